#include "solvers/gradient_descent.h"

#include <algorithm>

#include "solvers/chain_kinematics.h"
#include "solvers/stall_guard.h"

namespace reach {
namespace {

constexpr double kMaxStep = 0.5;  // radians per joint per step
constexpr double kArmijo = 1e-4;
constexpr int kMaxBacktracks = 12;

template <int Rows>
int Run(const ChainProblem& problem, ChainKinematics& kin) {
  double f = 0.5 * kin.Evaluate();
  if (kin.dof() == 0) return 0;
  const double max_step = problem.goal->options.max_step_rad > 0.0
                              ? problem.goal->options.max_step_rad
                              : kMaxStep;
  const double length = std::max(problem.chain_length, 1e-12);
  StallGuard guard(
      problem.deadline,
      std::min(problem.tolerance / length, problem.orientation_tolerance_rad),
      /*patience=*/16);
  JacobianMatrix<Rows> j;
  DofVector descent;       // -grad f = J^T e
  DofVector prev_descent;  // at the previous point
  DofVector step;          // last accepted step
  bool have_previous = false;
  int iterations = 0;
  while (iterations < problem.max_iterations && !kin.Converged() &&
         guard.KeepGoing(std::sqrt(2.0 * f))) {
    ++iterations;
    kin.template Jacobian<Rows>(&j);
    const Eigen::Matrix<double, Rows, 1> e = kin.error().template head<Rows>();
    descent.resize(kin.dof());
    descent.noalias() = j.transpose() * e;
    const double slope = descent.squaredNorm();
    if (slope < 1e-30) break;  // A stationary point: nothing to descend.

    double alpha;
    const Eigen::Matrix<double, Rows, 1> jg = j * descent;
    if (have_previous) {
      // BB1 step: s.s / s.y with y the change of the gradient.
      const double sy = -step.dot(descent - prev_descent);
      alpha = sy > 1e-300 ? step.squaredNorm() / sy : 0.0;
    } else {
      alpha = 0.0;
    }
    if (!(alpha > 0.0)) {
      // Buss's transpose step, exact for the linearised problem.
      alpha = jg.squaredNorm() > 1e-300 ? e.dot(jg) / jg.squaredNorm() : 1.0;
    }

    kin.Save();
    bool accepted = false;
    for (int b = 0; b < kMaxBacktracks; ++b) {
      step = alpha * descent;
      kin.CapStep(max_step, &step);
      kin.Apply(step);
      const double f_new = 0.5 * kin.Evaluate();
      if (f_new <= f - kArmijo * step.dot(descent)) {
        f = f_new;
        accepted = true;
        break;
      }
      kin.Restore();
      kin.Evaluate();
      alpha *= 0.5;
    }
    if (!accepted) break;
    prev_descent = descent;
    have_previous = true;
  }
  return iterations;
}

}  // namespace

int GradientDescentSolver::Solve(const ChainProblem& problem, Workspace& ws,
                                 Pose& pose) const {
  ChainKinematics kin(problem, ws, pose);
  return RunWithRestarts(problem, kin, [&] {
    return kin.task_rows() == 6 ? Run<6>(problem, kin) : Run<3>(problem, kin);
  });
}

}  // namespace reach
