// Biovision BVH motion capture: the hierarchy as a skeleton, the motion as
// poses, and solved poses written back out as BVH.
//
// Conventions: every ROOT / JOINT becomes a ball joint whose rest
// translation is its OFFSET and whose rest rotation is the identity (the
// all-zero channel pose; BvhOptions::rest_frame takes a frame's instead);
// an End Site becomes a fixed leaf joint named
// "<parent>_End". Rotation channels compose left to right in the order
// written, in degrees (CHANNELS ... Zrotation Yrotation Xrotation is
// Rz * Ry * Rx). Position channels replace the joint's OFFSET; only the root
// may have them, since the wire pose carries one root translation.
#ifndef REACH_IMPORTERS_BVH_H_
#define REACH_IMPORTERS_BVH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "importers/import_error.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::import {

// How one joint reads its channels from a frame.
struct BvhJointChannels {
  int first = 0;           // Index of the joint's first channel in a frame.
  int count = 0;           // Channels of the joint.
  // Frame indices of Xposition, Yposition, Zposition, or all -1.
  int position[3] = {-1, -1, -1};
  int num_rotations = 0;   // 0..3
  int rotation[3] = {};    // Frame indices of the rotation channels, in order.
  int axis[3] = {};        // 0 = X, 1 = Y, 2 = Z, for each rotation channel.
};

struct BvhClip {
  ImportedSkeleton skeleton;             // Chains guessed from joint names.
  std::vector<BvhJointChannels> joints;  // One per skeleton joint.
  int num_channels = 0;                  // Values per frame.
  int num_frames = 0;
  double frame_time = 0;                 // Seconds.
  std::vector<double> values;            // num_frames * num_channels.
  // Whole frame lines after the declared Frames: count, ignored.
  int extra_frame_lines = 0;

  // The pose of frame `frame` (0-based) for `skeleton`, which must be
  // Skeleton::Create(this->skeleton.def). `pose` is reused. Each joint's
  // local rotation is its channels' (from the identity, whatever the rest
  // rotation), its translation its OFFSET or position channels.
  void FramePose(int frame, Pose* pose) const;

  // Makes frame `frame`'s pose the skeleton's rest pose: each joint's rest
  // rotation becomes that frame's (FramePose's poses are unchanged;
  // BvhOptions::rest_frame). InvalidArgument naming rest_frame when
  // `frame` is not one of the clip's.
  absl::Status UseFrameAsRest(int frame);
};

struct BvhOptions {
  // When >= 0, the frame (0-based) whose pose becomes the skeleton's rest
  // pose: each joint's rest rotation is that frame's rotation (the frames'
  // poses are unchanged). For a clip whose all-zero pose does not stand (a
  // Character Creator export holds every limb up, the feet above the
  // hips) and whose first frame does (a mocap clip's T-pose): the
  // full-body solver's body model reads the posture and the knees' and
  // elbows' bend from the rest pose, and retargeting characterises it.
  // Beyond the clip's frames: InvalidArgument naming rest_frame.
  int rest_frame = -1;
};

// Parses BVH text; `file` names the source in errors, which carry the line.
absl::StatusOr<BvhClip> ParseBvh(absl::string_view text,
                                 absl::string_view file,
                                 const BvhOptions& options = {});

// Reads and parses a .bvh file.
absl::StatusOr<BvhClip> ImportBvh(const std::string& path,
                                  const BvhOptions& options = {});

// Writes `poses` of a single-rooted skeleton as BVH: the root with six
// channels (Xposition Yposition Zposition Zrotation Yrotation Xrotation),
// every other joint with three rotation channels, fixed leaves as End
// Sites, and an End Site of zero length under every other leaf. Offsets are
// rest translations (scales are ignored). Errors when the skeleton has
// several roots or `poses` do not match it.
absl::StatusOr<std::string> WriteBvh(const Skeleton& skeleton,
                                     absl::Span<const Pose> poses,
                                     double frame_time);

// Z-Y-X Euler angles in degrees (R = Rz * Ry * Rx) of a unit quaternion.
Eigen::Vector3d EulerZyxDegrees(const Eigen::Quaterniond& q);

}  // namespace reach::import

#endif  // REACH_IMPORTERS_BVH_H_
