// Shared by the VMC bridge's tests (vmc_test.cc, vmc_planting_test.cc): the
// test's own VMC performer and receiver. A VMC performance made from a
// mocap clip with the test's own code (HumanBodyBones from the clip's joint
// names, rotations relative to the default humanoid's rest, Unity's
// left-handed frame), serialised with Debian's liblo; liblo's parser for
// what comes out; UDP sockets on loopback; forward kinematics of the rigs
// and of received bones, written here (not the library's).
#ifndef REACH_TESTS_CLIENT_VMC_TESTING_H_
#define REACH_TESTS_CLIENT_VMC_TESTING_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <lo/lo.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "importers/bvh.h"
#include "reach/v1/skeleton.pb.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "solvers/transform.h"

namespace reach::vmc_testing {

using Eigen::Quaterniond;
using Eigen::Vector3d;

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A rig as the test reads it: names, parents, rest (from the wire form).
struct Rig {
  std::vector<std::string> names;
  std::vector<int> parents;
  std::vector<Transform> rest;

  int Find(const std::string& name) const {
    for (size_t j = 0; j < names.size(); ++j) {
      if (names[j] == name) return static_cast<int>(j);
    }
    return -1;
  }
};

inline Rig RigOf(const v1::Skeleton& skeleton) {
  Rig rig;
  for (const v1::Joint& joint : skeleton.joints()) {
    rig.names.push_back(joint.name());
    rig.parents.push_back(joint.parent());
    Transform t;
    t.translation =
        Vector3d(joint.rest().translation().x(), joint.rest().translation().y(),
                 joint.rest().translation().z());
    if (joint.rest().has_rotation()) {
      const v1::Quat& q = joint.rest().rotation();
      t.rotation = Quaterniond(q.w(), q.x(), q.y(), q.z());
    }
    rig.rest.push_back(t);
  }
  return rig;
}

// Forward kinematics, written here: model-space transforms of `local`.
inline std::vector<Transform> Fk(const std::vector<int>& parents,
                                 const std::vector<Transform>& local) {
  std::vector<Transform> g(local.size());
  for (size_t j = 0; j < local.size(); ++j) {
    const Transform& l = local[j];
    if (parents[j] < 0) {
      g[j] = l;
      continue;
    }
    const Transform& p = g[static_cast<size_t>(parents[j])];
    g[j].rotation = p.rotation * l.rotation;
    g[j].translation = p.translation + p.rotation * l.translation;
  }
  return g;
}

inline v1::Skeleton DefaultHumanoid() {
  v1::Skeleton skeleton;
  const std::string json =
      Slurp(absl::StrCat(REACH_EXAMPLES_DIR, "/vmc_humanoid.skeleton.json"));
  EXPECT_TRUE(
      google::protobuf::util::JsonStringToMessage(json, &skeleton).ok());
  return skeleton;
}

// Each clip's joints as HumanBodyBones, written out here (the test's own
// mapping, not the library's characterisation): the CMU MotionBuilder
// clips (jump, walk, wave), the CMU 131 naming (hop) and Character
// Creator's (shoot).
inline std::map<std::string, std::string> ClipToHumanBodyBones(
    const std::string& clip_file) {
  if (absl::StrContains(clip_file, "_hop")) {
    return {{"Hips", "Hips"},
            {"lowerback", "Spine"},
            {"Chest", "Chest"},
            {"Chest2", "UpperChest"},
            {"lowerneck", "Neck"},
            {"Head", "Head"},
            {"LeftCollar", "LeftShoulder"},
            {"LeftShoulder", "LeftUpperArm"},
            {"LeftElbow", "LeftLowerArm"},
            {"LeftWrist", "LeftHand"},
            {"RightCollar", "RightShoulder"},
            {"RightShoulder", "RightUpperArm"},
            {"RightElbow", "RightLowerArm"},
            {"RightWrist", "RightHand"},
            {"LeftHip", "LeftUpperLeg"},
            {"LeftKnee", "LeftLowerLeg"},
            {"LeftAnkle", "LeftFoot"},
            {"LeftToe", "LeftToes"},
            {"RightHip", "RightUpperLeg"},
            {"RightKnee", "RightLowerLeg"},
            {"RightAnkle", "RightFoot"},
            {"RightToe", "RightToes"}};
  }
  if (absl::StrContains(clip_file, "ccrig")) {
    std::map<std::string, std::string> out = {
        {"CC_Base_Hip", "Hips"},         {"CC_Base_Waist", "Spine"},
        {"CC_Base_Spine01", "Chest"},    {"CC_Base_Spine02", "UpperChest"},
        {"CC_Base_NeckTwist01", "Neck"}, {"CC_Base_Head", "Head"}};
    for (const auto& [cc, side] :
         {std::pair<const char*, const char*>{"L", "Left"}, {"R", "Right"}}) {
      const std::string c = absl::StrCat("CC_Base_", cc, "_");
      const std::string h = side;
      out[c + "Clavicle"] = h + "Shoulder";
      out[c + "Upperarm"] = h + "UpperArm";
      out[c + "Forearm"] = h + "LowerArm";
      out[c + "Hand"] = h + "Hand";
      out[c + "Thigh"] = h + "UpperLeg";
      out[c + "Calf"] = h + "LowerLeg";
      out[c + "Foot"] = h + "Foot";
      out[c + "ToeBase"] = h + "Toes";
    }
    return out;
  }
  return {{"Hips", "Hips"},
          {"LowerBack", "Spine"},
          {"Spine", "Chest"},
          {"Spine1", "UpperChest"},
          {"Neck", "Neck"},
          {"Head", "Head"},
          {"LeftShoulder", "LeftShoulder"},
          {"LeftArm", "LeftUpperArm"},
          {"LeftForeArm", "LeftLowerArm"},
          {"LeftHand", "LeftHand"},
          {"RightShoulder", "RightShoulder"},
          {"RightArm", "RightUpperArm"},
          {"RightForeArm", "RightLowerArm"},
          {"RightHand", "RightHand"},
          {"LeftUpLeg", "LeftUpperLeg"},
          {"LeftLeg", "LeftLowerLeg"},
          {"LeftFoot", "LeftFoot"},
          {"LeftToeBase", "LeftToes"},
          {"RightUpLeg", "RightUpperLeg"},
          {"RightLeg", "RightLowerLeg"},
          {"RightFoot", "RightFoot"},
          {"RightToeBase", "RightToes"}};
}

// One VMC bone as floats, Unity's frame.
using Floats7 = std::array<float, 7>;

// A performance: per frame its sender time and every bone of the default
// humanoid (in its joint order), as sent.
struct Performance {
  std::vector<float> times;
  std::vector<std::vector<Floats7>> bones;
};

// `reference_frame`: the clip's frame that is its T-pose, which the bones'
// turns are from, and the hips placed by their height over the lower ankle
// (-1: the clip's rest, the CMU conversions' T-pose, and the hips' height
// scaled; Character Creator's rest is not a T-pose, its frame 0 is).
inline Performance MakePerformance(const Rig& vmc, const std::string& clip_file,
                                   int first, int frames, double fps,
                                   int reference_frame = -1) {
  Performance out;
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(clip_file);
  EXPECT_TRUE(clip.ok()) << clip.status();
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(clip->skeleton.def);
  EXPECT_TRUE(skeleton.ok());
  std::vector<int> parents;
  std::vector<Transform> rest;
  std::map<std::string, int> clip_joint;
  for (const JointDef& j : clip->skeleton.def.joints) {
    clip_joint[j.name] = static_cast<int>(parents.size());
    parents.push_back(j.parent);
    rest.push_back(j.rest);
  }
  std::vector<Transform> rest_globals = Fk(parents, rest);
  if (reference_frame >= 0) {
    Pose reference;
    clip->FramePose(reference_frame, &reference);
    rest_globals = Fk(parents, reference.local);
  }
  // VMC bone -> clip joint.
  std::vector<int> source(vmc.names.size(), -1);
  for (const auto& [joint, bone] : ClipToHumanBodyBones(clip_file)) {
    const auto it = clip_joint.find(joint);
    EXPECT_NE(it, clip_joint.end()) << joint << " not in " << clip_file;
    if (it != clip_joint.end()) {
      source[static_cast<size_t>(vmc.Find(bone))] = it->second;
    }
  }
  Pose pose;
  clip->FramePose(first, &pose);
  double scale =
      vmc.rest[0].translation.y() / Fk(parents, pose.local)[0].translation.y();
  // Hips positions: the clip's scaled (the CMU conversions stand on y = 0),
  // or with a reference frame the hips' height over the lower ankle scaled
  // to the humanoid's and the feet put on its floor (Character Creator's
  // hips channels are not heights over the floor).
  Vector3d shift = Vector3d::Zero();
  if (reference_frame >= 0) {
    const std::vector<Transform> g = Fk(parents, pose.local);
    const std::vector<Transform> v = Fk(vmc.parents, vmc.rest);
    double clip_ankle = INFINITY, vmc_ankle = INFINITY;
    for (const char* foot : {"LeftFoot", "RightFoot"}) {
      const int b = vmc.Find(foot);
      const int c = source[static_cast<size_t>(b)];
      EXPECT_GE(c, 0) << foot;
      if (c < 0) continue;
      clip_ankle =
          std::min(clip_ankle, g[static_cast<size_t>(c)].translation.y());
      vmc_ankle =
          std::min(vmc_ankle, v[static_cast<size_t>(b)].translation.y());
    }
    scale = (v[0].translation.y() - vmc_ankle) /
            (g[0].translation.y() - clip_ankle);
    shift = Vector3d(0, vmc_ankle - clip_ankle * scale, 0);
  }
  for (int f = 0; f < frames; ++f) {
    clip->FramePose(first + f, &pose);
    const std::vector<Transform> g = Fk(parents, pose.local);
    // Each bone's turn from the rest in model axes (the humanoid's rest is
    // the normalised T-pose, as the CMU rest), then local to its parent.
    std::vector<Quaterniond> turn(vmc.names.size());
    std::vector<Floats7> bones(vmc.names.size());
    for (size_t b = 0; b < vmc.names.size(); ++b) {
      const int p = vmc.parents[b];
      const int c = source[b];
      turn[b] =
          c >= 0 ? g[static_cast<size_t>(c)].rotation *
                       rest_globals[static_cast<size_t>(c)].rotation.conjugate()
                 : (p >= 0 ? turn[static_cast<size_t>(p)]
                           : Quaterniond::Identity());
      const Quaterniond local =
          p >= 0 ? turn[static_cast<size_t>(p)].conjugate() * turn[b] : turn[b];
      const Vector3d position =
          p >= 0 ? vmc.rest[b].translation : g[0].translation * scale + shift;
      // Right-handed -> Unity: (-x, y, z), (x, -y, -z, w).
      bones[b] = {
          static_cast<float>(-position.x()), static_cast<float>(position.y()),
          static_cast<float>(position.z()),  static_cast<float>(local.x()),
          static_cast<float>(-local.y()),    static_cast<float>(-local.z()),
          static_cast<float>(local.w())};
    }
    out.times.push_back(static_cast<float>(f / fps));
    out.bones.push_back(std::move(bones));
  }
  return out;
}

// A VMC bundle that starts as a sender's frame does: /VMC/Ext/OK and the
// sender's time /VMC/Ext/T.
inline lo_bundle LoBundleAt(float time) {
  lo_bundle bundle = lo_bundle_new(LO_TT_IMMEDIATE);
  lo_message ok = lo_message_new();
  lo_message_add_int32(ok, 1);
  lo_bundle_add_message(bundle, "/VMC/Ext/OK", ok);
  lo_message t = lo_message_new();
  lo_message_add_float(t, time);
  lo_bundle_add_message(bundle, "/VMC/Ext/T", t);
  return bundle;
}

// A frame as a VMC bundle, serialised by liblo. `extras`: also a tracker,
// blend shapes, an unknown address and an unknown bone, which the bridge
// must ignore.
inline std::string LoFrame(const Rig& vmc, float time,
                           const std::vector<Floats7>& bones, bool extras) {
  lo_bundle bundle = LoBundleAt(time);
  const auto add = [&](const char* path, lo_message m) {
    lo_bundle_add_message(bundle, path, m);
  };
  lo_message root = lo_message_new();
  lo_message_add_string(root, "root");
  for (const float v : {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 1.f}) {
    lo_message_add_float(root, v);
  }
  add("/VMC/Ext/Root/Pos", root);
  for (size_t b = 0; b < bones.size(); ++b) {
    lo_message m = lo_message_new();
    lo_message_add_string(m, vmc.names[b].c_str());
    for (const float v : bones[b]) lo_message_add_float(m, v);
    add("/VMC/Ext/Bone/Pos", m);
  }
  if (extras) {
    lo_message tracker = lo_message_new();
    lo_message_add_string(tracker, "LHR-1234");
    for (int k = 0; k < 7; ++k) lo_message_add_float(tracker, k == 6 ? 1 : 0);
    add("/VMC/Ext/Tra/Pos", tracker);
    lo_message blend = lo_message_new();
    lo_message_add_string(blend, "Joy");
    lo_message_add_float(blend, 0.5f);
    add("/VMC/Ext/Blend/Val", blend);
    add("/VMC/Ext/Blend/Apply", lo_message_new());
    lo_message unknown = lo_message_new();
    lo_message_add_int32(unknown, 7);
    add("/VMC/Ext/Unknown/Thing", unknown);
    lo_message jaw = lo_message_new();
    lo_message_add_string(jaw, "Jaw");
    for (int k = 0; k < 7; ++k) lo_message_add_float(jaw, k == 6 ? 1 : 0);
    lo_message_add_float(jaw, 42);  // An extra argument: ignored.
    add("/VMC/Ext/Bone/Pos", jaw);
  }
  size_t size = 0;
  void* data = lo_bundle_serialise(bundle, nullptr, &size);
  std::string bytes(static_cast<const char*>(data), size);
  free(data);
  lo_bundle_free_recursive(bundle);
  return bytes;
}

// What liblo's parser reads from one datagram.
struct LoParsed {
  int bundles = 0;
  int messages = 0;
  bool ok = false;
  bool has_time = false;
  float time = 0;
  bool root = false;
  Floats7 root_pose{};  // The last /VMC/Ext/Root/Pos's floats.
  std::map<std::string, Floats7> bones;
  std::vector<std::string> addresses;
};

// liblo's parser over bytes: a LO_UNIX server (no network socket) whose
// handlers collect what lo_server_dispatch_data finds.
class LoParser {
 public:
  LoParser() {
    path_ = absl::StrCat(::testing::TempDir(), "/reach_vmc_lo_", getpid(), "_",
                         counter_++);
    unlink(path_.c_str());
    server_ = lo_server_new_with_proto(path_.c_str(), LO_UNIX, nullptr);
    EXPECT_NE(server_, nullptr);
    lo_server_add_method(server_, nullptr, nullptr, &LoParser::OnMessage, this);
    lo_server_add_bundle_handlers(server_, &LoParser::OnBundle,
                                  &LoParser::OnBundleEnd, this);
  }
  ~LoParser() {
    lo_server_free(server_);
    unlink(path_.c_str());
  }
  // False when liblo refuses the bytes.
  bool Parse(const std::string& bytes, LoParsed* out) {
    parsed_ = LoParsed();
    std::string copy = bytes;
    const int r = lo_server_dispatch_data(server_, copy.data(), copy.size());
    *out = parsed_;
    return r >= 0;
  }

 private:
  static int OnBundle(lo_timetag, void* self) {
    ++static_cast<LoParser*>(self)->parsed_.bundles;
    return 0;
  }
  static int OnBundleEnd(void*) { return 0; }
  // liblo's arguments point into the message at 4-byte alignment, but
  // lo_arg (a union with 64-bit members) wants 8: read them through
  // memcpy, never as lo_arg members (UBSan: misaligned member access).
  static float Float(const lo_arg* arg) {
    float f;
    std::memcpy(&f, arg, sizeof f);
    return f;
  }
  static int OnMessage(const char* path, const char* types, lo_arg** argv,
                       int argc, lo_message, void* self) {
    LoParsed& p = static_cast<LoParser*>(self)->parsed_;
    ++p.messages;
    p.addresses.push_back(path);
    const std::string address = path;
    const std::string t = types;
    if (address == "/VMC/Ext/OK") p.ok = argc >= 1 && t[0] == 'i';
    if (address == "/VMC/Ext/T" && argc == 1 && t == "f") {
      p.has_time = true;
      p.time = Float(argv[0]);
    }
    if ((address == "/VMC/Ext/Bone/Pos" || address == "/VMC/Ext/Root/Pos") &&
        t == "sfffffff") {
      Floats7 v;
      for (int k = 0; k < 7; ++k)
        v[static_cast<size_t>(k)] = Float(argv[k + 1]);
      if (address == "/VMC/Ext/Root/Pos") {
        p.root = true;
        p.root_pose = v;
      } else {
        p.bones[reinterpret_cast<const char*>(argv[0])] = v;
      }
    }
    return 0;
  }

  static inline int counter_ = 0;
  std::string path_;
  lo_server server_ = nullptr;
  LoParsed parsed_;
};

// A UDP socket on 127.0.0.1, port picked by the kernel.
class Udp {
 public:
  Udp() {
    fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const int buffer = 4 << 20;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    socklen_t length = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &length);
    port_ = ntohs(a.sin_port);
  }
  ~Udp() { close(fd_); }
  int port() const { return port_; }
  void SendTo(int port, const std::string& bytes) const {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(sendto(fd_, bytes.data(), bytes.size(), 0,
                     reinterpret_cast<sockaddr*>(&a), sizeof a),
              static_cast<ssize_t>(bytes.size()));
  }
  // One datagram, or false after `timeout_ms`.
  bool Receive(std::string* bytes, int timeout_ms = 5000) const {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) return false;
    bytes->resize(65536);
    const ssize_t n = recv(fd_, bytes->data(), bytes->size(), 0);
    if (n < 0) return false;
    bytes->resize(static_cast<size_t>(n));
    return true;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The HumanBodyBones hierarchy the test knows (Unity's): each body bone's
// parent bone (fingers: below).
inline const std::map<std::string, std::string>& HumanBoneParents() {
  static const auto* kParents = new std::map<std::string, std::string>{
      {"Spine", "Hips"},
      {"Chest", "Spine"},
      {"UpperChest", "Chest"},
      {"Neck", "UpperChest"},
      {"Head", "Neck"},
      {"LeftShoulder", "UpperChest"},
      {"LeftUpperArm", "LeftShoulder"},
      {"LeftLowerArm", "LeftUpperArm"},
      {"LeftHand", "LeftLowerArm"},
      {"RightShoulder", "UpperChest"},
      {"RightUpperArm", "RightShoulder"},
      {"RightLowerArm", "RightUpperArm"},
      {"RightHand", "RightLowerArm"},
      {"LeftUpperLeg", "Hips"},
      {"LeftLowerLeg", "LeftUpperLeg"},
      {"LeftFoot", "LeftLowerLeg"},
      {"LeftToes", "LeftFoot"},
      {"RightUpperLeg", "Hips"},
      {"RightLowerLeg", "RightUpperLeg"},
      {"RightFoot", "RightLowerLeg"},
      {"RightToes", "RightFoot"},
  };
  return *kParents;
}

// Forward kinematics of received bones (the test's own): each bone's
// model-space position, from the Hips' position and every bone's local
// rotation and offset, back in the right-handed frame.
inline std::map<std::string, Vector3d> BonePositions(const LoParsed& parsed) {
  std::map<std::string, Vector3d> at;
  std::map<std::string, Quaterniond> turn;
  const auto unflip = [](const Floats7& v, Vector3d* p, Quaterniond* q) {
    *p = Vector3d(-v[0], v[1], v[2]);
    *q = Quaterniond(v[6], v[3], -v[4], -v[5]).normalized();
  };
  std::function<void(const std::string&)> place = [&](const std::string& b) {
    if (at.count(b) || !parsed.bones.count(b)) return;
    Vector3d p;
    Quaterniond q;
    unflip(parsed.bones.at(b), &p, &q);
    if (b == "Hips") {
      at[b] = p;
      turn[b] = q;
      return;
    }
    // The nearest sent ancestor (a rig without UpperChest or shoulders
    // sends the bones below relative to the next one up).
    const auto parent_of = [](const std::string& bone) -> std::string {
      const auto it = HumanBoneParents().find(bone);
      if (it != HumanBoneParents().end()) return it->second;
      if (absl::EndsWith(bone, "Proximal")) {  // A finger's first bone.
        return absl::StartsWith(bone, "Left") ? "LeftHand" : "RightHand";
      }
      if (absl::EndsWith(bone, "Intermediate")) {
        return absl::StrCat(bone.substr(0, bone.size() - 12), "Proximal");
      }
      if (absl::EndsWith(bone, "Distal")) {
        return absl::StrCat(bone.substr(0, bone.size() - 6), "Intermediate");
      }
      return "";
    };
    std::string parent = parent_of(b);
    while (!parent.empty() && parent != "Hips" && !parsed.bones.count(parent)) {
      parent = parent_of(parent);
    }
    ASSERT_FALSE(parent.empty()) << "no parent known for " << b;
    place(parent);
    ASSERT_TRUE(at.count(parent)) << b << " without " << parent;
    at[b] = at[parent] + turn[parent] * p;
    turn[b] = turn[parent] * q;
  };
  for (const auto& [bone, values] : parsed.bones) place(bone);
  return at;
}

}  // namespace reach::vmc_testing

#endif  // REACH_TESTS_CLIENT_VMC_TESTING_H_
