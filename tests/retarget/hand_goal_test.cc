// Issue 41's limb bones: every clip of tests/data/mocap and the Boxing clip
// onto Boxing_Toes, BCN, RiggedFigure, the humanoid and the limited
// humanoid, measured by this test's own forward kinematics
// (tests/testing/sweep.h), with the bones matched by role:
// - limb bones (upper arm, forearm, thigh, shin; both sides) point as the
//   source's turned them from the retarget pose: mean error at most 3
//   degrees on every pair (the bar; before, 3.4-5.1 on the jump
//   and the wave and 4.4 on Boxing -> RiggedFigure, the hands placed at the
//   source hand's direction and extension on arms of other proportions);
// - the hands' goals follow the arm's bones: on the rigs without limits
//   every arm bone is the source's to 0.1 degrees on every frame and the
//   elbow bends as the source's does, angle for angle (before, 5-7
//   degrees per arm bone on the jump); on the limited humanoid the arm
//   bones are within a degree on average (its limits hold some frames'
//   arms off).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "tests/testing/retarget_rigs.h"
#include "tests/testing/sweep.h"

namespace reach::retarget {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using testing::IndependentFk;
using testing::IndependentGlobals;

constexpr double kDegree = M_PI / 180.0;

using Rig = testing::RetargetRig;

double Angle(const Vector3d& a, const Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

struct Scenario {
  const char* source;
  const char* target;
  bool limited;
};

class HandGoalTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(HandGoalTest, LimbBonesPointAsTheSourcesAndElbowsBendAsItsDo) {
  const Rig source = testing::LoadRetargetRig(GetParam().source);
  const Rig target = testing::LoadRetargetRig(GetParam().target);
  ASSERT_GT(source.clip.num_frames, 1);
  const absl::StatusOr<Retargeter> made =
      testing::MakeRetargeter(source, target);
  ASSERT_TRUE(made.ok()) << made.status();
  const Characterization& sc = source.roles;
  const Characterization& tc = target.roles;
  // The source's model frame in the target's (up to up, forward to
  // forward), the transfer's: the bones' directions are compared in it.
  const Quaterniond& align = made->transfer().align();
  const IndependentGlobals s_ref =
      IndependentFk(source.skeleton, source.reference);
  const IndependentGlobals t_ref =
      IndependentFk(target.skeleton, made->transfer().target_reference());
  // Limb bones by role: [0, 4) the left side's, [4, 8) the right's; per
  // side upper arm, forearm, thigh, shin. Each: source and target joints at
  // its two ends.
  struct Bone {
    int s_from, s_to, t_from, t_to;
  };
  std::vector<Bone> bones;
  for (int k = 0; k < 2; ++k) {
    const Arm &sa = sc.arms[k], &ta = tc.arms[k];
    const Leg &sl = sc.legs[k], &tl = tc.legs[k];
    bones.push_back({sa.upper_arm, sa.forearm, ta.upper_arm, ta.forearm});
    bones.push_back({sa.forearm, sa.hand, ta.forearm, ta.hand});
    bones.push_back({sl.thigh, sl.shin, tl.thigh, tl.shin});
    bones.push_back({sl.shin, sl.foot, tl.shin, tl.foot});
  }
  for (const Bone& b : bones) {
    ASSERT_GE(std::min({b.s_from, b.s_to, b.t_from, b.t_to}), 0);
  }

  RetargetState state;
  RetargetScratch scratch;
  RetargetFrameResult result;
  Pose source_pose, target_pose;
  double limb_sum = 0.0, arm_sum = 0.0, arm_max = 0.0, elbow_max = 0.0;
  int limb_count = 0, arm_count = 0;
  for (int f = 1; f < source.clip.num_frames; ++f) {
    source.clip.FramePose(f, &source_pose);
    ASSERT_TRUE(made->Apply(source_pose, source.clip.frame_time, state, scratch,
                            &target_pose, &result)
                    .ok());
    const IndependentGlobals s = IndependentFk(source.skeleton, source_pose);
    const IndependentGlobals t = IndependentFk(target.skeleton, target_pose);
    std::vector<Vector3d> t_dir(bones.size()), s_dir(bones.size());
    for (size_t i = 0; i < bones.size(); ++i) {
      const Bone& b = bones[i];
      // The source joint's model-space turn from its retarget pose, in the
      // target's frame, applied to the target bone's retarget direction.
      const Quaterniond turn = align * s.rotation[b.s_from] *
                               s_ref.rotation[b.s_from].conjugate() *
                               align.conjugate();
      const Vector3d want =
          turn * (t_ref.position[b.t_to] - t_ref.position[b.t_from]);
      t_dir[i] = t.position[b.t_to] - t.position[b.t_from];
      s_dir[i] = s.position[b.s_to] - s.position[b.s_from];
      const double e = Angle(want, t_dir[i]);
      limb_sum += e;
      ++limb_count;
      if (i % 4 < 2) {
        arm_sum += e;
        arm_max = std::max(arm_max, e);
        ++arm_count;
      }
    }
    // The elbows' bend, the target's against the source's (the retarget
    // poses' bends are alike: AlignLimbs points each bone as the source's).
    for (int k = 0; k < 2; ++k) {
      const int u = 4 * k, l = 4 * k + 1;
      const double s_ref_bend = Angle(
          s_ref.position[bones[u].s_to] - s_ref.position[bones[u].s_from],
          s_ref.position[bones[l].s_to] - s_ref.position[bones[l].s_from]);
      const double t_ref_bend = Angle(
          t_ref.position[bones[u].t_to] - t_ref.position[bones[u].t_from],
          t_ref.position[bones[l].t_to] - t_ref.position[bones[l].t_from]);
      elbow_max = std::max(elbow_max,
                           std::abs((Angle(t_dir[u], t_dir[l]) - t_ref_bend) -
                                    (Angle(s_dir[u], s_dir[l]) - s_ref_bend)));
    }
  }
  const double limb_mean = limb_sum / limb_count / kDegree;
  const double arm_mean = arm_sum / arm_count / kDegree;
  std::printf(
      "%s -> %s: limb bones mean %.2f deg; arm bones mean %.3f max %.3f deg; "
      "elbow bend off the source's by at most %.3f deg\n",
      GetParam().source, GetParam().target, limb_mean, arm_mean,
      arm_max / kDegree, elbow_max / kDegree);
  EXPECT_LE(limb_mean, 3.0);
  if (GetParam().limited) {
    // Where the wrist's, elbow's and shoulder's limits allow (0.00-0.20:
    // the shoot and the wave press them, up to 7.8 degrees on a frame).
    EXPECT_LE(arm_mean, 1.0);
  } else {
    EXPECT_LE(arm_max / kDegree, 0.1);
    EXPECT_LE(elbow_max / kDegree, 0.1);
  }
}

std::vector<Scenario> Scenarios() {
  const char* sources[] = {
      "mocap/cmu_01_01_jump.bvh",        "mocap/cmu_02_01_walk.bvh",
      "mocap/cmu_06_15_shoot_ccrig.bvh", "mocap/cmu_131_03_hop.bvh",
      "mocap/cmu_141_16_wave.bvh",       "rigs/Boxing_Toes.bvh"};
  const Scenario targets[] = {
      {nullptr, "rigs/Boxing_Toes.bvh", false},
      {nullptr, "rigs/BCN_Epileptic.glb", false},
      {nullptr, "gltf/RiggedFigure.glb", false},
      {nullptr, "humanoid.skeleton.json", false},
      {nullptr, "humanoid_limited.skeleton.json", true}};
  std::vector<Scenario> out;
  for (const char* s : sources) {
    for (const Scenario& t : targets) {
      if (std::string(s) == t.target) continue;
      out.push_back({s, t.target, t.limited});
    }
  }
  return out;
}

std::string Name(const ::testing::TestParamInfo<Scenario>& info) {
  std::string name = std::string(info.param.source) + "_" + info.param.target;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(EveryClipOntoEveryRig, HandGoalTest,
                         ::testing::ValuesIn(Scenarios()), Name);

}  // namespace
}  // namespace reach::retarget
