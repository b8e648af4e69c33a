// Issue 41's feet: every clip of tests/data/mocap onto Boxing_Toes, BCN,
// RiggedFigure, the humanoid and the limited humanoid, measured by this test's own forward
// kinematics (tests/testing/sweep.h) and its own contact detection, not by
// the retargeter's plant flags:
// - stance slide: while the source foot is in stance (its ankle low and
//   slow, with hysteresis; the landing and release frames included) the
//   target's ankle moves along the floor at most 0.01 target leg lengths
//   from where it was on the stance's first frame;
// - catch-up: no target foot moves faster than its source foot plus the
//   catch-up's margin (the skate: 1.16 against 0.17 legs/s);
// - jitter: the legs' and pelvis' (what planting moves) at most 1.3x the
//   source's; the whole body's at most 1.3x the source's motion on the
//   target's own bones (OwnBones: the bar without the rigs' proportions;
//   its ratio to the source's own joints is printed: RiggedFigure's is
//   1.3-1.6 with no IK at all, its head and arms farther out on longer
//   levers); and planting adds at most 15 % to the whole body's (a held
//   foot stops where the source's slows: the hop's feet and toes jitter
//   1.2-1.4x as much as unplanted ones);
// - no mapped joint's per-frame step more than 2 degrees beyond its
//   source's largest;
// - the quality meter (retarget/quality.h) reports the same stances and
//   slide.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "retarget/characterize.h"
#include "retarget/quality.h"
#include "retarget/retargeter.h"
#include "tests/testing/full_body.h"
#include "tests/testing/retarget_rigs.h"
#include "tests/testing/sweep.h"

namespace reach::retarget {
namespace {

using testing::Jitter;

using Eigen::Vector3d;
using testing::IndependentFk;
using testing::IndependentGlobals;

constexpr double kDegree = M_PI / 180.0;

// The stance this test detects on its own (the "slow and low",
// with hysteresis): a source ankle enters stance below 0.2 source leg
// lengths over the floor and 0.5 leg lengths per second (its move since
// the previous frame), and stays in it until it rises to 0.3 or moves at
// 0.75.
constexpr double kEnterHeight = 0.2, kEnterSpeed = 0.5;
constexpr double kLeaveHeight = 0.3, kLeaveSpeed = 0.75;
// The bars.
constexpr double kSlideBar = 0.01;        // Target leg lengths.
constexpr double kExcessBar = 0.75;       // Legs/s: the catch-up's 0.5 and the
                                          // mapping's own difference.
constexpr double kJitterBar = 1.3;        // Legs and pelvis, over the source's.
constexpr double kPlantingJitter = 1.15;  // Whole body, over no planting.
constexpr double kStepBar = 2.0;          // Degrees.

using Rig = testing::RetargetRig;
Rig LoadRig(const std::string& file) { return testing::LoadRetargetRig(file); }

double LegLength(const Leg& l, const IndependentGlobals& g) {
  return (g.position[l.shin] - g.position[l.thigh]).norm() +
         (g.position[l.foot] - g.position[l.shin]).norm();
}

// `v` without its component along `up`.
Vector3d AlongFloor(const Vector3d& v, const Vector3d& up) {
  return v - up.dot(v) * up;
}

struct Scenario {
  const char* source;
  const char* target;
};

// The clip retargeted with `options`: every frame's target pose (from
// frame 1: the CMU clips' frame 0 is a calibration T-pose), and the
// quality meter's report.
struct ClipRun {
  std::vector<Pose> target;
  RetargetQuality quality;
  double source_floor = 0.0;
};

ClipRun Retarget(const Rig& source, const Retargeter& retargeter) {
  ClipRun run;
  RetargetState state;
  RetargetScratch scratch;
  RetargetFrameResult result;
  QualityMeter meter(retargeter);
  Pose source_pose;
  for (int f = 1; f < source.clip.num_frames; ++f) {
    source.clip.FramePose(f, &source_pose);
    Pose& out = run.target.emplace_back();
    const absl::Status s = retargeter.Apply(source_pose, source.clip.frame_time,
                                            state, scratch, &out, &result);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) break;
    meter.Add(source_pose, out, result, state);
  }
  run.quality = meter.Result();
  run.source_floor = state.source_floor;
  return run;
}

// The source's motion on the target's own bones: each mapped joint turned
// from its retarget pose as its source joint turned (Transfer::Turn, from
// the source's globals by this test's kinematics), the others held against
// their parents as in the retarget pose, the pelvis moved as the source's
// scaled; positions by this test's forward kinematics. The whole-body
// jitter bar's reference: a target whose bones are longer or sit farther
// out (RiggedFigure's arms, 2.2-2.6x in position for the same turns)
// jitters more on its own bones for the same motion, which is no jitter
// the retargeting adds.
IndependentGlobals OwnBones(const Transfer& transfer,
                            const IndependentGlobals& source,
                            const IndependentGlobals& source_ref,
                            const IndependentGlobals& target_ref,
                            TransferScratch& scratch) {
  const Skeleton& ts = transfer.target_skeleton();
  const Pose& ref = transfer.target_reference();
  scratch.source_globals.resize(source.position.size());
  for (size_t j = 0; j < source.position.size(); ++j) {
    scratch.source_globals[j].translation = source.position[j];
    scratch.source_globals[j].rotation = source.rotation[j];
  }
  const int pelvis = transfer.target_roles().pelvis;
  const int source_pelvis = transfer.source_of()[pelvis];
  IndependentGlobals own;
  own.position.resize(ts.num_joints());
  own.rotation.resize(ts.num_joints());
  for (int j = 0; j < ts.num_joints(); ++j) {
    const int p = ts.joint(j).parent;
    own.rotation[j] =
        transfer.source_of()[j] >= 0
            ? Eigen::Quaterniond(transfer.Turn(j, scratch) *
                                 target_ref.rotation[j])
        : p >= 0 ? Eigen::Quaterniond(own.rotation[p] * ref.local[j].rotation)
                 : target_ref.rotation[j];
    if (j == pelvis && source_pelvis >= 0) {
      own.position[j] = target_ref.position[j] +
                        transfer.pelvis_scale() *
                            (transfer.align() *
                             (source.position[source_pelvis] -
                              source_ref.position[source_pelvis]));
    } else {
      own.position[j] = p >= 0 ? Vector3d(own.position[p] +
                                          own.rotation[p] *
                                              ref.local[j].translation)
                               : target_ref.position[j];
    }
  }
  return own;
}

class PlantingTest : public ::testing::TestWithParam<Scenario> {};

TEST_P(PlantingTest, FeetStayWhileTheSourceStandsAndCatchUpGently) {
  const Rig source = LoadRig(GetParam().source);
  const Rig target = LoadRig(GetParam().target);
  ASSERT_GT(source.clip.num_frames, 4);
  const absl::StatusOr<Retargeter> made =
      testing::MakeRetargeter(source, target);
  ASSERT_TRUE(made.ok()) << made.status();
  RetargetOptions no_planting;
  no_planting.plant_feet = false;
  const absl::StatusOr<Retargeter> unplanted =
      testing::MakeRetargeter(source, target, no_planting);
  ASSERT_TRUE(unplanted.ok()) << unplanted.status();
  const ClipRun run = Retarget(source, *made);
  const ClipRun plain = Retarget(source, *unplanted);
  const int frames = static_cast<int>(run.target.size());
  ASSERT_EQ(frames, source.clip.num_frames - 1);

  const Characterization& sc = source.roles;
  const Characterization& tc = target.roles;
  const Transfer& transfer = made->transfer();
  const Vector3d& source_up = made->source_vertical();
  const Vector3d& target_up = made->floor_up();
  // The verticals are model axes.
  EXPECT_NEAR(source_up.cwiseAbs().maxCoeff(), 1.0, 1e-12);
  EXPECT_NEAR(target_up.cwiseAbs().maxCoeff(), 1.0, 1e-12);
  const IndependentGlobals source_ref =
      IndependentFk(source.skeleton, source.reference);
  const IndependentGlobals target_ref =
      IndependentFk(target.skeleton, transfer.target_reference());
  std::array<double, 2> s_leg, t_leg;
  for (int k = 0; k < 2; ++k) {
    s_leg[k] = LegLength(sc.legs[k], source_ref);
    t_leg[k] = LegLength(tc.legs[k], target_ref);
  }

  std::vector<IndependentGlobals> s_frames, t_frames, plain_frames, own_frames;
  Pose source_pose;
  TransferScratch turns;
  for (int f = 0; f < frames; ++f) {
    source.clip.FramePose(f + 1, &source_pose);
    s_frames.push_back(IndependentFk(source.skeleton, source_pose));
    t_frames.push_back(IndependentFk(target.skeleton, run.target[f]));
    plain_frames.push_back(IndependentFk(target.skeleton, plain.target[f]));
    own_frames.push_back(
        OwnBones(transfer, s_frames.back(), source_ref, target_ref, turns));
  }
  // The source's floor: under the first frame's lower ankle, the ankle
  // 0.05 leg lengths above it (the retargeter's documented default).
  double floor = INFINITY;
  for (int k = 0; k < 2; ++k) {
    floor =
        std::min(floor, source_up.dot(s_frames[0].position[sc.legs[k].foot]) -
                            0.05 * s_leg[k]);
  }
  EXPECT_NEAR(run.source_floor, floor, 1e-9 * s_leg[0]);

  const double dt = source.clip.frame_time;
  double slide = 0.0, excess = 0.0;
  int stances = 0, stance_frames = 0;
  std::string slide_at, excess_at;
  for (int k = 0; k < 2; ++k) {
    const int sf = sc.legs[k].foot, tf = tc.legs[k].foot;
    bool stance = false;
    Vector3d start = Vector3d::Zero();
    for (int f = 0; f < frames; ++f) {
      const Vector3d& ankle = s_frames[f].position[sf];
      const Vector3d& at = t_frames[f].position[tf];
      const double height = (source_up.dot(ankle) - floor) / s_leg[k];
      double s_speed = 0.0;
      if (f > 0) {
        s_speed = (ankle - s_frames[f - 1].position[sf]).norm() / dt / s_leg[k];
        const double t_speed =
            (at - t_frames[f - 1].position[tf]).norm() / dt / t_leg[k];
        if (t_speed - s_speed > excess) {
          excess = t_speed - s_speed;
          excess_at = absl::StrCat("foot ", k, " frame ", f + 1, ": ", t_speed,
                                   " against ", s_speed, " legs/s");
        }
      }
      const bool was = stance;
      stance = was ? height < kLeaveHeight && s_speed < kLeaveSpeed
                   : height < kEnterHeight && s_speed < kEnterSpeed;
      if (!stance) continue;
      if (!was) {
        start = at;
        ++stances;
      }
      ++stance_frames;
      const double moved = AlongFloor(at - start, target_up).norm() / t_leg[k];
      if (moved > slide) {
        slide = moved;
        slide_at = absl::StrCat("foot ", k, " frame ", f + 1);
      }
    }
  }

  // Jitter: the legs and the pelvis against their source counterparts;
  // every mapped joint against the same retarget without planting.
  std::vector<int> s_legs, t_legs, t_all;
  for (int k = 0; k < 2; ++k) {
    const Leg& l = tc.legs[k];
    for (int j : {l.thigh, l.shin, l.foot, l.toe}) {
      if (j < 0 || transfer.source_of()[j] < 0) continue;
      t_legs.push_back(j);
      s_legs.push_back(transfer.source_of()[j]);
    }
  }
  if (tc.pelvis >= 0 && transfer.source_of()[tc.pelvis] >= 0) {
    t_legs.push_back(tc.pelvis);
    s_legs.push_back(transfer.source_of()[tc.pelvis]);
  }
  for (const RoleAssignment& r : tc.roles) {
    // Joints with a source joint of their own (not between two).
    if (transfer.source_of()[r.joint] >= 0 &&
        transfer.source_next_of(r.joint) < 0) {
      t_all.push_back(r.joint);
    }
  }
  const double legs_jitter =
      Jitter(t_frames, t_legs, t_leg[0]) / Jitter(s_frames, s_legs, s_leg[0]);
  std::vector<int> s_all;
  for (int j : t_all) s_all.push_back(transfer.source_of()[j]);
  const double t_jitter = Jitter(t_frames, t_all, t_leg[0]);
  const double body_jitter = t_jitter / Jitter(plain_frames, t_all, t_leg[0]);
  const double source_jitter = t_jitter / Jitter(s_frames, s_all, s_leg[0]);
  const double own_jitter = t_jitter / Jitter(own_frames, t_all, t_leg[0]);

  // Per-frame steps (model-space rotations) against the source's largest
  // for the role.
  const testing::StepExcess steps = testing::StepBeyondSource(
      transfer, tc, testing::LargestSteps(t_frames),
      testing::LargestSteps(s_frames));
  const double step_excess = std::max(0.0, steps.degrees);
  const std::string step_role = steps.degrees > 0.0 ? steps.role : "";

  std::printf(
      "%s -> %s: %d stances (%d frames), slide %.4f legs (%s); excess %.2f "
      "legs/s (%s); jitter legs %.2fx the source's, body %.3fx without "
      "planting, %.2fx the source's, %.2fx the source's motion on its own "
      "bones; step excess %.2f deg (%s)\n",
      GetParam().source, GetParam().target, stances, stance_frames, slide,
      slide_at.c_str(), excess, excess_at.c_str(), legs_jitter, body_jitter,
      source_jitter, own_jitter, step_excess, step_role.c_str());
  // Every clip stands somewhere.
  EXPECT_GT(stances, 0);
  EXPECT_LE(slide, kSlideBar) << slide_at;
  EXPECT_LE(excess, kExcessBar) << excess_at;
  EXPECT_LE(legs_jitter, kJitterBar);
  EXPECT_LE(body_jitter, kPlantingJitter);
  EXPECT_LE(own_jitter, kJitterBar);
  EXPECT_LE(step_excess, kStepBar) << step_role;
  // The quality meter counts the same stances and measures the same slide
  // with the library's kinematics.
  EXPECT_EQ(run.quality.contacts, stances);
  EXPECT_NEAR(run.quality.slide_worst, slide, 1e-9);
}

std::vector<Scenario> Scenarios() {
  const char* sources[] = {
      "mocap/cmu_01_01_jump.bvh", "mocap/cmu_02_01_walk.bvh",
      "mocap/cmu_06_15_shoot_ccrig.bvh", "mocap/cmu_131_03_hop.bvh",
      "mocap/cmu_141_16_wave.bvh"};
  const char* targets[] = {"rigs/Boxing_Toes.bvh", "rigs/BCN_Epileptic.glb",
                           "gltf/RiggedFigure.glb", "humanoid.skeleton.json",
                           "humanoid_limited.skeleton.json"};
  std::vector<Scenario> out;
  for (const char* s : sources) {
    for (const char* t : targets) out.push_back({s, t});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Clips, PlantingTest, ::testing::ValuesIn(Scenarios()),
                         [](const ::testing::TestParamInfo<Scenario>& info) {
                           std::string name = absl::StrCat(
                               info.param.source, "_to_", info.param.target);
                           for (char& ch : name) {
                             if (!std::isalnum(static_cast<unsigned char>(ch)))
                               ch = '_';
                           }
                           return name;
                         });

// The stance's hysteresis as documented: in below contact_height and
// contact_speed, out above 1.5x the height or the speed.
TEST(StanceTest, EntersLowAndSlowAndLeavesOnlyWellAbove) {
  RetargetOptions o;  // 0.2 leg lengths, 0.5 per second.
  EXPECT_TRUE(Stance(false, 0.19, 0.49, o));
  EXPECT_FALSE(Stance(false, 0.21, 0.1, o));
  EXPECT_FALSE(Stance(false, 0.1, 0.51, o));
  EXPECT_TRUE(Stance(true, 0.29, 0.74, o));
  EXPECT_FALSE(Stance(true, 0.31, 0.1, o));
  EXPECT_FALSE(Stance(true, 0.1, 0.76, o));
  o.contact_height = 0.1;
  o.contact_speed = 1.0;
  EXPECT_FALSE(Stance(false, 0.11, 0.1, o));
  EXPECT_TRUE(Stance(true, 0.14, 1.4, o));
  EXPECT_FALSE(Stance(true, 0.14, 1.6, o));
}

}  // namespace
}  // namespace reach::retarget
