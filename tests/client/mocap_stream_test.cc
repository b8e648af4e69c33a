// Every BVH clip streamed through a real server, with its own skeleton as
// the target and onto a skeleton with other proportions; every answer is
// checked here by forward kinematics.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "client/mocap_replay.h"
#include "wire/convert.h"
#include "tests/testing/service.h"

namespace reach::client {
namespace {

using testing::TestServer;

std::string MocapPath(const std::string& name) {
  return absl::StrCat(REACH_TEST_DATA, "/mocap/", name);
}

class MocapStreamTest : public ::testing::Test {
 protected:
  std::string Register(const SkeletonDef& def, const std::string& name) {
    v1::Skeleton wire;
    ToProto(def, &wire);
    wire.set_name(name);
    absl::StatusOr<v1::RegisterSkeletonResponse> r = client_.Register(wire);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->skeleton_id() : "";
  }

  TestServer server_;
  ReachClient client_{server_.channel};
};

TEST_F(MocapStreamTest, EveryClipStreamsOntoItsOwnSkeleton) {
  for (const char* file :
       {"cmu_02_01_walk.bvh", "cmu_01_01_jump.bvh", "cmu_131_03_hop.bvh",
        "cmu_141_16_wave.bvh", "cmu_06_15_shoot_ccrig.bvh"}) {
    SCOPED_TRACE(file);
    absl::StatusOr<import::BvhClip> clip = import::ImportBvh(MocapPath(file));
    ASSERT_TRUE(clip.ok()) << clip.status();
    const std::string id = Register(clip->skeleton.def, clip->skeleton.name);
    absl::StatusOr<Skeleton> target = Skeleton::Create(clip->skeleton.def);
    ASSERT_TRUE(target.ok());
    ReplayOptions options;
    options.max_in_flight = 16;
    absl::StatusOr<MocapRetarget> retarget = MocapRetarget::Create(*clip, *target);
    ASSERT_TRUE(retarget.ok()) << retarget.status();
    absl::StatusOr<ReplayReport> report =
        ReplayMocap(client_, id, *retarget, options);
    ASSERT_TRUE(report.ok()) << report.status();
    EXPECT_EQ(report->frames, clip->num_frames);
    EXPECT_EQ(report->solved, clip->num_frames);
    EXPECT_EQ(report->errors, 0) << report->first_error;
    EXPECT_EQ(report->goals, 4 * clip->num_frames);
    // The start pose's tips are off target (the chains start from the
    // previous frame), so the solver did the work being measured.
    EXPECT_GT(report->mean_start_error, 1e-3 * report->target_height);
    EXPECT_LT(report->mean_error, 1e-4 * report->target_height);
    EXPECT_LT(report->max_error, 1e-3 * report->target_height);
    std::printf("%-28s %5d frames  height %7.2f  error mean %.3g max %.3g "
                "(start %.3g)  %.0f frames/s  p50 %.3f ms  p99 %.3f ms\n",
                file, report->frames, report->target_height,
                report->mean_error, report->max_error,
                report->mean_start_error, report->fps,
                absl::ToDoubleMilliseconds(report->p50),
                absl::ToDoubleMilliseconds(report->p99));
  }
}

// Arms 20% longer, legs 10% shorter: targets scale with each limb, so they
// stay reachable and the solved tips land on them.
TEST_F(MocapStreamTest, RetargetsOntoOtherProportions) {
  absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(MocapPath("cmu_02_01_walk.bvh"));
  ASSERT_TRUE(clip.ok());
  SkeletonDef other = clip->skeleton.def;
  absl::StatusOr<Skeleton> source = Skeleton::Create(other);
  ASSERT_TRUE(source.ok());
  for (const ChainDef& chain : other.chains) {
    const double scale = absl::StrContains(chain.name, "arm") ? 1.2 : 0.9;
    const Chain& path = source->chain(source->FindChain(chain.name));
    for (size_t i = 1; i < path.joints.size(); ++i) {
      other.joints[path.joints[i]].rest.translation *= scale;
    }
  }
  const std::string id = Register(other, "walk-long-arms");
  absl::StatusOr<Skeleton> target = Skeleton::Create(other);
  ASSERT_TRUE(target.ok());
  ReplayOptions options;
  options.keep_poses = true;
  absl::StatusOr<MocapRetarget> retarget = MocapRetarget::Create(*clip, *target);
  ASSERT_TRUE(retarget.ok()) << retarget.status();
  absl::StatusOr<ReplayReport> report =
      ReplayMocap(client_, id, *retarget, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->errors, 0) << report->first_error;
  EXPECT_EQ(report->solved, clip->num_frames);
  EXPECT_LT(report->mean_error, 1e-4 * report->target_height);
  std::printf("retarget walk -> arms x1.2, legs x0.9: error mean %.3g max "
              "%.3g (height %.2f)\n",
              report->mean_error, report->max_error, report->target_height);

  // The solved motion written as BVH reads back with the same tips.
  absl::StatusOr<std::string> bvh =
      import::WriteBvh(*target, report->poses, clip->frame_time);
  ASSERT_TRUE(bvh.ok());
  absl::StatusOr<import::BvhClip> back = import::ParseBvh(*bvh, "solved.bvh");
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->num_frames, clip->num_frames);
  absl::StatusOr<Skeleton> back_skeleton = Skeleton::Create(back->skeleton.def);
  ASSERT_TRUE(back_skeleton.ok());
  Pose pose;
  std::vector<Transform> a(target->num_joints()), b(a.size());
  const int hand = target->FindJoint("LeftHand");
  for (int f = 0; f < back->num_frames; f += 17) {
    back->FramePose(f, &pose);
    ComputeGlobals(*back_skeleton, pose, absl::MakeSpan(b));
    ComputeGlobals(*target, report->poses[f], absl::MakeSpan(a));
    EXPECT_LT((a[hand].translation - b[hand].translation).norm(), 1e-3) << f;
  }
}

TEST_F(MocapStreamTest, LatestWinsAnswersEveryFrame) {
  absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(MocapPath("cmu_141_16_wave.bvh"));
  ASSERT_TRUE(clip.ok());
  const std::string id = Register(clip->skeleton.def, "wave");
  absl::StatusOr<Skeleton> target = Skeleton::Create(clip->skeleton.def);
  ASSERT_TRUE(target.ok());
  ReplayOptions options;
  options.latest_wins = true;
  options.max_in_flight = 64;
  options.keep_poses = true;
  absl::StatusOr<MocapRetarget> retarget = MocapRetarget::Create(*clip, *target);
  ASSERT_TRUE(retarget.ok()) << retarget.status();
  absl::StatusOr<ReplayReport> report =
      ReplayMocap(client_, id, *retarget, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->solved + report->skipped, clip->num_frames);
  EXPECT_EQ(report->errors, 0);
  EXPECT_EQ(report->poses.size(), static_cast<size_t>(clip->num_frames));
  EXPECT_LT(report->mean_error, 1e-4 * report->target_height);
}

TEST_F(MocapStreamTest, UnknownChainIsNamed) {
  absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(MocapPath("cmu_02_01_walk.bvh"));
  ASSERT_TRUE(clip.ok());
  absl::StatusOr<Skeleton> target = Skeleton::Create(clip->skeleton.def);
  ASSERT_TRUE(target.ok());
  absl::StatusOr<MocapRetarget> r =
      MocapRetarget::Create(*clip, *target, {"left_arm", "tail"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("chain 'tail'"));
}

// Rotations are copied by name: a rig with other joint names is refused
// (its joints would stay frozen at rest), pointing at `reach retarget`.
TEST_F(MocapStreamTest, ARigWithOtherNamesIsRefused) {
  absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(MocapPath("cmu_02_01_walk.bvh"));
  ASSERT_TRUE(clip.ok());
  SkeletonDef renamed = clip->skeleton.def;
  bool found = false;
  for (JointDef& joint : renamed.joints) {
    if (joint.name == "Head") {
      joint.name = "Skull";
      found = true;
    }
  }
  ASSERT_TRUE(found);
  absl::StatusOr<Skeleton> target = Skeleton::Create(renamed);
  ASSERT_TRUE(target.ok()) << target.status();
  absl::StatusOr<MocapRetarget> r = MocapRetarget::Create(*clip, *target);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("1 joint(s)"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("Skull"));
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("reach retarget"));
}

}  // namespace
}  // namespace reach::client
