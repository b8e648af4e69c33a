#include "solvers/jacobian.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>

#include "solvers/chain_kinematics.h"
#include "solvers/stall_guard.h"

namespace reach {
namespace {

constexpr double kDefaultDamping = 0.05;
constexpr double kDefaultMaxStep = 0.5;  // radians
constexpr double kMinDamping = 1e-6;
constexpr double kMaxDamping = 1e3;
constexpr int kMaxHalvings = 16;
constexpr int kPinvHalvings = 4;
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

template <int Rows>
int Run(const ChainProblem& problem, JacobianMethod method,
        ChainKinematics& kin) {
  double error_sq = kin.Evaluate();
  if (kin.dof() == 0) return 0;
  const SolveOptions& options = problem.goal->options;
  const double max_step =
      options.max_step_rad > 0.0 ? options.max_step_rad : kDefaultMaxStep;
  double lambda = options.damping > 0.0 ? options.damping : kDefaultDamping;
  const double length = std::max(problem.chain_length, 1e-12);
  StallGuard guard(
      problem.deadline,
      std::min(problem.tolerance / length, problem.orientation_tolerance_rad),
      /*patience=*/8);

  JacobianMatrix<Rows> j;
  DofVector delta;
  int iterations = 0;
  while (iterations < problem.max_iterations && !kin.Converged() &&
         guard.KeepGoing(std::sqrt(error_sq))) {
    ++iterations;
    kin.template Jacobian<Rows>(&j);
    const TaskRows<Rows> e = ClampedError<Rows>(kin.error());
    delta.resize(kin.dof());
    switch (method) {
      case JacobianMethod::kTranspose:
        TransposeStep<Rows>(j, e, &delta);
        break;
      case JacobianMethod::kPseudoInverse:
        PseudoInverseStep<Rows>(j, e, &delta);
        break;
      case JacobianMethod::kDampedLeastSquares:
        DampedStep<Rows>(j, e, lambda, &delta);
        break;
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
  return RunWithRestarts(problem, kin, [&] {
    return kin.task_rows() == 6 ? Run<6>(problem, method_, kin)
                                : Run<3>(problem, method_, kin);
  });
}

}  // namespace reach
