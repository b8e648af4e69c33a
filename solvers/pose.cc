#include "solvers/pose.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace reach {

Pose RestPose(const Skeleton& skeleton) {
  Pose pose;
  pose.local.reserve(skeleton.num_joints());
  for (const Joint& j : skeleton.joints()) pose.local.push_back(j.rest);
  return pose;
}

absl::Status ValidatePose(const Skeleton& skeleton, const Pose& pose) {
  if (static_cast<int>(pose.local.size()) != skeleton.num_joints()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pose.local has ", pose.local.size(), " transforms; the skeleton has ",
        skeleton.num_joints(), " joints"));
  }
  // The common case first: every joint valid, checked with a few
  // comparisons per joint and no branch. Only a failure walks the joints
  // again to name the first bad field.
  bool all_valid = true;
  for (const Transform& t : pose.local) {
    // t * 0 is 0 for finite t and NaN otherwise; NaN fails every compare.
    const double zero = (t.translation.x() + t.translation.y() +
                         t.translation.z()) * 0.0;
    all_valid &= IsNearUnit(t.rotation.squaredNorm()) & (zero == 0.0) &
                 (t.scale > 0.0) &
                 (t.scale <= std::numeric_limits<double>::max());
  }
  if (all_valid) return absl::OkStatus();
  for (int i = 0; i < skeleton.num_joints(); ++i) {
    const Transform& t = pose.local[i];
    if (auto s =
            ValidateFinite(t.translation, {"pose.local", i, "translation"});
        !s.ok()) {
      return s;
    }
    if (auto s =
            ValidateUnitQuaternion(t.rotation, {"pose.local", i, "rotation"});
        !s.ok()) {
      return s;
    }
    if (!std::isfinite(t.scale) || t.scale <= 0.0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pose.local[", i, "].scale = ", t.scale, " must be finite and > 0"));
    }
  }
  return absl::OkStatus();
}

void NormalizePose(Pose* pose) {
  for (Transform& t : pose->local) NormalizeRotation(&t.rotation);
}

void UpdateGlobalsFrom(const Skeleton& skeleton, const Pose& pose, int first,
                       absl::Span<Transform> globals) {
  const int n = skeleton.num_joints();
  for (int i = first < 0 ? 0 : first; i < n; ++i) {
    const int parent = skeleton.joint(i).parent;
    globals[i] = parent < 0 ? pose.local[i] : globals[parent] * pose.local[i];
  }
}

void ComputeGlobals(const Skeleton& skeleton, const Pose& pose,
                    absl::Span<Transform> globals) {
  UpdateGlobalsFrom(skeleton, pose, 0, globals);
}

}  // namespace reach
