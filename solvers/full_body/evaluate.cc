// FullBodySolve (problem.h): forward kinematics over the active joints,
// the goals' error rows and excess, and the Jacobian of those rows.

#include <algorithm>
#include <cmath>

#include "solvers/full_body/problem.h"

namespace reach {
namespace full_body_internal {
namespace {

// The largest position (body sizes) and orientation (radians) error one
// step aims to remove: far targets pull steadily instead of flinging.
// (Orientation 0.3: from rest on solver_bench's gameplay poses, whose feet
// turn by up to ~1.5 rad, 5.19 -> 4.88 iterations; 0.35 and more, or a
// larger position clamp, made the CMU hop's steps larger.)
constexpr double kMaxStepError = 0.25;
constexpr double kMaxTurnError = 0.3;

// A look-at goal's frame at the effector `ge`: its aim in model space,
// two directions across it, and the unit direction to the target (the aim
// when the target is at the effector).
struct LookAt {
  LookAt(const Transform& ge, const Vector3d& aim_axis, const Vector3d& target)
      : aim(RotateVector(ge.rotation, aim_axis.stableNormalized())),
        b1(aim.unitOrthogonal()),
        b2(aim.cross(b1)) {
    const Vector3d to = target - ge.translation;
    distance = to.norm();
    d = distance > 0.0 ? Vector3d(to / distance) : aim;
  }
  Vector3d aim, b1, b2, d;
  double distance;
};

}  // namespace

void FullBodySolve::ForwardKinematics() {
  for (int j : s_.active_joints) {
    s_.globals[j] =
        (j == root_ ? root_parent_ : s_.globals[skeleton_.joint(j).parent]) *
        pose_.local[j];
  }
}

void FullBodySolve::ComputeAxes() {
  // Each rotational column turns its joint about a model-space axis: a
  // hinge about its own; a free ball about X, Y and Z; a limited ball about
  // its twist axis, its swing axis and the third one (so that a joint held
  // at its twist or swing limit leaves only that column out).
  for (int j : s_.active_joints) {
    const int c0 = s_.dof_start[j];
    if (c0 < 0) continue;
    const Joint& joint = skeleton_.joint(j);
    const Quaterniond& rotation = s_.globals[j].rotation;
    if (joint.type == JointType::kHinge) {
      s_.axis[c0] = RotateVector(rotation, joint.axis);
    } else if (Hinged(j)) {
      // An anatomical hinge: its flexion axis, the lower bone's twist axis
      // and the third (the last two stiff: Setup).
      const Vector3d flex = RotateVector(rotation, model_->hinge_axis[j]);
      Vector3d along = flex.unitOrthogonal();
      s_.axis[c0] = flex;
      s_.axis[c0 + 1] = along;
      s_.axis[c0 + 2] = flex.cross(along);
    } else if (!joint.IsLimited()) {
      s_.axis[c0] = Vector3d::UnitX();
      s_.axis[c0 + 1] = Vector3d::UnitY();
      s_.axis[c0 + 2] = Vector3d::UnitZ();
    } else {
      const Quaterniond at_rest =
          (j == root_ ? root_parent_.rotation
                      : s_.globals[joint.parent].rotation) *
          joint.rest.rotation;
      const Vector3d twist = RotateVector(rotation, joint.axis);
      Vector3d swing = RotateVector(at_rest, joint.axis).cross(twist);
      swing = swing.norm() > 1e-9 ? swing.normalized() : twist.unitOrthogonal();
      s_.axis[c0] = twist;
      s_.axis[c0 + 1] = swing;
      s_.axis[c0 + 2] = twist.cross(swing);
    }
  }
}

bool FullBodySolve::Evaluate() {
  jacobian_current_ = false;
  factor_current_ = false;
  level_excess_.fill(0.0);
  bool all_reached = true;
  int level = 0;
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const int row = s_.goal_row[k];
    while (row >= level_start_[level + 1]) ++level;
    const int i = s_.goal_order[k];
    const Goal& goal = goals_[i];
    const Transform& ge = s_.globals[s_.effector[k]];
    const double sw = std::sqrt(goal.weight);
    double excess = 0.0;
    if (goal.aim_axis) {
      // Look-at: two rows, the aim's turn across itself.
      const LookAt look(ge, *goal.aim_axis, goal.target);
      Vector3d turn = Vector3d::Zero();
      double angle = 0.0;
      if (look.distance > 0.0) {
        const Vector3d c = look.aim.cross(look.d);
        angle = std::atan2(c.norm(), look.aim.dot(look.d));
        turn = c.norm() > 1e-300 ? (angle / c.norm()) * c : angle * look.b1;
      }
      s_.error(row) = sw * look.b1.dot(turn);
      s_.error(row + 1) = sw * look.b2.dot(turn);
      excess = std::max(0.0, angle - s_.orientation_tolerance[i]);
    } else {
      const Vector3d miss = goal.target - ge.translation;
      const double miss_norm = miss.norm() / body_;
      s_.error.segment<3>(row) =
          (sw / body_) * (miss_norm > kMaxStepError
                              ? (kMaxStepError / miss_norm) * miss
                              : miss);
      excess = std::max(0.0, miss.norm() - s_.tolerance[i]) / body_;
      if (goal.target_orientation) {
        const Vector3d turn = RotationVector(
            goal.target_orientation->normalized() * ge.rotation.conjugate());
        const double angle = turn.norm();
        s_.error.segment<3>(row + 3) =
            sw *
            (angle > kMaxTurnError ? (kMaxTurnError / angle) * turn : turn);
        excess += std::max(0.0, angle - s_.orientation_tolerance[i]);
      }
    }
    if (excess > 0.0 && s_.soft[i] != FullBodyScratch::kModelGoal) {
      all_reached = false;
    }
    s_.goal_excess[k] = goal.weight * excess * excess;
    level_excess_[level] += s_.goal_excess[k];
  }
  if (focus_) {
    for (int k = 0; k < m; ++k) {
      if (s_.goal_excess[k] > 0.0) continue;
      const int row = s_.goal_row[k];
      s_.error.segment(row, s_.goal_row[k + 1] - row).setZero();
    }
  }
  return all_reached;
}

bool FullBodySolve::RequestsReached() const {
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    if (s_.goal_excess[k] > 0.0 &&
        s_.soft[s_.goal_order[k]] == FullBodyScratch::kRequestGoal) {
      return false;
    }
  }
  return true;
}

bool FullBodySolve::NearlyReached() const {
  bool outside = false;
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    const int i = s_.goal_order[k];
    if (!(s_.goal_excess[k] > 0.0) || s_.soft[i] == FullBodyScratch::kModelGoal) {
      continue;
    }
    outside = true;
    const Goal& goal = goals_[i];
    const Transform& ge = s_.globals[s_.effector[k]];
    double miss = 0.0, angle = 0.0;
    if (goal.aim_axis) {
      angle = AimError(ge, *goal.aim_axis, goal.target);
    } else {
      miss = (goal.target - ge.translation).norm();
      if (goal.target_orientation) {
        angle =
            ge.rotation.angularDistance(goal.target_orientation->normalized());
      }
    }
    if (!(miss <= 2.0 * s_.tolerance[i]) ||
        !(angle <= 2.0 * s_.orientation_tolerance[i])) {
      return false;
    }
  }
  return outside;
}

void FullBodySolve::FillJacobian() {
  // Only a goal's own rows in its own columns (s_.goal_cols) are written,
  // every one of them, and nothing else reads the Jacobian: no clearing.
  factor_current_ = false;
  ComputeAxes();
  Eigen::MatrixXd& J = s_.jacobian;
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const int row = s_.goal_row[k];
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    const Transform& ge = s_.globals[e];
    const double sw = std::sqrt(goal.weight);
    if (goal.aim_axis) {
      // A column turns the aim about its axis u, and moves the effector by
      // u x (effector - joint) (or by the root's translation), which turns
      // the direction to the target the other way: the turn left shrinks
      // by u + d x motion / distance, across the aim.
      const LookAt look(ge, *goal.aim_axis, goal.target);
      const double reach =
          look.distance > 1e-9 * body_ ? 1.0 / look.distance : 0.0;
      if (translates_) {
        for (int a = 0; a < 3; ++a) {
          const Vector3d moved = reach * look.d.cross(Vector3d::Unit(a));
          J(row, a) = sw * look.b1.dot(moved) * body_;
          J(row + 1, a) = sw * look.b2.dot(moved) * body_;
        }
      }
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const Vector3d lever = ge.translation - s_.globals[j].translation;
        for (int c = s_.dof_start[j], end = c + DofCount(j); c < end; ++c) {
          const Vector3d& u = s_.axis[c];
          const Vector3d reduces = u + reach * look.d.cross(u.cross(lever));
          J(row, c) = sw * look.b1.dot(reduces);
          J(row + 1, c) = sw * look.b2.dot(reduces);
        }
        if (j == root_) break;
      }
    } else {
      const bool orient = goal.target_orientation.has_value();
      if (translates_) {
        J.block<3, 3>(row, 0) = sw * Eigen::Matrix3d::Identity();
        if (orient) J.block<3, 3>(row + 3, 0).setZero();
      }
      for (int j = e;; j = skeleton_.joint(j).parent) {
        const Vector3d v = (ge.translation - s_.globals[j].translation) / body_;
        for (int c = s_.dof_start[j], end = c + DofCount(j); c < end; ++c) {
          const Vector3d& u = s_.axis[c];
          J.block<3, 1>(row, c) = sw * u.cross(v);
          if (orient) J.block<3, 1>(row + 3, c) = sw * u;
        }
        if (j == root_) break;
      }
    }
  }
}

}  // namespace full_body_internal
}  // namespace reach
