#include "retarget/quality.h"

#include <algorithm>
#include <cmath>

#include "absl/types/span.h"

namespace reach::retarget {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

constexpr double kDegree = M_PI / 180.0;

Vector3d Hips(const Characterization& c, const std::vector<Transform>& g) {
  return 0.5 * (g[c.legs[kLeft].thigh].translation +
                g[c.legs[kRight].thigh].translation);
}

double HipHeight(const Characterization& c, const std::vector<Transform>& g,
                 const Vector3d& up) {
  const Vector3d feet = 0.5 * (g[c.legs[kLeft].foot].translation +
                               g[c.legs[kRight].foot].translation);
  return (Hips(c, g) - feet).dot(up);
}

double LegLength(const Characterization& c, const std::vector<Transform>& g) {
  const Leg& l = c.legs[kLeft];
  if (l.shin < 0) return (g[l.foot].translation - g[l.thigh].translation).norm();
  return (g[l.shin].translation - g[l.thigh].translation).norm() +
         (g[l.foot].translation - g[l.shin].translation).norm();
}

double Angle(const Vector3d& a, const Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

// `out` sized to the skeleton and filled (no allocation once sized).
void Globals(const Skeleton& skeleton, const Pose& pose,
             std::vector<Transform>* out) {
  out->resize(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(*out));
}

}  // namespace

QualityMeter::QualityMeter(const Retargeter& retargeter) : r_(retargeter) {
  const Transfer& transfer = r_.transfer();
  const Characterization& sc = transfer.source_roles();
  const Characterization& tc = transfer.target_roles();
  const Skeleton& target = r_.solving_skeleton();
  Globals(transfer.source_skeleton(), transfer.source_reference(),
          &source_ref_);
  Globals(target, transfer.target_reference(), &target_ref_);
  source_legs_ = LegLength(sc, source_ref_);
  source_hips_ = HipHeight(sc, source_ref_, r_.source_vertical());
  q_.leg_length = LegLength(tc, target_ref_);
  double lo = INFINITY, hi = -INFINITY;
  for (const Transform& g : target_ref_) {
    lo = std::min(lo, r_.floor_up().dot(g.translation));
    hi = std::max(hi, r_.floor_up().dot(g.translation));
  }
  q_.body_height = hi - lo;

  // Bones whose both ends have their own source joints.
  const auto usable = [&](int a, int b) {
    return a >= 0 && b >= 0 && transfer.source_of()[a] >= 0 &&
           transfer.source_of()[b] >= 0 && transfer.source_next_of(a) < 0 &&
           transfer.source_next_of(b) < 0;
  };
  const auto add = [&](int a, int b, std::vector<std::array<int, 2>>* to) {
    if (usable(a, b)) to->push_back({a, b});
  };
  for (int k = 0; k < 2; ++k) {
    const Arm& a = tc.arms[k];
    const Leg& l = tc.legs[k];
    add(a.clavicle, a.upper_arm, &bones_);
    add(l.foot, l.toe, &bones_);
    add(a.upper_arm, a.forearm, &limb_bones_);
    add(a.forearm, a.hand, &limb_bones_);
    add(l.thigh, l.shin, &limb_bones_);
    add(l.shin, l.foot, &limb_bones_);
  }
  const int chest = tc.spine.empty() ? tc.pelvis : tc.spine.back();
  add(chest, tc.neck.empty() ? tc.head : tc.neck.front(), &bones_);
  moved_.assign(target.num_joints(), 0);
  target_step_.assign(target.num_joints(), 0.0);
  source_step_.assign(transfer.source_skeleton().num_joints(), 0.0);
  for (const RoleAssignment& role : tc.roles) {
    if (transfer.source_of()[role.joint] >= 0) ++q_.mapped_joints;
  }
}

void QualityMeter::Add(const Pose& source, const Pose& target,
                       const RetargetFrameResult& result,
                       const RetargetState& state) {
  const Transfer& transfer = r_.transfer();
  const Characterization& sc = transfer.source_roles();
  const Characterization& tc = transfer.target_roles();
  const Skeleton& skeleton = r_.solving_skeleton();
  Globals(transfer.source_skeleton(), source, &s_);
  Globals(skeleton, target, &t_);
  const Quaterniond& align = transfer.align();
  const auto bone_error = [&](const std::array<int, 2>& bone) {
    const int sa = transfer.source_of()[bone[0]];
    const Vector3d t_ref = (target_ref_[bone[1]].translation -
                            target_ref_[bone[0]].translation)
                               .normalized();
    const Vector3d t_now =
        (t_[bone[1]].translation - t_[bone[0]].translation).normalized();
    const Quaterniond turn =
        s_[sa].rotation * source_ref_[sa].rotation.conjugate();
    return Angle(align * (turn * (align.conjugate() * t_ref)), t_now);
  };
  for (const auto& bone : bones_) {
    const double e = bone_error(bone);
    bones_sum_ += e;
    ++bones_count_;
    q_.bones_max_deg = std::max(q_.bones_max_deg, e / kDegree);
  }
  for (const auto& bone : limb_bones_) {
    const double e = bone_error(bone);
    limb_sum_ += e;
    ++limb_count_;
    q_.limb_bones_max_deg = std::max(q_.limb_bones_max_deg, e / kDegree);
  }
  const Vector3d& source_up = r_.source_vertical();
  const Vector3d& up = r_.floor_up();
  if (HipHeight(sc, s_, source_up) > 0.85 * source_hips_) {
    const double s_floor =
        (source_up.dot(Hips(sc, s_)) - state.source_floor) / source_legs_;
    const double t_floor =
        (up.dot(Hips(tc, t_)) - state.target_floor) / q_.leg_length;
    if (s_floor > 0.0) {
      q_.hips_ratio_worst =
          std::max(q_.hips_ratio_worst, std::abs(t_floor / s_floor - 1.0));
    }
  }
  for (int k = 0; k < 2; ++k) {
    const std::pair<const LimbResult*, int> limbs[] = {
        {&result.hands[k], tc.arms[k].hand}, {&result.feet[k], tc.legs[k].foot}};
    for (const auto& [limb, end] : limbs) {
      if (!limb->active) continue;
      q_.goal_worst = std::max(
          q_.goal_worst,
          (t_[end].translation - limb->goal).norm() / q_.body_height);
    }
    const int foot = tc.legs[k].foot;
    if (foot < 0) continue;
    const Vector3d at = t_[foot].translation;
    // Over the source foot's whole stance (low and slow, Stance), whether
    // or not a plant held the target's: from its first frame to its last.
    const bool stance = state.feet[k].contact;
    if (stance) {
      if (!in_stance_[k]) {
        contact_start_[k] = at;
        ++q_.contacts;
      }
      Vector3d moved_by = at - contact_start_[k];
      moved_by -= up.dot(moved_by) * up;
      q_.slide_worst = std::max(q_.slide_worst, moved_by.norm() / q_.leg_length);
    }
    in_stance_[k] = stance;
    const double lowest =
        state.target_floor + r_.options().ankle_height * q_.leg_length;
    q_.below_floor_worst = std::max(q_.below_floor_worst,
                                    (lowest - up.dot(at)) / q_.leg_length);
  }
  for (size_t j = 0; j < t_.size(); ++j) {
    if (t_[j].rotation.angularDistance(target_ref_[j].rotation) > 1e-6) {
      moved_[j] = 1;
    }
    if (q_.frames > 0) {
      target_step_[j] = std::max(
          target_step_[j],
          t_[j].rotation.angularDistance(previous_t_[j].rotation));
    }
  }
  if (q_.frames > 0) {
    for (size_t j = 0; j < s_.size(); ++j) {
      source_step_[j] = std::max(
          source_step_[j],
          s_[j].rotation.angularDistance(previous_s_[j].rotation));
    }
  }
  previous_s_.swap(s_);
  previous_t_.swap(t_);
  ++q_.frames;
}

RetargetQuality QualityMeter::Result() const {
  RetargetQuality q = q_;
  q.bones_mean_deg = bones_count_ ? bones_sum_ / bones_count_ / kDegree : 0.0;
  q.limb_bones_mean_deg =
      limb_count_ ? limb_sum_ / limb_count_ / kDegree : 0.0;
  const Transfer& transfer = r_.transfer();
  for (const RoleAssignment& role : transfer.target_roles().roles) {
    const int source = transfer.source_of()[role.joint];
    if (source < 0) continue;
    if (!moved_[role.joint]) q.unmoved.push_back(role.joint);
    double allowed = source_step_[source];
    const int next = transfer.source_next_of(role.joint);
    if (next >= 0) allowed = std::max(allowed, source_step_[next]);
    const double excess = (target_step_[role.joint] - allowed) / kDegree;
    if (excess > q.step_excess_worst_deg) {
      q.step_excess_worst_deg = excess;
      q.step_excess_role = role.role;
    }
  }
  return q;
}

}  // namespace reach::retarget
