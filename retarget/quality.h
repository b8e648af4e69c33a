// How well a retarget went, measured over a clip: the figures of the
// retargeting acceptance (every mapped joint moves; hips over legs as the
// source's; bone directions as the source's; goals reached; planted feet
// held over the source's stances and above the floor; no step larger
// than the source's), for users to check a profile on their own clips
// (`reach retarget --report`, RetargetBatchRequest.report). Measured with
// the library's forward kinematics; the acceptance tests measure the same
// with their own.
#ifndef REACH_RETARGET_QUALITY_H_
#define REACH_RETARGET_QUALITY_H_

#include <array>
#include <string>
#include <vector>

#include "retarget/retargeter.h"
#include "solvers/pose.h"

namespace reach::retarget {

struct RetargetQuality {
  int frames = 0;
  // Target joints with a role, and those of them that never moved from the
  // retarget pose.
  int mapped_joints = 0;
  std::vector<int> unmoved;
  // On frames where the source stands (its hips at 85% of their retarget
  // height or more): the worst relative difference of the hips' height
  // above the floor over the leg's length, target against source.
  double hips_ratio_worst = 0.0;
  // Bone directions against the source's (the source bone's turn from its
  // retarget pose, applied in the target's frame), degrees: bones no goal
  // sets (clavicles, toes, neck), and the limbs' bones.
  double bones_mean_deg = 0.0;
  double bones_max_deg = 0.0;
  double limb_bones_mean_deg = 0.0;
  double limb_bones_max_deg = 0.0;
  // The worst distance of a hand or foot from its goal, over the target's
  // body height.
  double goal_worst = 0.0;
  // Feet: the source feet's stances (RetargetState::Foot::contact: low and
  // slow, Stance in retargeter.h), the worst slide of the target's foot
  // along the floor within one stance (its first frame to its last,
  // whether or not a plant held it), and the deepest a foot went below the
  // floor plus the ankle's height; in target leg lengths.
  int contacts = 0;
  double slide_worst = 0.0;
  double below_floor_worst = 0.0;
  // The worst per-frame step (model-space rotation) of a mapped joint
  // beyond its source's largest step, degrees, and its role.
  double step_excess_worst_deg = 0.0;
  std::string step_excess_role;
  // Target units, for scale: the body's height and the leg's length.
  double body_height = 0.0;
  double leg_length = 0.0;
};

// Accumulates RetargetQuality frame after frame of one stream.
class QualityMeter {
 public:
  // `retargeter` must outlive the meter.
  explicit QualityMeter(const Retargeter& retargeter);
  // One retargeted frame: the source pose given, the target pose and
  // result Apply returned, and the state after it.
  void Add(const Pose& source, const Pose& target,
           const RetargetFrameResult& result, const RetargetState& state);
  RetargetQuality Result() const;

 private:
  const Retargeter& r_;
  std::vector<Transform> source_ref_, target_ref_;
  std::vector<Transform> s_, t_, previous_s_, previous_t_;
  std::vector<std::array<int, 2>> bones_, limb_bones_;
  double source_legs_ = 0.0, source_hips_ = 0.0;
  double bones_sum_ = 0.0, limb_sum_ = 0.0;
  int bones_count_ = 0, limb_count_ = 0;
  std::vector<char> moved_;
  std::vector<double> target_step_, source_step_;
  std::array<bool, 2> in_stance_ = {false, false};
  std::array<Eigen::Vector3d, 2> contact_start_;
  RetargetQuality q_;
};

}  // namespace reach::retarget

#endif  // REACH_RETARGET_QUALITY_H_
