#include "solvers/ccd.h"

#include <cmath>

#include "solvers/stall_guard.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

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
  int iterations = 0;
  StallGuard guard(problem.deadline, problem.tolerance);
  while (iterations < problem.max_iterations &&
         guard.KeepGoing((g[n - 1].translation - target).norm())) {
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
  ApplyTipOrientation(problem, ws, pose);
  return iterations;
}

}  // namespace reach
