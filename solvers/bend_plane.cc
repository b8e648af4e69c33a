#include "solvers/bend_plane.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "solvers/limits.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// A start whose bend is under this fraction of the chain's length keeps no
// side of its own: rounding, float32 noise or a previous straight answer.
constexpr double kStraightBend = 1e-6;
// Starts straighter than this get the symmetry-breaking bend.
constexpr double kKickBend = 1e-4;
// Results bent less than this (fraction of the length) are not turned.
constexpr double kSwivelBend = 1e-9;

// AxisAngle(axis, angle) for the small turns of ShiftBend (|angle| <=
// 0.01 rad) by Taylor series of the half angle's sine and cosine (exact
// to rounding there: the next terms are below 1e-17), without the library
// calls; AxisAngle itself past that.
Quaterniond SmallAxisAngle(const Vector3d& axis, double angle) {
  if (!(std::abs(angle) <= 0.01)) return AxisAngle(axis, angle);
  const double h = 0.5 * angle;
  const double h2 = h * h;
  const double c = 1.0 - h2 * (0.5 - h2 * (1.0 / 24.0 - h2 / 720.0));
  const double s = h * (1.0 - h2 * (1.0 / 6.0 - h2 / 120.0));
  return Quaterniond(c, s * axis.x(), s * axis.y(), s * axis.z());
}

// The part of v across the unit direction u.
Vector3d Across(const Vector3d& v, const Vector3d& u) {
  return v - v.dot(u) * u;
}

// The chain's bend across the unit direction u: the inner joints' offsets
// from the root, summed.
Vector3d BendAcross(const Workspace& ws, int n, const Vector3d& u) {
  // Across() is linear: the sum's part across u.
  Vector3d sum = Vector3d::Zero();
  for (int k = 1; k + 1 < n; ++k) sum += ws.chain_globals[k].translation;
  return Across(sum - (n - 2) * ws.chain_globals[0].translation, u);
}

// Unit v, or zero when v is shorter than `min_norm`.
Vector3d UnitOrZero(const Vector3d& v, double min_norm) {
  const double norm = v.norm();
  return norm > min_norm && std::isfinite(norm) ? Vector3d(v / norm)
                                                : Vector3d::Zero();
}

// The chain's root-tip direction in ws.chain_globals (unit), or zero when
// the tip sits on the root.
Vector3d ChainLine(const Workspace& ws, int n, double length) {
  return UnitOrZero(
      ws.chain_globals[n - 1].translation - ws.chain_globals[0].translation,
      1e-12 * std::max(length, 1e-300));
}

// The inner joint (1..n-2) nearest the middle of the chain by its
// distance along `line` from the root, of those for which
// axis_of(k, joint, &axis) gives an axis to turn about (false: skip it).
// Returns -1 when none does.
template <class AxisOf>
int JointNearestMiddle(const ChainProblem& problem, const Workspace& ws,
                       const Vector3d& line, AxisOf axis_of, Vector3d* axis) {
  const int n = static_cast<int>(problem.joints.size());
  const Vector3d& base = ws.chain_globals[0].translation;
  int best = -1;
  double best_gap = kInf;
  for (int k = 1; k + 1 < n; ++k) {
    const Joint& joint = problem.skeleton->joint(problem.joints[k]);
    if (joint.type == JointType::kFixed) continue;
    Vector3d w;
    if (!axis_of(k, joint, &w)) continue;
    const double along = (ws.chain_globals[k].translation - base).dot(line);
    const double gap = std::abs(along - 0.5 * problem.chain_length);
    if (gap < best_gap) {
      best_gap = gap;
      best = k;
      *axis = w;
    }
  }
  return best;
}

// Which ways a hinge at `angle` may turn (by a milliradian) within its
// range.
bool CanIncrease(const Joint& joint, double angle) {
  return ConstrainHingeAngle(joint, angle + 1e-3) > angle + 0.5e-3;
}
bool CanDecrease(const Joint& joint, double angle) {
  return ConstrainHingeAngle(joint, angle - 1e-3) < angle - 0.5e-3;
}

// The axis (model space, unit) a straight chain's inner joint k bends
// about and the sign of the turn, as CanonicalBendSide describes; false
// when the joint cannot bend the bone below it.
bool BendAxisOf(const ChainProblem& problem, const Workspace& ws,
                const Pose& pose, int k, Vector3d* axis, double* sign) {
  const Joint& joint = problem.skeleton->joint(problem.joints[k]);
  const Transform& g = ws.chain_globals[k];
  const Vector3d bone = ws.chain_globals[k + 1].translation - g.translation;
  if (!(bone.squaredNorm() > 1e-24)) return false;
  switch (joint.type) {
    case JointType::kHinge: {
      const double angle =
          HingeAngle(joint, pose.local[problem.joints[k]].rotation);
      *sign = CanIncrease(joint, angle) ? 1.0
              : CanDecrease(joint, angle) ? -1.0
                                          : 0.0;
      *axis = RotateVector(g.rotation, joint.axis);
      return *sign != 0.0 && axis->cross(bone).squaredNorm() >
                                 1e-12 * bone.squaredNorm();
    }
    case JointType::kBall: {
      const Vector3d& child_local = pose.local[problem.joints[k + 1]].translation;
      if (joint.max_swing_rad <= 0.0 || !(child_local.squaredNorm() > 0.0)) {
        return false;
      }
      *axis = StraightBendAxis(g.rotation, child_local);
      *sign = 1.0;
      return true;
    }
    case JointType::kFixed:
      break;
  }
  return false;
}

}  // namespace

Vector3d StraightBendAxis(const Quaterniond& joint_rotation,
                          const Vector3d& child_local) {
  return RotateVector(joint_rotation, child_local.unitOrthogonal());
}

Vector3d CanonicalBendSide(const ChainProblem& problem, const Workspace& ws,
                           const Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  const Vector3d line = ChainLine(ws, n, problem.chain_length);
  for (int k = 1; k + 1 < n; ++k) {
    Vector3d axis;
    double sign;
    if (!BendAxisOf(problem, ws, pose, k, &axis, &sign)) continue;
    // A turn by +sign swings the bone below towards sign (axis x bone); the
    // root's re-aim at the target then leaves the inner joints on the
    // other side.
    const Vector3d bone =
        ws.chain_globals[k + 1].translation - ws.chain_globals[k].translation;
    Vector3d side = -sign * axis.cross(bone);
    if (line.squaredNorm() > 0.0) side = Across(side, line);
    side = UnitOrZero(side, 1e-12 * bone.norm());
    if (side.squaredNorm() > 0.0) return side;
  }
  return Vector3d::Zero();
}

BendReference ComputeBendReference(const ChainProblem& problem,
                                   const Workspace& ws, const Pose& pose) {
  BendReference ref;
  const int n = static_cast<int>(problem.joints.size());
  const double length = problem.chain_length;
  if (n < 3 || !(length > 0.0)) return ref;
  const Goal& goal = *problem.goal;
  const Vector3d& root = ws.chain_globals[0].translation;
  const Vector3d start_line = ChainLine(ws, n, length);
  Vector3d line = UnitOrZero(goal.target - root, 1e-12 * length);
  if (line.squaredNorm() == 0.0) line = start_line;
  if (line.squaredNorm() == 0.0) return ref;
  const Vector3d start_bend =
      start_line.squaredNorm() > 0.0 ? BendAcross(ws, n, start_line)
                                     : Vector3d::Zero();
  ref.start_bend = start_bend.norm() / length;
  if (goal.pole) {
    const Vector3d pole = *goal.pole - root;
    ref.direction =
        UnitOrZero(Across(pole, line), 1e-9 * std::max(pole.norm(), length));
    if (ref.direction.squaredNorm() > 0.0) {
      ref.source = BendReference::Source::kPole;
      return ref;
    }
  }
  // Without a pole only a limb keeps a side (a knee or an elbow); a longer
  // chain keeps the bend its solver gives it, and needs a side only to
  // leave a straight start.
  if (n > 3 && (ref.start_bend > kKickBend ||
                !((goal.target - root).squaredNorm() < length * length))) {
    return ref;
  }
  // Carried from the start's line to the target's by the smallest
  // rotation, as a two-bone solve carries it.
  const Quaterniond carry = start_line.squaredNorm() > 0.0
                                ? SmallestRotation(start_line, line)
                                : Quaterniond::Identity();
  Vector3d side;
  if (ref.start_bend > kStraightBend) {
    side = start_bend;
    ref.source = BendReference::Source::kStart;
  } else {
    side = CanonicalBendSide(problem, ws, pose);
    ref.source = BendReference::Source::kCanonical;
  }
  ref.direction = UnitOrZero(Across(RotateVector(carry, side), line), 1e-9);
  if (ref.direction.squaredNorm() == 0.0) {
    ref.source = BendReference::Source::kNone;
  }
  return ref;
}

bool ShapeForReach(const ChainProblem& problem, const BendReference& reference,
                   Workspace& ws, Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  const double length = problem.chain_length;
  if (reference.source == BendReference::Source::kNone || n < 3 ||
      problem.goal->target_orientation) {
    return false;
  }
  const Vector3d& base = ws.chain_globals[0].translation;
  const Vector3d to_target = problem.goal->target - base;
  const double distance = to_target.norm();
  const bool straight_inside =
      reference.start_bend <= kKickBend && distance < length * (1.0 - 1e-12);
  // Near full extension only for limbs (three joints), where the shape is
  // the solution up to limits: a longer chain's warm start says more
  // about where its inner joints should go than one bend would.
  const bool near_extension = n == 3 && distance > 0.9 * length;
  if (!straight_inside && !near_extension) return false;
  const Vector3d line = ChainLine(ws, n, length);
  if (line.squaredNorm() == 0.0) return false;
  Vector3d side = UnitOrZero(Across(reference.direction, line), 1e-6);
  if (side.squaredNorm() == 0.0) side = CanonicalBendSide(problem, ws, pose);
  if (side.squaredNorm() == 0.0) return false;
  const Vector3d tip = ws.chain_globals[n - 1].translation;
  // Already at the target's distance: only aiming is left, which every
  // solver does at first order.
  if (!straight_inside &&
      std::abs((tip - base).norm() - std::min(distance, length)) <=
          problem.tolerance) {
    return false;
  }
  // The joint that bends: nearest the middle of the chain by length.
  const Vector3d swing = side.cross(line);  // Swings the tip towards -side.
  Vector3d axis = Vector3d::Zero();
  const int m = JointNearestMiddle(
      problem, ws, line,
      [&](int k, const Joint& joint, Vector3d* w) {
        *w = swing;
        if (joint.type == JointType::kHinge) {
          *w = RotateVector(ws.chain_globals[k].rotation, joint.axis);
          if (std::abs(w->dot(line)) > 0.9) return false;
          if (w->dot(swing) < 0.0) *w = -*w;
        } else {
          // A bent ball joint turns in the plane of its two segments, where
          // every distance between their spans' difference and sum is
          // reachable (about another axis some are not).
          const Vector3d& pk = ws.chain_globals[k].translation;
          const Vector3d normal = (pk - base).cross(tip - pk);
          if (normal.squaredNorm() >
              1e-12 * (pk - base).squaredNorm() * (tip - pk).squaredNorm()) {
            *w = normal.normalized();
          }
        }
        return true;
      },
      &axis);
  if (m < 0) return false;
  const int mj = problem.joints[m];
  if (n > 3) {
    // A longer chain only gets a nudge to leave the symmetric straight
    // line (its solver then curls it its own way, not as one kink): a
    // turn that grows with how far inside reach the target is. The tip
    // swings to -side, so the inner joints end up on `side`.
    const double kick =
        std::clamp(2.0 * std::sqrt(1.0 - distance / length), 1e-3, 0.2);
    const Quaterniond before = pose.local[mj].rotation;
    pose.local[mj].rotation =
        ConstrainRotation(problem.skeleton->joint(mj),
                          ws.chain_globals[m - 1].rotation.conjugate() *
                              (AxisAngle(axis, kick) *
                               ws.chain_globals[m].rotation))
            .normalized();
    if (AngleBetween(before, pose.local[mj].rotation) < 0.25 * kick) {
      pose.local[mj].rotation = before;
      return false;
    }
    ComputeChainGlobals(problem, pose, ws);
    return true;
  }
  const Vector3d& pm = ws.chain_globals[m].translation;
  // |ab + R(axis, t) me|^2 = k + 2 (a cos t + b sin t): see MidGeometry in
  // two_bone.cc.
  const Vector3d ab = pm - base;
  const Vector3d me = tip - pm;
  const Vector3d me_par = me.dot(axis) * axis;
  const Vector3d me_perp = me - me_par;
  const Vector3d me_side = axis.cross(me_perp);
  const double k = ab.squaredNorm() + me.squaredNorm() + 2.0 * ab.dot(me_par);
  const double a = ab.dot(me_perp);
  const double b = ab.dot(me_side);
  const double r = std::hypot(a, b);
  if (!(r > 1e-12 * length * length)) return false;
  // Never folded flat: a chain folded onto its line is as symmetric as a
  // straight one (a target at the root).
  const double h = std::clamp(0.5 * (distance * distance - k), -0.95 * r, r);
  const double phase = std::atan2(b, a);
  const double spread = std::acos(h / r);
  // Of the two turns, the one that leaves the joint on `side` once the
  // root aims (the tip swung to -side), else the smaller.
  double best_turn = 0.0;
  double best_score = -kInf;
  for (double turn : {std::remainder(phase + spread, 2 * M_PI),
                      std::remainder(phase - spread, 2 * M_PI)}) {
    const Vector3d moved = pm + RotateVector(AxisAngle(axis, turn), me);
    const Quaterniond aim = SmallestRotation(moved - base, to_target);
    const double on_side = RotateVector(aim, ab).dot(side) > 0.0 ? 1.0 : 0.0;
    const double score = 10.0 * on_side - std::abs(turn);
    if (score > best_score) {
      best_score = score;
      best_turn = turn;
    }
  }
  const Quaterniond mid_global = AxisAngle(axis, best_turn) *
                                 ws.chain_globals[m].rotation;
  pose.local[mj].rotation =
      ConstrainRotation(problem.skeleton->joint(mj),
                        ws.chain_globals[m - 1].rotation.conjugate() *
                            mid_global)
          .normalized();
  ComputeChainGlobals(problem, pose, ws);
  const Quaterniond aim = SmallestRotation(
      ws.chain_globals[n - 1].translation - base, to_target);
  const int rj = problem.joints[0];
  pose.local[rj].rotation =
      ConstrainRotation(problem.skeleton->joint(rj),
                        problem.parent_global.rotation.conjugate() *
                            (aim * ws.chain_globals[0].rotation))
          .normalized();
  ComputeChainGlobals(problem, pose, ws);
  return true;
}

namespace {

// Moves the bend across the chain's line by `shift` (model space, across
// `line`): the inner joint nearest the middle of the chain that can turn
// about an axis across the line moves by about `shift` (only its part the
// joint's axis allows, for a hinge), through a turn of the root by a and
// of that joint by -a (l_a + l_b) / l_b, l_a and l_b its distances along
// the line from the root and to the tip: the tip stays on the line to
// first order. Returns false, changing nothing, when no joint can or the
// tip would move by more than `max_tip_move`.
bool ShiftBend(const ChainProblem& problem, const Vector3d& line,
               const Vector3d& shift, double max_tip_move, Workspace& ws,
               Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  const double length = problem.chain_length;
  const int root_joint = problem.joints[0];
  const Joint& root = problem.skeleton->joint(root_joint);
  if (root.type == JointType::kFixed) return false;
  const Vector3d& base = ws.chain_globals[0].translation;
  const Vector3d tip = ws.chain_globals[n - 1].translation;
  const double shift_norm = shift.norm();
  if (!(shift_norm > 0.0)) return false;
  Vector3d best_axis = Vector3d::Zero();
  const int best = JointNearestMiddle(
      problem, ws, line,
      [&](int k, const Joint& joint, Vector3d* axis) {
        // A turn about line x shift moves the line towards `shift`.
        *axis = line.cross(shift) / shift_norm;
        if (joint.type == JointType::kHinge) {
          *axis = RotateVector(ws.chain_globals[k].rotation, joint.axis);
          if (std::abs(axis->dot(line)) > 0.5) return false;
        }
        return true;
      },
      &best_axis);
  if (best < 0) return false;
  const double l_a = (ws.chain_globals[best].translation - base).dot(line);
  const double l_b = (tip - ws.chain_globals[best].translation).dot(line);
  if (!(l_a > 1e-6 * length) || !(l_b > 1e-6 * length)) return false;
  // The part of `shift` a turn about best_axis makes.
  const Vector3d moves = best_axis.cross(line);
  const double along_moves = shift.dot(moves) / moves.squaredNorm();
  if (!(std::abs(along_moves) * moves.norm() > 0.25 * shift_norm)) {
    return false;
  }
  const double a = along_moves / l_a;
  const double back = -a * (l_a + l_b) / l_b;
  const int mid_joint = problem.joints[best];
  const Joint& mid = problem.skeleton->joint(mid_joint);
  const Quaterniond root_before = pose.local[root_joint].rotation;
  const Quaterniond mid_before = pose.local[mid_joint].rotation;
  const Quaterniond turn = SmallAxisAngle(best_axis, a);
  pose.local[root_joint].rotation =
      ConstrainRotation(root, problem.parent_global.rotation.conjugate() *
                                  (turn * ws.chain_globals[0].rotation))
          .normalized();
  // The joint's new model-space rotation, under its parent's after the
  // root's turn (which carries the whole chain).
  const Quaterniond mid_parent = turn * ws.chain_globals[best - 1].rotation;
  pose.local[mid_joint].rotation =
      ConstrainRotation(mid, mid_parent.conjugate() *
                                 (SmallAxisAngle(best_axis, a + back) *
                                  ws.chain_globals[best].rotation))
          .normalized();
  // Unconstrained, both turns are as computed and the tip moves by the
  // second-order term only (shift^2 / l_a): nothing to check. Limits may
  // have cut a turn short; then forward kinematics decides.
  if (!root.IsConstrained() && !mid.IsConstrained() &&
      shift_norm * shift_norm < 0.1 * max_tip_move * std::min(l_a, l_b)) {
    return true;
  }
  ComputeChainGlobals(problem, pose, ws);
  if ((ws.chain_globals[n - 1].translation - tip).norm() <= max_tip_move) {
    return true;
  }
  pose.local[root_joint].rotation = root_before;
  pose.local[mid_joint].rotation = mid_before;
  ComputeChainGlobals(problem, pose, ws);
  return false;
}

// Turns the chain about its root-tip line `line` by `angle` (or the part
// of it the root's limits allow); see AlignBend.
void Swivel(const ChainProblem& problem, const Vector3d& line, double angle,
            double max_tip_move, Workspace& ws, Pose& pose) {
  const int n = static_cast<int>(problem.joints.size());
  const Joint& root = problem.skeleton->joint(problem.joints[0]);
  if (root.type != JointType::kBall || !(std::abs(angle) > 1e-12)) return;
  const Quaterniond parent_inv = problem.parent_global.rotation.conjugate();
  const Quaterniond start = ws.chain_globals[0].rotation;
  auto local_at = [&](double a) -> Quaterniond {
    return (parent_inv * (AxisAngle(line, a) * start)).normalized();
  };
  double turn = angle;
  if (root.IsConstrained()) {
    turn = NearestFeasibleTurn(root, problem.parent_global.rotation, start,
                               line, angle, std::min(angle, 0.0),
                               std::max(angle, 0.0));
    if (!std::isfinite(turn) || !(std::abs(turn) > 1e-12)) return;
  }
  const Quaterniond before = pose.local[problem.joints[0]].rotation;
  const Vector3d tip = ws.chain_globals[n - 1].translation;
  pose.local[problem.joints[0]].rotation =
      root.IsConstrained() ? ConstrainRotation(root, local_at(turn)).normalized()
                           : local_at(turn);
  ComputeChainGlobals(problem, pose, ws);
  if (problem.goal->target_orientation) ApplyTipOrientation(problem, ws, pose);
  if ((ws.chain_globals[n - 1].translation - tip).norm() > max_tip_move) {
    pose.local[problem.joints[0]].rotation = before;
    ComputeChainGlobals(problem, pose, ws);
  }
}

}  // namespace

void AlignBend(const ChainProblem& problem, const BendReference& reference,
               Workspace& ws, Pose& pose) {
  constexpr double kNearlyStraight = 3e-4;
  constexpr double kKeep = 1e-5;
  // A bend this close to the reference's side (radians) is on it.
  constexpr double kSideSlack = 1e-6;
  const int n = static_cast<int>(problem.joints.size());
  const double length = problem.chain_length;
  if (reference.source == BendReference::Source::kNone || n < 3) return;
  // Without a pole only limbs are kept on their side (ComputeBendReference).
  const bool pole = reference.source == BendReference::Source::kPole;
  if (!pole && n > 3) return;
  const bool orientation = problem.goal->target_orientation.has_value();
  if (orientation) {
    const Joint& tip = problem.skeleton->joint(problem.joints[n - 1]);
    if (tip.type != JointType::kBall || tip.IsConstrained()) return;
  }
  const Vector3d line = ChainLine(ws, n, length);
  if (line.squaredNorm() == 0.0) return;
  const Vector3d want = UnitOrZero(Across(reference.direction, line), 1e-6);
  if (want.squaredNorm() == 0.0) return;
  Vector3d bend = BendAcross(ws, n, line);
  const double bend_norm = bend.norm();
  // How far the tip may move: a tenth of the tolerance, and never out of
  // it when the solver reached the target.
  const double error =
      (ws.chain_globals[n - 1].translation - problem.goal->target).norm();
  const double max_tip_move =
      error <= problem.tolerance
          ? std::min(0.1 * problem.tolerance, problem.tolerance - error)
          : 0.1 * problem.tolerance;
  // Without a pole a limb's bend faces the side TWO_BONE gives it (the
  // start's, carried by the smallest rotation): a solver free to put it
  // anywhere about the line puts a nearly straight limb's bend where its
  // damped steps drift (DLS: 90 degrees off within one frame past full
  // extension), and only a flip to the far side used to be undone.
  const bool off_side =
      std::atan2(bend.cross(want).norm(), bend.dot(want)) > kSideSlack;
  if (!orientation && bend_norm < kNearlyStraight * length &&
      (pole || off_side || bend_norm < kKeep * length)) {
    const Vector3d goal_bend = std::max(bend_norm, kKeep * length) * want;
    if (ShiftBend(problem, line, goal_bend - bend, max_tip_move, ws, pose)) {
      // On the reference's side now; a pole may still want a turn (a hinge
      // shifts the bend only across its own axis).
      if (!pole) return;
      ComputeChainGlobals(problem, pose, ws);
      bend = BendAcross(ws, n, line);
    }
  }
  if (!(bend.norm() > kSwivelBend * length)) return;
  if (!pole && !off_side) return;
  Swivel(problem, line, std::atan2(line.dot(bend.cross(want)), bend.dot(want)),
         max_tip_move, ws, pose);
}

double NearestFeasibleTurn(const Joint& root, const Quaterniond& parent_rotation,
                           const Quaterniond& root_global, const Vector3d& line,
                           double preferred, double lo, double hi) {
  constexpr double kInside = 1e-9;
  constexpr int kGrid = 64;
  const Quaterniond parent_inv = parent_rotation.conjugate();
  auto inside = [&](double a) {
    return WithinLimits(
        root, (parent_inv * (AxisAngle(line, a) * root_global)).normalized(),
        kInside);
  };
  if (inside(preferred)) return preferred;
  // The grid's angles nearest `preferred` first.
  double found = std::numeric_limits<double>::quiet_NaN();
  double found_distance = kInf;
  for (int i = 0; i <= kGrid; ++i) {
    const double a = lo + (hi - lo) * i / kGrid;
    const double distance = std::abs(a - preferred);
    if (distance < found_distance && inside(a)) {
      found = a;
      found_distance = distance;
    }
  }
  if (!std::isfinite(found)) return found;
  // Bisection between the inside angle and the next grid step towards
  // `preferred` (outside, or the grid would have found it).
  const double step = (hi - lo) / kGrid;
  double in = found;
  double out = found + std::copysign(std::min(step, found_distance),
                                     preferred - found);
  for (int i = 0; i < 30; ++i) {
    const double mid = 0.5 * (in + out);
    (inside(mid) ? in : out) = mid;
  }
  return in;
}

}  // namespace reach
