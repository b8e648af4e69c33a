#include "retarget/transfer.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/limits.h"

namespace reach::retarget {
namespace {

using Eigen::Matrix3d;
using Eigen::Quaterniond;
using Eigen::Vector3d;

// The midpoint of the two feet.
Vector3d Feet(const Characterization& c, absl::Span<const Transform> g) {
  return 0.5 * (g[c.legs[kLeft].foot].translation +
                g[c.legs[kRight].foot].translation);
}

}  // namespace

Vector3d Vertical(const Vector3d& up) {
  int axis = 0;
  up.cwiseAbs().maxCoeff(&axis);
  Vector3d v = Vector3d::Zero();
  v[axis] = up[axis] > 0.0 ? 1.0 : -1.0;
  return v.dot(up) >= std::cos(M_PI / 6.0) ? v : up;
}

namespace {

// The body's frame in a pose: columns left, up, forward (right-handed:
// forward = left x up), from the thighs (left minus right) and the world's
// vertical (Vertical of feet to chest).
Matrix3d BodyFrame(const Characterization& c, absl::Span<const Transform> g) {
  const Vector3d feet = Feet(c, g);
  const int chest = c.spine.empty() ? c.pelvis : c.spine.back();
  const Vector3d up = Vertical((g[chest].translation - feet).normalized());
  Vector3d left =
      g[c.legs[kLeft].thigh].translation - g[c.legs[kRight].thigh].translation;
  left = (left - left.dot(up) * up).normalized();
  Matrix3d frame;
  frame.col(0) = left;
  frame.col(1) = up;
  frame.col(2) = left.cross(up);
  return frame;
}

// The hips: the thigh joints' midpoint, not the pelvis joint, which rigs
// place anywhere from the hip line to the navel.
Vector3d Hips(const Characterization& c, absl::Span<const Transform> g) {
  return 0.5 * (g[c.legs[kLeft].thigh].translation +
                g[c.legs[kRight].thigh].translation);
}

// The hips' height above the feet along the body's up.
double HipHeight(const Characterization& c, absl::Span<const Transform> g,
                 const Vector3d& up) {
  return (Hips(c, g) - Feet(c, g)).dot(up);
}

// The legs' mean length: thigh to foot along the bones (through the shin
// when there is one); a pose does not change it.
double LegLength(const Characterization& c, absl::Span<const Transform> g) {
  double sum = 0.0;
  for (const Leg& leg : c.legs) {
    if (leg.shin >= 0) {
      sum += (g[leg.shin].translation - g[leg.thigh].translation).norm() +
             (g[leg.foot].translation - g[leg.shin].translation).norm();
    } else {
      sum += (g[leg.foot].translation - g[leg.thigh].translation).norm();
    }
  }
  return 0.5 * sum;
}

// Where each joint of `chain` sits along it, in [0, 1]: its distance
// from the first joint along the bones over the chain's length (UE's IK
// Retargeter's bone parameters). The first joint is at 0 and the last at
// 1, so a chain's ends map to the other chain's ends whatever the joint
// counts; a joint alone is at 1 (the source chain's end, as UE does).
// Joints at one place (zero-length bones: BCN's two neck joints, its
// pelvis pair) are spread evenly by their order up to the next joint, so
// each turns its own way.
std::vector<double> ChainParameters(const std::vector<int>& chain,
                                    absl::Span<const Transform> g) {
  const size_t n = chain.size();
  std::vector<double> at(n, 1.0);
  if (n < 2) return at;
  std::vector<double> length(n, 0.0);  // From the previous joint.
  double total = 0.0;
  for (size_t i = 1; i < n; ++i) {
    length[i] = (g[chain[i]].translation - g[chain[i - 1]].translation).norm();
    total += length[i];
  }
  if (!(total > 0.0)) {
    for (size_t i = 0; i < n; ++i) at[i] = static_cast<double>(i) / (n - 1);
    return at;
  }
  // A bone under 1% of the chain's mean length joins two joints at one
  // place.
  const double tiny = 0.01 * total / (n - 1);
  double run = 0.0;
  at[0] = 0.0;
  for (size_t i = 1; i < n; ++i) {
    run += length[i];
    at[i] = run / total;
  }
  // Each group of joints at one place: from its own place towards the
  // next group's (the last group: from the previous group's towards its
  // own), evenly.
  for (size_t i = 0; i < n;) {
    size_t end = i + 1;
    while (end < n && length[end] < tiny) ++end;
    const size_t count = end - i;
    if (count > 1) {
      const double from = end < n ? at[i] : (i > 0 ? at[i - 1] : 0.0);
      const double to = end < n ? at[end] : at[i];
      for (size_t m = 0; m < count; ++m) {
        at[i + m] = end < n ? from + (to - from) * m / count
                            : from + (to - from) * (m + 1) / count;
      }
    }
    i = end;
  }
  return at;
}

// Each joint of `to` (at `to_at`) takes the source's turn interpolated at
// the same place along `from` (at `from_at`): between the two joints of
// `from` that bracket it, with its weight towards the second.
void PairChains(const std::vector<int>& from,
                const std::vector<double>& from_at, const std::vector<int>& to,
                const std::vector<double>& to_at, std::vector<int>* first,
                std::vector<int>* second, std::vector<double>* weight) {
  if (from.empty()) return;
  for (size_t i = 0; i < to.size(); ++i) {
    const double at = to_at[i];
    size_t k = 0;
    while (k + 1 < from.size() && from_at[k + 1] < at) ++k;
    const int a = from[k];
    if (k + 1 == from.size() || from_at[k + 1] <= from_at[k]) {
      (*first)[to[i]] = a;
      (*second)[to[i]] = -1;
      (*weight)[to[i]] = 0.0;
      continue;
    }
    const double w =
        std::clamp((at - from_at[k]) / (from_at[k + 1] - from_at[k]), 0.0, 1.0);
    (*first)[to[i]] = a;
    (*second)[to[i]] = from[k + 1];
    (*weight)[to[i]] = w;
  }
}

// How a ball joint's twist and its hinge child's angle point the hinge's
// bone (from the hinge to its child) along a wanted direction.
struct HingeAim {
  double twist = 0.0;  // About the ball's bone, radians.
  double angle = 0.0;  // The hinge's angle, within its range.
  double error = 0.0;  // The bone's direction left off the wanted, radians.
};

// A hinge's bone can point only within the plane (or cone) its axis sweeps:
// a source elbow or knee (three degrees of freedom in mocap) that bends in
// another plane, or twists the forearm as it bends, has no hinge angle
// that points the bone as the source's. What does is the parent's twist
// about its own bone (upper arm, thigh) turning the hinge's plane onto the
// wanted direction, as a person's shoulder or hip does.
//
// In model space: `b` the parent's bone (unit, its joint to the hinge's),
// `axis` the hinge's axis and `c0` its bone at angle 0 (unit), `want` the
// wanted direction of the hinge's bone (unit). Finds the twist t about b,
// within [twist_lo, twist_hi] (what the parent's twist range leaves; 0 and
// 0: the angle alone), and the angle a with R_b(t) R_axis(a) c0 = want:
// R_axis(a) c0 lies on the cone about `axis` through c0, R_b(-t) want on
// the cone about b through `want`; the cones meet in up to two places, one
// per twist. Each twist is brought into its range and its angle into the
// hinge's; of those and no twist, the least direction error wins, a
// radian of twist costing kTwistCost radians of error (a knee bent back a
// little stays straight rather than twisting the thigh a half turn to bend
// forward). Where the cones do not meet, the nearest.
HingeAim AimHinge(const Joint& hinge, const Vector3d& b, const Vector3d& axis,
                  const Vector3d& c0, const Vector3d& want, double twist_lo,
                  double twist_hi) {
  // The angle about `axis` that turns c0 nearest R_b(-t) want, in the
  // hinge's range, and the error left.
  const Vector3d c0p = c0 - c0.dot(axis) * axis;
  auto aim_with = [&](double t) {
    HingeAim aim;
    aim.twist = t;
    const Vector3d x = t == 0.0 ? want : Eigen::AngleAxisd(-t, b) * want;
    const Vector3d xp = x - x.dot(axis) * axis;
    aim.angle = ConstrainHingeAngle(
        hinge, std::atan2(axis.dot(c0p.cross(xp)), c0p.dot(xp)));
    const Vector3d got = Eigen::AngleAxisd(aim.angle, axis) * c0;
    aim.error = std::atan2(got.cross(x).norm(), got.dot(x));
    return aim;
  };
  HingeAim best = aim_with(0.0);
  if (!(twist_hi > twist_lo)) return best;
  // x(u) = R_b(u) want = (want.b) b + perp cos(u) + (b x want) sin(u), and
  // x.axis = c0.axis: p cos(u) + q sin(u) = r; the twist is -u.
  const Vector3d perp = want - want.dot(b) * b;
  const double p = perp.dot(axis);
  const double q = b.cross(want).dot(axis);
  const double r = c0.dot(axis) - want.dot(b) * b.dot(axis);
  const double radius = std::hypot(p, q);
  if (!(radius > 1e-12)) return best;  // Every twist alike: none.
  const double at = std::atan2(q, p);
  const double spread = std::acos(std::clamp(r / radius, -1.0, 1.0));
  constexpr double kTwistCost = 0.05;
  double best_cost = best.error;
  for (const double u : {at + spread, at - spread}) {
    const HingeAim aim = aim_with(
        std::clamp(-std::remainder(u, 2.0 * M_PI), twist_lo, twist_hi));
    const double cost = aim.error + kTwistCost * std::abs(aim.twist);
    if (cost < best_cost) {
      best = aim;
      best_cost = cost;
    }
  }
  return best;
}

// How far a ball joint at `local` may still twist about its axis, each way
// (its twist range less its twist now; a half turn each way unlimited).
// The limbs' balls twist about their bone: their axis is the bone to their
// single child.
std::pair<double, double> TwistRoom(const Joint& ball,
                                    const Quaterniond& local) {
  if (!std::isfinite(ball.min_angle_rad) &&
      !std::isfinite(ball.max_angle_rad)) {
    return {-M_PI, M_PI};
  }
  Quaterniond swing;
  const double now = std::remainder(
      SwingTwist(ball.rest.rotation.conjugate() * local, ball.axis, &swing),
      2.0 * M_PI);
  return {std::max(-M_PI, ball.min_angle_rad - now),
          std::min(M_PI, ball.max_angle_rad - now)};
}

absl::Status CheckSides(const RetargetSide& source,
                        const RetargetSide& target) {
  for (const auto& [side, name] :
       {std::make_pair(&source, "source"), std::make_pair(&target, "target")}) {
    if (side->skeleton == nullptr || side->roles == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": skeleton and roles are required"));
    }
    const absl::Status valid = ValidatePose(*side->skeleton, side->reference);
    if (!valid.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ".reference: ", valid.message()));
    }
    // The roles the body's frame and the pelvis need (overrides can take
    // them away).
    const Characterization& c = *side->roles;
    const int n = side->skeleton->num_joints();
    const std::pair<const char*, int> needed[] = {
        {"pelvis", c.pelvis},
        {"left.thigh", c.legs[kLeft].thigh},
        {"right.thigh", c.legs[kRight].thigh},
        {"left.foot", c.legs[kLeft].foot},
        {"right.foot", c.legs[kRight].foot}};
    for (const auto& [role, joint] : needed) {
      if (joint < 0 || joint >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ".roles: no ", role));
      }
    }
  }
  return absl::OkStatus();
}

// Both sides checked, and their reference poses' model-space transforms.
absl::Status ReadReferences(const RetargetSide& source,
                            const RetargetSide& target,
                            std::vector<Transform>* source_globals,
                            std::vector<Transform>* target_globals) {
  const absl::Status valid = CheckSides(source, target);
  if (!valid.ok()) return valid;
  source_globals->resize(source.skeleton->num_joints());
  target_globals->resize(target.skeleton->num_joints());
  ComputeGlobals(*source.skeleton, source.reference,
                 absl::MakeSpan(*source_globals));
  ComputeGlobals(*target.skeleton, target.reference,
                 absl::MakeSpan(*target_globals));
  return absl::OkStatus();
}

// The rotation from the source's body frame to the target's.
Quaterniond Align(const Matrix3d& source_frame, const Matrix3d& target_frame) {
  return Quaterniond(Matrix3d(target_frame * source_frame.transpose()))
      .normalized();
}

}  // namespace

absl::StatusOr<Pose> AlignLimbs(const RetargetSide& source,
                                const RetargetSide& target) {
  std::vector<Transform> sg, tg;
  const absl::Status read = ReadReferences(source, target, &sg, &tg);
  if (!read.ok()) return read;
  const Skeleton& ts = *target.skeleton;
  const Characterization& sc = *source.roles;
  const Characterization& tc = *target.roles;
  Pose aligned = target.reference;
  const Quaterniond align = Align(BodyFrame(sc, sg), BodyFrame(tc, tg));
  for (int side = 0; side < 2; ++side) {
    const Arm& sa = sc.arms[side];
    const Arm& ta = tc.arms[side];
    const Leg& sl = sc.legs[side];
    const Leg& tl = tc.legs[side];
    // Parent first: each bone from its joint to the next role's.
    const std::pair<std::pair<int, int>, std::pair<int, int>> bones[] = {
        {{sa.clavicle, sa.upper_arm}, {ta.clavicle, ta.upper_arm}},
        {{sa.upper_arm, sa.forearm}, {ta.upper_arm, ta.forearm}},
        {{sa.forearm, sa.hand}, {ta.forearm, ta.hand}},
        {{sl.thigh, sl.shin}, {tl.thigh, tl.shin}},
        {{sl.shin, sl.foot}, {tl.shin, tl.foot}},
    };
    for (const auto& [from, to] : bones) {
      if (from.first < 0 || from.second < 0 || to.first < 0 || to.second < 0) {
        continue;
      }
      const Vector3d want =
          align * (sg[from.second].translation - sg[from.first].translation);
      const Vector3d have =
          tg[to.second].translation - tg[to.first].translation;
      if (!(want.norm() > 0.0) || !(have.norm() > 0.0)) continue;
      const Quaterniond turn = Quaterniond::FromTwoVectors(have, want);
      const int j = to.first;
      const int p = ts.joint(j).parent;
      const Quaterniond parent =
          p >= 0 ? tg[p].rotation : Quaterniond::Identity();
      aligned.local[j].rotation =
          (parent.conjugate() * turn * tg[j].rotation).normalized();
      ComputeGlobals(ts, aligned, absl::MakeSpan(tg));
    }
  }
  return aligned;
}

absl::StatusOr<Transfer> Transfer::Create(const RetargetSide& source,
                                          const RetargetSide& target,
                                          double pelvis_scale) {
  std::vector<Transform> sg, tg;
  const absl::Status read = ReadReferences(source, target, &sg, &tg);
  if (!read.ok()) return read;
  const Skeleton& ss = *source.skeleton;
  const Skeleton& ts = *target.skeleton;
  const Characterization& sc = *source.roles;
  const Characterization& tc = *target.roles;

  Transfer t;
  t.source_ = &ss;
  t.target_ = &ts;
  t.source_roles_ = source.roles;
  t.target_roles_ = target.roles;
  t.source_reference_ = source.reference;
  t.source_of_.assign(ts.num_joints(), -1);
  t.source_next_.assign(ts.num_joints(), -1);
  t.weight_.assign(ts.num_joints(), 0.0);
  // Single-joint roles to the same role; spines and necks by arc length.
  std::vector<std::pair<int, int>> same = {{sc.pelvis, tc.pelvis},
                                           {sc.head, tc.head}};
  for (int k = 0; k < 2; ++k) {
    const Arm &sa = sc.arms[k], &ta = tc.arms[k];
    const Leg &sl = sc.legs[k], &tl = tc.legs[k];
    same.insert(same.end(), {{sa.clavicle, ta.clavicle},
                             {sa.upper_arm, ta.upper_arm},
                             {sa.forearm, ta.forearm},
                             {sa.hand, ta.hand},
                             {sl.thigh, tl.thigh},
                             {sl.shin, tl.shin},
                             {sl.foot, tl.foot},
                             {sl.toe, tl.toe}});
  }
  for (const auto& [from, to] : same) {
    if (from >= 0 && to >= 0) t.source_of_[to] = from;
  }
  // Spines and necks (pelvis and head apart, as single joints) by their
  // share of the chain's length. A source without a neck drives the
  // target's between its chest and its head.
  PairChains(sc.spine, ChainParameters(sc.spine, sg), tc.spine,
             ChainParameters(tc.spine, tg), &t.source_of_, &t.source_next_,
             &t.weight_);
  // The neck's chain ends at the head (whose turn stays the source
  // head's own): the neck's last bone runs up to it, and a neck of one
  // joint drives the target's between its own turn and the head's.
  std::vector<int> source_neck = sc.neck, target_neck = tc.neck;
  if (source_neck.empty() && !sc.spine.empty()) {
    source_neck.push_back(sc.spine.back());
  }
  if (sc.head >= 0) source_neck.push_back(sc.head);
  if (tc.head >= 0) target_neck.push_back(tc.head);
  PairChains(source_neck, ChainParameters(source_neck, sg), target_neck,
             ChainParameters(target_neck, tg), &t.source_of_, &t.source_next_,
             &t.weight_);
  if (tc.head >= 0) {
    t.source_of_[tc.head] = sc.head;
    t.source_next_[tc.head] = -1;
    t.weight_[tc.head] = 0.0;
  }

  // Fingers: thumb to thumb, the others by name (index to index), else by
  // their place across the hand; along each finger by order.
  t.finger_parent_.assign(ts.num_joints(), -1);
  for (int k = 0; k < 2; ++k) {
    const std::vector<Finger>& from = sc.fingers[k];
    const std::vector<Finger>& to = tc.fingers[k];
    const int hand = sc.arms[k].hand;
    if (from.empty() || hand < 0 || tc.arms[k].hand < 0) continue;
    const Finger* source_thumb = nullptr;
    std::vector<const Finger*> others;
    for (const Finger& f : from) {
      if (f.name == "thumb") {
        source_thumb = &f;
      } else {
        others.push_back(&f);
      }
    }
    int target_others = 0;
    for (const Finger& f : to) target_others += f.name != "thumb";
    int nth = 0;  // Of the target's fingers that are no thumb.
    for (const Finger& f : to) {
      const Finger* match = nullptr;
      if (f.name == "thumb") {
        match = source_thumb;
      } else {
        for (const Finger* o : others) {
          if (o->name == f.name) match = o;
        }
        if (match == nullptr && !others.empty()) {
          // Its place among the target's fingers, on the source's.
          const size_t at =
              target_others > 1
                  ? static_cast<size_t>(std::lround(static_cast<double>(nth) *
                                                    (others.size() - 1) /
                                                    (target_others - 1)))
                  : others.size() / 2;
          match = others[std::min(at, others.size() - 1)];
        }
        ++nth;
      }
      if (match == nullptr) continue;
      // Joint by joint along the finger, each turning against its parent
      // as its source counterpart turns against its own (Apply); the
      // joints of a target finger longer than the source's have no
      // counterpart and ride on the last, as in the retarget pose.
      const size_t n = std::min(f.joints.size(), match->joints.size());
      for (size_t i = 0; i < n; ++i) {
        const int j = f.joints[i];
        t.source_of_[j] = match->joints[i];
        t.source_next_[j] = -1;
        t.weight_[j] = 0.0;
        t.finger_parent_[j] = i == 0 ? hand : match->joints[i - 1];
      }
      for (size_t i = n; i < f.joints.size(); ++i) {
        t.source_of_[f.joints[i]] = -1;
        t.source_next_[f.joints[i]] = -1;
      }
    }
    if (tc.arms[k].hand >= 0) {
      t.source_of_[tc.arms[k].hand] = hand;
      t.source_next_[tc.arms[k].hand] = -1;
      t.weight_[tc.arms[k].hand] = 0.0;
    }
  }

  // Hinges (a mapped elbow or knee) aim their longest bone; the ball
  // joint above each twists to help (Apply).
  t.aim_child_.assign(ts.num_joints(), -1);
  t.aim_hinge_.assign(ts.num_joints(), -1);
  for (int c = 0; c < ts.num_joints(); ++c) {
    const int j = ts.joint(c).parent;
    if (j < 0 || ts.joint(j).type != JointType::kHinge || t.source_of_[j] < 0) {
      continue;
    }
    const double length = target.reference.local[c].translation.norm();
    if (length > 0.0 &&
        (t.aim_child_[j] < 0 ||
         length > target.reference.local[t.aim_child_[j]].translation.norm())) {
      t.aim_child_[j] = c;
    }
  }
  for (int j = 0; j < ts.num_joints(); ++j) {
    const int p = ts.joint(j).parent;
    if (t.aim_child_[j] >= 0 && p >= 0 && t.source_of_[p] >= 0 &&
        ts.joint(p).type == JointType::kBall && t.aim_hinge_[p] < 0 &&
        target.reference.local[j].translation.norm() > 0.0) {
      t.aim_hinge_[p] = j;
    }
  }

  const Matrix3d source_frame = BodyFrame(sc, sg);
  const Matrix3d target_frame = BodyFrame(tc, tg);
  t.align_ = Align(source_frame, target_frame);
  const double source_height = HipHeight(sc, sg, source_frame.col(1));
  const double target_height = HipHeight(tc, tg, target_frame.col(1));
  if (!(source_height > 0.0) || !(target_height > 0.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(!(source_height > 0.0) ? "source" : "target",
                     ".reference: the hips are not above the feet (height ",
                     !(source_height > 0.0) ? source_height : target_height,
                     "): the retarget pose must stand"));
  }
  // The legs' ratio, not the hips' heights: rest poses stand differently
  // (legs splayed in CMU's, straight in others), and the legs' length is
  // what carries the body over the floor.
  const double source_legs = LegLength(sc, sg);
  const double target_legs = LegLength(tc, tg);
  t.scale_ = pelvis_scale > 0.0 ? pelvis_scale
             : source_legs > 0.0 && target_legs > 0.0
                 ? target_legs / source_legs
                 : target_height / source_height;
  t.target_pelvis_ = tc.pelvis;
  for (int k = 0; k < 2; ++k) {
    t.source_thighs_[k] = sc.legs[k].thigh;
    t.target_thighs_[k] = tc.legs[k].thigh;
  }
  t.source_hips_ref_ = Hips(sc, sg);
  t.target_hips_ref_ = Hips(tc, tg);
  for (const Transform& g : sg) {
    t.source_ref_inverse_.push_back(g.rotation.conjugate());
  }
  for (const Transform& g : tg) t.target_ref_.push_back(g.rotation);
  t.target_reference_ = target.reference;
  return t;
}

Quaterniond Transfer::Turn(int j, const TransferScratch& scratch) const {
  const int k = source_of_[j];
  // The source joint's turn from its retarget pose, in the target's model
  // frame.
  Quaterniond turn =
      scratch.source_globals[k].rotation * source_ref_inverse_[k];
  const int k2 = source_next_[j];
  if (k2 >= 0) {
    // Along a spine or neck: between two source joints' turns.
    turn = turn.slerp(weight_[j], scratch.source_globals[k2].rotation *
                                      source_ref_inverse_[k2]);
  }
  return align_ * turn * align_.conjugate();
}

Quaterniond Transfer::Wanted(int j, const TransferScratch& scratch) const {
  return (Turn(j, scratch) * target_ref_[j]).normalized();
}

void Transfer::Apply(const Pose& source, TransferScratch& scratch,
                     Pose* target, const Pose* previous,
                     const FrameBefore& given_before) const {
  const int n = target_->num_joints();
  if (previous != nullptr && static_cast<int>(previous->local.size()) != n) {
    previous = nullptr;
  }
  // Used only whole and of these skeletons' sizes.
  const bool fits =
      given_before.transferred != nullptr &&
      given_before.source_globals != nullptr &&
      static_cast<int>(given_before.transferred->local.size()) == n &&
      static_cast<int>(given_before.source_globals->size()) ==
          source_->num_joints();
  const FrameBefore frame_before = fits ? given_before : FrameBefore{};
  scratch.source_globals.resize(source_->num_joints());
  ComputeGlobals(*source_, source, absl::MakeSpan(scratch.source_globals));
  scratch.target_rotations.resize(n);
  target->local.resize(n);
  for (int j = 0; j < n; ++j) {
    const Joint& joint = target_->joint(j);
    const int p = joint.parent;
    const Quaterniond parent =
        p >= 0 ? scratch.target_rotations[p] : Quaterniond::Identity();
    Transform& local = target->local[j];
    local = target_reference_.local[j];
    // The joint's answer on the frame before, for the side of its range a
    // twist wanted beyond it goes to (ProjectIntoLimits).
    const Quaterniond* before =
        previous != nullptr ? &previous->local[j].rotation : nullptr;
    if (source_of_[j] < 0) {
      ProjectIntoLimits(joint, before, &local.rotation);
      scratch.target_rotations[j] = (parent * local.rotation).normalized();
      continue;
    }
    if (finger_parent_[j] >= 0) {
      // A finger joint turns against its parent (the hand, the finger's
      // previous joint) as its source turns against the source's own (the
      // source's local turn, rest-aligned), whatever the hand did: a hand
      // its wrist's limits or the hands' goals turned from the source's
      // keeps its fingers' curl.
      const int k = finger_parent_[j];
      const Quaterniond from =
          align_ *
          (scratch.source_globals[k].rotation * source_ref_inverse_[k]) *
          align_.conjugate();
      const Quaterniond p_ref =
          p >= 0 ? target_ref_[p] : Quaterniond::Identity();
      local.rotation = (p_ref.conjugate() * from.conjugate() *
                        Turn(j, scratch) * target_ref_[j])
                           .normalized();
      ProjectIntoLimits(joint, before, &local.rotation);
      scratch.target_rotations[j] = (parent * local.rotation).normalized();
      continue;
    }
    const Quaterniond model = Wanted(j, scratch);
    local.rotation = (parent.conjugate() * model).normalized();
    const int child = aim_child_[j];
    if (joint.type == JointType::kHinge && child >= 0) {
      // A hinge turns its bone (to `child`) as near the source's direction
      // as its plane and range allow (AimHinge), not by the part of the
      // source's turn about its axis, which a forearm's twist as it bends
      // would change.
      const Quaterniond at = parent * joint.rest.rotation;
      const Vector3d& bone = target_reference_.local[child].translation;
      const HingeAim aim = AimHinge(joint, Vector3d::Zero(), at * joint.axis,
                                    (at * bone).normalized(),
                                    (model * bone).normalized(), 0.0, 0.0);
      local.rotation = HingeRotation(joint, aim.angle);
      scratch.target_rotations[j] = (parent * local.rotation).normalized();
      continue;
    }
    // Within the target joint's limits (the nearest rotation they allow);
    // its children then turn from where it is, so their own model-space
    // rotations stay the source's where their limits allow.
    Quaterniond placed = ProjectIntoLimits(joint, before, &local.rotation)
                             ? (parent * local.rotation).normalized()
                             : model;
    const int hinge = aim_hinge_[j];
    if (hinge >= 0) {
      // The ball above a hinge (shoulder, hip) twists about its bone so
      // that the hinge's plane holds the source's direction of the hinge's
      // bone (AimHinge). The twist fades in over the first kAimBend of
      // bend: a limb near straight points the same whatever its twist,
      // and the plane of a small bend turns fast with noise.
      constexpr double kAimBend = 10.0 * M_PI / 180.0;
      // How fast a twist held back from its aim (below) catches up while
      // the source holds still: 45 degrees a second, 1.5 a frame at 30 Hz
      // (within the 2 a frame beyond the source's the issue allows).
      constexpr double kAimCatchUp = M_PI / 4.0;
      const Joint& h = target_->joint(hinge);
      const int c = aim_child_[hinge];
      const Vector3d& bone = target_reference_.local[c].translation;
      const Vector3d b =
          (placed * target_reference_.local[hinge].translation).normalized();
      const Vector3d want = (Wanted(hinge, scratch) * bone).normalized();
      const Quaterniond at = placed * h.rest.rotation;
      const auto [lo, hi] =
          TwistRoom(joint, (parent.conjugate() * placed).normalized());
      const HingeAim aim =
          AimHinge(h, b, at * h.axis, (at * bone).normalized(), want, lo, hi);
      const double bend = std::atan2(b.cross(want).norm(), b.dot(want));
      const double x = std::min(bend / kAimBend, 1.0);
      const double twist = aim.twist * x * x * (3.0 - 2.0 * x);
      if (twist != 0.0) {
        local.rotation =
            (parent.conjugate() * Eigen::AngleAxisd(twist, b) * placed)
                .normalized();
        ProjectIntoLimits(joint, before, &local.rotation);
        placed = (parent * local.rotation).normalized();
      }
      if (frame_before.transferred != nullptr) {
        // Its twist turns from the transfer's answer on the frame before
        // no more than the source's limb turned, plus kAimCatchUp a second
        // (Apply's comment).
        const std::vector<Transform>& was_source =
            *frame_before.source_globals;
        auto step = [&](int s) {
          return scratch.source_globals[s].rotation.angularDistance(
              was_source[s].rotation);
        };
        const double allowed =
            std::max(step(source_of_[j]), step(source_of_[hinge])) +
            kAimCatchUp * frame_before.dt;
        Quaterniond swing;
        const Quaterniond rest_inverse = joint.rest.rotation.conjugate();
        const double turn = std::remainder(
            SwingTwist(rest_inverse * local.rotation, joint.axis, &swing) -
                SwingTwist(
                    rest_inverse * frame_before.transferred->local[j].rotation,
                    joint.axis, &swing),
            2.0 * M_PI);
        if (std::abs(turn) > allowed) {
          local.rotation =
              (local.rotation *
               Eigen::AngleAxisd(std::copysign(allowed, turn) - turn,
                                 joint.axis))
                  .normalized();
          ProjectIntoLimits(joint, before, &local.rotation);
          placed = (parent * local.rotation).normalized();
        }
      }
    }
    scratch.target_rotations[j] = placed;
  }
  // The hips (the thigh joints' midpoint) move as the source's, scaled and
  // turned into the target's frame: the pelvis is placed under them as its
  // new rotation has it (rigs put the pelvis joint anywhere from the hip
  // line to the navel). Its parents (if any) stay at their retarget pose.
  const std::vector<Transform>& sg = scratch.source_globals;
  const Vector3d want =
      target_hips_ref_ +
      scale_ * (align_ * (0.5 * (sg[source_thighs_[0]].translation +
                                 sg[source_thighs_[1]].translation) -
                          source_hips_ref_));
  scratch.target_globals.resize(n);
  ComputeGlobals(*target_, *target, absl::MakeSpan(scratch.target_globals));
  const std::vector<Transform>& tg = scratch.target_globals;
  const Vector3d shift = want - 0.5 * (tg[target_thighs_[0]].translation +
                                       tg[target_thighs_[1]].translation);
  const int p = target_->joint(target_pelvis_).parent;
  const Transform parent_global = p >= 0 ? tg[p] : Transform();
  target->local[target_pelvis_].translation =
      parent_global.Inverse() * (tg[target_pelvis_].translation + shift);
  // The globals again from the pelvis on: those of the pose written.
  UpdateGlobalsFrom(*target_, *target, target_pelvis_,
                    absl::MakeSpan(scratch.target_globals));
}

}  // namespace reach::retarget
