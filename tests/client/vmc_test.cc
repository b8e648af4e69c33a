// The VMC bridge (`reach vmc`, client/vmc_bridge.h) end to end on loopback,
// against a real server, with independent ends: the test makes a VMC
// performance from a CMU clip with its own code (HumanBodyBones from the
// clip's joint names, rotations relative to the default rest, Unity's
// left-handed frame), serialises it with Debian's liblo, sends it over UDP,
// and reads what comes out with liblo's parser. The retargeted bones must
// be what the test computes itself (forward kinematics written here) from
// RetargetStream's answers for the same frames.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <lo/lo.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/osc.h"
#include "client/reach_client.h"
#include "client/vmc_bridge.h"
#include "google/protobuf/util/json_util.h"
#include "importers/bvh.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::testing::HasSubstr;
using Eigen::Quaterniond;
using Eigen::Vector3d;

std::string Slurp(const std::string& path) {
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

Rig RigOf(const v1::Skeleton& skeleton) {
  Rig rig;
  for (const v1::Joint& joint : skeleton.joints()) {
    rig.names.push_back(joint.name());
    rig.parents.push_back(joint.parent());
    Transform t;
    t.translation = Vector3d(joint.rest().translation().x(),
                             joint.rest().translation().y(),
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
std::vector<Transform> Fk(const std::vector<int>& parents,
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

v1::Skeleton DefaultHumanoid() {
  v1::Skeleton skeleton;
  const std::string json =
      Slurp(absl::StrCat(REACH_EXAMPLES_DIR, "/vmc_humanoid.skeleton.json"));
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &skeleton).ok());
  return skeleton;
}

// The CMU clips' joints as HumanBodyBones.
const std::map<std::string, std::string>& CmuToHumanBodyBones() {
  static const auto* kMap = new std::map<std::string, std::string>{
      {"Hips", "Hips"},
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
      {"RightToeBase", "RightToes"},
  };
  return *kMap;
}

// One VMC bone as floats, Unity's frame.
using Floats7 = std::array<float, 7>;

// A performance: per frame its sender time and every bone of the default
// humanoid (in its joint order), as sent.
struct Performance {
  std::vector<float> times;
  std::vector<std::vector<Floats7>> bones;
};

Performance MakePerformance(const Rig& vmc, const std::string& clip_file,
                            int first, int frames, double fps) {
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
  const std::vector<Transform> rest_globals = Fk(parents, rest);
  // VMC bone -> clip joint.
  std::vector<int> source(vmc.names.size(), -1);
  for (const auto& [cmu, bone] : CmuToHumanBodyBones()) {
    source[static_cast<size_t>(vmc.Find(bone))] = clip_joint.at(cmu);
  }
  Pose pose;
  clip->FramePose(first, &pose);
  const double scale =
      vmc.rest[0].translation.y() / Fk(parents, pose.local)[0].translation.y();
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
      turn[b] = c >= 0 ? g[static_cast<size_t>(c)].rotation *
                             rest_globals[static_cast<size_t>(c)]
                                 .rotation.conjugate()
                       : (p >= 0 ? turn[static_cast<size_t>(p)]
                                 : Quaterniond::Identity());
      const Quaterniond local =
          p >= 0 ? turn[static_cast<size_t>(p)].conjugate() * turn[b]
                 : turn[b];
      const Vector3d position =
          p >= 0 ? vmc.rest[b].translation : g[0].translation * scale;
      // Right-handed -> Unity: (-x, y, z), (x, -y, -z, w).
      bones[b] = {static_cast<float>(-position.x()),
                  static_cast<float>(position.y()),
                  static_cast<float>(position.z()),
                  static_cast<float>(local.x()),
                  static_cast<float>(-local.y()),
                  static_cast<float>(-local.z()),
                  static_cast<float>(local.w())};
    }
    out.times.push_back(static_cast<float>(f / fps));
    out.bones.push_back(std::move(bones));
  }
  return out;
}

// A frame as a VMC bundle, serialised by liblo. `extras`: also a tracker,
// blend shapes, an unknown address and an unknown bone, which the bridge
// must ignore.
std::string LoFrame(const Rig& vmc, float time,
                    const std::vector<Floats7>& bones, bool extras) {
  lo_bundle bundle = lo_bundle_new(LO_TT_IMMEDIATE);
  const auto add = [&](const char* path, lo_message m) {
    lo_bundle_add_message(bundle, path, m);
  };
  lo_message ok = lo_message_new();
  lo_message_add_int32(ok, 1);
  add("/VMC/Ext/OK", ok);
  lo_message t = lo_message_new();
  lo_message_add_float(t, time);
  add("/VMC/Ext/T", t);
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
    lo_server_add_method(server_, nullptr, nullptr, &LoParser::OnMessage,
                         this);
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
      for (int k = 0; k < 7; ++k) v[static_cast<size_t>(k)] = Float(argv[k + 1]);
      if (address == "/VMC/Ext/Root/Pos") {
        p.root = true;
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

// The HumanBodyBones of a target's roles: the test's own table.
std::map<std::string, std::string> ExpectedBones(const v1::RetargetProfile& p) {
  int spines = 0;
  for (const v1::RoleMapping& r : p.target().roles()) {
    spines += absl::StartsWith(r.role(), "spine.") ? 1 : 0;
  }
  const std::map<std::string, std::string> limbs = {
      {"clavicle", "Shoulder"}, {"upper_arm", "UpperArm"},
      {"forearm", "LowerArm"},  {"hand", "Hand"},
      {"thigh", "UpperLeg"},    {"shin", "LowerLeg"},
      {"foot", "Foot"},         {"toe", "Toes"}};
  const std::map<std::string, std::string> fingers = {
      {"thumb", "Thumb"},   {"index", "Index"},    {"finger1", "Index"},
      {"middle", "Middle"}, {"finger2", "Middle"}, {"ring", "Ring"},
      {"finger3", "Ring"},  {"pinky", "Little"},   {"finger4", "Little"}};
  const char* segments[] = {"Proximal", "Intermediate", "Distal"};
  std::map<std::string, std::string> bones;  // HumanBodyBones -> joint.
  for (const v1::RoleMapping& r : p.target().roles()) {
    const std::vector<std::string> parts = absl::StrSplit(r.role(), '.');
    std::string bone;
    if (r.role() == "pelvis") bone = "Hips";
    if (r.role() == "head") bone = "Head";
    if (r.role() == "neck.0") bone = "Neck";
    if (r.role() == "spine.0") bone = "Spine";
    if (r.role() == "spine.1" && spines >= 2) bone = "Chest";
    if (spines >= 3 && r.role() == absl::StrCat("spine.", spines - 1)) {
      bone = "UpperChest";
    }
    if (parts.size() >= 2 && (parts[0] == "left" || parts[0] == "right")) {
      const std::string side = parts[0] == "left" ? "Left" : "Right";
      if (parts.size() == 2 && limbs.count(parts[1])) {
        bone = side + limbs.at(parts[1]);
      }
      if (parts.size() == 3 && fingers.count(parts[1]) &&
          (parts[2] == "0" || parts[2] == "1" || parts[2] == "2")) {
        bone = side + fingers.at(parts[1]) + segments[std::stoi(parts[2])];
      }
    }
    if (!bone.empty()) bones[bone] = r.joint();
  }
  return bones;
}

// What the bridge must send for `answer`, computed here: each bone's turn
// from the target's retarget pose in model axes, relative to its nearest
// sent ancestor; the hips' model-space position; others the retarget
// pose's offsets. Unity's frame, as floats would carry it.
std::map<std::string, std::array<double, 7>> ExpectedOut(
    const Rig& target, const std::vector<Transform>& reference,
    const std::map<std::string, std::string>& bones,
    const v1::RetargetResponse& answer) {
  std::vector<Transform> local = target.rest;
  for (size_t j = 0; j < local.size(); ++j) {
    const v1::Quat& q = answer.target().rotations(static_cast<int>(j));
    local[j].rotation = Quaterniond(q.w(), q.x(), q.y(), q.z());
  }
  if (answer.target().has_root_translation()) {
    const v1::Vec3& t = answer.target().root_translation();
    local[0].translation = Vector3d(t.x(), t.y(), t.z());
  }
  const std::vector<Transform> g = Fk(target.parents, local);
  std::map<int, std::string> sent;  // joint -> bone
  for (const auto& [bone, joint] : bones) sent[target.Find(joint)] = bone;
  std::map<std::string, std::array<double, 7>> out;
  for (const auto& [j, bone] : sent) {
    int p = target.parents[static_cast<size_t>(j)];
    while (p >= 0 && !sent.count(p)) p = target.parents[static_cast<size_t>(p)];
    const auto turn = [&](int k) {
      return g[static_cast<size_t>(k)].rotation *
             reference[static_cast<size_t>(k)].rotation.conjugate();
    };
    Quaterniond q = p >= 0 ? turn(p).conjugate() * turn(j) : turn(j);
    q.normalize();
    const Vector3d x =
        p >= 0 ? Vector3d(reference[static_cast<size_t>(j)].translation -
                          reference[static_cast<size_t>(p)].translation)
               : g[static_cast<size_t>(j)].translation;
    out[bone] = {-x.x(), x.y(), x.z(), q.x(), -q.y(), -q.z(), q.w()};
  }
  return out;
}

// The bridge's counts once `out` frames have gone out (it counts each just
// after sending it), or after 5 s.
client::VmcBridgeCounts CountsAfter(const client::VmcBridge& bridge,
                                    uint64_t out) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  client::VmcBridgeCounts c = bridge.counts();
  while (c.frames_out < out && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
    c = bridge.counts();
  }
  return c;
}

// q and -q are one rotation.
double QuatDistance(const std::array<double, 7>& want, const Floats7& got) {
  double same = 0, opposite = 0;
  for (int k = 3; k < 7; ++k) {
    same = std::max(same, std::abs(want[k] - got[k]));
    opposite = std::max(opposite, std::abs(want[k] + got[k]));
  }
  return std::min(same, opposite);
}

class VmcTest : public ::testing::Test {
 protected:
  VmcTest()
      : client_(server_.channel),
        vmc_(RigOf(DefaultHumanoid())) {}

  std::unique_ptr<client::VmcBridge> StartBridge(
      client::VmcBridgeOptions options = {}) {
    options.listen = "127.0.0.1:0";
    options.send_to = absl::StrCat("127.0.0.1:", out_.port());
    if (options.target.empty()) {
      options.target =
          absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid.skeleton.json");
    }
    absl::StatusOr<std::unique_ptr<client::VmcBridge>> bridge =
        client::VmcBridge::Start(client_, options);
    EXPECT_TRUE(bridge.ok()) << bridge.status();
    return bridge.ok() ? *std::move(bridge) : nullptr;
  }

  // A rest-pose frame (every bone at identity) at `time`.
  std::string RestFrame(float time) {
    std::vector<Floats7> bones(vmc_.names.size());
    for (size_t b = 0; b < bones.size(); ++b) {
      const Vector3d p = b == 0 ? vmc_.rest[0].translation
                                : vmc_.rest[b].translation;
      bones[b] = {static_cast<float>(-p.x()), static_cast<float>(p.y()),
                  static_cast<float>(p.z()), 0, 0, 0, 1};
    }
    return LoFrame(vmc_, time, bones, false);
  }

  testing::TestServer server_;
  client::ReachClient client_;
  Rig vmc_;
  Udp in_;   // The performer's end.
  Udp out_;  // The receiver's end.
};

TEST(OscTest, WriterAndLibloAgree) {
  // Ours -> liblo.
  osc::Writer w;
  w.OpenBundle();
  w.Message("/VMC/Ext/OK").Int(1);
  w.Message("/VMC/Ext/T").Float(1.25f);
  w.OpenBundle();
  w.Message("/VMC/Ext/Bone/Pos").String("LeftHand");
  for (int k = 0; k < 7; ++k) w.Float(0.5f * static_cast<float>(k));
  w.CloseBundle();
  w.CloseBundle();
  LoParser lo;
  LoParsed parsed;
  ASSERT_TRUE(lo.Parse(w.bytes(), &parsed));
  EXPECT_EQ(parsed.bundles, 2);
  EXPECT_EQ(parsed.messages, 3);
  EXPECT_TRUE(parsed.ok);
  EXPECT_EQ(parsed.time, 1.25f);
  ASSERT_EQ(parsed.bones.count("LeftHand"), 1u);
  EXPECT_EQ(parsed.bones["LeftHand"][6], 3.0f);

  // liblo -> ours: a bundle within a bundle, every argument type liblo
  // writes that VMC senders use, and a lone message.
  lo_bundle outer = lo_bundle_new(LO_TT_IMMEDIATE);
  lo_bundle inner = lo_bundle_new(LO_TT_IMMEDIATE);
  lo_message m = lo_message_new();
  lo_message_add_string(m, "Hips");
  lo_message_add_float(m, -2.5f);
  lo_message_add_int32(m, -7);
  lo_message_add_double(m, 0.125);
  lo_message_add_int64(m, int64_t{1} << 40);
  lo_message_add_true(m);
  lo_message_add_nil(m);
  const uint8_t blob_bytes[5] = {1, 2, 3, 4, 5};
  lo_blob blob = lo_blob_new(5, blob_bytes);
  lo_message_add_blob(m, blob);
  lo_message_add_symbol(m, "sym");
  lo_bundle_add_message(inner, "/a/b", m);
  lo_bundle_add_bundle(outer, inner);
  lo_message m2 = lo_message_new();
  lo_message_add_float(m2, 3.f);
  lo_bundle_add_message(outer, "/VMC/Ext/T", m2);
  size_t size = 0;
  void* data = lo_bundle_serialise(outer, nullptr, &size);
  osc::Packet packet;
  ASSERT_EQ(osc::Decode(static_cast<const uint8_t*>(data), size,
                        osc::Limits(), &packet),
            osc::DecodeResult::kOk);
  ASSERT_EQ(packet.messages.size(), 2u);
  const osc::Message& a = packet.messages[0];
  EXPECT_EQ(a.address, "/a/b");
  ASSERT_EQ(a.argument_count, 9);
  EXPECT_EQ(packet.arg(a, 0).bytes, "Hips");
  EXPECT_EQ(packet.arg(a, 1).f, -2.5f);
  EXPECT_EQ(packet.arg(a, 2).i, -7);
  EXPECT_EQ(packet.arg(a, 3).d, 0.125);
  EXPECT_EQ(packet.arg(a, 4).i, int64_t{1} << 40);
  EXPECT_EQ(packet.arg(a, 5).type, 'T');
  EXPECT_EQ(packet.arg(a, 6).type, 'N');
  EXPECT_EQ(packet.arg(a, 7).bytes, std::string("\1\2\3\4\5"));
  EXPECT_EQ(packet.arg(a, 8).bytes, "sym");
  EXPECT_EQ(packet.messages[1].address, "/VMC/Ext/T");
  free(data);  // The packet's views point into it.
  lo_bundle_free_recursive(outer);
  lo_blob_free(blob);

  lo_message lone = lo_message_new();
  lo_message_add_string(lone, "x");
  data = lo_message_serialise(lone, "/VMC/Ext/OK", nullptr, &size);
  ASSERT_EQ(osc::Decode(static_cast<const uint8_t*>(data), size,
                        osc::Limits(), &packet),
            osc::DecodeResult::kOk);
  lo_message_free(lone);
  EXPECT_FALSE(packet.bundle);
  ASSERT_EQ(packet.messages.size(), 1u);
  EXPECT_EQ(packet.messages[0].address, "/VMC/Ext/OK");
  EXPECT_EQ(packet.arg(packet.messages[0], 0).bytes, "x");
  free(data);
}

TEST_F(VmcTest, RetargetedBonesEqualTheStreamsAnswers) {
  constexpr int kFrames = 150;
  const Performance performance = MakePerformance(
      vmc_, absl::StrCat(REACH_TEST_DATA, "/mocap/cmu_02_01_walk.bvh"), 1,
      kFrames, 120);
  std::unique_ptr<client::VmcBridge> bridge = StartBridge();
  ASSERT_NE(bridge, nullptr);
  const v1::RetargetProfile profile = bridge->profile();
  const std::map<std::string, std::string> bones = ExpectedBones(profile);
  ASSERT_GE(bones.size(), 22u);  // The demo humanoid's body and fingers.

  // Frame by frame (each waits for its answer, so none is superseded).
  LoParser lo;
  std::vector<LoParsed> received;
  for (int f = 0; f < kFrames; ++f) {
    in_.SendTo(bridge->port(), LoFrame(vmc_, performance.times[f],
                                       performance.bones[f], true));
    std::string bytes;
    ASSERT_TRUE(out_.Receive(&bytes)) << "frame " << f << " not answered";
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed)) << "liblo refuses frame " << f;
    received.push_back(parsed);
  }
  const client::VmcBridgeCounts counts =
      CountsAfter(*bridge, static_cast<uint64_t>(kFrames));
  ASSERT_TRUE(bridge->Stop().ok());

  // The same frames through RetargetStream, as the bridge must have sent
  // them: the floats back in the right-handed frame, the time steps of the
  // sender's clock.
  const Rig target = [&] {
    v1::GetSkeletonRequest request;
    request.set_skeleton_id(profile.spec().target().skeleton_id());
    v1::GetSkeletonResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(server_.stub->GetSkeleton(&context, request, &response).ok());
    return RigOf(response.skeleton());
  }();
  std::vector<Transform> reference_local = target.rest;
  for (size_t j = 0; j < reference_local.size(); ++j) {
    const v1::Quat& q =
        profile.target_reference().rotations(static_cast<int>(j));
    reference_local[j].rotation = Quaterniond(q.w(), q.x(), q.y(), q.z());
  }
  const std::vector<Transform> reference = Fk(target.parents, reference_local);

  std::unique_ptr<client::RetargetStream> stream =
      client_.OpenRetargetStream(absl::Seconds(60), 8);
  v1::RetargetRequest request;
  request.set_profile_id(profile.profile_id());
  for (int f = 0; f < kFrames; ++f) {
    request.set_sequence(static_cast<uint64_t>(f));
    request.set_frame_time_s(
        f == 0 ? 0
               : std::clamp(static_cast<double>(performance.times[f]) -
                                static_cast<double>(performance.times[f - 1]),
                            1e-4, 10.0));
    v1::Pose* pose = request.mutable_source();
    pose->Clear();
    for (size_t b = 0; b < vmc_.names.size(); ++b) {
      const Floats7& v = performance.bones[static_cast<size_t>(f)][b];
      Quaterniond q(v[6], v[3], v[4], v[5]);
      q.coeffs() /= q.norm();
      v1::Quat* out = pose->add_rotations();
      out->set_w(q.w());
      out->set_x(q.x());
      out->set_y(-q.y());
      out->set_z(-q.z());
      if (b == 0) {
        pose->mutable_root_translation()->set_x(-static_cast<double>(v[0]));
        pose->mutable_root_translation()->set_y(v[1]);
        pose->mutable_root_translation()->set_z(v[2]);
      }
    }
    ASSERT_TRUE(stream->Send(request));
  }
  std::vector<v1::RetargetResponse> answers;
  client::StreamAnswer<v1::RetargetResponse> answer;
  while (stream->Receive(&answer)) answers.push_back(answer.response);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), static_cast<size_t>(kFrames));

  double worst = 0;
  for (int f = 0; f < kFrames; ++f) {
    const LoParsed& got_frame = received[static_cast<size_t>(f)];
    ASSERT_FALSE(answers[static_cast<size_t>(f)].has_error());
    EXPECT_TRUE(got_frame.ok);
    EXPECT_TRUE(got_frame.root);
    ASSERT_TRUE(got_frame.has_time);
    EXPECT_EQ(got_frame.time, performance.times[static_cast<size_t>(f)]);
    EXPECT_EQ(got_frame.bones.size(), bones.size()) << "frame " << f;
    const auto want = ExpectedOut(target, reference, bones,
                                  answers[static_cast<size_t>(f)]);
    for (const auto& [bone, values] : want) {
      const auto it = got_frame.bones.find(bone);
      ASSERT_NE(it, got_frame.bones.end()) << bone << " missing, frame " << f;
      for (int k = 0; k < 3; ++k) {
        worst = std::max(worst, std::abs(values[static_cast<size_t>(k)] -
                                         it->second[static_cast<size_t>(k)]));
      }
      worst = std::max(worst, QuatDistance(values, it->second));
      EXPECT_LE(worst, 1e-5) << bone << " frame " << f;
    }
  }
  std::printf("bones per frame %zu, worst difference %.3g\n", bones.size(),
              worst);

  EXPECT_EQ(counts.receive.packets_ok, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.frames, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.frames_out, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.frames_superseded, 0u);
  EXPECT_EQ(counts.frames_skipped, 0u);
  EXPECT_EQ(counts.frames_errors, 0u);
  EXPECT_EQ(counts.receive.tracker, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.blend, static_cast<uint64_t>(2 * kFrames));
  EXPECT_EQ(counts.receive.unknown_address, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.unknown_bone, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.bad_arguments, 0u);
  EXPECT_EQ(counts.receive.frames_lost, 0u);
}

TEST_F(VmcTest, PacedFramesArriveInOrder) {
  // 120 frames at 120 Hz without waiting: every frame is sent on or
  // superseded (latest wins), and what comes out is in the sender's order.
  std::unique_ptr<client::VmcBridge> bridge = StartBridge();
  ASSERT_NE(bridge, nullptr);
  const absl::Time begin = absl::Now();
  for (int f = 0; f < 120; ++f) {
    absl::SleepFor(begin + absl::Seconds(f / 120.0) - absl::Now());
    in_.SendTo(bridge->port(), RestFrame(static_cast<float>(f) / 120.f));
  }
  LoParser lo;
  std::vector<float> times;
  std::string bytes;
  while (out_.Receive(&bytes, 1000)) {
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed));
    times.push_back(parsed.time);
    if (parsed.time == 119.f / 120.f) break;
  }
  ASSERT_FALSE(times.empty());
  EXPECT_EQ(times.back(), 119.f / 120.f);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  const client::VmcBridgeCounts c = CountsAfter(*bridge, times.size());
  EXPECT_EQ(c.receive.frames, 120u);
  EXPECT_EQ(c.frames_out + c.frames_superseded + c.frames_skipped, 120u);
  EXPECT_EQ(c.frames_out, times.size());
}

TEST_F(VmcTest, BadInputIsCountedAndNeverStalls) {
  std::unique_ptr<client::VmcBridge> bridge = StartBridge();
  ASSERT_NE(bridge, nullptr);
  const int port = bridge->port();
  LoParser lo;
  std::string bytes;
  // Frames at 60 Hz establish the sender's frame time.
  float t = 0;
  for (int f = 0; f < 5; ++f, t += 1 / 60.f) {
    in_.SendTo(port, RestFrame(t));
    ASSERT_TRUE(out_.Receive(&bytes));
  }
  // Malformed: not OSC at all, cut short, sizes that lie, no type tags,
  // an unknown type tag, an address without '/', an empty datagram.
  const std::string good = RestFrame(t);
  std::vector<std::string> malformed = {
      std::string("hello, world!"),
      std::string(1000, '\xff'),
      good.substr(0, good.size() / 2),
      good.substr(0, 20),
      std::string(""),
  };
  {
    std::string lying = good;
    lying[16] = '\x7f';  // The first element's size: far past the end.
    malformed.push_back(lying);
    osc::Writer w;
    w.Message("/VMC/Ext/T").Float(1);
    std::string no_tags = w.bytes();
    no_tags.replace(12, 4, std::string("\0\0\0\0", 4));
    malformed.push_back(no_tags);
    std::string unknown_tag = w.bytes();
    unknown_tag[13] = 'x';
    malformed.push_back(unknown_tag);
    w.Clear();
    w.Message("VMC").Int(1);
    malformed.push_back(w.bytes());
  }
  for (const std::string& m : malformed) in_.SendTo(port, m);
  // Too large: 5000 messages; bundles 20 deep.
  {
    osc::Writer w;
    w.OpenBundle();
    for (int k = 0; k < 5000; ++k) w.Message("/x");
    w.CloseBundle();
    in_.SendTo(port, w.bytes());
    w.Clear();
    for (int k = 0; k < 20; ++k) w.OpenBundle();
    w.Message("/VMC/Ext/OK").Int(1);
    for (int k = 0; k < 20; ++k) w.CloseBundle();
    in_.SendTo(port, w.bytes());
  }
  // Well-formed OSC with wrong arguments: ints for floats, too few, NaN, a
  // zero quaternion, a number for the name. Each is one ok packet whose
  // message is counted and ignored (no frame: nothing else in it).
  {
    osc::Writer w;
    const auto bone = [&](const char* name) -> osc::Writer& {
      w.Clear();
      return w.Message("/VMC/Ext/Bone/Pos").String(name);
    };
    bone("Hips").Int(0).Int(1).Int(0).Int(0).Int(0).Int(0).Int(1);
    in_.SendTo(port, w.bytes());
    bone("Hips").Float(0).Float(1).Float(0);
    in_.SendTo(port, w.bytes());
    bone("Hips").Float(NAN).Float(1).Float(0).Float(0).Float(0).Float(0).Float(1);
    in_.SendTo(port, w.bytes());
    bone("Hips").Float(0).Float(1).Float(0).Float(0).Float(0).Float(0).Float(0);
    in_.SendTo(port, w.bytes());
    w.Clear();
    w.Message("/VMC/Ext/Root/Pos").Int(3).Float(0).Float(0).Float(0).Float(0)
        .Float(0).Float(0).Float(1);
    in_.SendTo(port, w.bytes());
    w.Clear();
    w.Message("/VMC/Ext/T").String("soon");
    in_.SendTo(port, w.bytes());
  }
  // Out of order: a frame older than the last one is dropped whole.
  in_.SendTo(port, RestFrame(t - 2 / 60.f));
  // Lost: the next frame comes four frame times later (three missing).
  t += 3 / 60.f;
  in_.SendTo(port, RestFrame(t));
  ASSERT_TRUE(out_.Receive(&bytes)) << "the bridge stalled";
  LoParsed parsed;
  ASSERT_TRUE(lo.Parse(bytes, &parsed));
  EXPECT_EQ(parsed.time, t);
  EXPECT_FALSE(out_.Receive(&bytes, 200)) << "the reordered frame went out";

  const client::VmcBridgeCounts c = CountsAfter(*bridge, 6);
  EXPECT_EQ(c.receive.packets_malformed, malformed.size());
  EXPECT_EQ(c.receive.packets_too_large, 2u);
  EXPECT_EQ(c.receive.packets_reordered, 1u);
  EXPECT_EQ(c.receive.packets_ok, 5u + 6u + 1u);
  EXPECT_EQ(c.receive.bad_arguments, 6u);
  EXPECT_EQ(c.receive.frames, 6u);
  EXPECT_EQ(c.receive.frames_lost, 3u);
  EXPECT_EQ(c.frames_out, 6u);
  const std::string text = bridge->PrometheusText();
  EXPECT_THAT(text, HasSubstr(absl::StrCat(
                        "reach_vmc_packets_total{result=\"malformed\"} ",
                        malformed.size(), "\n")));
  EXPECT_THAT(text,
              HasSubstr("reach_vmc_packets_total{result=\"reordered\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("reach_vmc_frames_lost_total 3\n"));
  EXPECT_TRUE(bridge->Stop().ok());
}

TEST_F(VmcTest, ReachVmcCommandBridgesAndReportsItsCounts) {
  const std::string status_file =
      absl::StrCat(::testing::TempDir(), "/reach_vmc_status_", getpid());
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string addr = server_.address();
  const std::string target =
      absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid.skeleton.json");
  const std::string send = absl::StrCat("127.0.0.1:", out_.port());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Dies with the test: a test that fails (or aborts under a sanitizer)
    // must not leave the bridge holding CTest's output pipe open.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    execl(REACH_CLI_BINARY, REACH_CLI_BINARY, "--addr", addr.c_str(), "vmc",
          "--to", target.c_str(), "--listen", "127.0.0.1:0", "--send",
          send.c_str(), "--status-file", status_file.c_str(), "--quiet",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  // An ASSERT that returns early stops the bridge too.
  absl::Cleanup stop_bridge = [pid] { kill(pid, SIGKILL); };
  std::string out;
  char buffer[4096];
  while (out.find('\n') == std::string::npos) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 20000), 0) << "no start line: " << out;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    ASSERT_GT(n, 0) << out;
    out.append(buffer, static_cast<size_t>(n));
  }
  // No <regex>: GCC 12's -O2 sanitizer build warns inside std::regex.
  const std::string listening = "listening on 127.0.0.1:";
  const size_t at = out.find(listening);
  ASSERT_NE(at, std::string::npos) << out;
  const int port = std::atoi(out.c_str() + at + listening.size());
  ASSERT_GT(port, 0) << out;
  EXPECT_THAT(out, HasSubstr("Hips=hips"));
  LoParser lo;
  std::string bytes;
  for (int f = 0; f < 20; ++f) {
    in_.SendTo(port, RestFrame(static_cast<float>(f) / 60.f));
    ASSERT_TRUE(out_.Receive(&bytes)) << "frame " << f;
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed));
    EXPECT_EQ(parsed.time, static_cast<float>(f) / 60.f);
    EXPECT_TRUE(parsed.bones.count("LeftUpperArm"));
  }
  in_.SendTo(port, "garbage!");
  absl::SleepFor(absl::Milliseconds(100));
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::move(stop_bridge).Cancel();
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_THAT(out, HasSubstr("20 ok, 1 malformed"));
  EXPECT_THAT(out, HasSubstr("20 out"));
  const std::string text = Slurp(status_file);
  EXPECT_THAT(text, HasSubstr("reach_vmc_frames_total{result=\"out\"} 20\n"));
  EXPECT_THAT(text,
              HasSubstr("reach_vmc_packets_total{result=\"malformed\"} 1\n"));
  std::remove(status_file.c_str());
}

}  // namespace
}  // namespace reach
