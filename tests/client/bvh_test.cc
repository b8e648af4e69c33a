#include "importers/bvh.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <random>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "importers/skeleton_file.h"
#include "solvers/pose.h"
#include "tests/testing/sweep.h"

namespace reach::import {
namespace {

using ::testing::HasSubstr;

std::string MocapPath(const std::string& name) {
  return absl::StrCat(REACH_TEST_DATA, "/mocap/", name);
}

std::string ReadOrDie(const std::string& path) {
  std::string text;
  const absl::Status s = ReadFile(path, &text);
  EXPECT_TRUE(s.ok()) << s;
  return text;
}

// The values of frame `frame`, read straight from the file's text.
std::vector<double> FrameValues(const std::string& text, int frame) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  size_t i = 0;
  while (!absl::StartsWith(lines[i], "Frame Time")) ++i;
  ++i;
  while (absl::StripAsciiWhitespace(lines[i]).empty()) ++i;
  std::vector<double> values;
  for (absl::string_view token :
       absl::StrSplit(lines[i + frame], absl::ByAnyChar(" \t\r"),
                      absl::SkipEmpty())) {
    double v;
    EXPECT_TRUE(absl::SimpleAtod(token, &v));
    values.push_back(v);
  }
  return values;
}

struct ClipFacts {
  const char* file;
  int joints;  // ROOT + JOINT + End Site.
  int frames;
  int channels;
  double frame_time;
  const char* left_hand;
  const char* right_foot;
};

// From the data folder's README (checked there by a separate parser).
constexpr ClipFacts kClips[] = {
    {"cmu_02_01_walk.bvh", 38, 344, 96, 0.0083333, "LeftHand", "RightFoot"},
    {"cmu_01_01_jump.bvh", 38, 2752, 96, 0.0083333, "LeftHand", "RightFoot"},
    {"cmu_131_03_hop.bvh", 38, 1102, 96, 0.0083333, "LeftWrist", "RightAnkle"},
    {"cmu_141_16_wave.bvh", 38, 299, 96, 0.008333, "LeftHand", "RightFoot"},
    {"cmu_06_15_shoot_ccrig.bvh", 141, 273, 303, 0.016667, "CC_Base_L_Hand",
     "CC_Base_R_Foot"},
};

const ChainDef* FindChain(const SkeletonDef& def, const std::string& name) {
  for (const ChainDef& c : def.chains) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(BvhImportTest, EveryMocapFileImports) {
  for (const ClipFacts& facts : kClips) {
    SCOPED_TRACE(facts.file);
    absl::StatusOr<BvhClip> clip = ImportBvh(MocapPath(facts.file));
    ASSERT_TRUE(clip.ok()) << clip.status();
    EXPECT_EQ(clip->skeleton.def.joints.size(), facts.joints);
    EXPECT_EQ(clip->num_frames, facts.frames);
    EXPECT_EQ(clip->num_channels, facts.channels);
    EXPECT_EQ(clip->values.size(),
              static_cast<size_t>(facts.frames) * facts.channels);
    EXPECT_DOUBLE_EQ(clip->frame_time, facts.frame_time);
    EXPECT_EQ(clip->skeleton.def.chains.size(), 4u);
    const ChainDef* arm = FindChain(clip->skeleton.def, "left_arm");
    const ChainDef* leg = FindChain(clip->skeleton.def, "right_leg");
    ASSERT_NE(arm, nullptr);
    ASSERT_NE(leg, nullptr);
    EXPECT_EQ(arm->tip, facts.left_hand);
    EXPECT_EQ(leg->tip, facts.right_foot);
    EXPECT_TRUE(Skeleton::Create(clip->skeleton.def).ok());
  }
}

// Frame poses agree with the file's numbers, composed here with Eigen's
// AngleAxis in each joint's written channel order.
TEST(BvhImportTest, FramePoseFollowsTheWrittenChannelOrder) {
  for (const char* file : {"cmu_131_03_hop.bvh", "cmu_02_01_walk.bvh"}) {
    SCOPED_TRACE(file);
    const std::string text = ReadOrDie(MocapPath(file));
    absl::StatusOr<BvhClip> clip = ParseBvh(text, file);
    ASSERT_TRUE(clip.ok()) << clip.status();
    Pose pose;
    for (int frame : {0, 7, clip->num_frames - 1}) {
      clip->FramePose(frame, &pose);
      const std::vector<double> values = FrameValues(text, frame);
      ASSERT_EQ(values.size(), static_cast<size_t>(clip->num_channels));
      EXPECT_EQ(pose.local[0].translation,
                Eigen::Vector3d(values[0], values[1], values[2]));
      // Walk the channel layout independently: the header's order.
      std::vector<absl::string_view> words =
          absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty());
      size_t value = 0;
      int joint = -1;
      for (size_t w = 0; w < words.size() && words[w] != "MOTION"; ++w) {
        if (words[w] == "ROOT" || words[w] == "JOINT") ++joint;
        if (words[w] == "End") ++joint;
        if (words[w] != "CHANNELS") continue;
        int count;
        ASSERT_TRUE(absl::SimpleAtoi(words[w + 1], &count));
        Eigen::Quaterniond expected = Eigen::Quaterniond::Identity();
        for (int c = 0; c < count; ++c, ++value) {
          const absl::string_view name = words[w + 2 + c];
          if (name.substr(1) != "rotation") continue;
          const Eigen::Vector3d axis = name[0] == 'X'   ? Eigen::Vector3d::UnitX()
                                       : name[0] == 'Y' ? Eigen::Vector3d::UnitY()
                                                        : Eigen::Vector3d::UnitZ();
          expected = expected * Eigen::AngleAxisd(values[value] * M_PI / 180,
                                                  axis);
        }
        EXPECT_LT(AngleBetween(pose.local[joint].rotation, expected), 1e-12)
            << "joint " << clip->skeleton.def.joints[joint].name;
      }
      EXPECT_EQ(value, values.size());
    }
  }
}

// The shared README's observations, measured there with an independent
// parser: the CC rig's zero-channel pose points the limbs up (feet near
// y = 200, hands near y = 217); the wave's right hand rises above the head.
TEST(BvhImportTest, ForwardKinematicsMatchesDocumentedPositions) {
  absl::StatusOr<BvhClip> shoot = ImportBvh(MocapPath(kClips[4].file));
  ASSERT_TRUE(shoot.ok()) << shoot.status();
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(shoot->skeleton.def);
  ASSERT_TRUE(skeleton.ok());
  Pose rest = RestPose(*skeleton);
  std::vector<Transform> globals(skeleton->num_joints());
  ComputeGlobals(*skeleton, rest, absl::MakeSpan(globals));
  const auto y = [&](const char* name) {
    return globals[skeleton->FindJoint(name)].translation.y();
  };
  EXPECT_NEAR(y("CC_Base_L_Foot"), 200, 5);
  EXPECT_NEAR(y("CC_Base_R_Hand"), 217, 5);

  absl::StatusOr<BvhClip> wave = ImportBvh(MocapPath(kClips[3].file));
  ASSERT_TRUE(wave.ok());
  absl::StatusOr<Skeleton> wave_skeleton = Skeleton::Create(wave->skeleton.def);
  ASSERT_TRUE(wave_skeleton.ok());
  double highest_right = -1e9, highest_left = -1e9, head = 0;
  Pose pose;
  std::vector<Transform> g(wave_skeleton->num_joints());
  for (int f = 0; f < wave->num_frames; ++f) {
    wave->FramePose(f, &pose);
    ComputeGlobals(*wave_skeleton, pose, absl::MakeSpan(g));
    highest_right = std::max(
        highest_right, g[wave_skeleton->FindJoint("RightHand")].translation.y());
    highest_left = std::max(
        highest_left, g[wave_skeleton->FindJoint("LeftHand")].translation.y());
    head = g[wave_skeleton->FindJoint("Head")].translation.y();
  }
  EXPECT_NEAR(highest_right, 26.9, 0.3);
  EXPECT_LT(highest_left, 17);
  EXPECT_GT(highest_right, head);
}

// BvhOptions::rest_frame: the CC rig's zero pose holds the feet above the
// hips; with frame 0 (its T-pose) as the rest pose the rest stands (by
// this test's own kinematics), every joint's rest rotation is frame 0's,
// and the frames' poses are the same as without the option.
TEST(BvhImportTest, RestFrameMakesAFrameTheRestPose) {
  BvhOptions first;
  first.rest_frame = 0;
  absl::StatusOr<BvhClip> plain = ImportBvh(MocapPath(kClips[4].file));
  absl::StatusOr<BvhClip> rested = ImportBvh(MocapPath(kClips[4].file), first);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(rested.ok()) << rested.status();
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(rested->skeleton.def);
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const testing::IndependentGlobals rest =
      testing::IndependentFk(*skeleton, RestPose(*skeleton));
  const double hips = rest.position[skeleton->FindJoint("CC_Base_Hip")].y();
  for (const char* foot : {"CC_Base_L_Foot", "CC_Base_R_Foot"}) {
    EXPECT_LT(rest.position[skeleton->FindJoint(foot)].y(), hips - 50.0)
        << foot;
  }
  Pose zero, a, b;
  plain->FramePose(0, &zero);
  for (size_t j = 0; j < zero.local.size(); ++j) {
    EXPECT_LE(rested->skeleton.def.joints[j].rest.rotation.angularDistance(
                  zero.local[j].rotation),
              1e-12);
    EXPECT_EQ(plain->skeleton.def.joints[j].rest.rotation.coeffs(),
              Eigen::Quaterniond::Identity().coeffs());
  }
  for (int f : {0, 100, 272}) {
    plain->FramePose(f, &a);
    rested->FramePose(f, &b);
    for (size_t j = 0; j < a.local.size(); ++j) {
      EXPECT_EQ(a.local[j].rotation.coeffs(), b.local[j].rotation.coeffs());
      EXPECT_EQ(a.local[j].translation, b.local[j].translation);
    }
  }
  BvhOptions beyond;
  beyond.rest_frame = kClips[4].frames;
  const absl::StatusOr<BvhClip> refused =
      ImportBvh(MocapPath(kClips[4].file), beyond);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("rest_frame 273 is beyond the clip's 273"));
}

TEST(BvhWriteTest, WrittenMotionReadsBackToTheSamePositions) {
  absl::StatusOr<BvhClip> clip = ImportBvh(MocapPath(kClips[2].file));  // hop
  ASSERT_TRUE(clip.ok());
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(clip->skeleton.def);
  ASSERT_TRUE(skeleton.ok());
  std::vector<Pose> poses(40);
  for (int f = 0; f < 40; ++f) clip->FramePose(f * 25, &poses[f]);
  absl::StatusOr<std::string> text =
      WriteBvh(*skeleton, poses, clip->frame_time);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<BvhClip> back = ParseBvh(*text, "written.bvh");
  ASSERT_TRUE(back.ok()) << back.status();
  // Every joint with children keeps its name; End Sites are re-created.
  ASSERT_EQ(back->skeleton.def.joints.size(), clip->skeleton.def.joints.size());
  EXPECT_EQ(back->num_frames, 40);
  absl::StatusOr<Skeleton> back_skeleton =
      Skeleton::Create(back->skeleton.def);
  ASSERT_TRUE(back_skeleton.ok());
  std::vector<Transform> a(skeleton->num_joints()), b(a.size());
  Pose pose;
  double worst = 0;
  for (int f = 0; f < 40; ++f) {
    back->FramePose(f, &pose);
    ComputeGlobals(*skeleton, poses[f], absl::MakeSpan(a));
    ComputeGlobals(*back_skeleton, pose, absl::MakeSpan(b));
    for (size_t j = 0; j < a.size(); ++j) {
      worst = std::max(worst, (a[j].translation - b[j].translation).norm());
    }
  }
  // Six decimals of degrees and offsets: about 1e-5 of 25 units.
  EXPECT_LT(worst, 1e-3);
}

TEST(BvhWriteTest, EulerAnglesRecoverRotationsIncludingGimbalLock) {
  std::mt19937 rng(7);
  std::normal_distribution<double> n;
  for (int i = 0; i < 1000; ++i) {
    Eigen::Quaterniond q(n(rng), n(rng), n(rng), n(rng));
    q.normalize();
    if (i % 100 == 0) {  // Pitch of exactly +-90 degrees.
      q = Eigen::AngleAxisd(n(rng), Eigen::Vector3d::UnitZ()) *
          Eigen::AngleAxisd((i % 200 ? 1 : -1) * M_PI / 2,
                            Eigen::Vector3d::UnitY()) *
          Eigen::AngleAxisd(n(rng), Eigen::Vector3d::UnitX());
    }
    const Eigen::Vector3d zyx = EulerZyxDegrees(q) * M_PI / 180;
    const Eigen::Quaterniond back =
        Eigen::AngleAxisd(zyx[0], Eigen::Vector3d::UnitZ()) *
        Eigen::AngleAxisd(zyx[1], Eigen::Vector3d::UnitY()) *
        Eigen::AngleAxisd(zyx[2], Eigen::Vector3d::UnitX());
    EXPECT_LT(AngleBetween(q, back), 1e-7) << i;
  }
}

TEST(BvhWriteTest, RejectsSeveralRootsAndMismatchedPoses) {
  SkeletonDef def;
  def.joints.resize(2);
  def.joints[0].name = "a";
  def.joints[1].name = "b";
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  ASSERT_TRUE(skeleton.ok());
  std::vector<Pose> poses = {RestPose(*skeleton)};
  absl::StatusOr<std::string> text = WriteBvh(*skeleton, poses, 0.01);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("second root"));
}

// One malformed input per case; each error names the file, the line and
// the element.
struct BadBvh {
  const char* name;
  const char* text;
  int line;
  const char* expected;
};

TEST(BvhImportTest, MalformedFilesGiveClearErrors) {
  const BadBvh cases[] = {
      {"no hierarchy", "ROOT Hips\n", 1, "expected 'HIERARCHY'"},
      {"truncated hierarchy",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  JOINT Leg\n  {\n", 7,
       "file ends inside the joint"},
      {"channel count larger than the names",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 3 Xrotation "
       "Yrotation\n  JOINT Leg\n",
       6, "CHANNELS 3 lists 2 channel names, then 'JOINT'"},
      {"channel count out of range",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 9 Xrotation\n", 5,
       "CHANNELS count must be 0 to 6"},
      {"unknown keyword",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  BONE Leg\n", 5,
       "unknown keyword 'BONE'"},
      {"position channels below the root",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  JOINT Leg\n  {\n    "
       "OFFSET 0 1 0\n    CHANNELS 3 Xposition Yposition Zposition\n",
       8, "only the root may have position channels"},
      {"duplicate joint name",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  JOINT Hips\n", 5,
       "the name is used by an earlier joint"},
      {"bad offset",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 nan 0\n", 4,
       "OFFSET needs three finite numbers"},
      {"missing offset", "HIERARCHY\nROOT Hips\n{\n  CHANNELS 0\n}\n", 5,
       "no OFFSET"},
      {"several roots",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n}\nROOT Other\n", 6,
       "several ROOTs"},
      {"frame with too few values",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 3 Zrotation "
       "Yrotation Xrotation\n}\nMOTION\nFrames: 2\nFrame Time: 0.1\n1 2 3\n1 "
       "2\n",
       11, "has 2 values; the hierarchy declares 3 channels"},
      {"truncated motion",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 3 Zrotation "
       "Yrotation Xrotation\n}\nMOTION\nFrames: 3\nFrame Time: 0.1\n1 2 "
       "3\n",
       10, "file ends after 1 of 3 frames"},
      {"a surplus line that is not a frame",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Zrotation\n}\n"
       "MOTION\nFrames: 1\nFrame Time: 0.1\n1\n2\n3 4\n",
       12, "after the 1 frames of Frames:, a line that is not a frame of 1"},
      {"bad frame time",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n}\nMOTION\nFrames: 0\nFrame "
       "Time: -1\n",
       8, "Frame Time: needs a positive number"},
      {"not a number in a frame",
       "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Zrotation\n}\n"
       "MOTION\nFrames: 1\nFrame Time: 0.1\n1e400\n",
       10, "'1e400' is not a finite number"},
  };
  for (const BadBvh& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<BvhClip> clip = ParseBvh(c.text, "bad.bvh");
    ASSERT_FALSE(clip.ok());
    EXPECT_EQ(clip.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(clip.status().message(),
                HasSubstr(absl::StrCat("bad.bvh:", c.line, ": ")));
    EXPECT_THAT(clip.status().message(), HasSubstr(c.expected));
  }
}

// Assimp's Boxing_Toes.bvh declares 3069 frames and holds 3070 lines of
// them: the declared frames are read, the surplus counted (Assimp and
// Blender read it so).
TEST(BvhImportTest, WholeFramesBeyondTheDeclaredCountAreIgnored) {
  absl::StatusOr<BvhClip> clip = ParseBvh(
      "HIERARCHY\nROOT Hips\n{\n  OFFSET 0 0 0\n  CHANNELS 1 Zrotation\n}\n"
      "MOTION\nFrames: 2\nFrame Time: 0.1\n1\n2\n3\n\n",
      "extra.bvh");
  ASSERT_TRUE(clip.ok()) << clip.status();
  EXPECT_EQ(clip->num_frames, 2);
  EXPECT_EQ(clip->extra_frame_lines, 1);
  EXPECT_EQ(clip->values, (std::vector<double>{1, 2}));
  absl::StatusOr<BvhClip> boxing = ImportBvh(
      absl::StrCat(REACH_TEST_DATA, "/rigs/Boxing_Toes.bvh"));
  ASSERT_TRUE(boxing.ok()) << boxing.status();
  EXPECT_EQ(boxing->num_frames, 3069);
  EXPECT_EQ(boxing->extra_frame_lines, 1);
  // 21 joints and 5 End Sites.
  EXPECT_EQ(boxing->skeleton.def.joints.size(), 26u);
}

TEST(BvhImportTest, MissingFileIsNotFound) {
  absl::StatusOr<BvhClip> clip = ImportBvh("/nonexistent/walk.bvh");
  EXPECT_EQ(clip.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(clip.status().message(), HasSubstr("/nonexistent/walk.bvh"));
}

// Cutting a real file anywhere gives an error or a shorter valid clip, and
// never a crash (run under the sanitizer build too).
TEST(BvhImportTest, TruncatedRealFileNeverCrashes) {
  const std::string text = ReadOrDie(MocapPath(kClips[0].file));
  std::mt19937 rng(11);
  std::uniform_int_distribution<size_t> cut(0, text.size());
  int errors = 0;
  for (int i = 0; i < 200; ++i) {
    const size_t at = i < 20 ? i * 97 : cut(rng);
    absl::StatusOr<BvhClip> clip = ParseBvh(text.substr(0, at), "cut.bvh");
    if (!clip.ok()) {
      ++errors;
      EXPECT_THAT(clip.status().message(), HasSubstr("cut.bvh:"));
    }
  }
  // A cut inside the last frame line can still parse (fewer values are an
  // error, so only a cut at a line end passes); nearly all cuts fail.
  EXPECT_GT(errors, 190);
}

TEST(SkeletonFileTest, LoadsEveryFormatByExtensionAndAppliesOverrides) {
  SkeletonFileOptions options;
  options.name = "walker";
  options.chains.push_back({"spine", "Hips", "Head"});
  absl::StatusOr<v1::Skeleton> walk =
      LoadSkeletonFile(MocapPath(kClips[0].file), options);
  ASSERT_TRUE(walk.ok()) << walk.status();
  EXPECT_EQ(walk->name(), "walker");
  EXPECT_EQ(walk->joints_size(), 38);
  EXPECT_EQ(walk->chains_size(), 5);

  absl::StatusOr<v1::Skeleton> json = LoadSkeletonFile(
      absl::StrCat(REACH_TEST_DATA, "/../../examples/humanoid.skeleton.json"));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_GT(json->joints_size(), 10);

  absl::StatusOr<v1::Skeleton> unknown = LoadSkeletonFile("robot.fbx");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown skeleton format"));
}

TEST(SkeletonFileTest, JsonCarriesJointStiffness) {
  // The full-body solver's per-joint stiffness, as a skeleton file spells
  // it; kept when chain overrides rebuild the skeleton too.
  const std::string path = absl::StrCat(::testing::TempDir(), "/reach_stiff_",
                                        getpid(), ".skeleton.json");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(R"({"name": "stiff", "joints": [
        {"name": "hips", "parent": -1, "stiffness": 0.8},
        {"name": "knee", "parent": 0, "rest": {"translation": {"y": -0.4}}},
        {"name": "ankle", "parent": 1, "rest": {"translation": {"y": -0.4}},
         "stiffness": 0.25}],
      "chains": [{"name": "leg", "root": "hips", "tip": "ankle"}]})",
               f);
    std::fclose(f);
  }
  for (const bool overrides : {false, true}) {
    SCOPED_TRACE(overrides ? "with a chain override" : "as read");
    SkeletonFileOptions options;
    if (overrides) options.chains.push_back({"shin", "knee", "ankle"});
    absl::StatusOr<v1::Skeleton> s = LoadSkeletonFile(path, options);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_EQ(s->joints_size(), 3);
    EXPECT_TRUE(s->joints(0).has_stiffness());
    EXPECT_EQ(s->joints(0).stiffness(), 0.8);
    EXPECT_FALSE(s->joints(1).has_stiffness());
    EXPECT_EQ(s->joints(2).stiffness(), 0.25);
    EXPECT_EQ(s->chains_size(), overrides ? 2 : 1);
  }
}

TEST(SkeletonFileTest, MalformedJsonNamesTheFile) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/reach_bad_", getpid(), ".json");
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("{\"joints\": [{\"name\": 3", f);
    std::fclose(f);
  }
  absl::StatusOr<v1::Skeleton> s = LoadSkeletonFile(path);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace reach::import
