// The motion transfer of retargeting: a source skeleton's pose onto a
// target skeleton whose joints are named, placed and proportioned
// differently, by role (characterize.h). Every mapped joint turns in
// model space as its source counterpart turns from the source's retarget
// pose (target = align * (source_now * source_ref^-1) * align^-1 *
// target_ref); spines and necks of different joint counts are matched by
// normalised arc length; unmapped joints keep the target's retarget pose;
// the pelvis moves as the source's, scaled by the ratio of hip heights
// (the thigh joints above the feet; units and up axes included). Depends on solvers/ only; the IK pass for
// hands and feet comes after this.
#ifndef REACH_RETARGET_TRANSFER_H_
#define REACH_RETARGET_TRANSFER_H_

#include <vector>

#include "Eigen/Geometry"
#include "absl/status/statusor.h"
#include "retarget/characterize.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "solvers/transform.h"

namespace reach::retarget {

// One side of a retarget: a skeleton, its roles and its retarget pose (the
// pose both rigs are taken to share: usually each one's rest, or a frame
// that stands).
struct RetargetSide {
  const Skeleton* skeleton = nullptr;
  const Characterization* roles = nullptr;
  Pose reference;
};

// Reused per call (no allocation once sized).
struct TransferScratch {
  std::vector<Transform> source_globals;
  std::vector<Eigen::Quaterniond> target_rotations;  // Model space.
};

// `target.reference` with each limb bone (clavicle, upper arm, forearm,
// thigh, shin; both sides) turned to point as the source's does in
// `source.reference`, in the target's frame: the "align limbs" retarget
// pose, for rigs whose rest poses differ (T-pose against A-pose or arms
// down). Bones are turned parent first by the least rotation; twist is
// left as it was. Both sides must be valid (Transfer::Create's checks).
absl::StatusOr<Pose> AlignLimbs(const RetargetSide& source,
                                const RetargetSide& target);

class Transfer {
 public:
  // Errors: InvalidArgument when a reference pose does not fit its
  // skeleton, or its hips are not above its feet (it must stand).
  static absl::StatusOr<Transfer> Create(const RetargetSide& source,
                                         const RetargetSide& target);

  // Writes the target's pose for the source's `source` (a pose of the
  // source skeleton) into `target` (resized to the target skeleton).
  void Apply(const Pose& source, TransferScratch& scratch, Pose* target) const;

  // Per target joint: the source joint it follows (along a spine or neck,
  // the first of the two it is placed between), or -1 (kept at the
  // target's retarget pose).
  const std::vector<int>& source_of() const { return source_of_; }
  // Target hip height over source hip height (the thigh joints above the
  // feet, in the retarget poses): the pelvis' motion is scaled by it.
  double pelvis_scale() const { return scale_; }
  // Rotation from the source's model frame to the target's (up to up,
  // forward to forward).
  const Eigen::Quaterniond& align() const { return align_; }
  // The target's retarget pose the transfer works from.
  const Pose& target_reference() const { return target_reference_; }

 private:
  const Skeleton* source_ = nullptr;
  const Skeleton* target_ = nullptr;
  std::vector<int> source_of_;
  // Spine and neck joints: a second source joint, and the weight of its
  // turn (the first's is 1 - weight); -1 elsewhere.
  std::vector<int> source_next_;
  std::vector<double> weight_;
  std::vector<Eigen::Quaterniond> source_ref_inverse_;  // Per source joint.
  std::vector<Eigen::Quaterniond> target_ref_;           // Per target joint.
  Pose target_reference_;
  Eigen::Quaterniond align_ = Eigen::Quaterniond::Identity();
  double scale_ = 1.0;
  int source_pelvis_ = -1;
  int target_pelvis_ = -1;
  std::vector<int> pelvis_ancestors_;  // Of the target's pelvis, root first.
  Eigen::Vector3d source_pelvis_ref_ = Eigen::Vector3d::Zero();
  Eigen::Vector3d target_pelvis_ref_ = Eigen::Vector3d::Zero();
};

}  // namespace reach::retarget

#endif  // REACH_RETARGET_TRANSFER_H_
