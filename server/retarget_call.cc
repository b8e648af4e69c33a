#include "server/retarget_call.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/metrics.h"
#include "server/retarget_profiles.h"
#include "solvers/pose.h"
#include "wire/convert.h"

namespace reach {
namespace {

void ToProto(const retarget::LimbResult& limb, v1::LimbOutcome* out) {
  out->set_active(limb.active);
  out->set_reached(limb.reached);
  out->set_position_error(limb.position_error);
  out->set_orientation_error_rad(limb.orientation_error_rad);
  out->set_planted(limb.planted);
  out->set_adjusted(limb.adjusted);
  reach::ToProto(limb.goal, out->mutable_goal());
}

}  // namespace

absl::Status FrameTime(double frame_time_s, absl::string_view field,
                       double* seconds) {
  if (!std::isfinite(frame_time_s) || frame_time_s < 0.0 ||
      frame_time_s > 10.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": ", frame_time_s, " is not in [0, 10] seconds"));
  }
  *seconds = frame_time_s == 0.0 ? 1.0 / 30.0 : frame_time_s;
  return absl::OkStatus();
}

absl::Status RetargetFrame(const BuiltRetargetProfile& profile,
                           const v1::Pose& source, absl::string_view field,
                           double dt, bool return_globals,
                           retarget::RetargetState& state,
                           RetargetFrameScratch& scratch,
                           const Deadline& deadline, Metrics* metrics,
                           v1::RetargetResponse* out) {
  out->Clear();
  absl::Status status =
      FromProto(profile.source_skeleton, source, &scratch.source, field);
  if (!status.ok()) return status;
  const absl::Time start = absl::Now();
  status = profile.retargeter->Apply(scratch.source, dt, state, scratch.work,
                                     &scratch.target, &scratch.result,
                                     deadline);
  if (!status.ok()) return status;
  if (metrics != nullptr) {
    bool reached = true;
    for (const auto* limbs : {&scratch.result.hands, &scratch.result.feet}) {
      for (const retarget::LimbResult& limb : *limbs) {
        if (limb.active && !limb.reached) reached = false;
      }
    }
    metrics->RetargetFrame(absl::Now() - start, reached);
  }
  reach::ToProto(scratch.target, out->mutable_target());
  ToProto(scratch.result.hands[retarget::kLeft], out->mutable_left_hand());
  ToProto(scratch.result.hands[retarget::kRight], out->mutable_right_hand());
  ToProto(scratch.result.feet[retarget::kLeft], out->mutable_left_foot());
  ToProto(scratch.result.feet[retarget::kRight], out->mutable_right_foot());
  out->set_iterations(scratch.result.iterations);
  if (return_globals) {
    const int n = profile.target_skeleton.num_joints();
    scratch.globals.resize(n);
    ComputeGlobals(profile.target_skeleton, scratch.target,
                   absl::MakeSpan(scratch.globals));
    out->mutable_globals()->Reserve(n);
    for (const Transform& g : scratch.globals) {
      reach::ToProto(g, out->add_globals());
    }
  }
  return absl::OkStatus();
}

void ToProto(const Skeleton& target, const retarget::RetargetQuality& q,
             v1::RetargetQuality* out) {
  out->set_frames(q.frames);
  out->set_mapped_joints(q.mapped_joints);
  for (const int joint : q.unmoved) {
    out->add_unmoved_joints(target.joint(joint).name);
  }
  out->set_hips_ratio_worst(q.hips_ratio_worst);
  out->set_bones_mean_deg(q.bones_mean_deg);
  out->set_bones_max_deg(q.bones_max_deg);
  out->set_limb_bones_mean_deg(q.limb_bones_mean_deg);
  out->set_limb_bones_max_deg(q.limb_bones_max_deg);
  out->set_goal_worst(q.goal_worst);
  out->set_contacts(q.contacts);
  out->set_slide_worst(q.slide_worst);
  out->set_below_floor_worst(q.below_floor_worst);
  out->set_step_excess_worst_deg(q.step_excess_worst_deg);
  out->set_step_excess_role(q.step_excess_role);
  out->set_body_height(q.body_height);
  out->set_leg_length(q.leg_length);
}

int64_t RetargetResponseBound(int joints, bool return_globals) {
  constexpr int64_t kRotationBytes = 40;  // A Quat.
  constexpr int64_t kGlobalBytes = 96;    // A Transform.
  constexpr int64_t kLimbsBytes = 4 * 80;
  return 96 + kLimbsBytes + joints * kRotationBytes +
         (return_globals ? joints * kGlobalBytes : 0);
}

}  // namespace reach
