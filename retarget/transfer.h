// The motion transfer of retargeting: a source skeleton's pose onto a
// target skeleton whose joints are named, placed and proportioned
// differently, by role (characterize.h). Every mapped joint turns in
// model space as its source counterpart turns from the source's retarget
// pose (target = align * (source_now * source_ref^-1) * align^-1 *
// target_ref); spines and necks (up to the head) of different joint counts
// are matched as UE's IK Retargeter matches chains: each target joint takes
// the source's turn interpolated at its normalised place along the chain
// (ends meet ends); fingers by role (thumb, index, middle, ring, pinky) and
// joint by joint in order, each turning against its parent as its source
// joint turns against its own (rest-aligned local turns: a hand turned
// otherwise by limits or goals keeps its fingers' curl), a target finger
// longer than the source's repeating the last joint's turn; hinges (elbows,
// knees) turn their bone nearest the source's direction, the ball above
// them twisting for it within its range; every joint is brought within its
// limits, parent first; unmapped joints keep the target's retarget pose;
// the hips move as the source's, scaled by the ratio of leg lengths
// (units and up axes included; UE scales by pelvis heights, which differ
// from the legs' ratio when the retarget poses stand differently, e.g.
// CMU's splayed rest legs). Depends on solvers/ only; the IK pass for
// hands and feet is retargeter.h.
#ifndef REACH_RETARGET_TRANSFER_H_
#define REACH_RETARGET_TRANSFER_H_

#include <array>
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
  // Model-space transforms of the pose written (callers may read them).
  std::vector<Transform> target_globals;
};

// The world's vertical for a body whose up (feet to chest) is `up`: the
// model axis nearest to it when within 30 degrees (mocap and glTF worlds
// are axis-aligned, and a body's feet-to-chest line leans a few degrees in
// its rest pose), else `up` itself. Body frames are built on it, so a
// source walking on the level drives a target walking on the level.
Eigen::Vector3d Vertical(const Eigen::Vector3d& up);

// `target.reference` with each limb bone (clavicle, upper arm, forearm,
// thigh, shin; both sides) turned to point as the source's does in
// `source.reference`, in the target's frame: the "align limbs" retarget
// pose, for rigs whose rest poses differ (T-pose against A-pose or arms
// down). Bones are turned parent first by the least rotation; twist is
// left as it was. Both sides must be valid (Transfer::Create's checks).
absl::StatusOr<Pose> AlignLimbs(const RetargetSide& source,
                                const RetargetSide& target);

// The frame before, for Transfer::Apply's `frame_before`: the source's
// model-space transforms then, the transfer's own answer then (its Apply's
// `target`, before any solve), and the seconds since.
struct FrameBefore {
  const std::vector<Transform>* source_globals = nullptr;
  const Pose* transferred = nullptr;
  double dt = 0.0;
};

class Transfer {
 public:
  // Errors: InvalidArgument when a reference pose does not fit its
  // skeleton, or its hips are not above its feet (it must stand).
  // `pelvis_scale` > 0 replaces the ratio of leg lengths.
  static absl::StatusOr<Transfer> Create(const RetargetSide& source,
                                         const RetargetSide& target,
                                         double pelvis_scale = 0.0);

  // Writes the target's pose for the source's `source` (a pose of the
  // source skeleton) into `target` (resized to the target skeleton).
  // `previous`, when given (the target's answer on the frame before, of
  // the target skeleton), keeps limited joints continuous: a twist or hinge
  // angle wanted beyond its range goes to the bound on `previous`'s side
  // (ProjectIntoLimits with a previous rotation), not the bound nearest on
  // the circle, which flips across the range as the wanted twist crosses
  // the half turn (the limited humanoid's right wrist turned 141 degrees in
  // a frame on the shoot clip, against the source's 55).
  //
  // `frame_before`, when given (both pointers), bounds how fast the ball
  // above a hinge (a hip, a shoulder) twists about its bone to aim the
  // hinge's plane (AimHinge in transfer.cc): from its twist in the
  // transfer's answer on the frame before, per frame no more than the
  // source's thigh or shin (upper arm or forearm) turned in it, plus 45
  // degrees a second (a twist held back catches up while the source holds
  // still; 1.5 degrees a frame at 30 Hz). The plane of a limb bent a
  // little turns as 1/sin(bend) of its bone's move across it: on the wave
  // the limited humanoid's thigh twisted 3-4 degrees a frame at an 11
  // degree knee where the performer's thigh and shin turned 1 (2.4 beyond
  // the source's largest step; the Boxing clip's upper arms 21). The bone
  // lags the source's direction while the plane is held back (the hop's
  // forearm up to 10 degrees; the goals' solve still reaches the hand).
  void Apply(const Pose& source, TransferScratch& scratch, Pose* target,
             const Pose* previous = nullptr,
             const FrameBefore& frame_before = {}) const;

  // Per target joint: the source joint it follows (along a spine or neck,
  // the first of the two it is placed between; a finger joint, the source
  // finger's joint of its order), or -1 (kept at the target's retarget
  // pose).
  const std::vector<int>& source_of() const { return source_of_; }
  // Along a spine or neck, the second source joint a target joint
  // is placed between (-1 elsewhere and where it meets one source joint).
  int source_next_of(int joint) const { return source_next_[joint]; }
  // Target leg length over source leg length (thigh to foot along the
  // bones, both legs' mean): the pelvis' motion is scaled by it.
  double pelvis_scale() const { return scale_; }
  // Rotation from the source's model frame to the target's (up to up,
  // forward to forward).
  const Eigen::Quaterniond& align() const { return align_; }
  // The hips (the thigh joints' midpoint) in the retarget poses, model
  // space: the hips map source points x to target_hips_reference() +
  // pelvis_scale() * align() * (x - source_hips_reference()).
  const Eigen::Vector3d& source_hips_reference() const {
    return source_hips_ref_;
  }
  const Eigen::Vector3d& target_hips_reference() const {
    return target_hips_ref_;
  }
  // The target's retarget pose the transfer works from.
  const Pose& target_reference() const { return target_reference_; }
  // The sides it was made from (the skeletons and roles are the caller's,
  // which outlive the transfer).
  const Skeleton& source_skeleton() const { return *source_; }
  const Skeleton& target_skeleton() const { return *target_; }
  const Characterization& source_roles() const { return *source_roles_; }
  const Characterization& target_roles() const { return *target_roles_; }
  const Pose& source_reference() const { return source_reference_; }

  // Mapped target joint `j`'s source's turn from its retarget pose (between
  // two along a chain), in the target's model frame, for the source pose
  // of the last Apply with `scratch` (its source globals): the turn the
  // transfer gives the joint before limits (the retargeter's hand and foot
  // goals follow it).
  Eigen::Quaterniond Turn(int j, const TransferScratch& scratch) const;

 private:
  // Target joint `j`'s model-space rotation as its source's turns (before
  // limits): Turn times its retarget rotation.
  Eigen::Quaterniond Wanted(int j, const TransferScratch& scratch) const;

  const Skeleton* source_ = nullptr;
  const Skeleton* target_ = nullptr;
  const Characterization* source_roles_ = nullptr;
  const Characterization* target_roles_ = nullptr;
  Pose source_reference_;
  std::vector<int> source_of_;
  // Spine and neck joints: a second source joint, and the weight of its
  // turn (the first's is 1 - weight); -1 elsewhere.
  std::vector<int> source_next_;
  std::vector<double> weight_;
  // Per target joint: a mapped hinge's child its bone is aimed at, and a
  // ball joint's hinge child it twists for (-1: none).
  std::vector<int> aim_child_;
  std::vector<int> aim_hinge_;
  // Per target finger joint: the source joint its source counterpart
  // turns against (its finger's previous joint, or the hand); the joint
  // turns against its own parent as much (-1: not a finger).
  std::vector<int> finger_parent_;
  std::vector<Eigen::Quaterniond> source_ref_inverse_;  // Per source joint.
  std::vector<Eigen::Quaterniond> target_ref_;          // Per target joint.
  Pose target_reference_;
  Eigen::Quaterniond align_ = Eigen::Quaterniond::Identity();
  double scale_ = 1.0;
  int target_pelvis_ = -1;
  std::array<int, 2> source_thighs_ = {-1, -1};
  std::array<int, 2> target_thighs_ = {-1, -1};
  Eigen::Vector3d source_hips_ref_ = Eigen::Vector3d::Zero();
  Eigen::Vector3d target_hips_ref_ = Eigen::Vector3d::Zero();
};

}  // namespace reach::retarget

#endif  // REACH_RETARGET_TRANSFER_H_
