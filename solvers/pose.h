// A pose: one local transform per joint, and forward kinematics.
#ifndef REACH_SOLVERS_POSE_H_
#define REACH_SOLVERS_POSE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "solvers/skeleton.h"
#include "solvers/transform.h"

namespace reach {

// Local transforms, one per joint, in the skeleton's joint order. Solvers
// write rotations (and, for two-bone stretch, the translations of the joints
// below the chain root); the root joint's translation places the skeleton in
// model space.
struct Pose {
  std::vector<Transform> local;
};

// The skeleton's rest pose.
Pose RestPose(const Skeleton& skeleton);

// Checks the pose against the skeleton: one transform per joint, finite
// translations, unit rotations (within 1e-5), finite positive scales.
// Errors name "pose.local[i].field".
absl::Status ValidatePose(const Skeleton& skeleton, const Pose& pose);

// Rescales every rotation of a validated pose to unit length.
void NormalizePose(Pose* pose);

// Forward kinematics: global (model-space) transforms of every joint.
// `globals` must have skeleton.num_joints() elements.
void ComputeGlobals(const Skeleton& skeleton, const Pose& pose,
                    absl::Span<Transform> globals);

// Forward kinematics from joint `first` on: recomputes globals[first..n-1]
// assuming globals of joints before `first` are current.
void UpdateGlobalsFrom(const Skeleton& skeleton, const Pose& pose, int first,
                       absl::Span<Transform> globals);

}  // namespace reach

#endif  // REACH_SOLVERS_POSE_H_
