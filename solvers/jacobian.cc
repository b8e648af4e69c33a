#include "solvers/jacobian.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>

#include "solvers/chain_kinematics.h"
#include "solvers/stall_guard.h"

namespace reach {
namespace {

constexpr double kDefaultDamping = 0.05;
// RefineTipPosition starts close to its solution, where the chain is
// nearly straight or against its limits: little damping, so the first
// steps already move along the weak directions.
constexpr double kRefineDamping = 1e-3;
constexpr double kDefaultMaxStep = 0.5;  // radians
constexpr double kMinDamping = 1e-6;
constexpr double kMaxDamping = 1e3;
constexpr int kMaxHalvings = 16;
constexpr int kPinvHalvings = 4;
// Steps computed per iteration at most: the first, then again after
// blocking the directions it pushed against limits.
constexpr int kBlockPasses = 3;
// Buss's error clamping: a step aims at most this far (position in chain
// lengths, rotation in radians), which keeps the linearisation honest.
constexpr double kMaxTaskStep = 0.5;

template <int Rows>
using TaskRows = Eigen::Matrix<double, Rows, 1>;
template <int Rows>
using TaskSquare = Eigen::Matrix<double, Rows, Rows>;

template <int Rows>
TaskRows<Rows> ClampedError(const TaskVector& error) {
  TaskRows<Rows> e = error.head<Rows>();
  const double n = e.norm();
  if (n > kMaxTaskStep) e *= kMaxTaskStep / n;
  return e;
}

template <int Rows>
void TransposeStep(const JacobianMatrix<Rows>& j, const TaskRows<Rows>& e,
                   DofVector* delta) {
  delta->noalias() = j.transpose() * e;
  const TaskRows<Rows> jjte = j * *delta;
  const double denom = jjte.squaredNorm();
  *delta *= denom > 1e-300 ? e.dot(jjte) / denom : 0.0;
}

// JACOBIAN_TRANSPOSE's directions: the gradient J^T e made conjugate to
// the previous accepted direction (nonlinear conjugate gradients with the
// Polak-Ribiere+ choice, Nocedal & Wright 2006, section 5.2), so it does
// not zigzag down narrow valleys as steepest descent does; `valid` false
// restarts from the plain gradient.
struct ConjugateState {
  DofVector gradient;   // J^T e at the last accepted step.
  DofVector direction;  // The direction of the last accepted step.
  bool valid = false;
};

// delta = alpha d along d = J^T e + beta d_prev, with Buss's step length:
// alpha = <e, J d> / |J d|^2 minimises |e - alpha J d| (exact on the
// linearised problem). Writes the gradient and direction to *next.
template <int Rows>
void ConjugateTransposeStep(const JacobianMatrix<Rows>& j,
                            const TaskRows<Rows>& e,
                            const ConjugateState& previous,
                            ConjugateState* next, DofVector* delta) {
  next->gradient.resize(j.cols());
  next->gradient.noalias() = j.transpose() * e;
  next->direction = next->gradient;
  if (previous.valid && previous.gradient.size() == j.cols()) {
    const double old_sq = previous.gradient.squaredNorm();
    const double change =
        next->gradient.dot(next->gradient - previous.gradient);
    const double beta = old_sq > 1e-300 ? std::max(0.0, change / old_sq) : 0.0;
    next->direction += beta * previous.direction;
    // Not a descent direction: restart from the gradient.
    if (next->direction.dot(next->gradient) <= 0.0) {
      next->direction = next->gradient;
    }
  }
  const TaskRows<Rows> jd = j * next->direction;
  const double denom = jd.squaredNorm();
  *delta = next->direction * (denom > 1e-300 ? e.dot(jd) / denom : 0.0);
}

template <int Rows>
void PseudoInverseStep(const JacobianMatrix<Rows>& j, const TaskRows<Rows>& e,
                       DofVector* delta) {
  // With J = U S V^T, J^+ = V S^+ U^T = J^T U (S^+)^2 U^T. The eigenvectors
  // of J J^T are U and its eigenvalues the squared singular values, so the
  // pseudo-inverse comes from a Rows x Rows symmetric eigenproblem instead of
  // a Rows x dof SVD: same result, fixed size, no allocation.
  TaskSquare<Rows> jjt;
  jjt.noalias() = j * j.transpose();
  const Eigen::SelfAdjointEigenSolver<TaskSquare<Rows>> eig(jjt);
  const TaskRows<Rows>& sigma_sq = eig.eigenvalues();
  const double cutoff = 1e-12 * sigma_sq.maxCoeff();  // (1e-6 sigma_max)^2
  TaskRows<Rows> coeffs = eig.eigenvectors().transpose() * e;
  for (int i = 0; i < Rows; ++i) {
    coeffs[i] = sigma_sq[i] > cutoff ? coeffs[i] / sigma_sq[i] : 0.0;
  }
  const TaskRows<Rows> w = eig.eigenvectors() * coeffs;
  delta->noalias() = j.transpose() * w;
}

template <int Rows>
void DampedStep(const JacobianMatrix<Rows>& j, const TaskRows<Rows>& e,
                double lambda, DofVector* delta) {
  TaskSquare<Rows> a;
  a.noalias() = j * j.transpose();
  a.diagonal().array() += lambda * lambda;
  const TaskRows<Rows> w = a.ldlt().solve(e);
  delta->noalias() = j.transpose() * w;
}

// Runs up to `max_iterations` steps of `method` from the chain's current
// configuration; DLS starts from damping `lambda`.
template <int Rows>
int Run(const ChainProblem& problem, JacobianMethod method,
        ChainKinematics& kin, int max_iterations, double lambda) {
  double error_sq = kin.Evaluate();
  if (kin.dof() == 0) return 0;
  const SolveOptions& options = problem.goal->options;
  const double max_step =
      options.max_step_rad > 0.0 ? options.max_step_rad : kDefaultMaxStep;
  const double length = std::max(problem.chain_length, 1e-12);
  StallGuard guard(
      problem.deadline,
      std::min(problem.tolerance / length, problem.orientation_tolerance_rad),
      /*patience=*/8);

  JacobianMatrix<Rows> j;
  DofVector delta;
  ConjugateState conjugate, next_conjugate;  // JACOBIAN_TRANSPOSE only.
  int iterations = 0;
  while (iterations < max_iterations && !kin.Converged() &&
         guard.KeepGoing(std::sqrt(error_sq))) {
    ++iterations;
    kin.template Jacobian<Rows>(&j);
    const TaskRows<Rows> e = ClampedError<Rows>(kin.error());
    delta.resize(kin.dof());
    // The step, then again without the directions that push joints on a
    // limit further out (ChainKinematics::BlockOutwardDirections), until
    // none does or kBlockPasses steps were computed.
    for (int pass = 0; pass < kBlockPasses; ++pass) {
      switch (method) {
        case JacobianMethod::kTranspose:
          ConjugateTransposeStep<Rows>(j, e, conjugate, &next_conjugate,
                                       &delta);
          break;
        case JacobianMethod::kPseudoInverse:
          PseudoInverseStep<Rows>(j, e, &delta);
          break;
        case JacobianMethod::kDampedLeastSquares:
          DampedStep<Rows>(j, e, lambda, &delta);
          break;
      }
      if (pass + 1 == kBlockPasses ||
          !kin.template BlockOutwardDirections<Rows>(delta, &j)) {
        break;
      }
    }
    kin.CapStep(max_step, &delta);
    kin.Save();
    kin.Apply(delta);
    double new_error_sq = kin.Evaluate();
    if (method == JacobianMethod::kDampedLeastSquares) {
      if (new_error_sq < error_sq) {
        error_sq = new_error_sq;
        lambda = std::max(lambda * 0.5, kMinDamping);
      } else {
        kin.Restore();
        kin.Evaluate();
        if (lambda >= kMaxDamping) break;
        lambda = std::min(lambda * 4.0, kMaxDamping);
      }
      continue;
    }
    // Transpose and pseudo-inverse: halve a step that does not lower the
    // error. Near a singularity (a straight chain reaching for a target out
    // of reach) the pseudo-inverse step is huge along the vanishing singular
    // direction; after kPinvHalvings failed halvings it falls back to the
    // transpose direction, the gradient, which always descends.
    if (method == JacobianMethod::kTranspose) {
      // Conjugate directions continue only from a step taken as computed;
      // one that needs halving restarts them from the gradient.
      conjugate.valid = new_error_sq < error_sq;
      if (conjugate.valid) {
        conjugate.gradient = next_conjugate.gradient;
        conjugate.direction = next_conjugate.direction;
      }
    }
    for (int halvings = 0; new_error_sq >= error_sq && halvings < kMaxHalvings;
         ++halvings) {
      kin.Restore();
      kin.Evaluate();
      if (method == JacobianMethod::kPseudoInverse &&
          halvings == kPinvHalvings) {
        TransposeStep<Rows>(j, e, &delta);
        kin.CapStep(max_step, &delta);
      } else {
        delta *= 0.5;
      }
      kin.Apply(delta);
      new_error_sq = kin.Evaluate();
    }
    if (new_error_sq >= error_sq) {
      kin.Restore();
      kin.Evaluate();
      break;  // No step along this direction helps: a stationary point.
    }
    error_sq = new_error_sq;
  }
  return iterations;
}

}  // namespace

int JacobianSolver::Solve(const ChainProblem& problem, Workspace& ws,
                          Pose& pose) const {
  ChainKinematics kin(problem, ws, pose);
  const double lambda = problem.goal->options.damping > 0.0
                            ? problem.goal->options.damping
                            : kDefaultDamping;
  return RunWithRestarts(problem, kin, [&] {
    return kin.task_rows() == 6
               ? Run<6>(problem, method_, kin, problem.max_iterations, lambda)
               : Run<3>(problem, method_, kin, problem.max_iterations, lambda);
  });
}

int RefineTipPosition(const ChainProblem& problem, Workspace& ws, Pose& pose,
                      int max_iterations) {
  if (max_iterations <= 0) return 0;
  ChainKinematics kin(problem, ws, pose, /*position_only=*/true);
  return Run<3>(problem, JacobianMethod::kDampedLeastSquares, kin,
                max_iterations, kRefineDamping);
}

int RefineOffBounds(const ChainProblem& problem, Workspace& ws, Pose& pose,
                    int max_iterations) {
  if (max_iterations <= 0) return 0;
  ChainKinematics kin(problem, ws, pose, /*position_only=*/true);
  const double first = kin.Evaluate();
  if (kin.Converged() || !kin.TargetWithinReach()) return 0;
  kin.SaveBest();
  if (!kin.MoveOffBounds()) return 0;
  const int iterations = Run<3>(problem, JacobianMethod::kDampedLeastSquares,
                                kin, max_iterations, kRefineDamping);
  if (!(kin.error().squaredNorm() < first)) {
    kin.RestoreBest();
    kin.Evaluate();
  }
  return iterations;
}

}  // namespace reach
