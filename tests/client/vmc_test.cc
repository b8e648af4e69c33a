// The VMC bridge (`reach vmc`, client/vmc_bridge.h) end to end on loopback,
// against a real server, with independent ends: the test makes a VMC
// performance from a CMU clip with its own code (HumanBodyBones from the
// clip's joint names, rotations relative to the default rest, Unity's
// left-handed frame), serialises it with Debian's liblo, sends it over UDP,
// and reads what comes out with liblo's parser. The retargeted bones must
// be what the test computes itself (forward kinematics written here) from
// RetargetStream's answers for the same frames.
#include "client/vmc.h"

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
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
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
#include "tests/client/vmc_testing.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::testing::HasSubstr;
using ::testing::Not;

using vmc_testing::BonePositions;
using vmc_testing::ClipToHumanBodyBones;
using vmc_testing::DefaultHumanoid;
using vmc_testing::Fk;
using vmc_testing::Floats7;
using vmc_testing::HumanBoneParents;
using vmc_testing::LoBundleAt;
using vmc_testing::LoFrame;
using vmc_testing::LoParsed;
using vmc_testing::LoParser;
using vmc_testing::MakePerformance;
using vmc_testing::Performance;
using vmc_testing::Rig;
using vmc_testing::RigOf;
using vmc_testing::Slurp;
using vmc_testing::Udp;

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

// What the bridge must send for an answer's model-space transforms `g`,
// computed here: each bone's turn from the target's retarget pose in model
// axes, relative to its nearest sent ancestor; its offset from that
// ancestor in the ancestor's turned frame (the retarget pose's offset when
// the joints between do not turn); the hips' model-space position. Unity's
// frame.
std::map<std::string, std::array<double, 7>> ExpectedFromGlobals(
    const Rig& target, const std::vector<Transform>& reference,
    const std::map<std::string, std::string>& bones,
    const std::vector<Transform>& g) {
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
    const Vector3d x = p >= 0
                           ? Vector3d(turn(p).conjugate() *
                                      (g[static_cast<size_t>(j)].translation -
                                       g[static_cast<size_t>(p)].translation))
                           : g[static_cast<size_t>(j)].translation;
    out[bone] = {-x.x(), x.y(), x.z(), q.x(), -q.y(), -q.z(), q.w()};
  }
  return out;
}

// What the bridge must send for a RetargetStream `answer` (its pose by the
// test's own forward kinematics).
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
  return ExpectedFromGlobals(target, reference, bones,
                             Fk(target.parents, local));
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
  VmcTest() : client_(server_.channel), vmc_(RigOf(DefaultHumanoid())) {}

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

  // Options of a tracker-mode bridge onto the limited humanoid.
  static client::VmcBridgeOptions LimitedTrackerOptions() {
    client::VmcBridgeOptions options;
    options.target =
        absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid_limited.skeleton.json");
    options.trackers = true;
    return options;
  }

  // A rest-pose frame (every bone at identity) at `time`.
  std::string RestFrame(float time) {
    std::vector<Floats7> bones(vmc_.names.size());
    for (size_t b = 0; b < bones.size(); ++b) {
      const Vector3d p =
          b == 0 ? vmc_.rest[0].translation : vmc_.rest[b].translation;
      bones[b] = {static_cast<float>(-p.x()),
                  static_cast<float>(p.y()),
                  static_cast<float>(p.z()),
                  0,
                  0,
                  0,
                  1};
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
  ASSERT_EQ(osc::Decode(static_cast<const uint8_t*>(data), size, osc::Limits(),
                        &packet),
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
  ASSERT_EQ(osc::Decode(static_cast<const uint8_t*>(data), size, osc::Limits(),
                        &packet),
            osc::DecodeResult::kOk);
  lo_message_free(lone);
  EXPECT_FALSE(packet.bundle);
  ASSERT_EQ(packet.messages.size(), 1u);
  EXPECT_EQ(packet.messages[0].address, "/VMC/Ext/OK");
  EXPECT_EQ(packet.arg(packet.messages[0], 0).bytes, "x");
  free(data);
}

// Every clip of tests/data/mocap made into a VMC performance.
class VmcClipTest : public VmcTest,
                    public ::testing::WithParamInterface<const char*> {};

TEST_P(VmcClipTest, RetargetedBonesEqualTheStreamsAnswers) {
  constexpr int kFrames = 150;
  const Performance performance = MakePerformance(
      vmc_, absl::StrCat(REACH_TEST_DATA, "/mocap/", GetParam()), 1, kFrames,
      120);
  std::unique_ptr<client::VmcBridge> bridge = StartBridge();
  ASSERT_NE(bridge, nullptr);
  const v1::RetargetProfile profile = bridge->profile();
  const std::map<std::string, std::string> bones = ExpectedBones(profile);
  ASSERT_GE(bones.size(), 22u);  // The demo humanoid's body and fingers.

  // Frame by frame (each waits for its answer, so none is superseded).
  LoParser lo;
  std::vector<LoParsed> received;
  for (int f = 0; f < kFrames; ++f) {
    in_.SendTo(bridge->port(),
               LoFrame(vmc_, performance.times[f], performance.bones[f], true));
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
    const auto want =
        ExpectedOut(target, reference, bones, answers[static_cast<size_t>(f)]);
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

INSTANTIATE_TEST_SUITE_P(Clips, VmcClipTest,
                         ::testing::Values("cmu_01_01_jump.bvh",
                                           "cmu_02_01_walk.bvh",
                                           "cmu_06_15_shoot_ccrig.bvh",
                                           "cmu_131_03_hop.bvh",
                                           "cmu_141_16_wave.bvh"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find('.'));
                         });

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
    bone("Hips").Float(NAN).Float(1).Float(0).Float(0).Float(0).Float(0).Float(
        1);
    in_.SendTo(port, w.bytes());
    bone("Hips").Float(0).Float(1).Float(0).Float(0).Float(0).Float(0).Float(0);
    in_.SendTo(port, w.bytes());
    w.Clear();
    w.Message("/VMC/Ext/Root/Pos")
        .Int(3)
        .Float(0)
        .Float(0)
        .Float(0)
        .Float(0)
        .Float(0)
        .Float(0)
        .Float(1);
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

// ---------------------------------------------------------------------
// Tracker mode (`reach vmc --trackers`): an HMD and two controllers drive
// the limited humanoid's full body through SolveStream.

// One tracker as VMC floats, Unity's frame.
Floats7 ToUnity(const Vector3d& p, const Quaterniond& q) {
  return {static_cast<float>(-p.x()), static_cast<float>(p.y()),
          static_cast<float>(p.z()),  static_cast<float>(q.x()),
          static_cast<float>(-q.y()), static_cast<float>(-q.z()),
          static_cast<float>(q.w())};
}
// ... and back, as the bridge must read it.
void FromUnity(const Floats7& v, Vector3d* p, Quaterniond* q) {
  *p = Vector3d(-static_cast<double>(v[0]), v[1], v[2]);
  Quaterniond u(v[6], v[3], v[4], v[5]);
  u.coeffs() /= u.norm();
  *q = Quaterniond(u.w(), u.x(), -u.y(), -u.z());
}

// A tracker-only performance: per frame the HMD (the performer's head:
// position, and its turn from the rest's looking ahead) and the two hands'
// controllers, from the clip by the test's own forward kinematics, turned
// to face +Z, standing in place (the hips' drift along the floor taken
// out, as a VR player stays on the spot), scaled to `height` (head above
// the ankles) and in Unity's frame.
struct TrackerPerformance {
  std::vector<float> times;
  std::vector<Floats7> hmd, left, right;
  // The performer's hips and hip sockets in the same space (right-handed),
  // for measuring the body the trackers drive against theirs.
  std::vector<Vector3d> hips, left_hip, right_hip;
};

// `step`: every step-th clip frame from `first` (a clip's own times kept).
// `in_place` false: the hips' drift along the floor kept (a player walking
// about the room), the first frame's hips over the origin.
TrackerPerformance MakeTrackerPerformance(const std::string& clip_file,
                                          int frames, double fps, double height,
                                          int first = 0, int step = 1,
                                          bool in_place = true) {
  TrackerPerformance out;
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(clip_file);
  EXPECT_TRUE(clip.ok()) << clip.status();
  std::vector<int> parents;
  std::vector<Transform> rest;
  std::map<std::string, int> at;
  for (const JointDef& j : clip->skeleton.def.joints) {
    at[j.name] = static_cast<int>(parents.size());
    parents.push_back(j.parent);
    rest.push_back(j.rest);
  }
  // HumanBodyBones -> the clip's joint (the test's own table).
  for (const auto& [joint, bone] : ClipToHumanBodyBones(clip_file)) {
    if (at.count(joint)) at[bone] = at.at(joint);
  }
  const std::vector<Transform> rest_globals = Fk(parents, rest);
  const size_t head = static_cast<size_t>(at.at("Head"));
  const size_t hips = static_cast<size_t>(at.at("Hips"));
  Pose pose;
  clip->FramePose(first, &pose);
  std::vector<Transform> g = Fk(parents, pose.local);
  // Facing: the hips' left (LeftUpperLeg - RightUpperLeg) x up is forward.
  const Vector3d left =
      g[static_cast<size_t>(at.at("LeftUpperLeg"))].translation -
      g[static_cast<size_t>(at.at("RightUpperLeg"))].translation;
  Vector3d forward = left.cross(Vector3d::UnitY());
  forward.y() = 0;
  const Quaterniond face =
      Quaterniond::FromTwoVectors(forward.normalized(), Vector3d::UnitZ());
  const double ankle =
      g[static_cast<size_t>(at.at("LeftFoot"))].translation.y();
  const double scale = height / (g[head].translation.y() - ankle);
  const Vector3d start = g[hips].translation;
  for (int f = 0; f < frames && first + f * step < clip->num_frames; ++f) {
    clip->FramePose(first + f * step, &pose);
    g = Fk(parents, pose.local);
    Vector3d drift = in_place ? g[hips].translation : start;
    drift.y() = ankle;
    const auto place = [&](const std::string& joint) {
      return Vector3d(
          face * (g[static_cast<size_t>(at.at(joint))].translation - drift) *
          scale);
    };
    const Quaterniond look =
        face * g[head].rotation * rest_globals[head].rotation.conjugate();
    out.times.push_back(static_cast<float>(f / fps));
    out.hmd.push_back(ToUnity(place("Head"), look));
    out.left.push_back(ToUnity(place("LeftHand"), Quaterniond::Identity()));
    out.right.push_back(ToUnity(place("RightHand"), Quaterniond::Identity()));
    out.hips.push_back(place("Hips"));
    out.left_hip.push_back(place("LeftUpperLeg"));
    out.right_hip.push_back(place("RightUpperLeg"));
  }
  return out;
}

// A tracker frame as a VMC bundle, serialised by liblo. `extras`: also a
// tracker no flag names, a bone and the root (ignored in tracker mode).
std::string LoTrackerFrame(float time, const Floats7& hmd, const Floats7& left,
                           const Floats7& right, bool extras) {
  lo_bundle bundle = LoBundleAt(time);
  const auto add = [&](const char* path, lo_message m) {
    lo_bundle_add_message(bundle, path, m);
  };
  const auto pose = [&](const char* path, const char* serial,
                        const Floats7& v) {
    lo_message m = lo_message_new();
    lo_message_add_string(m, serial);
    for (const float x : v) lo_message_add_float(m, x);
    add(path, m);
  };
  // The controllers first: the bridge sides them by the HMD of the same
  // packet all the same.
  pose("/VMC/Ext/Con/Pos", "LHR-CON-A", left);
  pose("/VMC/Ext/Con/Pos", "LHR-CON-B", right);
  pose("/VMC/Ext/Hmd/Pos", "LHR-HMD", hmd);
  if (extras) {
    pose("/VMC/Ext/Tra/Pos", "LHR-WAIST", hmd);
    pose("/VMC/Ext/Bone/Pos", "Hips", {0, 1, 0, 0, 0, 0, 1});
    pose("/VMC/Ext/Root/Pos", "root", {0, 0, 0, 0, 0, 0, 1});
  }
  size_t size = 0;
  void* data = lo_bundle_serialise(bundle, nullptr, &size);
  std::string bytes(static_cast<const char*>(data), size);
  free(data);
  lo_bundle_free_recursive(bundle);
  return bytes;
}

// The performance `p` sent through `bridge` (tracker mode) from `in` frame
// by frame, each waiting for its answer on `out`: per frame, the rig's
// bone positions (the test's own forward kinematics of the bones
// received) and the head's and hands' distances from their trackers.
// False, with the failure recorded, if a frame is not answered.
struct TrackerSessionFrame {
  std::map<std::string, Vector3d> at;
  std::array<double, 3> errors;  // Head, left hand, right hand.
};
bool RunTrackerSession(Udp& in, Udp& out, const client::VmcBridge& bridge,
                       const TrackerPerformance& p,
                       std::vector<TrackerSessionFrame>* frames) {
  LoParser lo;
  frames->clear();
  for (size_t k = 0; k < p.times.size(); ++k) {
    in.SendTo(bridge.port(), LoTrackerFrame(p.times[k], p.hmd[k], p.left[k],
                                            p.right[k], false));
    std::string bytes;
    LoParsed parsed;
    if (!out.Receive(&bytes) || !lo.Parse(bytes, &parsed)) {
      ADD_FAILURE() << "frame " << k << " not answered";
      return false;
    }
    TrackerSessionFrame frame;
    frame.at = BonePositions(parsed);
    Vector3d h, l, r;
    Quaterniond unused;
    FromUnity(p.hmd[k], &h, &unused);
    FromUnity(p.left[k], &l, &unused);
    FromUnity(p.right[k], &r, &unused);
    frame.errors = {(frame.at.at("Head") - h).norm(),
                    (frame.at.at("LeftHand") - l).norm(),
                    (frame.at.at("RightHand") - r).norm()};
    frames->push_back(std::move(frame));
  }
  return true;
}

// The 99th percentile and the largest of the sessions' head and hand
// distances from their trackers.
std::pair<double, double> TrackerErrorP99Max(
    const std::vector<TrackerSessionFrame>& frames) {
  std::vector<double> all;
  for (const TrackerSessionFrame& f : frames) {
    all.insert(all.end(), f.errors.begin(), f.errors.end());
  }
  if (all.empty()) return {0.0, 0.0};
  std::sort(all.begin(), all.end());
  return {all[std::min(all.size() - 1,
                       static_cast<size_t>(0.99 * all.size()))],
          all.back()};
}

v1::Skeleton LimitedHumanoid() {
  v1::Skeleton skeleton;
  const std::string json = Slurp(
      absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid_limited.skeleton.json"));
  EXPECT_TRUE(
      google::protobuf::util::JsonStringToMessage(json, &skeleton).ok());
  return skeleton;
}

TEST_F(VmcTest, TrackersDriveTheLimitedHumanoid) {
  const Rig rig = RigOf(LimitedHumanoid());
  const std::vector<Transform> reference = Fk(rig.parents, rig.rest);
  const int head = rig.Find("head");
  const int l_wrist = rig.Find("l_wrist");
  const int r_wrist = rig.Find("r_wrist");
  const int l_ankle = rig.Find("l_ankle");
  ASSERT_GE(head, 0);
  ASSERT_GE(l_wrist, 0);
  ASSERT_GE(r_wrist, 0);
  constexpr int kFrames = 240;
  const TrackerPerformance performance = MakeTrackerPerformance(
      absl::StrCat(REACH_TEST_DATA, "/mocap/cmu_141_16_wave.bvh"), kFrames, 120,
      reference[static_cast<size_t>(head)].translation.y() -
          reference[static_cast<size_t>(l_ankle)].translation.y());

  std::unique_ptr<client::VmcBridge> bridge =
      StartBridge(LimitedTrackerOptions());
  ASSERT_NE(bridge, nullptr);
  std::map<std::string, std::string> bones;  // HumanBodyBones -> joint.
  for (const auto& [bone, joint] : bridge->bones()) bones[bone] = joint;
  for (const char* bone :
       {"Hips", "Spine", "Chest", "UpperChest", "Neck", "Head", "LeftHand",
        "RightHand", "LeftFoot", "RightFoot"}) {
    EXPECT_TRUE(bones.count(bone)) << bone;
  }
  EXPECT_EQ(bones["Head"], "head");
  EXPECT_EQ(bones["LeftHand"], "l_wrist");

  // Frame by frame, each waiting for its answer.
  LoParser lo;
  std::vector<LoParsed> received;
  for (int f = 0; f < kFrames; ++f) {
    const size_t k = static_cast<size_t>(f);
    in_.SendTo(bridge->port(),
               LoTrackerFrame(performance.times[k], performance.hmd[k],
                              performance.left[k], performance.right[k], true));
    std::string bytes;
    ASSERT_TRUE(out_.Receive(&bytes)) << "frame " << f << " not answered";
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed)) << "liblo refuses frame " << f;
    received.push_back(parsed);
  }
  const client::VmcBridgeCounts counts =
      CountsAfter(*bridge, static_cast<uint64_t>(kFrames));
  const std::string target_id = bridge->target_id();
  ASSERT_TRUE(bridge->Stop().ok());

  // The same goals on a SolveStream of the test's own: the head at the HMD
  // turned as it turns from looking ahead (+Z, the rig's forward), the
  // hands at the controllers, feet planted; the first frame from the rest
  // pose turned to the HMD's heading and moved under it.
  std::unique_ptr<client::SolveStream> stream =
      client_.OpenStream(absl::Seconds(120), 8);
  for (int f = 0; f < kFrames; ++f) {
    const size_t k = static_cast<size_t>(f);
    Vector3d hmd, l, r;
    Quaterniond look, unused;
    FromUnity(performance.hmd[k], &hmd, &look);
    FromUnity(performance.left[k], &l, &unused);
    FromUnity(performance.right[k], &r, &unused);
    v1::SolveRequest request;
    request.set_skeleton_id(target_id);
    request.set_sequence(static_cast<uint64_t>(f));
    request.set_return_globals(true);
    request.mutable_full_body()->set_plant_feet(true);
    const auto goal = [&](const char* joint, const Vector3d& at) {
      v1::Goal* g = request.add_goals();
      g->set_tip_joint(joint);
      g->set_solver(v1::SOLVER_FULL_BODY);
      g->mutable_target()->set_x(at.x());
      g->mutable_target()->set_y(at.y());
      g->mutable_target()->set_z(at.z());
      return g;
    };
    const Quaterniond want =
        (look * reference[static_cast<size_t>(head)].rotation).normalized();
    v1::Quat* o = goal("head", hmd)->mutable_target_orientation();
    o->set_w(want.w());
    o->set_x(want.x());
    o->set_y(want.y());
    o->set_z(want.z());
    goal("l_wrist", l);
    goal("r_wrist", r);
    if (f == 0) {
      const Vector3d ahead = look * Vector3d::UnitZ();
      const Quaterniond heading = Quaterniond::FromTwoVectors(
          Vector3d::UnitZ(), Vector3d(ahead.x(), 0, ahead.z()).normalized());
      const Vector3d root = rig.rest[0].translation;
      const Vector3d head_at =
          root +
          heading * (reference[static_cast<size_t>(head)].translation - root);
      v1::Pose* start = request.mutable_start_pose();
      for (size_t j = 0; j < rig.rest.size(); ++j) {
        const Quaterniond q =
            j == 0 ? Quaterniond((heading * rig.rest[0].rotation).normalized())
                   : rig.rest[j].rotation;
        v1::Quat* out = start->add_rotations();
        out->set_w(q.w());
        out->set_x(q.x());
        out->set_y(q.y());
        out->set_z(q.z());
      }
      start->mutable_root_translation()->set_x(root.x() + hmd.x() -
                                               head_at.x());
      start->mutable_root_translation()->set_y(root.y());
      start->mutable_root_translation()->set_z(root.z() + hmd.z() -
                                               head_at.z());
    }
    ASSERT_TRUE(stream->Send(request));
  }
  std::vector<v1::SolveResponse> answers;
  client::StreamResult answer;
  while (stream->Receive(&answer)) answers.push_back(answer.response);
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), static_cast<size_t>(kFrames));

  double worst_same = 0, worst_head = 0, worst_hand = 0, ankle_moved = 0;
  double hands_moved = 0, head_moved = 0, lowest_chest = 1e9;
  std::map<std::string, Vector3d> first;
  for (int f = 0; f < kFrames; ++f) {
    const size_t k = static_cast<size_t>(f);
    const LoParsed& got = received[k];
    ASSERT_FALSE(answers[k].has_error()) << answers[k].error().message();
    ASSERT_TRUE(got.has_time);
    EXPECT_EQ(got.time, performance.times[k]) << "frame " << f;
    EXPECT_EQ(got.bones.size(), bones.size()) << "frame " << f;
    // The bridge's bones against the direct stream's answer.
    std::vector<Transform> g(rig.names.size());
    ASSERT_EQ(answers[k].globals_size(), static_cast<int>(g.size()));
    for (size_t j = 0; j < g.size(); ++j) {
      const v1::Transform& t = answers[k].globals(static_cast<int>(j));
      g[j].translation = Vector3d(t.translation().x(), t.translation().y(),
                                  t.translation().z());
      g[j].rotation = Quaterniond(t.rotation().w(), t.rotation().x(),
                                  t.rotation().y(), t.rotation().z());
    }
    for (const auto& [bone, values] :
         ExpectedFromGlobals(rig, reference, bones, g)) {
      const auto it = got.bones.find(bone);
      ASSERT_NE(it, got.bones.end()) << bone << " missing, frame " << f;
      for (int c = 0; c < 3; ++c) {
        worst_same =
            std::max(worst_same, std::abs(values[static_cast<size_t>(c)] -
                                          it->second[static_cast<size_t>(c)]));
      }
      worst_same = std::max(worst_same, QuatDistance(values, it->second));
    }
    // Head and hands where the trackers are, by FK of the bones received.
    const std::map<std::string, Vector3d> at = BonePositions(got);
    Vector3d hmd, l, r;
    Quaterniond unused;
    FromUnity(performance.hmd[k], &hmd, &unused);
    FromUnity(performance.left[k], &l, &unused);
    FromUnity(performance.right[k], &r, &unused);
    worst_head = std::max(worst_head, (at.at("Head") - hmd).norm());
    worst_hand = std::max({worst_hand, (at.at("LeftHand") - l).norm(),
                           (at.at("RightHand") - r).norm()});
    if (f == 0) first = at;
    for (const char* foot : {"LeftFoot", "RightFoot"}) {
      ankle_moved =
          std::max(ankle_moved, (at.at(foot) - first.at(foot)).norm());
    }
    for (const char* hand : {"LeftHand", "RightHand"}) {
      hands_moved =
          std::max(hands_moved, (at.at(hand) - first.at(hand)).norm());
    }
    head_moved =
        std::max(head_moved, (at.at("Head") - first.at("Head")).norm());
    lowest_chest =
        std::min(lowest_chest, at.at("Chest").y() - at.at("Hips").y());
  }
  std::printf(
      "trackers: %d frames; bridge vs direct SolveStream worst %.3g; head "
      "%.3g m and hands %.3g m from their trackers; ankles moved %.3g m "
      "while the hands moved %.3g m and the head %.3g m; chest above the "
      "pelvis by %.3f m at least\n",
      kFrames, worst_same, worst_head, worst_hand, ankle_moved, hands_moved,
      head_moved, lowest_chest);
  EXPECT_LE(worst_same, 1e-5);
  EXPECT_LE(worst_head, 1e-3);
  EXPECT_LE(worst_hand, 1e-3);
  EXPECT_LT(ankle_moved, 0.01);
  EXPECT_GT(hands_moved, 0.1) << "the trackers hardly moved";
  EXPECT_GT(lowest_chest, 0);

  EXPECT_EQ(counts.receive.frames, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.frames_out, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.frames_superseded, 0u);
  EXPECT_EQ(counts.frames_skipped, 0u);
  EXPECT_EQ(counts.frames_errors, 0u);
  EXPECT_EQ(counts.receive.tracker, static_cast<uint64_t>(4 * kFrames));
  EXPECT_EQ(counts.trackers_applied, static_cast<uint64_t>(3 * kFrames));
  EXPECT_EQ(counts.trackers_unknown_serial, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.bone, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.root, static_cast<uint64_t>(kFrames));
  EXPECT_EQ(counts.receive.bad_arguments, 0u);
}

TEST_F(VmcTest, TrackerBadInputIsCountedAndNeverStalls) {
  client::VmcBridgeOptions options;
  options.target =
      absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid_limited.skeleton.json");
  options.trackers = true;
  options.assignment.left_hand = "LEFT";
  options.assignment.right_hand = "RIGHT";
  std::unique_ptr<client::VmcBridge> bridge = StartBridge(options);
  ASSERT_NE(bridge, nullptr);
  const int port = bridge->port();
  const Rig rig = RigOf(LimitedHumanoid());
  const Vector3d head =
      Fk(rig.parents, rig.rest)[static_cast<size_t>(rig.Find("head"))]
          .translation;
  const Floats7 hmd = ToUnity(head, Quaterniond::Identity());
  // Named by flag: the left hand on the performer's right side (-X) is
  // still the left hand (the hands crossed in front).
  const Vector3d left_at = head + Vector3d(-0.1, -0.5, 0.35);
  const Floats7 left = ToUnity(left_at, Quaterniond::Identity());
  const Floats7 right =
      ToUnity(head + Vector3d(0.1, -0.5, 0.35), Quaterniond::Identity());
  const auto frame = [&](float t) {
    osc::Writer w;
    w.OpenBundle();
    w.Message("/VMC/Ext/T").Float(t);
    const auto put = [&](const char* address, const char* serial,
                         const Floats7& v) {
      w.Message(address).String(serial);
      for (const float x : v) w.Float(x);
    };
    put("/VMC/Ext/Hmd/Pos", "HMD", hmd);
    put("/VMC/Ext/Con/Pos", "LEFT", left);
    put("/VMC/Ext/Con/Pos", "RIGHT", right);
    w.CloseBundle();
    return w.bytes();
  };
  LoParser lo;
  std::string bytes;
  LoParsed parsed;
  in_.SendTo(port, frame(0));
  ASSERT_TRUE(out_.Receive(&bytes));
  ASSERT_TRUE(lo.Parse(bytes, &parsed));
  std::map<std::string, Vector3d> at = BonePositions(parsed);
  EXPECT_LT((at.at("LeftHand") - left_at).norm(), 1e-3);

  // Wrong argument types, too few, NaN, a zero quaternion, a number for the
  // serial: counted, no frame. An unknown serial alone: a frame without a
  // goal, not sent. A third controller: unknown.
  osc::Writer w;
  const auto tracker = [&](const char* address) -> osc::Writer& {
    w.Clear();
    return w.Message(address).String("HMD");
  };
  tracker("/VMC/Ext/Hmd/Pos").Int(0).Int(1).Int(0).Int(0).Int(0).Int(0).Int(1);
  in_.SendTo(port, w.bytes());
  tracker("/VMC/Ext/Con/Pos").Float(0).Float(1).Float(0);
  in_.SendTo(port, w.bytes());
  tracker("/VMC/Ext/Tra/Pos")
      .Float(NAN)
      .Float(1)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(1);
  in_.SendTo(port, w.bytes());
  tracker("/VMC/Ext/Hmd/Pos")
      .Float(0)
      .Float(1)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0);
  in_.SendTo(port, w.bytes());
  w.Clear();
  w.Message("/VMC/Ext/Hmd/Pos")
      .Int(7)
      .Float(0)
      .Float(1)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(1);
  in_.SendTo(port, w.bytes());
  w.Clear();
  w.Message("/VMC/Ext/Tra/Pos")
      .String("LHR-NOBODY")
      .Float(0)
      .Float(1)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(1);
  in_.SendTo(port, w.bytes());
  w.Clear();
  w.Message("/VMC/Ext/Con/Pos")
      .String("THIRD")
      .Float(0)
      .Float(1)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(0)
      .Float(1);
  in_.SendTo(port, w.bytes());
  EXPECT_FALSE(out_.Receive(&bytes, 200)) << "a frame without a goal went out";
  // Still answering.
  in_.SendTo(port, frame(1 / 60.f));
  ASSERT_TRUE(out_.Receive(&bytes)) << "the bridge stalled";
  ASSERT_TRUE(lo.Parse(bytes, &parsed));
  EXPECT_EQ(parsed.time, 1 / 60.f);

  const client::VmcBridgeCounts c = CountsAfter(*bridge, 2);
  EXPECT_EQ(c.receive.bad_arguments, 5u);
  EXPECT_EQ(c.receive.packets_ok, 2u + 7u);
  EXPECT_EQ(c.trackers_applied, 6u);
  EXPECT_EQ(c.trackers_unknown_serial, 2u);
  EXPECT_EQ(c.frames_no_goal, 2u);
  EXPECT_EQ(c.frames_out, 2u);
  const std::string text = bridge->PrometheusText();
  EXPECT_THAT(text, HasSubstr("reach_vmc_messages_total{kind=\"tracker_"
                              "unknown_serial\"} 2\n"));
  EXPECT_THAT(
      text, HasSubstr("reach_vmc_messages_total{kind=\"bad_arguments\"} 5\n"));
  EXPECT_TRUE(bridge->Stop().ok());
}

// docs/vmc.md's tracker command, as written plus where to listen and send.
TEST_F(VmcTest, ReachVmcTrackersCommand) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string addr = server_.address();
  const std::string target =
      absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid_limited.skeleton.json");
  const std::string send = absl::StrCat("127.0.0.1:", out_.port());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[0]);
    execl(REACH_CLI_BINARY, REACH_CLI_BINARY, "--addr", addr.c_str(), "vmc",
          "--trackers", "--to", target.c_str(), "--listen", "127.0.0.1:0",
          "--send", send.c_str(), "--right-hand", "CON-R", "--quiet",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  // A failed assertion returns early: the bridge must not outlive the test.
  struct KillOnExit {
    pid_t pid;
    bool waited = false;
    ~KillOnExit() {
      if (waited) return;
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } child{pid};
  close(pipe_fds[1]);
  std::string out;
  char buffer[4096];
  while (out.find('\n') == std::string::npos) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 20000), 0) << "no start line: " << out;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    ASSERT_GT(n, 0) << out;
    out.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_THAT(out, HasSubstr("head=head, left hand=l_wrist, right "
                             "hand=r_wrist, pelvis=hips, left foot=l_ankle, "
                             "right foot=r_ankle"));
  const std::string listening = "listening on 127.0.0.1:";
  const size_t at = out.find(listening);
  ASSERT_NE(at, std::string::npos) << out;
  const int port = std::atoi(out.c_str() + at + listening.size());
  ASSERT_GT(port, 0) << out;
  const Rig rig = RigOf(LimitedHumanoid());
  const Vector3d head =
      Fk(rig.parents, rig.rest)[static_cast<size_t>(rig.Find("head"))]
          .translation;
  LoParser lo;
  std::string bytes;
  for (int f = 0; f < 10; ++f) {
    const Floats7 hmd = ToUnity(head, Quaterniond::Identity());
    const Floats7 hand = ToUnity(head + Vector3d(-0.2, -0.4, 0.3 + 0.01 * f),
                                 Quaterniond::Identity());
    osc::Writer w;
    w.OpenBundle();
    w.Message("/VMC/Ext/T").Float(static_cast<float>(f) / 60.f);
    w.Message("/VMC/Ext/Hmd/Pos").String("HMD");
    for (const float x : hmd) w.Float(x);
    w.Message("/VMC/Ext/Con/Pos").String("CON-R");
    for (const float x : hand) w.Float(x);
    w.Message("/VMC/Ext/Tra/Pos").String("LHR-1");  // Named by no flag.
    for (const float x : hand) w.Float(x);
    w.CloseBundle();
    in_.SendTo(port, w.bytes());
    ASSERT_TRUE(out_.Receive(&bytes)) << "frame " << f;
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed));
    EXPECT_EQ(parsed.time, static_cast<float>(f) / 60.f);
    const std::map<std::string, Vector3d> bones = BonePositions(parsed);
    EXPECT_LT(
        (bones.at("RightHand") - (head + Vector3d(-0.2, -0.4, 0.3 + 0.01 * f)))
            .norm(),
        1e-3);
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  child.waited = true;
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
    out.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_THAT(out, HasSubstr("trackers: 20 applied, 10 unknown serials"));
  EXPECT_THAT(out, HasSubstr("10 out"));

  // A tracker's serial without --trackers: a usage error.
  const std::string command =
      absl::StrCat(REACH_CLI_BINARY, " --addr ", addr, " vmc --to ", target,
                   " --pelvis LHR-1 --duration 1 >/dev/null 2>&1");
  const int code = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(code));
  EXPECT_EQ(WEXITSTATUS(code), 2);
}

TEST_F(VmcTest, TrackerModeNeedsAHumanoid) {
  client::VmcBridgeOptions options;
  options.listen = "127.0.0.1:0";
  options.send_to = absl::StrCat("127.0.0.1:", out_.port());
  options.target = absl::StrCat(REACH_TEST_DATA, "/urdf/panda.urdf");
  options.trackers = true;
  absl::StatusOr<std::unique_ptr<client::VmcBridge>> bridge =
      client::VmcBridge::Start(client_, options);
  ASSERT_FALSE(bridge.ok());
  EXPECT_EQ(bridge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bridge.status().message(),
              HasSubstr("panda.urdf: tracker mode needs a humanoid"));
  // A bridge that fails to start ends cleanly (no threads to join), in
  // either mode.
  options.trackers = false;
  options.target = absl::StrCat(::testing::TempDir(), "/no_such_rig.json");
  bridge = client::VmcBridge::Start(client_, options);
  ASSERT_FALSE(bridge.ok());
  EXPECT_THAT(bridge.status().message(), HasSubstr("no_such_rig.json"));
}

// ---------------------------------------------------------------------
// VMC v2.1's Root/Pos scale and offset, the trackers' offsets on the body,
// and a bridge that outlives a server restart.

// One OSC bundle of messages (address, a string, floats), by liblo.
std::string LoBundle(
    const std::vector<std::tuple<std::string, std::string, std::vector<float>>>&
        messages) {
  lo_bundle bundle = lo_bundle_new(LO_TT_IMMEDIATE);
  for (const auto& [path, name, floats] : messages) {
    lo_message m = lo_message_new();
    if (!name.empty()) lo_message_add_string(m, name.c_str());
    for (const float v : floats) lo_message_add_float(m, v);
    lo_bundle_add_message(bundle, path.c_str(), m);
  }
  size_t size = 0;
  void* data = lo_bundle_serialise(bundle, nullptr, &size);
  std::string bytes(static_cast<const char*>(data), size);
  free(data);
  lo_bundle_free_recursive(bundle);
  return bytes;
}

TEST(VmcReceiverTest, RootPosScaleAndOffsetPlaceTheModelAsTheSpecSays) {
  // The spec (protocol.vmc.info, Marionette: Root Transform, v2.1): Root/Pos
  // (string)name p.xyz q.xyzw s.xyz o.xyz, s and o the MR composition's
  // scale and offset that fit the avatar to the performer's real body; the
  // reference receiver places the model at p - o (world), turned by q,
  // scaled by 1/s. The hips (a Bone/Pos local to the model) are then at
  // model * hips. The bridge keeps the source skeleton's proportions, so it
  // must see that model with its scale divided out (times s): the hips'
  // place in skeleton units. Computed here with Eigen's affine transforms
  // in Unity's frame, then mirrored to the right-handed one.
  const Rig vmc = RigOf(DefaultHumanoid());
  vmc::VmcReceiver receiver(vmc.names, vmc.rest);
  const Eigen::Vector3f p(0.4f, 0.05f, 1.2f), o(0.3f, -0.1f, 0.25f);
  const Eigen::Quaternionf q =
      Eigen::Quaternionf(Eigen::AngleAxisf(0.7f, Eigen::Vector3f::UnitY()));
  const Eigen::Vector3f hips(0.02f, 0.93f, -0.01f);
  const Eigen::Quaternionf hips_turn =
      Eigen::Quaternionf(Eigen::AngleAxisf(0.2f, Eigen::Vector3f::UnitX()));
  const float s = 1.25f;
  const auto root = [&](int extra) {
    std::vector<float> v = {p.x(), p.y(), p.z(), q.x(), q.y(), q.z(), q.w()};
    const float more[] = {s, s, s, o.x(), o.y(), o.z()};
    v.insert(v.end(), more, more + extra);
    return v;
  };
  const std::vector<float> hips_bone = {
      hips.x(),      hips.y(),      hips.z(),     hips_turn.x(),
      hips_turn.y(), hips_turn.z(), hips_turn.w()};
  const auto send = [&](int extra) {
    const std::string bytes =
        LoBundle({{"/VMC/Ext/Root/Pos", "root", root(extra)},
                  {"/VMC/Ext/Bone/Pos", "Hips", hips_bone}});
    return receiver.Apply(reinterpret_cast<const uint8_t*>(bytes.data()),
                          bytes.size());
  };
  const auto right_handed = [](const Eigen::Vector3f& u) {
    return Vector3d(-u.x(), u.y(), u.z());
  };

  ASSERT_EQ(send(6), vmc::VmcReceiver::Outcome::kFrame);
  const Eigen::Affine3f model =
      Eigen::Translation3f(p - o) * Eigen::Affine3f(q) *
      Eigen::Scaling(Eigen::Vector3f::Constant(1 / s));
  const Eigen::Vector3f world = model * hips;
  const Vector3d want = right_handed(world * s);
  EXPECT_LT((receiver.frame().root_translation - want).norm(), 1e-5)
      << receiver.frame().root_translation.transpose() << " vs "
      << want.transpose();
  const Eigen::Quaternionf turn = q * hips_turn;
  const Quaterniond want_turn(turn.w(), turn.x(), -turn.y(), -turn.z());
  EXPECT_LT(receiver.frame().rotations[0].angularDistance(want_turn), 1e-6);
  EXPECT_EQ(receiver.counts().root_scaled, 1u);
  // Scale 1 and no offset: the v2.0 root.
  const Eigen::Affine3f plain = Eigen::Translation3f(p) * Eigen::Affine3f(q);
  ASSERT_EQ(send(0), vmc::VmcReceiver::Outcome::kFrame);
  const Vector3d v20 = receiver.frame().root_translation;
  EXPECT_LT((v20 - right_handed(plain * hips)).norm(), 1e-5);
  // Part of the v2.1 arguments: extra arguments, ignored (v2.0).
  ASSERT_EQ(send(3), vmc::VmcReceiver::Outcome::kFrame);
  EXPECT_LT((receiver.frame().root_translation - v20).norm(), 1e-9);
  EXPECT_EQ(receiver.counts().root_scaled, 1u);
  EXPECT_EQ(receiver.counts().bad_arguments, 0u);
  // A scale that is not positive: the message is bad, the root unchanged.
  for (const float bad : {0.f, -1.f}) {
    std::vector<float> v = root(6);
    v[8] = bad;
    const std::string bytes =
        LoBundle({{"/VMC/Ext/Root/Pos", "root", v},
                  {"/VMC/Ext/Bone/Pos", "Hips", hips_bone}});
    ASSERT_EQ(receiver.Apply(reinterpret_cast<const uint8_t*>(bytes.data()),
                             bytes.size()),
              vmc::VmcReceiver::Outcome::kFrame);
    EXPECT_LT((receiver.frame().root_translation - v20).norm(), 1e-9);
  }
  EXPECT_EQ(receiver.counts().bad_arguments, 2u);
  EXPECT_EQ(receiver.counts().root, 3u);
}

TEST(TrackerOffsetsTest, FileIsReadAndErrorsNameTheKeyAndField) {
  absl::StatusOr<vmc::TrackerOffsets> offsets = vmc::ParseTrackerOffsets(
      R"({"head": {"position": [0, -0.08, -0.1]},
          "LHR-CON-B": {"position": [0.01, 0, -0.12],
                        "rotation": [0, 0.7071068, 0, 0.7071068]}})",
      "f.json");
  ASSERT_TRUE(offsets.ok()) << offsets.status();
  // Unity's axes -> right-handed: x mirrored, the rotation's y and z.
  const Transform& head =
      offsets->by_part[static_cast<size_t>(vmc::BodyPart::kHead)];
  EXPECT_LT((head.translation - Vector3d(0, -0.08, -0.1)).norm(), 1e-12);
  ASSERT_TRUE(offsets->by_serial.count("LHR-CON-B"));
  const Transform& b = offsets->by_serial.at("LHR-CON-B");
  EXPECT_LT((b.translation - Vector3d(-0.01, 0, -0.12)).norm(), 1e-12);
  EXPECT_NEAR(b.rotation.y(), -0.7071068, 1e-6);
  EXPECT_EQ(offsets->by_part[static_cast<size_t>(vmc::BodyPart::kLeftHand)]
                .translation.norm(),
            0);
  for (const auto& [text, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"[1]", "f.json: expected a JSON object"},
           {"{\"head\": 1}", "f.json: \"head\": expected {"},
           {"{\"head\": {\"position\": [0, 1]}}",
            "f.json: \"head\".position: expected 3 numbers"},
           {"{\"head\": {\"rotation\": [0, 0, 0, \"w\"]}}",
            "f.json: \"head\".rotation: expected 4 finite numbers"},
           {"{\"head\": {\"rotation\": [0, 0, 0, 0]}}",
            "f.json: \"head\".rotation: a zero quaternion"},
           {"{\"left_hand\": {\"scale\": 2}}",
            "f.json: \"left_hand\".scale: unknown field"},
           {"{\"\": {}}", "f.json: \"\": a serial or body part is needed"},
       }) {
    const absl::StatusOr<vmc::TrackerOffsets> bad =
        vmc::ParseTrackerOffsets(text, "f.json");
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(message))
        << text;
  }
}

TEST_F(VmcTest, OffsetTrackersStillPutTheHeadAndHandsOnThePerformers) {
  // Real trackers do not sit on the joints: the HMD is in front of and
  // above the head joint and pitched, controllers are held ahead of the
  // wrists and rolled. The performance's head and hands (the joints) are
  // turned into such tracker poses with the test's own offsets; with the
  // same offsets in a --tracker-offsets file (the head and left hand by
  // body part, the right controller by its serial) the rig's head and
  // hands must be where the performer's are, as close as with trackers on
  // the joints (TrackersDriveTheLimitedHumanoid); without the file, off by
  // about the offsets.
  const Rig rig = RigOf(LimitedHumanoid());
  const std::vector<Transform> reference = Fk(rig.parents, rig.rest);
  const size_t head = static_cast<size_t>(rig.Find("head"));
  const size_t l_ankle = static_cast<size_t>(rig.Find("l_ankle"));
  constexpr int kFrames = 120;
  const TrackerPerformance joints = MakeTrackerPerformance(
      absl::StrCat(REACH_TEST_DATA, "/mocap/cmu_141_16_wave.bvh"), kFrames, 120,
      reference[head].translation.y() - reference[l_ankle].translation.y());
  // The offsets as a user writes them (Unity's axes, the tracker's frame).
  const Floats7 head_offset = {0, -0.09f, -0.11f,        std::sin(0.1f),
                               0, 0,      std::cos(0.1f)};  // Pitched.
  const Floats7 left_offset = {0.03f, -0.02f,          -0.1f,          0,
                               0,     std::sin(0.25f), std::cos(0.25f)};
  const Floats7 right_offset = {-0.03f, -0.02f,           -0.1f,          0,
                                0,      -std::sin(0.25f), std::cos(0.25f)};
  const std::string offsets_file = absl::StrCat(
      ::testing::TempDir(), "/reach_tracker_offsets_", getpid(), ".json");
  {
    const auto entry = [](const Floats7& v) {
      return absl::StrCat("{\"position\": [", v[0], ", ", v[1], ", ", v[2],
                          "], \"rotation\": [", v[3], ", ", v[4], ", ", v[5],
                          ", ", v[6], "]}");
    };
    std::ofstream out(offsets_file);
    out << "{\"head\": " << entry(head_offset)
        << ", \"left_hand\": " << entry(left_offset)
        << ", \"LHR-CON-B\": " << entry(right_offset) << "}\n";
  }
  absl::Cleanup remove = [&] { std::remove(offsets_file.c_str()); };
  // joint = tracker * offset, so tracker = joint * offset^-1 (right-handed).
  const auto tracker = [](const Floats7& joint, const Floats7& offset) {
    Vector3d jp, op;
    Quaterniond jq, oq;
    FromUnity(joint, &jp, &jq);
    FromUnity(offset, &op, &oq);
    const Quaterniond tq = (jq * oq.conjugate()).normalized();
    return ToUnity(jp - tq * op, tq);
  };
  TrackerPerformance worn = joints;
  for (size_t k = 0; k < static_cast<size_t>(kFrames); ++k) {
    worn.hmd[k] = tracker(joints.hmd[k], head_offset);
    worn.left[k] = tracker(joints.left[k], left_offset);
    worn.right[k] = tracker(joints.right[k], right_offset);
  }

  // Worst distance of the rig's head and hands (FK of the bones received)
  // from the performer's joints.
  const auto run = [&](bool with_offsets, double* worst_head,
                       double* worst_hand) {
    client::VmcBridgeOptions options;
    options.target =
        absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid_limited.skeleton.json");
    options.trackers = true;
    if (with_offsets) {
      const absl::StatusOr<vmc::TrackerOffsets> offsets =
          vmc::ParseTrackerOffsets(Slurp(offsets_file), offsets_file);
      ASSERT_TRUE(offsets.ok()) << offsets.status();
      options.tracker_offsets = *offsets;
    }
    std::unique_ptr<client::VmcBridge> bridge = StartBridge(options);
    ASSERT_NE(bridge, nullptr);
    LoParser lo;
    *worst_head = *worst_hand = 0;
    for (size_t k = 0; k < static_cast<size_t>(kFrames); ++k) {
      in_.SendTo(bridge->port(),
                 LoTrackerFrame(worn.times[k], worn.hmd[k], worn.left[k],
                                worn.right[k], false));
      std::string bytes;
      ASSERT_TRUE(out_.Receive(&bytes)) << "frame " << k << " not answered";
      LoParsed parsed;
      ASSERT_TRUE(lo.Parse(bytes, &parsed));
      const std::map<std::string, Vector3d> at = BonePositions(parsed);
      Vector3d h, l, r;
      Quaterniond unused;
      FromUnity(joints.hmd[k], &h, &unused);
      FromUnity(joints.left[k], &l, &unused);
      FromUnity(joints.right[k], &r, &unused);
      *worst_head = std::max(*worst_head, (at.at("Head") - h).norm());
      *worst_hand = std::max({*worst_hand, (at.at("LeftHand") - l).norm(),
                              (at.at("RightHand") - r).norm()});
    }
    const client::VmcBridgeCounts c =
        CountsAfter(*bridge, static_cast<uint64_t>(kFrames));
    EXPECT_EQ(c.trackers_applied, static_cast<uint64_t>(3 * kFrames));
    ASSERT_TRUE(bridge->Stop().ok());
  };
  double head_with = 0, hand_with = 0, head_without = 0, hand_without = 0;
  run(true, &head_with, &hand_with);
  run(false, &head_without, &hand_without);
  std::printf(
      "offset trackers, %d frames: head %.3g m and hands %.3g m from the "
      "performer's with --tracker-offsets; %.3g m and %.3g m without\n",
      kFrames, head_with, hand_with, head_without, hand_without);
  EXPECT_LE(head_with, 1e-3);
  EXPECT_LE(hand_with, 1e-3);
  EXPECT_GT(head_without, 0.1);
  EXPECT_GT(hand_without, 0.05);
}

// A reach-server process on the default SQLite registry in `data_dir` (it
// survives a restart), its log in data_dir/server.log.
class ServerChild {
 public:
  ServerChild(const std::string& data_dir, int port) : data_dir_(data_dir) {
    std::vector<std::string> args = {
        REACH_SERVER_BINARY,  absl::StrCat("--listen=127.0.0.1:", port),
        "--metrics_listen=",  "--http_listen=",
        "--solver_threads=1", "--data_dir=" + data_dir};
    const std::string log = data_dir + "/server.log";
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (absl::Now() < give_up) {
      const std::string text = Slurp(log);
      const size_t at = text.find("(port ");
      if (at != std::string::npos &&
          text.find("config:") != std::string::npos) {
        port_ = std::atoi(text.c_str() + at + 6);
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  ~ServerChild() { Kill(); }
  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int port() const { return port_; }
  std::string log() const { return Slurp(data_dir_ + "/server.log"); }

 private:
  std::string data_dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(VmcRestartTest, ReachVmcCarriesOnWhenItsServerIsKilledAndRestarted) {
  // `reach vmc` against a real reach-server process; mid-performance the
  // server is killed (SIGKILL) and started again on the same port and
  // registry. The bridge keeps receiving meanwhile, reopens its stream
  // (the frames not yet answered sent again) and the receiver gets frames
  // again soon after the restart, in the sender's order, each once.
  char pattern[] = "/tmp/reach_vmc_restart_XXXXXX";
  const std::string dir = mkdtemp(pattern);
  // Declared before the server: removed after it has gone.
  absl::Cleanup remove_dir = [dir] {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  };
  auto server = std::make_unique<ServerChild>(dir, 0);
  const int server_port = server->port();
  ASSERT_GT(server_port, 0) << server->log();
  Udp in, out;
  const Rig vmc = RigOf(DefaultHumanoid());
  const std::string status_file = dir + "/status.prom";
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string addr = absl::StrCat("127.0.0.1:", server_port);
  const std::string target =
      absl::StrCat(REACH_EXAMPLES_DIR, "/humanoid.skeleton.json");
  const std::string send = absl::StrCat("127.0.0.1:", out.port());
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
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
  absl::Cleanup stop_bridge = [pid] { kill(pid, SIGKILL); };
  std::string text;
  char buffer[4096];
  while (text.find('\n') == std::string::npos) {
    pollfd p{pipe_fds[0], POLLIN, 0};
    ASSERT_GT(poll(&p, 1, 20000), 0) << "no start line: " << text;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    ASSERT_GT(n, 0) << text;
    text.append(buffer, static_cast<size_t>(n));
  }
  const std::string listening = "listening on 127.0.0.1:";
  const size_t at = text.find(listening);
  ASSERT_NE(at, std::string::npos) << text;
  const int port = std::atoi(text.c_str() + at + listening.size());

  // The performer: 60 Hz for 4 s, a rest-pose frame each (its time is what
  // the receiver checks), from its own thread.
  constexpr int kFrames = 240;
  std::atomic<int> sent{0};
  std::thread performer([&] {
    std::vector<Floats7> bones(vmc.names.size());
    for (size_t b = 0; b < bones.size(); ++b) {
      const Vector3d p = vmc.rest[b].translation;
      bones[b] = {static_cast<float>(-p.x()),
                  static_cast<float>(p.y()),
                  static_cast<float>(p.z()),
                  0,
                  0,
                  0,
                  1};
    }
    const absl::Time begin = absl::Now();
    for (int f = 0; f < kFrames; ++f) {
      absl::SleepFor(begin + absl::Seconds(f / 60.0) - absl::Now());
      in.SendTo(port, LoFrame(vmc, static_cast<float>(f) / 60.f, bones, false));
      sent = f + 1;
    }
  });
  // The receiver, from this thread; the server killed at 1 s and started
  // again 0.5 s later.
  LoParser lo;
  std::vector<float> times;
  std::vector<absl::Time> arrived;
  const absl::Time begin = absl::Now();
  absl::Time killed_at = absl::InfiniteFuture();
  absl::Time restarted_at = absl::InfiniteFuture();
  while (absl::Now() - begin < absl::Seconds(7)) {
    if (killed_at == absl::InfiniteFuture() &&
        absl::Now() - begin > absl::Seconds(1)) {
      server->Kill();
      server.reset();
      killed_at = absl::Now();
    }
    if (server == nullptr && restarted_at == absl::InfiniteFuture() &&
        absl::Now() - killed_at > absl::Milliseconds(500)) {
      server = std::make_unique<ServerChild>(dir, server_port);
      ASSERT_EQ(server->port(), server_port) << server->log();
      restarted_at = absl::Now();
    }
    std::string bytes;
    if (!out.Receive(&bytes, 50)) continue;
    LoParsed parsed;
    ASSERT_TRUE(lo.Parse(bytes, &parsed));
    times.push_back(parsed.time);
    arrived.push_back(absl::Now());
    if (parsed.time == static_cast<float>(kFrames - 1) / 60.f) break;
  }
  performer.join();
  ASSERT_NE(restarted_at, absl::InfiniteFuture());
  // Frames before the kill, none while the server is down (those sent on
  // come out after the restart), then again.
  absl::Time first_after = absl::InfiniteFuture();
  size_t before = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    if (arrived[k] < killed_at) ++before;
    if (arrived[k] >= restarted_at && first_after == absl::InfiniteFuture()) {
      first_after = arrived[k];
    }
  }
  const absl::Duration gap = first_after - restarted_at;
  std::printf(
      "server killed after %zu frames out, restarted %.0f ms later; frames "
      "out again %.0f ms after the restart; %zu of %d frames out in all, "
      "the last at %.4f s\n",
      before, absl::ToDoubleMilliseconds(restarted_at - killed_at),
      absl::ToDoubleMilliseconds(gap), times.size(), kFrames,
      times.empty() ? -1.0 : times.back());
  EXPECT_GT(before, 30u);
  ASSERT_NE(first_after, absl::InfiniteFuture()) << "no frame after restart";
  // The bar the bridge is built for is ~1 s (a 250 ms reconnect backoff;
  // 0.24-0.30 s measured); this wide one, for a loaded machine, still
  // catches a bridge that waits for gRPC's 5 s backup poller or its
  // default backoff, or never comes back.
  EXPECT_LT(gap, absl::Seconds(3));
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_TRUE(std::adjacent_find(times.begin(), times.end()) == times.end())
      << "a frame came out twice";
  ASSERT_FALSE(times.empty());
  EXPECT_EQ(times.back(), static_cast<float>(kFrames - 1) / 60.f);

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  std::move(stop_bridge).Cancel();
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0) {
    text.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 0) << text;
  EXPECT_THAT(text, HasSubstr(absl::StrCat(kFrames, " ok, 0 malformed")));
  const std::string prometheus = Slurp(status_file);
  EXPECT_THAT(prometheus, HasSubstr("reach_vmc_stream_resumes_total "));
  EXPECT_THAT(prometheus, Not(HasSubstr("reach_vmc_stream_resumes_total 0\n")));
  EXPECT_THAT(prometheus,
              HasSubstr(absl::StrCat("reach_vmc_frames_total{result=\"out\"} ",
                                     times.size(), "\n")));
  std::printf("%s\n", text.c_str());
}

TEST_F(VmcTest, TrackerSessionAgainstThePerformer) {
  // A measurement (issue 40's sparse-tracker figures for issue 44's
  // tracker-only session): each clip of tests/data/mocap as an HMD and two
  // controllers (every clip frame from 1 at 30 Hz, standing in place,
  // scaled to the limited humanoid), through `reach vmc --trackers`
  // frame by frame; the rig's body (FK of the bones received) against the
  // performer's:
  // - effectors: head and hands from their trackers (p99, max);
  // - pelvis height: the rig's hips' rise or drop from their first frame
  //   against the performer's (scaled), max and mean;
  // - heading: the hip line's (left - right hip socket) angle about the
  //   vertical against the performer's, max;
  // - chest below the pelvis: frames.
  // Only the effectors' bar is asserted (issue 40's sparse mode: p99 <=
  // 1 mm), on every clip but the jump: without foot trackers the rig's
  // feet stand and step after the body (the hop's turn on one leg was out
  // of the hands' reach before they stepped), but the jump's head rises
  // beyond the standing reach (p99 1.9 mm). The rest is reported.
  const Rig rig = RigOf(LimitedHumanoid());
  const std::vector<Transform> reference = Fk(rig.parents, rig.rest);
  const double height =
      reference[static_cast<size_t>(rig.Find("head"))].translation.y() -
      reference[static_cast<size_t>(rig.Find("l_ankle"))].translation.y();
  std::printf("%-28s %6s %12s %12s %12s %12s %9s %6s\n",
              "clip (limited humanoid)", "frames", "eff p99 mm", "eff max mm",
              "pelv max cm", "pelv mean cm", "heading", "chest<");
  for (const auto& [name, on_the_spot] :
       std::vector<std::pair<const char*, bool>>{
           {"cmu_01_01_jump", false},
           {"cmu_02_01_walk", true},
           {"cmu_06_15_shoot_ccrig", true},
           {"cmu_131_03_hop", true},
           {"cmu_141_16_wave", true}}) {
    const std::string file =
        absl::StrCat(REACH_TEST_DATA, "/mocap/", name, ".bvh");
    absl::StatusOr<import::BvhClip> clip = import::ImportBvh(file);
    ASSERT_TRUE(clip.ok()) << clip.status();
    const int step = std::max(
        1, static_cast<int>(std::lround(1.0 / (30 * clip->frame_time))));
    const TrackerPerformance p =
        MakeTrackerPerformance(file, clip->num_frames, 30, height, 1, step);
    const size_t frames = p.times.size();
    std::unique_ptr<client::VmcBridge> bridge =
        StartBridge(LimitedTrackerOptions());
    ASSERT_NE(bridge, nullptr);
    std::vector<TrackerSessionFrame> session;
    ASSERT_TRUE(RunTrackerSession(in_, out_, *bridge, p, &session)) << name;
    double pelvis_max = 0, pelvis_sum = 0, heading_max = 0;
    int chest_below = 0;
    double rig_hips0 = 0, performer_hips0 = 0;
    for (size_t k = 0; k < frames; ++k) {
      const std::map<std::string, Vector3d>& at = session[k].at;
      if (k == 0) {
        rig_hips0 = at.at("Hips").y();
        performer_hips0 = p.hips[0].y();
      }
      const double pelvis = std::abs((at.at("Hips").y() - rig_hips0) -
                                     (p.hips[k].y() - performer_hips0));
      pelvis_max = std::max(pelvis_max, pelvis);
      pelvis_sum += pelvis;
      const Vector3d rig_line = at.at("LeftUpperLeg") - at.at("RightUpperLeg");
      const Vector3d performer_line = p.left_hip[k] - p.right_hip[k];
      const double heading = std::abs(
          std::remainder(std::atan2(rig_line.z(), rig_line.x()) -
                             std::atan2(performer_line.z(), performer_line.x()),
                         2 * M_PI));
      heading_max = std::max(heading_max, heading);
      if (at.at("Chest").y() < at.at("Hips").y()) ++chest_below;
    }
    ASSERT_TRUE(bridge->Stop().ok());
    const auto [p99, worst] = TrackerErrorP99Max(session);
    std::printf("%-28s %6zu %12.3f %12.3f %12.2f %12.2f %8.1f° %6d\n", name,
                frames, 1e3 * p99, 1e3 * worst, 100 * pelvis_max,
                100 * pelvis_sum / static_cast<double>(frames),
                heading_max * 180 / M_PI, chest_below);
    if (on_the_spot) {
      EXPECT_LE(p99, 1e-3) << name;
    }
  }
}

TEST_F(VmcTest, TrackerSessionWalksAboutTheRoom) {
  // A VR player walking about the room: the CMU walk's head and hands as
  // an HMD and two controllers at 30 Hz, the hips' drift along the floor
  // kept (3 m of it), through `reach vmc --trackers` onto the limited
  // humanoid. No foot has a tracker: the feet stand and step after the
  // body (docs/full-body.md), so the head and hands are where their
  // trackers are on every frame (p99 within 1 mm), the rig's hips go
  // where the performer's go, one foot at a time leaves the floor, and
  // the feet end under the hips. Before the feet stepped, they stayed
  // where the session began: the hands 22 mm from their trackers (p99),
  // the hips 60 cm behind the performer's, a foot dragged 78 cm up.
  const Rig rig = RigOf(LimitedHumanoid());
  const std::vector<Transform> reference = Fk(rig.parents, rig.rest);
  const double height =
      reference[static_cast<size_t>(rig.Find("head"))].translation.y() -
      reference[static_cast<size_t>(rig.Find("l_ankle"))].translation.y();
  const double leg =
      (reference[static_cast<size_t>(rig.Find("l_hip"))].translation -
       reference[static_cast<size_t>(rig.Find("l_ankle"))].translation)
          .norm();
  const std::string file =
      absl::StrCat(REACH_TEST_DATA, "/mocap/cmu_02_01_walk.bvh");
  const TrackerPerformance p =
      MakeTrackerPerformance(file, 1000, 30, height, 1, 4, false);
  const size_t frames = p.times.size();
  ASSERT_GT(frames, 80u);
  std::unique_ptr<client::VmcBridge> bridge =
      StartBridge(LimitedTrackerOptions());
  ASSERT_NE(bridge, nullptr);
  std::vector<TrackerSessionFrame> session;
  ASSERT_TRUE(RunTrackerSession(in_, out_, *bridge, p, &session));
  double hips_off = 0, floor = 0, both_up = 0;
  for (size_t k = 0; k < frames; ++k) {
    const std::map<std::string, Vector3d>& at = session[k].at;
    Vector3d along = at.at("Hips") - p.hips[k];
    along.y() = 0;
    hips_off = std::max(hips_off, along.norm());
    const double lf = at.at("LeftFoot").y(), rf = at.at("RightFoot").y();
    if (k == 0) floor = std::min(lf, rf);
    both_up = std::max(both_up, std::min(lf, rf) - floor);
  }
  ASSERT_TRUE(bridge->Stop().ok());
  const auto [p99, worst] = TrackerErrorP99Max(session);
  const std::map<std::string, Vector3d>& last = session.back().at;
  Vector3d walked = p.hips.back() - p.hips.front();
  walked.y() = 0;
  std::printf(
      "walk about the room: %zu frames, %.2f m walked; head and hands p99 "
      "%.3f mm, max %.3f mm; hips %.1f cm from the performer's along the "
      "floor at most; the lower foot %.1f cm over the floor at most\n",
      frames, walked.norm(), 1e3 * p99, 1e3 * worst, 100 * hips_off,
      100 * both_up);
  EXPECT_GT(walked.norm(), 2.0);
  EXPECT_LE(p99, 1e-3);
  EXPECT_LE(hips_off, 0.3 * leg);
  EXPECT_LE(both_up, 0.06 * leg);
  for (const char* foot : {"LeftFoot", "RightFoot"}) {
    Vector3d under = last.at(foot) - last.at("Hips");
    under.y() = 0;
    EXPECT_LE(under.norm(), 0.6 * leg) << foot;
  }
}

TEST(TrackerOffsetsTest, ReadmeExampleAndTheFlag) {
  // docs/vmc.md's --tracker-offsets example, exactly as written there.
  const std::string readme =
      Slurp(absl::StrCat(REACH_EXAMPLES_DIR, "/../docs/vmc.md"));
  const size_t begin = readme.find("    {\"head\": {\"position\": [0, -0.09");
  ASSERT_NE(begin, std::string::npos);
  std::string example;
  for (const absl::string_view line :
       absl::StrSplit(absl::string_view(readme).substr(begin), '\n')) {
    if (!absl::StartsWith(line, "    ")) break;
    absl::StrAppend(&example, line.substr(4), "\n");
  }
  const absl::StatusOr<vmc::TrackerOffsets> offsets =
      vmc::ParseTrackerOffsets(example, "docs/vmc.md");
  ASSERT_TRUE(offsets.ok()) << offsets.status() << "\n" << example;
  EXPECT_TRUE(offsets->by_serial.count("LHR-CON-B"));
  EXPECT_NEAR(offsets->by_part[0].translation.z(), -0.11, 1e-12);

  // The flag: with --trackers only; a bad file is a file error naming it.
  const std::string file =
      absl::StrCat(::testing::TempDir(), "/reach_bad_offsets_", getpid());
  {
    std::ofstream out(file);
    out << "{\"head\": {\"position\": [0, 1]}}";
  }
  const auto run = [](const std::string& args, int* code) {
    const std::string command = absl::StrCat(
        REACH_CLI_BINARY, " --addr 127.0.0.1:1 vmc --to ", REACH_EXAMPLES_DIR,
        "/humanoid.skeleton.json ", args, " 2>&1");
    FILE* pipe = popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    size_t n;
    while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0)
      out.append(buffer, n);
    const int status = pclose(pipe);
    *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return out;
  };
  int code = 0;
  std::string out = run(absl::StrCat("--tracker-offsets ", file), &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("--tracker-offsets requires --trackers"));
  out = run(absl::StrCat("--trackers --tracker-offsets ", file), &code);
  EXPECT_EQ(code, 3) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("--tracker-offsets ", file,
                                          ": \"head\".position: expected 3 "
                                          "numbers")));
  out = run("--trackers --tracker-offsets /nonexistent/offsets.json", &code);
  EXPECT_EQ(code, 3) << out;
  EXPECT_THAT(out, HasSubstr("/nonexistent/offsets.json"));
  out = run("--reconnect-within -1", &code);
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("--reconnect-within"));
  std::remove(file.c_str());
}

}  // namespace
}  // namespace reach
