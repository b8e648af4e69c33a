// Retargeting a frame allocates nothing once the state and scratch are
// warm: every operator new (std containers, strings) is counted while
// frames of the CMU walk are retargeted onto the BCN rig, planting and the
// full-body solve included. (Eigen's own heap use inside the solve is
// covered by no_allocation_test, built with EIGEN_RUNTIME_NO_MALLOC.)
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "tests/testing/counting_new.h"

namespace reach::retarget {
namespace {

std::string Data(const std::string& path) {
  return absl::StrCat(REACH_TEST_DATA, "/", path);
}

TEST(RetargetNoAllocationTest, AWarmStreamAllocatesNothingPerFrame) {
  const absl::StatusOr<import::BvhClip> clip =
      import::ImportBvh(Data("mocap/cmu_02_01_walk.bvh"));
  ASSERT_TRUE(clip.ok()) << clip.status();
  const absl::StatusOr<import::ImportedSkeleton> bcn =
      import::ImportGltf(Data("rigs/BCN_Epileptic.glb"));
  ASSERT_TRUE(bcn.ok()) << bcn.status();
  const absl::StatusOr<Skeleton> source = Skeleton::Create(clip->skeleton.def);
  const absl::StatusOr<Skeleton> target = Skeleton::Create(bcn->def);
  ASSERT_TRUE(source.ok() && target.ok());
  const absl::StatusOr<Characterization> source_roles = Characterize(*source);
  const absl::StatusOr<Characterization> target_roles = Characterize(*target);
  ASSERT_TRUE(source_roles.ok() && target_roles.ok());
  const absl::StatusOr<Retargeter> retargeter = Retargeter::Create(
      {&*source, &*source_roles, RestPose(*source)},
      {&*target, &*target_roles, RestPose(*target)}, {});
  ASSERT_TRUE(retargeter.ok()) << retargeter.status();

  RetargetState state;
  RetargetScratch scratch;
  RetargetFrameResult result;
  Pose frame, out;
  clip->FramePose(1, &frame);
  // Warm: the first frames size the scratch.
  for (int f = 1; f < 4; ++f) {
    clip->FramePose(f, &frame);
    ASSERT_TRUE(retargeter
                    ->Apply(frame, clip->frame_time, state, scratch, &out,
                            &result)
                    .ok());
  }
  int contacts = 0;
  for (int f = 4; f < clip->num_frames; ++f) {
    clip->FramePose(f, &frame);  // Outside the count: the clip's own.
    testing::StartCountingNew();
    const absl::Status status = retargeter->Apply(
        frame, clip->frame_time, state, scratch, &out, &result);
    const long allocations = testing::StopCountingNew();
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(allocations, 0) << "frame " << f;
    contacts += result.feet[0].planted + result.feet[1].planted;
  }
  EXPECT_GT(contacts, 0);  // Planting ran.
}

}  // namespace
}  // namespace reach::retarget
