// Joint-space view of a chain shared by the Jacobian family and gradient
// descent: the chain's degrees of freedom, the task-space error, the
// Jacobian, and applying a step within the joint limits.
//
// Units: positions are divided by the chain's length, so position and
// orientation errors are both dimensionless and the same damping works for
// a finger and a crane. Rotational DOFs are radians.
#ifndef REACH_SOLVERS_CHAIN_KINEMATICS_H_
#define REACH_SOLVERS_CHAIN_KINEMATICS_H_

#include <Eigen/Core>
#include <array>
#include <cstdint>
#include <limits>

#include "solvers/chain_solver.h"

namespace reach {

using TaskVector = Eigen::Matrix<double, 6, 1>;
template <int Rows>
using JacobianMatrix =
    Eigen::Matrix<double, Rows, Eigen::Dynamic, 0, Rows, kMaxChainDof>;
using DofVector = Eigen::Matrix<double, Eigen::Dynamic, 1, 0, kMaxChainDof, 1>;

// The restart sequence's seed: a mix of the target's bits, so the same goal
// always restarts the same way.
uint64_t RestartSeed(const Goal& goal);

class ChainKinematics {
 public:
  // Lays out the DOFs (hinge 1, ball 3, fixed 0) of the joints that move the
  // tip: all but the tip for a position goal, all for a 6-D goal.
  // `position_only` treats a 6-D goal as a position goal (the finishing
  // pass of FABRIK and CCD, which set the tip's orientation afterwards).
  ChainKinematics(const ChainProblem& problem, Workspace& ws, Pose& pose,
                  bool position_only = false);

  int dof() const { return dof_; }
  // 6 with a target orientation, else 3.
  int task_rows() const { return task_rows_; }

  // Forward kinematics of the chain and the error towards the goal. Returns
  // the squared norm of the (dimensionless) task error.
  double Evaluate();
  const TaskVector& error() const { return error_; }
  double position_error() const { return position_error_; }
  double orientation_error() const { return orientation_error_; }
  bool Converged() const;

  // Jacobian of the tip (position / chain length, then rotation) with
  // respect to the DOFs, at the last Evaluate().
  template <int Rows>
  void Jacobian(JacobianMatrix<Rows>* jacobian) const;

  // The clamping loop of Baerlocher & Boulic (2004, "An inverse kinematics
  // architecture enforcing an arbitrary number of strict priority
  // levels"), for cones and twist ranges as well as hinge ranges: for every
  // joint that sits on a bound and that `delta` would push further out,
  // removes the outward direction from the joint's columns of `jacobian`
  // (a hinge's column is zeroed; a ball joint's three columns are
  // projected square to the outward normal of its swing cone and/or twist
  // bound, in model space). The step recomputed from the result moves
  // along the bound instead of into it, where Apply's projection would
  // have thrown that part of the step away. Returns whether it changed
  // anything. Only joints that Apply has projected since they were last
  // seen inside their limits are looked at, so chains that stay clear of
  // their limits pay nothing.
  template <int Rows>
  bool BlockOutwardDirections(const DofVector& delta,
                              JacobianMatrix<Rows>* jacobian);

  // Adds `delta` to the DOFs: hinge angles are clamped to their range, ball
  // rotations (delta is a model-space rotation vector) projected onto their
  // limits. Call Evaluate() afterwards.
  void Apply(const DofVector& delta);

  // Scales `delta` down uniformly so no joint turns more than `max_step`
  // radians (a ball joint's turn is the norm of its rotation vector).
  void CapStep(double max_step, DofVector* delta) const;

  // Saves / restores the chain's DOFs (for rejected steps).
  void Save();
  void Restore();

  // Saves / restores the best configuration seen across restarts.
  void SaveBest();
  void RestoreBest();

  // Whether the goal's target lies within the chain's reach of its root
  // (at the last Evaluate()).
  bool TargetWithinReach() const;

  // Moves every moving joint held at a bound of its limits (within 1e-3
  // rad) into the middle of its range (MoveOffBounds in limits.h), where a
  // solve that stalled against the bound can start again: a knee straight
  // at its 0-degree bound bends the tip across the leg, to first order
  // never towards the hip, so no step shortens the leg, and a step that
  // would swing it through straight is clamped back onto the bound.
  // Returns whether anything moved. Call Evaluate() afterwards.
  bool MoveOffBounds();

  // Moves every DOF to a pseudo-random value within its limits: hinges
  // uniformly in their range ([-pi, pi] when unlimited), ball joints to a
  // uniformly random rotation projected onto their limits. `state` is a
  // splitmix64 state; the same state gives the same configuration.
  void Randomize(uint64_t* state);

 private:
  void WriteHinge(int k, double angle);

  const ChainProblem& problem_;
  Workspace& ws_;
  Pose& pose_;
  int moving_joints_ = 0;  // Chain joints that carry DOFs (prefix).
  int dof_ = 0;
  int task_rows_ = 3;
  double inv_length_ = 1.0;
  std::array<int, kMaxChainJoints> dof_start_{};
  // Joints Apply projected onto a limit and not seen inside since.
  std::array<bool, kMaxChainJoints> maybe_on_bound_{};
  TaskVector error_ = TaskVector::Zero();
  double position_error_ = 0.0;
  double orientation_error_ = 0.0;
};

// Runs `attempt` (a callable returning the iterations it ran and leaving
// `kin` evaluated at its result), then, while the goal is unreached, more
// attempts from random configurations within the limits: up to
// options.max_restarts of them, or, when the goal has a time_budget_ms (and
// so problem.deadline a time limit), as many as fit before the deadline.
// Every restart first checks problem.deadline (time or cancellation); the
// attempts' own StallGuards stop them inside. Keeps the best result; returns
// the iterations of all attempts (saturating at INT_MAX).
//
// Before any restart (and without restarts too), a first attempt that
// leaves a target within reach unreached with a joint held at a bound
// makes one more attempt from its own result, those joints moved into the
// middle of their ranges (ChainKinematics::MoveOffBounds): deterministic,
// near the first answer, and the cure for a limb straight at a one-sided
// hinge bound. A goal reached, or out of reach, never costs it.
template <class Attempt>
int RunWithRestarts(const ChainProblem& problem, ChainKinematics& kin,
                    Attempt attempt) {
  int iterations = attempt();
  if (kin.dof() == 0 || kin.Converged()) return iterations;
  auto add = [&iterations](int more) {
    iterations = more > std::numeric_limits<int>::max() - iterations
                     ? std::numeric_limits<int>::max()
                     : iterations + more;
  };
  const bool timed = problem.goal->options.time_budget_ms > 0.0 &&
                     problem.deadline.has_time_limit();
  const int restarts = timed ? std::numeric_limits<int>::max()
                             : problem.goal->options.max_restarts;
  double best = kin.error().squaredNorm();
  kin.SaveBest();
  bool kept = true;  // The pose holds the best attempt so far.
  if (kin.TargetWithinReach() && !problem.deadline.Expired() &&
      kin.MoveOffBounds()) {
    kin.Evaluate();
    add(attempt());
    if (kin.Converged()) return iterations;
    kept = kin.error().squaredNorm() < best;
    if (kept) {
      best = kin.error().squaredNorm();
      kin.SaveBest();
    }
  }
  if (restarts == 0) {
    if (!kept) {
      kin.RestoreBest();
      kin.Evaluate();
    }
    return iterations;
  }
  uint64_t state = RestartSeed(*problem.goal);
  for (int r = 0; r < restarts && !problem.deadline.Expired(); ++r) {
    kin.Randomize(&state);
    add(attempt());
    if (kin.Converged()) return iterations;
    const double error = kin.error().squaredNorm();
    if (error < best) {
      best = error;
      kin.SaveBest();
    }
  }
  kin.RestoreBest();
  kin.Evaluate();
  return iterations;
}

}  // namespace reach

#endif  // REACH_SOLVERS_CHAIN_KINEMATICS_H_
