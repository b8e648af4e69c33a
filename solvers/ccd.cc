#include "solvers/ccd.h"

#include <algorithm>
#include <cmath>

#include "solvers/fabrik.h"
#include "solvers/jacobian.h"
#include "solvers/stall_guard.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// The finishing pass takes over when the error fell by less than this
// factor over SlowProgress::kWindow iterations, and runs at most
// kRefineIterations damped least squares steps.
constexpr double kSlowRatio = 0.66;
constexpr int kRefineIterations = 32;

// Caps a rotation's angle at max_angle (> 0).
Quaterniond CapAngle(const Quaterniond& q, double max_angle) {
  const Vector3d v = RotationVector(q);
  const double angle = v.norm();
  if (angle <= max_angle) return q;
  return FromRotationVector(v * (max_angle / angle));
}

}  // namespace

int CcdSolver::Solve(const ChainProblem& problem, Workspace& ws,
                     Pose& pose) const {
  const int n = static_cast<int>(problem.joints.size());
  const Skeleton& skeleton = *problem.skeleton;
  const Vector3d& target = problem.goal->target;
  const double max_step = problem.goal->options.max_step_rad;
  Transform* g = ws.chain_globals.data();
  // Slow progress hands over to a finishing pass: BendToReach on a chain
  // of free ball joints without a step cap, else RefineTipPosition, which
  // needs a target within reach (beyond it the error levels off at the
  // excess and the stall guard decides).
  bool bend = max_step == 0.0;
  for (int k = 0; k + 1 < n; ++k) {
    bend = bend && !skeleton.joint(problem.joints[k]).IsConstrained();
  }
  const bool within_reach =
      (target - g[0].translation).norm() < problem.chain_length;
  const bool finish = bend || within_reach;
  int iterations = 0;
  StallGuard guard(problem.deadline, problem.tolerance);
  SlowProgress slow(kSlowRatio);
  while (iterations < problem.max_iterations) {
    const double error = (g[n - 1].translation - target).norm();
    if (!guard.KeepGoing(error) || (finish && slow.Slow(error))) break;
    ++iterations;
    Vector3d tip = g[n - 1].translation;
    // Tip's parent back to the root. Joints above k are untouched so far in
    // this sweep, so g[k] and its parent's rotation are current.
    for (int k = n - 2; k >= 0; --k) {
      const Joint& joint = skeleton.joint(problem.joints[k]);
      if (joint.type == JointType::kFixed) continue;
      Quaterniond turn = TurnTowards(joint, g[k], tip, target);
      if (max_step > 0.0) turn = CapAngle(turn, max_step);
      const Quaterniond& parent_rotation =
          k == 0 ? problem.parent_global.rotation : g[k - 1].rotation;
      const Quaterniond applied_global = SetGlobalRotation(
          problem, k, parent_rotation, turn * g[k].rotation, pose);
      const Quaterniond applied = applied_global * g[k].rotation.conjugate();
      tip = g[k].translation + applied * (tip - g[k].translation);
      g[k].rotation = applied_global;
    }
    ComputeChainGlobals(problem, pose, ws);
  }
  // Stopped short. Near full extension CCD crawls (each turn changes the
  // tip's distance from the root only to second order), and against
  // limits coordinate descent zigzags: finish exactly on a free chain
  // (BendToReach; not when steps are capped, as it moves every joint at
  // once), else with damped least squares steps within the limits and the
  // step cap.
  if (finish && iterations < problem.max_iterations &&
      (g[n - 1].translation - target).norm() > problem.tolerance) {
    if (bend && BendToReach(problem, ws, pose)) {
      ++iterations;
    } else if (within_reach) {
      iterations += RefineTipPosition(
          problem, ws, pose,
          std::min(kRefineIterations, problem.max_iterations - iterations));
      // Stalled against a bound (a knee straight at a one-sided limit).
      iterations += RefineOffBounds(
          problem, ws, pose,
          std::min(kRefineIterations, problem.max_iterations - iterations));
    }
  }
  ApplyTipOrientation(problem, ws, pose);
  return iterations;
}

}  // namespace reach
