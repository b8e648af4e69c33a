// Issue 41: held feet stay put on a crouch deeper than a limited rig's
// knees allow. The Boxing clip (tests/data/rigs/Boxing_Toes.bvh) closes in
// a crouch whose knees fold further than the limited humanoid's 2.5 rad
// (examples/humanoid_limited.skeleton.json) with both feet down: with the
// pelvis at the source's scaled height the held feet are nearer the hips
// than the folded legs reach, and slid up to 0.10 leg lengths. Measured by
// this test's own forward kinematics (tests/testing/sweep.h) and its own
// contact detection, not the retargeter's flags:
// - the crouch is there: on stance frames the source's knees fold beyond
//   the target knee's range and the source ankles come nearer the hips
//   (over leg length) than the target leg's nearest reach;
// - stance slide: while the source foot is in stance (ankle low and slow,
//   with hysteresis) the target ankle moves along the floor at most 0.01
//   target leg lengths from where it was on the stance's first frame;
// - the pelvis moves without pops: the legs' and pelvis' jitter at most
//   1.3x the source's, the hips' per-frame move at most the source's
//   largest, and every knee within its range;
// - per-frame steps: no mapped joint's largest model-space turn in a frame
//   more than 2 degrees beyond its source's largest, but the limbs' upper
//   bones and hinges (8; see the test's end).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "tests/testing/retarget_rigs.h"
#include "tests/testing/sweep.h"

namespace reach::retarget {
namespace {

using testing::Jitter;

using Eigen::Vector3d;
using testing::IndependentFk;
using testing::IndependentGlobals;

constexpr double kDegree = M_PI / 180.0;
// Stance as the issue defines it (and retarget_figures measures it).
constexpr double kEnterHeight = 0.2, kEnterSpeed = 0.5;
constexpr double kLeaveHeight = 0.3, kLeaveSpeed = 0.75;
constexpr double kSlideBar = 0.01;  // Target leg lengths.
constexpr double kJitterBar = 1.3;
constexpr double kStepBar = 2.0;  // Degrees.

double LegLength(const Leg& l, const IndependentGlobals& g) {
  return (g.position[l.shin] - g.position[l.thigh]).norm() +
         (g.position[l.foot] - g.position[l.shin]).norm();
}

// The angle a knee is bent by (0 straight): between thigh->knee and
// knee->ankle.
double KneeBend(const Leg& l, const IndependentGlobals& g) {
  const Vector3d a = g.position[l.shin] - g.position[l.thigh];
  const Vector3d b = g.position[l.foot] - g.position[l.shin];
  return std::acos(std::clamp(a.dot(b) / (a.norm() * b.norm()), -1.0, 1.0));
}

TEST(LimitedCrouchTest, HeldFeetStayWhereTheKneesCannotFoldAsFar) {
  const testing::RetargetRig source =
      testing::LoadRetargetRig("rigs/Boxing_Toes.bvh");
  const testing::RetargetRig target =
      testing::LoadRetargetRig("humanoid_limited.skeleton.json");
  const absl::StatusOr<Retargeter> made =
      testing::MakeRetargeter(source, target);
  ASSERT_TRUE(made.ok()) << made.status();
  const Characterization& sc = source.roles;
  const Characterization& tc = target.roles;
  const Transfer& transfer = made->transfer();
  const Vector3d& source_up = made->source_vertical();
  const Vector3d& target_up = made->floor_up();

  // The target knees' range, and the nearest a target leg's ankle can come
  // to its hip with the knee at the end of it (the test's own geometry: the
  // law of cosines on the two bones).
  const IndependentGlobals source_ref =
      IndependentFk(source.skeleton, source.reference);
  const IndependentGlobals target_ref =
      IndependentFk(target.skeleton, transfer.target_reference());
  std::array<double, 2> s_leg, t_leg, most_bend, nearest;
  for (int k = 0; k < 2; ++k) {
    const Leg& l = tc.legs[k];
    s_leg[k] = LegLength(sc.legs[k], source_ref);
    t_leg[k] = LegLength(l, target_ref);
    const Joint& knee = target.skeleton.joint(l.shin);
    ASSERT_EQ(knee.type, JointType::kHinge);
    most_bend[k] = knee.max_angle_rad;
    const double a =
        (target_ref.position[l.shin] - target_ref.position[l.thigh]).norm();
    const double b =
        (target_ref.position[l.foot] - target_ref.position[l.shin]).norm();
    nearest[k] =
        std::sqrt(a * a + b * b + 2.0 * a * b * std::cos(most_bend[k])) /
        t_leg[k];
  }

  RetargetState state;
  RetargetScratch scratch;
  RetargetFrameResult result;
  std::vector<IndependentGlobals> s_frames, t_frames;
  double most_rise = 0.0;
  Pose sp, tp;
  for (int f = 1; f < source.clip.num_frames; ++f) {
    source.clip.FramePose(f, &sp);
    ASSERT_TRUE(
        made->Apply(sp, source.clip.frame_time, state, scratch, &tp, &result)
            .ok());
    most_rise = std::max(most_rise, result.pelvis_move / t_leg[0]);
    s_frames.push_back(IndependentFk(source.skeleton, sp));
    t_frames.push_back(IndependentFk(target.skeleton, tp));
  }
  const int frames = static_cast<int>(t_frames.size());
  double floor = INFINITY;
  for (int k = 0; k < 2; ++k) {
    floor =
        std::min(floor, source_up.dot(s_frames[0].position[sc.legs[k].foot]) -
                            0.05 * s_leg[k]);
  }

  const double dt = source.clip.frame_time;
  double slide = 0.0, knee_over = 0.0;
  int deep = 0;  // Stance frames the target knee cannot fold to.
  std::string slide_at;
  for (int k = 0; k < 2; ++k) {
    const Leg &sl = sc.legs[k], &tl = tc.legs[k];
    bool stance = false;
    Vector3d start = Vector3d::Zero();
    for (int f = 0; f < frames; ++f) {
      const Vector3d& ankle = s_frames[f].position[sl.foot];
      const Vector3d& at = t_frames[f].position[tl.foot];
      knee_over = std::max(knee_over, KneeBend(tl, t_frames[f]) - most_bend[k]);
      const double height = (source_up.dot(ankle) - floor) / s_leg[k];
      const double speed =
          f > 0 ? (ankle - s_frames[f - 1].position[sl.foot]).norm() / dt /
                      s_leg[k]
                : 0.0;
      const bool was = stance;
      stance = was ? height < kLeaveHeight && speed < kLeaveSpeed
                   : height < kEnterHeight && speed < kEnterSpeed;
      if (!stance) continue;
      if (!was) start = at;
      const double reach =
          (ankle - s_frames[f].position[sl.thigh]).norm() / s_leg[k];
      if (KneeBend(sl, s_frames[f]) > most_bend[k] && reach < nearest[k]) {
        ++deep;
      }
      Vector3d moved = at - start;
      moved -= target_up.dot(moved) * target_up;
      if (moved.norm() / t_leg[k] > slide) {
        slide = moved.norm() / t_leg[k];
        slide_at = absl::StrCat("foot ", k, " frame ", f + 1);
      }
    }
  }

  // Jitter of the legs and the pelvis against the source's; per-frame
  // steps against the source's largest for the role; the hips' largest
  // per-frame move against the source's.
  std::vector<int> s_legs, t_legs;
  for (int k = 0; k < 2; ++k) {
    const Leg& l = tc.legs[k];
    for (int j : {l.thigh, l.shin, l.foot, l.toe}) {
      if (j < 0 || transfer.source_of()[j] < 0) continue;
      t_legs.push_back(j);
      s_legs.push_back(transfer.source_of()[j]);
    }
  }
  t_legs.push_back(tc.pelvis);
  s_legs.push_back(transfer.source_of()[tc.pelvis]);
  const double jitter =
      Jitter(t_frames, t_legs, t_leg[0]) / Jitter(s_frames, s_legs, s_leg[0]);
  std::vector<double> t_step(target.skeleton.num_joints(), 0.0);
  std::vector<double> s_step(source.skeleton.num_joints(), 0.0);
  double t_hips = 0.0, s_hips = 0.0;
  for (int f = 1; f < frames; ++f) {
    for (size_t j = 0; j < t_step.size(); ++j) {
      t_step[j] = std::max(t_step[j], t_frames[f].rotation[j].angularDistance(
                                          t_frames[f - 1].rotation[j]));
    }
    for (size_t j = 0; j < s_step.size(); ++j) {
      s_step[j] = std::max(s_step[j], s_frames[f].rotation[j].angularDistance(
                                          s_frames[f - 1].rotation[j]));
    }
    t_hips = std::max(t_hips, (t_frames[f].position[tc.pelvis] -
                               t_frames[f - 1].position[tc.pelvis])
                                      .norm() /
                                  t_leg[0]);
    s_hips = std::max(s_hips, (s_frames[f].position[sc.pelvis] -
                               s_frames[f - 1].position[sc.pelvis])
                                      .norm() /
                                  s_leg[0]);
  }
  // Steps beyond the source's largest for the role. The limbs' upper
  // bones and hinges are apart (printed, and bounded):
  // - upper arms and forearms turn up to 5.9 degrees in a frame beyond the
  //   source's: the transfer twists a shoulder about its bone so the hinge
  //   elbow's plane holds the source's forearm (transfer.h), and that plane
  //   turns 1/sin(bend) times as fast as the source's forearm moves across
  //   it. Before the twist's turn was bounded by the source's (Transfer::
  //   Apply's frame_before): 21 degrees (24 in a frame at a 20 degree bend
  //   on frame 2419). Fading the twist in over the bend instead (least
  //   squares, or over 20-30 degrees) left 4-13 degrees and took the wave's
  //   limb bones from 2.94 to 3.4-5.6 degrees.
  // - thighs and shins: the solve chased a foot turn its ankle's limits
  //   stopped by swinging the whole leg's plane, 24.5 degrees beyond the
  //   source's with the knee at its bound (the ankle alone turns a foot
  //   where the knee is, retargeter.h); 7.1 is left on the right leg where
  //   the knee is 13 degrees inside its range and the hip's twist swings
  //   to its bound (frame 2914).
  double step_excess = 0.0, arm_excess = 0.0, leg_excess = 0.0;
  std::string step_role, leg_role;
  std::vector<int> arms, legs;
  for (int k = 0; k < 2; ++k) {
    arms.push_back(tc.arms[k].upper_arm);
    arms.push_back(tc.arms[k].forearm);
    legs.push_back(tc.legs[k].thigh);
    legs.push_back(tc.legs[k].shin);
  }
  auto among = [](const std::vector<int>& v, int j) {
    return std::find(v.begin(), v.end(), j) != v.end();
  };
  for (const RoleAssignment& r : tc.roles) {
    const double allowed = testing::AllowedStep(transfer, r.joint, s_step);
    if (allowed < 0.0) continue;
    const double e = (t_step[r.joint] - allowed) / kDegree;
    if (among(arms, r.joint)) {
      arm_excess = std::max(arm_excess, e);
    } else if (among(legs, r.joint)) {
      if (e > leg_excess) leg_excess = e, leg_role = r.role;
    } else if (e > step_excess) {
      step_excess = e;
      step_role = r.role;
    }
  }
  std::printf(
      "Boxing -> limited humanoid: %d deep stance frames (nearest reach "
      "%.3f legs), pelvis moved up to %.3f legs; slide %.4f legs (%s); "
      "legs' jitter %.2fx the source's; step excess %.2f deg (%s), thighs' "
      "and shins' %.2f (%s), upper arms' and forearms' %.2f; hips' largest "
      "per-frame move %.4f legs (source's %.4f)\n",
      deep, nearest[0], most_rise, slide, slide_at.c_str(), jitter, step_excess,
      step_role.c_str(), leg_excess, leg_role.c_str(), arm_excess, t_hips,
      s_hips);
  // The clip crouches deeper than the limited knees fold (236 stance
  // frames of the two feet), and the pelvis moved for it.
  EXPECT_GT(deep, 100);
  EXPECT_GT(most_rise, 0.1);
  EXPECT_LE(knee_over, 1e-6);
  // Before the pelvis moved: 0.104.
  EXPECT_LE(slide, kSlideBar) << slide_at;
  EXPECT_LE(jitter, kJitterBar);
  EXPECT_LE(step_excess, kStepBar) << step_role;
  // The legs: 24.5 degrees when the foot's turn swung them (left thigh,
  // frame 2885), 7.1 left (above). The arms: 21 before the twist's bound.
  EXPECT_LE(leg_excess, 4.0 * kStepBar) << leg_role;
  EXPECT_LE(arm_excess, 4.0 * kStepBar);
  // The hips move no faster than the source's fastest (a move that popped
  // would shift them by up to its whole 0.18 leg lengths at once; a rise
  // straight up moved them 0.091 in a frame against the source's 0.033).
  EXPECT_LE(t_hips, s_hips);
}

}  // namespace
}  // namespace reach::retarget
