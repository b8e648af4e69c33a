// The VMC protocol (protocol.vmc.info): OSC over UDP between motion
// capture tools and avatars. What `reach vmc` needs of it, without sockets
// or gRPC (client/vmc_bridge.h adds those):
//
// - Unity's frame (left-handed, Y up, metres) and Reach's right-handed
//   Y-up frame: position (-x, y, z), quaternion (x, -y, -z, w), both ways.
// - VmcReceiver: packets (a bundle or a message) applied onto a source
//   skeleton whose joints carry Unity HumanBodyBones names
//   (examples/vmc_humanoid.skeleton.json); every packet that set a bone or
//   the root is a frame: the whole pose, bones not sent keeping their last
//   value (their rest at first), with the sender's time (/VMC/Ext/T).
//   Everything else is counted and ignored: unknown addresses and bones,
//   trackers (/VMC/Ext/Tra|Hmd|Con/Pos), blend shapes, messages whose
//   arguments have other types or are not finite, extra arguments. A
//   packet whose time is older than the last applied one arrived out of
//   order: it is dropped whole (counted), so frames stay in order.
//   In tracker mode the frames are the packets that set a tracker instead
//   (trackers()), and bones are counted and ignored.
// - TrackerMap: which body part each tracker's serial drives (HMD head,
//   controllers hands, others only when named), with their latest poses.
// - VmcPoseWriter: a target rig's answered pose as one VMC bundle (OK, T,
//   Root/Pos, Bone/Pos per HumanBodyBones bone), its joints named by the
//   roles the server's characterisation gave them (RetargetSideReport).
#ifndef REACH_CLIENT_VMC_H_
#define REACH_CLIENT_VMC_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/osc.h"
#include "solvers/transform.h"

namespace reach::vmc {

// Unity <-> right-handed (the mapping is its own inverse).
inline Eigen::Vector3d FlipPosition(const Eigen::Vector3d& p) {
  return Eigen::Vector3d(-p.x(), p.y(), p.z());
}
inline Eigen::Quaterniond FlipRotation(const Eigen::Quaterniond& q) {
  return Eigen::Quaterniond(q.w(), q.x(), -q.y(), -q.z());
}

// Unity's HumanBodyBones, in its enum order (Hips = 0 ... UpperChest = 54).
const std::array<absl::string_view, 55>& HumanBodyBones();

// The HumanBodyBones name of a characterisation role ("pelvis" -> "Hips",
// "left.forearm" -> "LeftLowerArm", "left.index.0" -> "LeftIndexProximal"),
// given how many spine and neck joints the rig has: one spine joint is
// Spine; two Spine, Chest; three or more Spine, Chest, ..., UpperChest (the
// last); the first neck joint is Neck. "" for a role with none (middle
// spine joints, further neck joints, a finger's fourth joint).
std::string HumanBoneForRole(absl::string_view role, int spine_joints,
                             int neck_joints);

// Counts of what the receiver saw. Packets: every datagram is exactly one
// of ok, malformed, too_large, reordered (truncated: see the bridge).
struct ReceiveCounts {
  uint64_t packets_ok = 0;
  uint64_t packets_malformed = 0;
  uint64_t packets_too_large = 0;
  uint64_t packets_reordered = 0;
  // Messages of ok packets.
  // /VMC/Ext/Bone/Pos and Root/Pos applied (in tracker mode: seen, with
  // good arguments, and ignored).
  uint64_t bone = 0;
  uint64_t root = 0;
  // Root/Pos messages with v2.1's scale and offset (applied; also in root).
  uint64_t root_scaled = 0;
  uint64_t time = 0;  // /VMC/Ext/T.
  uint64_t ok = 0;    // /VMC/Ext/OK.
  // Tra, Hmd, Con/Pos with good arguments (used in tracker mode only; in
  // bone mode ignored).
  uint64_t tracker = 0;
  uint64_t blend = 0;  // Blend/Val, Blend/Apply: not used.
  uint64_t unknown_address = 0;
  uint64_t unknown_bone = 0;  // A Bone/Pos of a bone the rig lacks.
  uint64_t bad_arguments =
      0;  // Too few, other types, not finite, zero quaternion.
  // Frames: packets that set a bone or the root (tracker mode: a tracker).
  uint64_t frames = 0;
  // Frames that came later than expected from the sender's times: the
  // estimated count of frames lost between them (a gap of k typical frame
  // times counts k - 1).
  uint64_t frames_lost = 0;
};

// One source frame, right-handed, in the source skeleton's joint order.
struct SourceFrame {
  std::vector<Eigen::Quaterniond> rotations;
  Eigen::Vector3d root_translation = Eigen::Vector3d::Zero();
  // The sender's /VMC/Ext/T when it has sent one (else has_time false).
  bool has_time = false;
  double time = 0;
};

// Where a tracker message came from.
enum class TrackerKind { kHmd, kController, kTracker };

// One tracker's pose from a packet, right-handed, metres (the tracking
// space: Unity's world after FlipPosition/FlipRotation).
struct TrackerSample {
  TrackerKind kind = TrackerKind::kTracker;
  std::string serial;
  Transform pose;
};

class VmcReceiver {
 public:
  // `joint_names` and `rest` (local rest transforms) of the source
  // skeleton; bones are matched by name. Joint 0 must be the root: Hips.
  // `trackers`: tracker mode (frames are the packets that set a tracker;
  // the skeleton is then unused and may be empty).
  VmcReceiver(std::vector<std::string> joint_names, std::vector<Transform> rest,
              const osc::Limits& limits = osc::Limits(), bool trackers = false);

  enum class Outcome { kFrame, kNoFrame, kDropped };
  // Decodes and applies one packet; kFrame: frame() is a new frame.
  Outcome Apply(const uint8_t* data, size_t size);

  const SourceFrame& frame() const { return frame_; }
  // Tracker mode: the trackers of the last packet that was a frame, in
  // the packet's order.
  const std::vector<TrackerSample>& trackers() const { return trackers_; }
  const ReceiveCounts& counts() const { return counts_; }
  ReceiveCounts& mutable_counts() { return counts_; }

 private:
  bool ReadFloats(const osc::Message& m, int first, int n, float* out);

  std::vector<std::string> names_;
  absl::flat_hash_map<std::string, int> index_;
  std::vector<Transform> rest_;
  osc::Limits limits_;
  bool tracker_mode_ = false;
  osc::Packet packet_;
  std::vector<TrackerSample> trackers_;
  // Latest values, right-handed: local transforms of every joint and the
  // model root.
  std::vector<Transform> local_;
  Transform root_;
  SourceFrame frame_;
  ReceiveCounts counts_;
  bool has_time_ = false;
  double last_time_ = 0;  // Of the last applied packet with a time.
  double last_frame_time_ = 0;
  bool has_frame_time_ = false;
  double typical_dt_ = 0;  // Running estimate of the sender's frame time.
};

// The body parts trackers drive, in goal order.
enum class BodyPart {
  kHead,
  kLeftHand,
  kRightHand,
  kPelvis,
  kLeftFoot,
  kRightFoot,
};
inline constexpr int kBodyParts = 6;
absl::string_view BodyPartName(BodyPart part);  // "head", "left hand", ...

// Serials given by the user (empty: none). An HMD always drives the head;
// a controller named nowhere drives the free hand on its side of the head
// when it first appears; a generic tracker (/VMC/Ext/Tra/Pos) drives only
// what it is named for.
struct TrackerAssignment {
  std::string left_hand, right_hand, pelvis, left_foot, right_foot;
};

// Where trackers sit on the body: a part's joint is at the tracker's pose
// composed with an offset, joint = tracker * offset (the offset's position
// in the tracker's own frame, metres; its rotation the joint's turn from
// the tracker's). By serial first, else by the body part the tracker
// drives; identity where none is given. Right-handed (ParseTrackerOffsets
// converts from the file's Unity axes).
struct TrackerOffsets {
  std::array<Transform, kBodyParts> by_part;
  absl::flat_hash_map<std::string, Transform> by_serial;
};

// Reads `reach vmc --tracker-offsets` files: one JSON object whose keys are
// body parts (head, left_hand, right_hand, pelvis, left_foot, right_foot)
// or tracker serials, each {"position": [x, y, z], "rotation": [x, y, z,
// w]} (both optional; Unity's axes and metres, as VMC sends poses: x
// right, y up, z forward of the tracker). Errors name `name`, the key and
// the field.
absl::StatusOr<TrackerOffsets> ParseTrackerOffsets(absl::string_view json,
                                                   absl::string_view name);

// Serial -> body part, and each part's latest pose (tracking space).
class TrackerMap {
 public:
  explicit TrackerMap(TrackerAssignment assignment,
                      TrackerOffsets offsets = {});

  // Applies one packet's samples (HMDs first, so a controller that appears
  // with the first HMD is sided by it). Returns how many drove a part.
  int Apply(const std::vector<TrackerSample>& samples);

  bool has(BodyPart part) const { return has_[static_cast<int>(part)]; }
  const Transform& pose(BodyPart part) const {
    return pose_[static_cast<int>(part)];
  }
  // The serial driving `part` ("" while none).
  const std::string& serial(BodyPart part) const {
    return serial_[static_cast<int>(part)];
  }
  uint64_t applied() const { return applied_; }
  // Samples whose serial drives nothing (a tracker not named by a flag, a
  // second HMD, a third controller).
  uint64_t unknown_serial() const { return unknown_serial_; }

 private:
  bool Place(const TrackerSample& sample);
  // The joint's pose from the tracker's (TrackerOffsets).
  Transform Joint(const TrackerSample& sample, int part) const;

  TrackerOffsets offsets_;
  std::array<std::string, kBodyParts> serial_;
  std::array<bool, kBodyParts> named_{};  // serial_ given by the user.
  std::array<bool, kBodyParts> has_{};
  std::array<Transform, kBodyParts> pose_;
  uint64_t applied_ = 0;
  uint64_t unknown_serial_ = 0;
};

// How a target joint's rotation goes out.
enum class BoneMode {
  // Relative to the profile's target retarget pose, in model axes: every
  // bone's rotation is identity when the target stands in its retarget
  // pose (a T-pose when the source's is), as a VRM 0.x normalised avatar
  // expects. Positions: the bone's offset from its sent parent in the
  // parent's turned frame (the retarget pose's offset whenever the joints
  // between them do not turn, as with every joint VMC has a bone for; a
  // joint it has none for, such as a second neck joint, still puts the
  // bones below it where the answer has them); the hips' its model-space
  // position.
  kNormalized,
  // The target joint's local transform relative to its nearest mapped
  // ancestor, in the rig's own joint frames (a raw VRM 1.0 avatar of
  // exactly this rig).
  kRaw,
};

class VmcPoseWriter {
 public:
  // `parents` of the target skeleton's joints, its roles (role, joint
  // index) as the profile reports them, the model-space transforms of its
  // retarget pose, how bones go out, and metres per target unit.
  static absl::StatusOr<VmcPoseWriter> Create(
      std::vector<int> parents,
      const std::vector<std::pair<std::string, int>>& roles,
      std::vector<Transform> reference_globals, BoneMode mode, double scale);

  // The bones that go out: (HumanBodyBones name, target joint), parents
  // before children.
  const std::vector<std::pair<std::string, int>>& bones() const {
    return bones_;
  }
  // The nearest mapped ancestor of bones()[k] (an index into bones(); -1
  // for none).
  const std::vector<int>& bone_parents() const { return bone_parent_; }

  // One bundle: /VMC/Ext/OK 1, /VMC/Ext/T time, /VMC/Ext/Root/Pos
  // (identity), a /VMC/Ext/Bone/Pos per bone, from the answer's
  // model-space transforms of every target joint.
  void Write(const std::vector<Transform>& globals, float time,
             osc::Writer* writer) const;
  // The local transform (right-handed, target units) that bone k gets.
  Transform BoneTransform(const std::vector<Transform>& globals,
                          size_t k) const;

 private:
  std::vector<std::pair<std::string, int>> bones_;
  std::vector<int> bone_parent_;
  std::vector<Transform> reference_;
  BoneMode mode_ = BoneMode::kNormalized;
  double scale_ = 1;
};

}  // namespace reach::vmc

#endif  // REACH_CLIENT_VMC_H_
