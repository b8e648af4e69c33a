#include "client/vmc.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace reach::vmc {
namespace {

constexpr absl::string_view kBone = "/VMC/Ext/Bone/Pos";
constexpr absl::string_view kRoot = "/VMC/Ext/Root/Pos";
constexpr absl::string_view kTime = "/VMC/Ext/T";
constexpr absl::string_view kOk = "/VMC/Ext/OK";
constexpr absl::string_view kHmd = "/VMC/Ext/Hmd/Pos";
constexpr absl::string_view kController = "/VMC/Ext/Con/Pos";
constexpr absl::string_view kTracker = "/VMC/Ext/Tra/Pos";

}  // namespace

const std::array<absl::string_view, 55>& HumanBodyBones() {
  static const std::array<absl::string_view, 55> kNames = {
      "Hips",
      "LeftUpperLeg",
      "RightUpperLeg",
      "LeftLowerLeg",
      "RightLowerLeg",
      "LeftFoot",
      "RightFoot",
      "Spine",
      "Chest",
      "Neck",
      "Head",
      "LeftShoulder",
      "RightShoulder",
      "LeftUpperArm",
      "RightUpperArm",
      "LeftLowerArm",
      "RightLowerArm",
      "LeftHand",
      "RightHand",
      "LeftToes",
      "RightToes",
      "LeftEye",
      "RightEye",
      "Jaw",
      "LeftThumbProximal",
      "LeftThumbIntermediate",
      "LeftThumbDistal",
      "LeftIndexProximal",
      "LeftIndexIntermediate",
      "LeftIndexDistal",
      "LeftMiddleProximal",
      "LeftMiddleIntermediate",
      "LeftMiddleDistal",
      "LeftRingProximal",
      "LeftRingIntermediate",
      "LeftRingDistal",
      "LeftLittleProximal",
      "LeftLittleIntermediate",
      "LeftLittleDistal",
      "RightThumbProximal",
      "RightThumbIntermediate",
      "RightThumbDistal",
      "RightIndexProximal",
      "RightIndexIntermediate",
      "RightIndexDistal",
      "RightMiddleProximal",
      "RightMiddleIntermediate",
      "RightMiddleDistal",
      "RightRingProximal",
      "RightRingIntermediate",
      "RightRingDistal",
      "RightLittleProximal",
      "RightLittleIntermediate",
      "RightLittleDistal",
      "UpperChest",
  };
  return kNames;
}

std::string HumanBoneForRole(absl::string_view role, int spine_joints,
                             int neck_joints) {
  if (role == "pelvis") return "Hips";
  if (role == "head") return "Head";
  const std::vector<absl::string_view> parts = absl::StrSplit(role, '.');
  int index = 0;
  if (parts.size() >= 2 && !absl::SimpleAtoi(parts.back(), &index)) {
    index = -1;
  }
  if (parts.size() == 2 && parts[0] == "spine") {
    if (index == 0) return "Spine";
    if (index == 1 && spine_joints >= 2) return "Chest";
    if (index >= 2 && index == spine_joints - 1) return "UpperChest";
    return "";
  }
  if (parts.size() == 2 && parts[0] == "neck") {
    return index == 0 && neck_joints >= 1 ? "Neck" : "";
  }
  if (parts.size() < 2 || (parts[0] != "left" && parts[0] != "right")) {
    return "";
  }
  const std::string side = parts[0] == "left" ? "Left" : "Right";
  if (parts.size() == 2) {
    static const std::pair<absl::string_view, absl::string_view> kLimbs[] = {
        {"clavicle", "Shoulder"}, {"upper_arm", "UpperArm"},
        {"forearm", "LowerArm"},  {"hand", "Hand"},
        {"thigh", "UpperLeg"},    {"shin", "LowerLeg"},
        {"foot", "Foot"},         {"toe", "Toes"}};
    for (const auto& [part, bone] : kLimbs) {
      if (parts[1] == part) return absl::StrCat(side, bone);
    }
    return "";
  }
  if (parts.size() != 3 || index < 0 || index > 2) return "";
  static const std::pair<absl::string_view, absl::string_view> kFingers[] = {
      {"thumb", "Thumb"},   {"index", "Index"},    {"finger1", "Index"},
      {"middle", "Middle"}, {"finger2", "Middle"}, {"ring", "Ring"},
      {"finger3", "Ring"},  {"pinky", "Little"},   {"finger4", "Little"}};
  static const absl::string_view kSegments[] = {"Proximal", "Intermediate",
                                                "Distal"};
  for (const auto& [finger, bone] : kFingers) {
    if (parts[1] == finger) return absl::StrCat(side, bone, kSegments[index]);
  }
  return "";
}

VmcReceiver::VmcReceiver(std::vector<std::string> joint_names,
                         std::vector<Transform> rest, const osc::Limits& limits,
                         bool trackers)
    : names_(std::move(joint_names)),
      rest_(std::move(rest)),
      limits_(limits),
      tracker_mode_(trackers),
      local_(rest_) {
  for (size_t j = 0; j < names_.size(); ++j) {
    index_.emplace(names_[j], static_cast<int>(j));
  }
  frame_.rotations.resize(names_.size());
}

bool VmcReceiver::ReadFloats(const osc::Message& m, int first, int n,
                             float* out) {
  if (m.argument_count < first + n) return false;
  for (int k = 0; k < n; ++k) {
    const osc::Argument& a = packet_.arg(m, first + k);
    if (a.type != 'f' || !std::isfinite(a.f)) return false;
    out[k] = a.f;
  }
  return true;
}

VmcReceiver::Outcome VmcReceiver::Apply(const uint8_t* data, size_t size) {
  switch (osc::Decode(data, size, limits_, &packet_)) {
    case osc::DecodeResult::kOk:
      break;
    case osc::DecodeResult::kMalformed:
      ++counts_.packets_malformed;
      return Outcome::kDropped;
    case osc::DecodeResult::kTooLarge:
      ++counts_.packets_too_large;
      return Outcome::kDropped;
  }
  // The packet's time first: one older than what was applied arrived out
  // of order, and is dropped whole.
  bool has_time = false;
  double time = 0;
  for (const osc::Message& m : packet_.messages) {
    float t;
    if (m.address == kTime && ReadFloats(m, 0, 1, &t)) {
      has_time = true;
      time = t;
    }
  }
  if (has_time && has_time_ && time < last_time_) {
    ++counts_.packets_reordered;
    return Outcome::kDropped;
  }
  ++counts_.packets_ok;
  bool frame = false;
  if (tracker_mode_) trackers_.clear();
  for (const osc::Message& m : packet_.messages) {
    const absl::string_view address = m.address;
    const bool tracker =
        address == kHmd || address == kController || address == kTracker;
    if (address == kBone || address == kRoot || tracker) {
      float v[7];
      if (m.argument_count < 1 || packet_.arg(m, 0).type != 's' ||
          !ReadFloats(m, 1, 7, v)) {
        ++counts_.bad_arguments;
        continue;
      }
      Eigen::Quaterniond q(v[6], v[3], v[4], v[5]);
      const double norm = q.norm();
      if (!(norm > 1e-6)) {
        ++counts_.bad_arguments;
        continue;
      }
      q.coeffs() /= norm;
      Transform t;
      t.rotation = FlipRotation(q);
      t.translation = FlipPosition(Eigen::Vector3d(v[0], v[1], v[2]));
      if (tracker) {
        ++counts_.tracker;
        if (!tracker_mode_) continue;
        TrackerSample& sample = trackers_.emplace_back();
        sample.kind = address == kHmd          ? TrackerKind::kHmd
                      : address == kController ? TrackerKind::kController
                                               : TrackerKind::kTracker;
        sample.serial = std::string(packet_.arg(m, 0).bytes);
        sample.pose = t;
        frame = true;
        continue;
      }
      if (tracker_mode_) {
        // Bones and the root: seen, not used.
        ++(address == kRoot ? counts_.root : counts_.bone);
        continue;
      }
      if (address == kRoot) {
        // v2.1 appends the MR composition's scale s and offset o: the
        // receiver's model is placed at p - o and scaled by 1/s (per axis,
        // in the model's own axes), so its hips are at
        // p - o + q (hips / s). Proportions are the source skeleton's: in
        // its units (the model's scale divided out) that is
        // s (p - o) + q hips, the root at s (p - o), with s the mean scale
        // cbrt(sx sy sz) (MR composition sends one scale thrice; an uneven
        // one would stretch the bones, which a skeleton cannot). Fewer than
        // six more floats: v2.0 (extra arguments ignored); a scale that is
        // not positive: the message is bad.
        float so[6];
        if (ReadFloats(m, 8, 6, so)) {
          if (!(so[0] > 0 && so[1] > 0 && so[2] > 0)) {
            ++counts_.bad_arguments;
            continue;
          }
          const double k =
              std::cbrt(static_cast<double>(so[0]) * so[1] * so[2]);
          const Eigen::Vector3d offset =
              FlipPosition(Eigen::Vector3d(so[3], so[4], so[5]));
          t.translation = (t.translation - offset) * k;
          ++counts_.root_scaled;
        }
        root_ = t;
        ++counts_.root;
        frame = true;
        continue;
      }
      const auto it = index_.find(packet_.arg(m, 0).bytes);
      if (it == index_.end()) {
        ++counts_.unknown_bone;
        continue;
      }
      // Proportions are the source skeleton's: only the root joint (the
      // hips) takes the sender's position.
      local_[static_cast<size_t>(it->second)].rotation = t.rotation;
      if (it->second == 0) local_[0].translation = t.translation;
      ++counts_.bone;
      frame = true;
    } else if (address == kTime) {
      float t;
      if (ReadFloats(m, 0, 1, &t)) {
        ++counts_.time;
      } else {
        ++counts_.bad_arguments;
      }
    } else if (address == kOk) {
      ++counts_.ok;
    } else if (absl::StartsWith(address, "/VMC/Ext/Tra/Pos") ||
               absl::StartsWith(address, "/VMC/Ext/Hmd/Pos") ||
               absl::StartsWith(address, "/VMC/Ext/Con/Pos")) {
      // The Local variants (/VMC/Ext/Hmd/Pos/Local, ...): poses relative to
      // the avatar, not the tracking space; not used.
      ++counts_.unknown_address;
    } else if (absl::StartsWith(address, "/VMC/Ext/Blend/")) {
      ++counts_.blend;
    } else {
      ++counts_.unknown_address;
    }
  }
  if (has_time) {
    has_time_ = true;
    last_time_ = time;
  }
  if (!frame) return Outcome::kNoFrame;
  ++counts_.frames;
  for (size_t j = 0; j < local_.size() && !tracker_mode_; ++j) {
    frame_.rotations[j] = local_[j].rotation;
  }
  if (!local_.empty() && !tracker_mode_) {
    frame_.rotations[0] = root_.rotation * local_[0].rotation;
    frame_.root_translation = root_ * local_[0].translation;
  }
  frame_.has_time = has_time_;
  frame_.time = last_time_;
  if (has_time_) {
    if (has_frame_time_) {
      const double dt = last_time_ - last_frame_time_;
      if (typical_dt_ > 0 && dt > 1.5 * typical_dt_) {
        counts_.frames_lost +=
            static_cast<uint64_t>(std::llround(dt / typical_dt_)) - 1;
      } else if (dt > 0) {
        typical_dt_ = typical_dt_ == 0 ? dt : 0.9 * typical_dt_ + 0.1 * dt;
      }
    }
    has_frame_time_ = true;
    last_frame_time_ = last_time_;
  }
  return Outcome::kFrame;
}

absl::string_view BodyPartName(BodyPart part) {
  switch (part) {
    case BodyPart::kHead:
      return "head";
    case BodyPart::kLeftHand:
      return "left hand";
    case BodyPart::kRightHand:
      return "right hand";
    case BodyPart::kPelvis:
      return "pelvis";
    case BodyPart::kLeftFoot:
      return "left foot";
    case BodyPart::kRightFoot:
      return "right foot";
  }
  return "";
}

absl::StatusOr<TrackerOffsets> ParseTrackerOffsets(absl::string_view text,
                                                   absl::string_view name) {
  const nlohmann::json json =
      nlohmann::json::parse(text.begin(), text.end(), nullptr,
                            /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     ": expected a JSON object of body parts or serials, each "
                     "{\"position\": [x, y, z], \"rotation\": [x, y, z, w]}"));
  }
  static constexpr std::pair<absl::string_view, BodyPart> kParts[] = {
      {"head", BodyPart::kHead},
      {"left_hand", BodyPart::kLeftHand},
      {"right_hand", BodyPart::kRightHand},
      {"pelvis", BodyPart::kPelvis},
      {"left_foot", BodyPart::kLeftFoot},
      {"right_foot", BodyPart::kRightFoot}};
  TrackerOffsets out;
  for (auto item = json.begin(); item != json.end(); ++item) {
    const std::string& key = item.key();
    const nlohmann::json& entry = item.value();
    const auto fail = [&](absl::string_view field, absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": \"", key, "\"",
                                                     field.empty() ? "" : ".",
                                                     field, ": ", what));
    };
    if (key.empty()) return fail("", "a serial or body part is needed");
    if (!entry.is_object()) {
      return fail("",
                  "expected {\"position\": [x, y, z], \"rotation\": "
                  "[x, y, z, w]}");
    }
    // Reads `field` as n finite numbers into v; absent: false.
    const auto numbers = [&](const char* field, int n, double* v,
                             bool* present) -> absl::Status {
      *present = false;
      const auto it = entry.find(field);
      if (it == entry.end()) return absl::OkStatus();
      if (!it->is_array() || static_cast<int>(it->size()) != n) {
        return fail(field, absl::StrCat("expected ", n, " numbers"));
      }
      for (int k = 0; k < n; ++k) {
        const nlohmann::json& x = (*it)[static_cast<size_t>(k)];
        if (!x.is_number() || !std::isfinite(x.get<double>())) {
          return fail(field, absl::StrCat("expected ", n, " finite numbers"));
        }
        v[k] = x.get<double>();
      }
      *present = true;
      return absl::OkStatus();
    };
    for (auto field = entry.begin(); field != entry.end(); ++field) {
      if (field.key() != "position" && field.key() != "rotation") {
        return fail(field.key(), "unknown field (position, rotation)");
      }
    }
    Transform offset;
    double p[3], q[4];
    bool has_p, has_q;
    if (absl::Status s = numbers("position", 3, p, &has_p); !s.ok()) return s;
    if (absl::Status s = numbers("rotation", 4, q, &has_q); !s.ok()) return s;
    if (has_p)
      offset.translation = FlipPosition(Eigen::Vector3d(p[0], p[1], p[2]));
    if (has_q) {
      Eigen::Quaterniond r(q[3], q[0], q[1], q[2]);
      if (!(r.norm() > 1e-6)) {
        return fail("rotation", "a zero quaternion");
      }
      offset.rotation = FlipRotation(r.normalized());
    }
    bool part = false;
    for (const auto& [part_name, body_part] : kParts) {
      if (key == part_name) {
        out.by_part[static_cast<size_t>(body_part)] = offset;
        part = true;
      }
    }
    if (!part) out.by_serial[key] = offset;
  }
  return out;
}

TrackerMap::TrackerMap(TrackerAssignment a, TrackerOffsets offsets)
    : offsets_(std::move(offsets)) {
  const std::pair<BodyPart, std::string*> named[] = {
      {BodyPart::kLeftHand, &a.left_hand},
      {BodyPart::kRightHand, &a.right_hand},
      {BodyPart::kPelvis, &a.pelvis},
      {BodyPart::kLeftFoot, &a.left_foot},
      {BodyPart::kRightFoot, &a.right_foot}};
  for (const auto& [part, serial] : named) {
    if (serial->empty()) continue;
    serial_[static_cast<int>(part)] = std::move(*serial);
    named_[static_cast<int>(part)] = true;
  }
}

Transform TrackerMap::Joint(const TrackerSample& sample, int part) const {
  const auto it = offsets_.by_serial.find(sample.serial);
  const Transform& offset = it != offsets_.by_serial.end()
                                ? it->second
                                : offsets_.by_part[static_cast<size_t>(part)];
  Transform joint;
  joint.translation =
      sample.pose.translation + sample.pose.rotation * offset.translation;
  joint.rotation = (sample.pose.rotation * offset.rotation).normalized();
  return joint;
}

bool TrackerMap::Place(const TrackerSample& sample) {
  for (int p = 0; p < kBodyParts; ++p) {
    if (!serial_[p].empty() && serial_[p] == sample.serial) {
      pose_[p] = Joint(sample, p);
      has_[p] = true;
      return true;
    }
  }
  // A serial seen for the first time, named by no flag.
  constexpr int kHead = static_cast<int>(BodyPart::kHead);
  if (sample.kind == TrackerKind::kHmd) {
    if (!serial_[kHead].empty()) return false;  // A second HMD.
    serial_[kHead] = sample.serial;
    pose_[kHead] = Joint(sample, kHead);
    has_[kHead] = true;
    return true;
  }
  if (sample.kind != TrackerKind::kController) return false;
  // The side of the head it appears on: the head's left is +X turned by
  // the HMD (identity looks along +Z, Y up; Unity's -X is our +X), else
  // the tracking space's +X.
  const Eigen::Vector3d left =
      has_[kHead]
          ? Eigen::Vector3d(pose_[kHead].rotation * Eigen::Vector3d::UnitX())
          : Eigen::Vector3d::UnitX();
  const Eigen::Vector3d from =
      has_[kHead] ? pose_[kHead].translation : Eigen::Vector3d::Zero();
  const bool is_left = (sample.pose.translation - from).dot(left) >= 0;
  const int first =
      static_cast<int>(is_left ? BodyPart::kLeftHand : BodyPart::kRightHand);
  const int second =
      static_cast<int>(is_left ? BodyPart::kRightHand : BodyPart::kLeftHand);
  for (const int p : {first, second}) {
    if (!serial_[p].empty()) continue;
    serial_[p] = sample.serial;
    pose_[p] = Joint(sample, p);
    has_[p] = true;
    return true;
  }
  return false;  // A third controller.
}

int TrackerMap::Apply(const std::vector<TrackerSample>& samples) {
  int placed = 0;
  for (const bool hmds : {true, false}) {
    for (const TrackerSample& sample : samples) {
      if ((sample.kind == TrackerKind::kHmd) != hmds) continue;
      if (Place(sample)) {
        ++placed;
        ++applied_;
      } else {
        ++unknown_serial_;
      }
    }
  }
  return placed;
}

absl::StatusOr<VmcPoseWriter> VmcPoseWriter::Create(
    std::vector<int> parents,
    const std::vector<std::pair<std::string, int>>& roles,
    std::vector<Transform> reference_globals, BoneMode mode, double scale) {
  if (reference_globals.size() != parents.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the retarget pose has ", reference_globals.size(),
                     " joints, the target ", parents.size()));
  }
  int spines = 0, necks = 0;
  for (const auto& [role, joint] : roles) {
    if (absl::StartsWith(role, "spine.")) ++spines;
    if (absl::StartsWith(role, "neck.")) ++necks;
  }
  VmcPoseWriter w;
  std::vector<int> bone_of(parents.size(), -1);
  for (const auto& [role, joint] : roles) {
    if (joint < 0 || joint >= static_cast<int>(parents.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("role ", role, ": joint ", joint, " out of range"));
    }
    std::string name = HumanBoneForRole(role, spines, necks);
    if (name.empty() || bone_of[static_cast<size_t>(joint)] >= 0) continue;
    bool taken = false;
    for (const auto& b : w.bones_) taken = taken || b.first == name;
    if (taken) continue;
    bone_of[static_cast<size_t>(joint)] = 0;
    w.bones_.emplace_back(std::move(name), joint);
  }
  // Joint order: parents come before children.
  std::sort(w.bones_.begin(), w.bones_.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  for (size_t k = 0; k < w.bones_.size(); ++k) {
    bone_of[static_cast<size_t>(w.bones_[k].second)] = static_cast<int>(k);
  }
  for (const auto& [name, joint] : w.bones_) {
    int up = parents[static_cast<size_t>(joint)];
    while (up >= 0 && up < static_cast<int>(parents.size()) &&
           bone_of[static_cast<size_t>(up)] < 0) {
      up = parents[static_cast<size_t>(up)];
    }
    w.bone_parent_.push_back(up >= 0 ? bone_of[static_cast<size_t>(up)] : -1);
  }
  w.reference_ = std::move(reference_globals);
  w.mode_ = mode;
  w.scale_ = scale;
  return w;
}

Transform VmcPoseWriter::BoneTransform(const std::vector<Transform>& globals,
                                       size_t k) const {
  const size_t j = static_cast<size_t>(bones_[k].second);
  const int pk = bone_parent_[k];
  const size_t pj =
      pk >= 0 ? static_cast<size_t>(bones_[static_cast<size_t>(pk)].second) : 0;
  Transform local;
  if (mode_ == BoneMode::kRaw) {
    local = pk >= 0 ? globals[pj].Inverse() * globals[j] : globals[j];
  } else {
    const Eigen::Quaterniond n =
        globals[j].rotation * reference_[j].rotation.conjugate();
    if (pk < 0) {
      local.rotation = n;
      local.translation = globals[j].translation;
    } else {
      const Eigen::Quaterniond np =
          globals[pj].rotation * reference_[pj].rotation.conjugate();
      local.rotation = np.conjugate() * n;
      local.translation =
          np.conjugate() * (globals[j].translation - globals[pj].translation);
    }
  }
  local.rotation.normalize();
  local.scale = 1;
  return local;
}

void VmcPoseWriter::Write(const std::vector<Transform>& globals, float time,
                          osc::Writer* w) const {
  w->Clear();
  w->OpenBundle();
  w->Message(kOk).Int(1);
  w->Message(kTime).Float(time);
  w->Message(kRoot).String("root");
  for (const float v : {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 1.f}) w->Float(v);
  for (size_t k = 0; k < bones_.size(); ++k) {
    const Transform t = BoneTransform(globals, k);
    const Eigen::Vector3d p = FlipPosition(t.translation * scale_);
    const Eigen::Quaterniond q = FlipRotation(t.rotation);
    w->Message(kBone).String(bones_[k].first);
    for (const double v : {p.x(), p.y(), p.z(), q.x(), q.y(), q.z(), q.w()}) {
      w->Float(static_cast<float>(v));
    }
  }
  w->CloseBundle();
}

}  // namespace reach::vmc
