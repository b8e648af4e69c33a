// The motion transfer between rigs, checked by a forward kinematics
// written here (tests/testing/sweep.h), on the real clips and rigs.
#include "retarget/transfer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "retarget/characterize.h"
#include "tests/testing/full_body.h"
#include "tests/testing/retarget_rigs.h"
#include "tests/testing/sweep.h"

namespace reach::retarget {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using testing::IndependentFk;
using testing::IndependentGlobals;

std::string Data(const std::string& path) {
  return absl::StrCat(REACH_TEST_DATA, "/", path);
}

struct Rig {
  Skeleton skeleton;
  Characterization roles;
};

Rig MakeRig(const SkeletonDef& def) {
  absl::StatusOr<Skeleton> s = Skeleton::Create(def);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<Characterization> c = Characterize(*s);
  EXPECT_TRUE(c.ok()) << c.status();
  return Rig{*std::move(s), *std::move(c)};
}

import::BvhClip Clip(const std::string& path) {
  absl::StatusOr<import::BvhClip> clip = import::ImportBvh(Data(path));
  EXPECT_TRUE(clip.ok()) << clip.status();
  return *std::move(clip);
}

Transfer MakeTransfer(const Rig& source, const Rig& target) {
  const absl::StatusOr<Transfer> t =
      Transfer::Create({&source.skeleton, &source.roles, RestPose(source.skeleton)},
                       {&target.skeleton, &target.roles, RestPose(target.skeleton)});
  EXPECT_TRUE(t.ok()) << t.status();
  return *t;
}

// Retargeting a clip onto its own skeleton gives back every mapped
// joint's model-space rotation and the pelvis' position.
TEST(TransferTest, OntoItselfEveryMappedJointFollowsExactly) {
  const import::BvhClip walk = Clip("mocap/cmu_02_01_walk.bvh");
  const Rig rig = MakeRig(walk.skeleton.def);
  const Transfer transfer = MakeTransfer(rig, rig);
  EXPECT_NEAR(transfer.pelvis_scale(), 1.0, 1e-12);
  EXPECT_LE(transfer.align().angularDistance(Quaterniond::Identity()), 1e-12);
  TransferScratch scratch;
  Pose source, target;
  for (int f = 0; f < walk.num_frames; f += 7) {
    walk.FramePose(f, &source);
    transfer.Apply(source, scratch, &target);
    const IndependentGlobals want = IndependentFk(rig.skeleton, source);
    const IndependentGlobals got = IndependentFk(rig.skeleton, target);
    for (const RoleAssignment& r : rig.roles.roles) {
      EXPECT_LE(got.rotation[r.joint].angularDistance(want.rotation[r.joint]),
                1e-9)
          << r.role << " frame " << f;
    }
    EXPECT_LE((got.position[rig.roles.pelvis] - want.position[rig.roles.pelvis])
                  .norm(),
              1e-9);
  }
}

struct Pair {
  const char* source;  // BVH clip.
  const char* target;  // BVH rig or glTF file.
};

// Limb bones: from the first role's joint to the second's.
const std::pair<const char*, const char*> kLimbBones[] = {
    {"upper_arm", "forearm"}, {"forearm", "hand"},
    {"thigh", "shin"},        {"shin", "foot"}};

int RoleJoint(const Characterization& c, const std::string& role) {
  for (const RoleAssignment& r : c.roles) {
    if (r.role == role) return r.joint;
  }
  return -1;
}

// Up in a pose: from the feet to the chest.
Vector3d rig_up(const Rig& rig, const IndependentGlobals& g) {
  const Vector3d feet = 0.5 * (g.position[rig.roles.legs[kLeft].foot] +
                               g.position[rig.roles.legs[kRight].foot]);
  return (g.position[rig.roles.spine.back()] - feet).normalized();
}

class TransferPairTest : public ::testing::TestWithParam<Pair> {};

// Between different rigs: each limb bone turns from its retarget pose as
// the source's does (the source's turn, in the target's frame, applied
// to the target bone's retarget direction); the hips keep the source's
// height over leg length on upright frames; every mapped joint moves.
TEST_P(TransferPairTest, LimbsTurnAsTheSourcesAndThePelvisKeepsItsHeight) {
  const import::BvhClip clip = Clip(GetParam().source);
  const Rig source = MakeRig(clip.skeleton.def);
  SkeletonDef target_def;
  const std::string target_file = GetParam().target;
  if (target_file.find(".bvh") != std::string::npos) {
    target_def = Clip(target_file).skeleton.def;
  } else {
    absl::StatusOr<import::ImportedSkeleton> imported =
        import::ImportGltf(Data(target_file));
    ASSERT_TRUE(imported.ok()) << imported.status();
    target_def = imported->def;
  }
  const Rig target = MakeRig(target_def);
  // The target's retarget pose: its rest with the limbs turned to the
  // source's rest directions (rest poses differ: T, A, arms down).
  const RetargetSide source_side{&source.skeleton, &source.roles,
                                 RestPose(source.skeleton)};
  const absl::StatusOr<Pose> aligned = AlignLimbs(
      source_side, {&target.skeleton, &target.roles, RestPose(target.skeleton)});
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  const absl::StatusOr<Transfer> made =
      Transfer::Create(source_side, {&target.skeleton, &target.roles, *aligned});
  ASSERT_TRUE(made.ok()) << made.status();
  const Transfer& transfer = *made;
  const IndependentGlobals source_ref =
      IndependentFk(source.skeleton, RestPose(source.skeleton));
  const IndependentGlobals target_ref =
      IndependentFk(target.skeleton, transfer.target_reference());
  auto leg_length = [](const Rig& rig, const IndependentGlobals& g) {
    const Leg& l = rig.roles.legs[kLeft];
    return (g.position[l.shin] - g.position[l.thigh]).norm() +
           (g.position[l.foot] - g.position[l.shin]).norm();
  };
  // The hips' height (the thigh joints' midpoint) above the feet.
  auto pelvis_height = [](const Rig& rig, const IndependentGlobals& g,
                          const Vector3d& up) {
    const Vector3d feet = 0.5 * (g.position[rig.roles.legs[kLeft].foot] +
                                 g.position[rig.roles.legs[kRight].foot]);
    const Vector3d hips = 0.5 * (g.position[rig.roles.legs[kLeft].thigh] +
                                 g.position[rig.roles.legs[kRight].thigh]);
    return (hips - feet).dot(up);
  };
  const Vector3d source_up = rig_up(source, source_ref);
  const Vector3d target_up = rig_up(target, target_ref);
  const double source_legs = leg_length(source, source_ref);
  const double target_legs = leg_length(target, target_ref);

  TransferScratch scratch;
  Pose source_pose, target_pose;
  double sum = 0.0, worst = 0.0, worst_height = 0.0;
  int count = 0;
  std::vector<bool> moved(target.skeleton.num_joints(), false);
  std::vector<bool> source_moved(source.skeleton.num_joints(), false);
  const Pose& target_rest = transfer.target_reference();
  const Pose source_rest = RestPose(source.skeleton);
  for (int f = 1; f < clip.num_frames; ++f) {
    clip.FramePose(f, &source_pose);
    transfer.Apply(source_pose, scratch, &target_pose);
    const IndependentGlobals s = IndependentFk(source.skeleton, source_pose);
    const IndependentGlobals t = IndependentFk(target.skeleton, target_pose);
    for (int side = 0; side < 2; ++side) {
      const std::string prefix = side == kLeft ? "left." : "right.";
      for (const auto& [from, to] : kLimbBones) {
        const int sa = RoleJoint(source.roles, prefix + from);
        const int sb = RoleJoint(source.roles, prefix + to);
        const int ta = RoleJoint(target.roles, prefix + from);
        const int tb = RoleJoint(target.roles, prefix + to);
        const Vector3d s_ref = (source_ref.position[sb] - source_ref.position[sa]).normalized();
        const Vector3d s_now = (s.position[sb] - s.position[sa]).normalized();
        const Vector3d t_ref = (target_ref.position[tb] - target_ref.position[ta]).normalized();
        const Vector3d t_now = (t.position[tb] - t.position[ta]).normalized();
        const Quaterniond swing = Quaterniond::FromTwoVectors(s_ref, s_now);
        const Vector3d want = transfer.align() * (swing * (transfer.align().conjugate() * t_ref));
        const double angle = std::atan2(want.cross(t_now).norm(), want.dot(t_now));
        sum += angle;
        worst = std::max(worst, angle);
        ++count;
      }
    }
    // Upright frames of the source: its pelvis at 85% or more of its
    // rest height over its legs.
    const double s_ratio = pelvis_height(source, s, source_up) / source_legs;
    const double t_ratio = pelvis_height(target, t, target_up) / target_legs;
    const double s_rest = pelvis_height(source, source_ref, source_up) / source_legs;
    if (s_ratio > 0.85 * s_rest) {
      worst_height = std::max(worst_height, std::abs(t_ratio / s_ratio - 1.0));
    }
    for (int j = 0; j < target.skeleton.num_joints(); ++j) {
      if (target_pose.local[j].rotation.angularDistance(
              target_rest.local[j].rotation) > 1e-6) {
        moved[j] = true;
      }
    }
    for (int j = 0; j < source.skeleton.num_joints(); ++j) {
      if (source_pose.local[j].rotation.angularDistance(
              source_rest.local[j].rotation) > 1e-6) {
        source_moved[j] = true;
      }
    }
  }
  const double mean_deg = sum / count * 180.0 / M_PI;
  const double worst_deg = worst * 180.0 / M_PI;
  std::printf("%s -> %s: limb bones mean %.2f deg, max %.2f deg; pelvis height "
              "over legs within %.1f%% of the source's; scale %.4f\n",
              GetParam().source, GetParam().target, mean_deg, worst_deg,
              100.0 * worst_height, transfer.pelvis_scale());
  EXPECT_LE(mean_deg, 3.0);
  EXPECT_LE(worst_deg, 10.0);
  EXPECT_LE(worst_height, 0.05);
  // Every mapped target limb, pelvis and head joint whose source turns,
  // turns; a spine or neck turns where the source's does (a joint placed
  // between two source joints that never bend apart keeps its pose).
  // Fingers, also placed along their source's by arc length, are checked
  // by FingersTest.
  bool source_spine = false, target_spine = false;
  for (const RoleAssignment& r : target.roles.roles) {
    const int k = transfer.source_of()[r.joint];
    if (k < 0) continue;
    if (r.role.rfind("spine.", 0) == 0 || r.role.rfind("neck.", 0) == 0) {
      target_spine = target_spine || moved[r.joint];
      continue;
    }
    if (transfer.source_next_of(r.joint) >= 0) continue;  // A finger.
    if (source_moved[k]) {
      EXPECT_TRUE(moved[r.joint]) << r.role << " never moves";
    }
  }
  for (int k : source.roles.spine) source_spine = source_spine || source_moved[k];
  EXPECT_EQ(target_spine, source_spine);
}

INSTANTIATE_TEST_SUITE_P(
    Rigs, TransferPairTest,
    ::testing::Values(Pair{"mocap/cmu_02_01_walk.bvh", "rigs/Boxing_Toes.bvh"},
                      Pair{"mocap/cmu_02_01_walk.bvh", "rigs/BCN_Epileptic.glb"},
                      Pair{"mocap/cmu_131_03_hop.bvh", "mocap/cmu_02_01_walk.bvh"},
                      Pair{"rigs/Boxing_Toes.bvh", "mocap/cmu_01_01_jump.bvh"},
                      Pair{"mocap/cmu_141_16_wave.bvh", "gltf/RiggedFigure.glb"}),
    [](const ::testing::TestParamInfo<Pair>& info) {
      std::string name = absl::StrCat(info.param.source, "_to_", info.param.target);
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

// A hip or shoulder above a hinge knee or elbow twists about its bone so
// that the hinge's plane holds the source's shin or forearm; near straight
// that plane turns as 1/sin(bend) of the bone's move across it. With the
// frame before given, the twist turns per frame no more than the source's
// thigh or shin (upper arm or forearm) did, plus 45 degrees a second. The
// wave onto the limited humanoid (hinge knees and elbows), twist measured
// here (about the joint's axis, from its rest): without the frame before,
// its left thigh twisted 3-4 degrees a frame at an 11 degree knee where
// the performer's leg turned about 1.
TEST(TransferTest, AHingesPlaneTurnsNoFasterThanTheSourcesLimb) {
  const testing::RetargetRig source =
      testing::LoadRetargetRig("mocap/cmu_141_16_wave.bvh");
  const testing::RetargetRig target =
      testing::LoadRetargetRig("humanoid_limited.skeleton.json");
  const RetargetSide from{&source.skeleton, &source.roles, source.reference};
  const absl::StatusOr<Pose> aligned =
      AlignLimbs(from, {&target.skeleton, &target.roles, target.reference});
  ASSERT_TRUE(aligned.ok()) << aligned.status();
  const absl::StatusOr<Transfer> made =
      Transfer::Create(from, {&target.skeleton, &target.roles, *aligned});
  ASSERT_TRUE(made.ok()) << made.status();
  const Transfer& transfer = *made;
  // The balls above a hinge, and the joints that drive them and their hinge.
  struct Limb {
    int ball, hinge;
  };
  std::vector<Limb> limbs;
  for (int k = 0; k < 2; ++k) {
    for (const auto& [ball, hinge] :
         {std::pair{target.roles.legs[k].thigh, target.roles.legs[k].shin},
          std::pair{target.roles.arms[k].upper_arm,
                    target.roles.arms[k].forearm}}) {
      ASSERT_EQ(target.skeleton.joint(hinge).type, JointType::kHinge);
      limbs.push_back({ball, hinge});
    }
  }
  auto twist = [&](const Pose& pose, int j) {
    const Joint& joint = target.skeleton.joint(j);
    const Quaterniond d = joint.rest.rotation.conjugate() * pose.local[j].rotation;
    return 2.0 * std::atan2(d.vec().dot(joint.axis), d.w());
  };
  const double dt = source.clip.frame_time;
  // The largest twist step beyond what the bound allows, over the clip.
  auto largest_excess = [&](bool bounded, std::string* where) {
    TransferScratch scratch;
    Pose pose, target_pose, before;
    std::vector<Transform> source_before;
    std::vector<IndependentGlobals> fk;
    double worst = -INFINITY;
    for (int f = 1; f < source.clip.num_frames; ++f) {
      source.clip.FramePose(f, &pose);
      const bool first = f == 1;
      transfer.Apply(pose, scratch, &target_pose, first ? nullptr : &before,
                     bounded && !first
                         ? FrameBefore{&source_before, &before, dt}
                         : FrameBefore{});
      fk.push_back(IndependentFk(source.skeleton, pose));
      if (!first) {
        const IndependentGlobals& now = fk[fk.size() - 1];
        const IndependentGlobals& was = fk[fk.size() - 2];
        for (const Limb& l : limbs) {
          double allowed = M_PI / 4.0 * dt;
          double source_step = 0.0;
          for (int j : {l.ball, l.hinge}) {
            const int s = transfer.source_of()[j];
            source_step = std::max(
                source_step, now.rotation[s].angularDistance(was.rotation[s]));
          }
          allowed += source_step;
          const double step = std::abs(std::remainder(
              twist(target_pose, l.ball) - twist(before, l.ball), 2.0 * M_PI));
          if (step - allowed > worst) {
            worst = step - allowed;
            *where = absl::StrCat(target.skeleton.joint(l.ball).name, " frame ",
                                  f, ": ", step * 180.0 / M_PI, " deg against ",
                                  allowed * 180.0 / M_PI);
          }
        }
      }
      before = target_pose;
      source_before = scratch.source_globals;
    }
    return worst;
  };
  std::string bounded_at, free_at;
  const double bounded = largest_excess(true, &bounded_at);
  const double free = largest_excess(false, &free_at);
  std::printf("twist step beyond the source's limb: bounded %.4f deg (%s), "
              "without the frame before %.2f deg (%s)\n",
              bounded * 180.0 / M_PI, bounded_at.c_str(), free * 180.0 / M_PI,
              free_at.c_str());
  EXPECT_LE(bounded, 1e-9) << bounded_at;
  // The clip turns a plane faster than that somewhere.
  EXPECT_GT(free, 1.0 * M_PI / 180.0) << free_at;
}

// An override can take a role the transfer needs away: refused, naming
// it, instead of reading joint -1.
TEST(TransferTest, ASideWithoutFeetIsRefused) {
  const import::BvhClip walk = Clip("mocap/cmu_02_01_walk.bvh");
  const Rig rig = MakeRig(walk.skeleton.def);
  const std::vector<RoleOverride> overrides = {{"left.foot", "RightFoot"}};
  const absl::StatusOr<Characterization> moved =
      Characterize(rig.skeleton, overrides);
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_EQ(moved->legs[kRight].foot, -1);
  const absl::StatusOr<Transfer> t =
      Transfer::Create({&rig.skeleton, &rig.roles, RestPose(rig.skeleton)},
                       {&rig.skeleton, &*moved, RestPose(rig.skeleton)});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              ::testing::HasSubstr("target.roles: no right.foot"));
  EXPECT_FALSE(AlignLimbs({&rig.skeleton, &*moved, RestPose(rig.skeleton)},
                          {&rig.skeleton, &rig.roles, RestPose(rig.skeleton)})
                   .ok());
}

TEST(TransferTest, AReferencePoseThatDoesNotFitIsRefused) {
  const import::BvhClip walk = Clip("mocap/cmu_02_01_walk.bvh");
  const Rig rig = MakeRig(walk.skeleton.def);
  Pose bad = RestPose(rig.skeleton);
  bad.local.pop_back();
  const absl::StatusOr<Transfer> t = Transfer::Create(
      {&rig.skeleton, &rig.roles, RestPose(rig.skeleton)}, {&rig.skeleton, &rig.roles, bad});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), ::testing::HasSubstr("target.reference"));
}

}  // namespace
}  // namespace reach::retarget
