// FullBodySolve (problem.h): a limb's bend, the part of the pose the
// goals leave free: turned to face its pole, a straight knee or elbow
// bent a little first, a rest pose's hinges bent for a second attempt.

#include <algorithm>
#include <cmath>

#include "solvers/bend_plane.h"
#include "solvers/full_body/problem.h"

namespace reach {
namespace full_body_internal {
namespace {

// How far (radians) a pole's swivel may leave a joint outside its limits.
constexpr double kLimitSlack = 1e-9;

}  // namespace

bool FullBodySolve::ApplyPoles() {
  bool turned = false;
  // Each pole limb's bend turns about the line from its root to its
  // effector (the swivel) until it faces the pole: the effector stays where
  // it is, and an effector with an orientation goal is turned back (within
  // its limits). A limb whose root and middle joint are balls swings at
  // the two (as far as their limits allow); one with a hinge at either
  // rolls as a whole about the line (a limited limb root takes the part of
  // the turn its limits allow). A nearly straight limb is bent across at
  // its middle joint instead (Unstraighten gives a straight one a bend
  // first). The model-space transforms must be current (Run keeps them
  // so: Unstraighten leaves them current, and so does every iteration).
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    if (!goal.pole) continue;
    const int e = s_.effector[k];
    const int lr = LimbRootOf(skeleton_, goal);
    if (!s_.active[lr] || s_.dof_start[lr] < 0) continue;
    const Vector3d origin = s_.globals[lr].translation;
    Vector3d line = s_.globals[e].translation - origin;
    const double reach = line.norm();
    if (!(reach > 1e-12 * body_)) continue;
    line /= reach;
    Vector3d bend = Vector3d::Zero();
    double length = 0.0;
    for (int j = skeleton_.joint(e).parent; j != lr;
         j = skeleton_.joint(j).parent) {
      const Vector3d off = s_.globals[j].translation - origin;
      bend += off - off.dot(line) * line;
      length += (s_.globals[j].translation -
                 s_.globals[skeleton_.joint(j).parent].translation)
                    .norm();
    }
    const Vector3d to_pole = *goal.pole - origin;
    const Vector3d want = to_pole - to_pole.dot(line) * line;
    if (!(bend.norm() > 1e-4 * std::max(length, reach)) ||
        !(want.norm() > 1e-9 * body_)) {
      continue;
    }
    double angle = std::atan2(line.dot(bend.cross(want)), bend.dot(want));
    // A preferred bend (the body model's) leaves a cone free: the limb
    // turns only to its edge.
    const double cone = s_.pole_cone[s_.goal_order[k]];
    if (cone > 0.0) {
      if (std::abs(angle) <= cone) continue;
      angle -= std::copysign(cone, angle);
    }
    if (!(std::abs(angle) > 1e-9)) continue;
    if (std::abs(angle) > 0.1 && bend.norm() < 0.05 * length) {
      // A nearly straight limb: swivelling it to the pole would roll the
      // whole limb by up to half a turn (a pop on a stream, for a bend
      // that barely shows). It is bent across instead, at its middle
      // joint: the bend moves by delta to the pole's side (the lower bone
      // turns the other way, the effector moves by about twice delta and
      // the next iterations bring it back).
      const int mid = MiddleJoint(e, lr);
      const Joint& middle = skeleton_.joint(mid);
      if (middle.type != JointType::kBall || s_.dof_start[mid] < 0) continue;
      const Vector3d lower =
          s_.globals[e].translation - s_.globals[mid].translation;
      const Vector3d delta =
          std::max(bend.norm(), 0.01 * length) * want.normalized() - bend;
      const Vector3d axis = delta.cross(lower);
      if (!(axis.norm() > 0.0) || !(lower.norm() > 0.0)) continue;
      const double turn = 2.0 * delta.norm() / lower.norm();
      pose_.local[mid].rotation =
          ConstrainRotation(
              middle,
              TurnedLocal(s_.globals[middle.parent].rotation,
                          turn * axis.normalized(), pose_.local[mid].rotation))
              .normalized();
      ForwardKinematics();
      turned = true;
      continue;
    }
    const Joint& joint = skeleton_.joint(lr);
    const Quaterniond parent =
        lr == root_ ? root_parent_.rotation : s_.globals[joint.parent].rotation;
    const Quaterniond effector_rotation = s_.globals[e].rotation;
    // A ball middle joint takes the new bend itself: the limb's root (a
    // ball) swings the upper part to the swivelled middle by the least
    // turn (no roll about the upper bone), and the middle joint swings the
    // lower part back onto the effector. Rolling the whole limb instead
    // would wind its root and effector up by the swivel's angle (half a
    // turn for a knee bent backwards), and a stream carries that twist
    // on. Where the limits stop the swings short, the limb swivels as far
    // as they allow.
    const int mid = MiddleJoint(e, lr);
    const Joint& middle = skeleton_.joint(mid);
    const Vector3d effector = s_.globals[e].translation;
    const Vector3d upper = s_.globals[mid].translation - origin;
    const Vector3d lower = effector - s_.globals[mid].translation;
    bool swung = false;
    if (joint.type == JointType::kBall && middle.type == JointType::kBall &&
        s_.dof_start[mid] >= 0 && upper.norm() > 1e-6 * length &&
        lower.norm() > 1e-6 * length) {
      const Quaterniond root_global = s_.globals[lr].rotation;
      const Quaterniond middle_global = s_.globals[mid].rotation;
      const Quaterniond middle_parent = s_.globals[middle.parent].rotation;
      Quaterniond root_local, middle_local;
      // The two joints' local rotations for a swivel by `turn` (every joint
      // from the root to the middle's parent turns with the root's swing);
      // returns whether both are within their limits.
      auto swivel = [&](double turn) {
        const Quaterniond swing =
            Quaterniond::FromTwoVectors(upper, AxisAngle(line, turn) * upper);
        const Quaterniond bend = Quaterniond::FromTwoVectors(
            swing * lower, effector - (origin + swing * upper));
        root_local = (parent.conjugate() * (swing * root_global)).normalized();
        middle_local = ((swing * middle_parent).conjugate() *
                        (bend * (swing * middle_global)))
                           .normalized();
        return WithinLimits(joint, root_local, kLimitSlack) &&
               WithinLimits(middle, middle_local, kLimitSlack);
      };
      if (!swivel(angle)) {
        // The largest part of the swivel the limits allow.
        double lo = 0.0, hi = 1.0;
        for (int i = 0; i < 30; ++i) {
          const double t = 0.5 * (lo + hi);
          (swivel(t * angle) ? lo : hi) = t;
        }
        swivel(lo * angle);
      }
      pose_.local[lr].rotation = root_local;
      pose_.local[mid].rotation = middle_local;
      ForwardKinematics();
      swung = true;
      turned = true;
    }
    if (!swung) {
      // The limb rolls about the line (a hinge in it bends in its own
      // plane; so does a hinge root); a limited root takes the part of
      // the turn its limits allow.
      double turn = angle;
      if (joint.IsConstrained()) {
        turn = NearestFeasibleTurn(joint, parent, s_.globals[lr].rotation, line,
                                   angle, std::min(angle, 0.0),
                                   std::max(angle, 0.0));
        if (!std::isfinite(turn)) continue;
      }
      pose_.local[lr].rotation =
          (parent.conjugate() *
           (AxisAngle(line, turn) * s_.globals[lr].rotation))
              .normalized();
      if (joint.IsConstrained()) {
        pose_.local[lr].rotation =
            ConstrainRotation(joint, pose_.local[lr].rotation).normalized();
      }
      ForwardKinematics();
      turned = true;
    }
    if (goal.target_orientation && s_.dof_start[e] >= 0) {
      const Joint& tip = skeleton_.joint(e);
      pose_.local[e].rotation =
          ConstrainRotation(tip, (s_.globals[tip.parent].rotation.conjugate() *
                                  effector_rotation)
                                     .normalized())
              .normalized();
      ForwardKinematics();
    }
  }
  return turned;
}

void FullBodySolve::Unstraighten() {
  // A straight knee or elbow is a singular point of every goal: no first-
  // order motion of its joints shortens the limb, so no Jacobian step ever
  // bends it (a crouch with straight legs would never lower the pelvis).
  // Like UE's preferred angles, such a joint starts bent a little: a hinge
  // into its range (towards the middle of a two-sided range, else to
  // positive angles), the middle joint of a ball limb with a pole towards
  // the pole.
  constexpr double kStraight = 1e-3;  // Radians between the two bones.
  constexpr double kBend = 0.1;
  ForwardKinematics();
  const int m = static_cast<int>(s_.goal_order.size());
  for (int k = 0; k < m; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    const int e = s_.effector[k];
    for (int c = e, j = skeleton_.joint(e).parent; j >= 0 && j != root_;
         c = j, j = skeleton_.joint(j).parent) {
      const Joint& joint = skeleton_.joint(j);
      if (joint.type != JointType::kHinge || s_.dof_start[j] < 0) continue;
      const Vector3d upper =
          s_.globals[j].translation - s_.globals[joint.parent].translation;
      const Vector3d lower =
          s_.globals[c].translation - s_.globals[j].translation;
      if (!(std::atan2(upper.cross(lower).norm(), upper.dot(lower)) <
            kStraight)) {
        continue;
      }
      const double angle =
          HingeAngleWithinLimits(joint, pose_.local[j].rotation);
      double sign = 1.0;
      if (std::isfinite(joint.min_angle_rad) &&
          std::isfinite(joint.max_angle_rad)) {
        sign = 0.5 * (joint.min_angle_rad + joint.max_angle_rad) >= angle
                   ? 1.0
                   : -1.0;
      } else if (std::isfinite(joint.max_angle_rad)) {
        sign = -1.0;
      }
      pose_.local[j].rotation =
          ConstrainRotation(joint, HingeRotation(joint, angle + sign * kBend))
              .normalized();
      ForwardKinematics();
    }
    if (!goal.pole) continue;
    // The inner joint nearest the middle of a pole limb.
    const int lr = LimbRootOf(skeleton_, goal);
    if (!s_.active[lr]) continue;
    const int mid = MiddleJoint(e, lr);
    const Joint& joint = skeleton_.joint(mid);
    if (joint.type != JointType::kBall || s_.dof_start[mid] < 0) continue;
    const Vector3d origin = s_.globals[lr].translation;
    const Vector3d line = s_.globals[e].translation - origin;
    const Vector3d off = s_.globals[mid].translation - origin;
    if (!(line.norm() > 0.0) ||
        !(off.cross(line).norm() < kStraight * off.norm() * line.norm())) {
      continue;
    }
    if (Hinged(mid)) {
      // An anatomical hinge bends about its own axis (the poles then turn
      // the limb to face its pole).
      pose_.local[mid].rotation =
          (pose_.local[mid].rotation *
           Quaterniond(Eigen::AngleAxisd(kBend, model_->hinge_axis[mid])))
              .normalized();
      ForwardKinematics();
      continue;
    }
    const Vector3d to_pole = *goal.pole - origin;
    const Vector3d axis = to_pole.cross(line);
    if (!(axis.norm() > 1e-12 * to_pole.norm() * line.norm())) continue;
    pose_.local[mid].rotation =
        ConstrainRotation(joint, TurnedLocal(s_.globals[joint.parent].rotation,
                                             kBend * axis.normalized(),
                                             pose_.local[mid].rotation))
            .normalized();
    ForwardKinematics();
  }
}

bool FullBodySolve::BendRestingHinges(const std::vector<Transform>& start) {
  pose_.local = start;
  ForwardKinematics();
  // Only for an unreached goal (s_.goal_excess is the answer's, from
  // ExcessByGoal), not a look-at, within 1.25 times its path's length of
  // the root where the start pose has it: a target further out is out of
  // reach of the limbs alone (the root may still move toward it, but the
  // first attempt has already moved it as far as the goals let it).
  const Vector3d root = s_.globals[root_].translation;
  bool within_reach = false;
  for (size_t k = 0; k < s_.goal_order.size() && !within_reach; ++k) {
    const Goal& goal = goals_[s_.goal_order[k]];
    if (!(s_.goal_excess[k] > 0.0) || goal.aim_axis) continue;
    double length = 0.0;
    for (int j = s_.effector[k]; j != root_; j = skeleton_.joint(j).parent) {
      length += (s_.globals[j].translation -
                 s_.globals[skeleton_.joint(j).parent].translation)
                    .norm();
    }
    within_reach = (goal.target - root).norm() <= 1.25 * length;
  }
  if (!within_reach) return false;
  // Every limb's, not only that goal's: another limb's straight hinge
  // pulls the body into the same corner (bending them all solved 98.0% of
  // the peer benchmark's full-range poses from rest, the unreached goals'
  // paths alone 95.0%).
  bool any = false;
  for (int j : s_.active_joints) {
    const Joint& joint = skeleton_.joint(j);
    if (joint.type == JointType::kHinge && s_.dof_start[j] >= 0 &&
        std::isfinite(joint.min_angle_rad) &&
        std::isfinite(joint.max_angle_rad)) {
      pose_.local[j].rotation = HingeRotation(
          joint, 0.5 * (joint.min_angle_rad + joint.max_angle_rad));
      any = true;
    }
  }
  return any;
}

}  // namespace full_body_internal
}  // namespace reach
