// Issue 41's retargeting figures per pair (every clip of tests/data/mocap
// and the Boxing clip onto Boxing, BCN, RiggedFigure, the humanoid and the
// limited humanoid), with default options, a Markdown table:
//
//   build/bench/retarget_figures [--pairs SUBSTRING] [--detail]
//
// - stance slide: the target foot's largest move along the floor within
//   one stance of the source foot (its ankle within contact_height leg
//   lengths of the source's floor and its own frame-to-frame speed under
//   contact_speed legs/s, and then until it rises above 1.5x that height
//   or moves faster than 1.5x that speed; landing and release frames are
//   stance frames), measured here from the poses, not the retargeter's
//   plant flags; target leg lengths. Bar 0.01. The source ankle's own and
//   the source toe's over the same frames, for scale (an ankle rolls
//   forward about the toe as the heel lifts).
// - excess: the target foot's largest speed beyond its source foot's, leg
//   lengths per second (a catch-up after a release).
// - limb bones: direction error of upper arm, forearm, thigh and shin
//   against the source's (retarget/quality.h), mean and max, degrees.
//   Bar: mean 3.
// - jitter: the mean third difference of every mapped joint's position (in
//   leg lengths), target over source. A joint far out on a bone whose
//   source counterpart is near its parent (RiggedFigure's long arms, a
//   finger the source has at its wrist) jitters more in position, over leg
//   lengths, for the same turns: this ratio carries the two rigs'
//   proportions.
// - own bones: the same jitter, target over the source's motion on the
//   target's own bones (each mapped joint turned as its source joint turns,
//   Transfer::Turn, every other joint keeping its retarget pose against its
//   parent, the pelvis moved as the source's scaled by the legs' ratio, by
//   a forward kinematics written here): the jitter the retargeter adds
//   beyond the rigs' proportions. The bar (1.3) is judged on this column;
//   the plain one is kept for comparison.
// - us/frame: p50 of Retargeter::Apply over the clip (one pass; a wall-
//   clock figure for orientation only: retarget_bench is the speed bar).
//
// --detail adds, per pair, each limb bone's mean error and each mapped
// joint's jitter over its source joint's: its position's, then in
// parentheses its model-space turn's (the third difference of the turned
// axes; a joint far out on a bone the source's is near, a finger the
// source has at its wrist, jitters more in position for the same turn),
// its position's over that of the source's motion on the target's own
// bones ("own"), what the proportions alone predict (that motion's jitter
// over the source's: "pred"), and its lever against its source's (its
// distance from its nearest mapped ancestor, whose turn moves it, in leg
// lengths of each rig, retarget poses: "lever t/s") and its distance from
// the pelvis against its source's ("from pelvis t/s": every turn above it
// moves it by about that much).
//
// Not run by CI: a measuring tool (the tests assert the bars).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "retarget/characterize.h"
#include "retarget/quality.h"
#include "retarget/retargeter.h"
#include "tests/testing/full_body.h"
#include "tests/testing/retarget_rigs.h"

namespace reach::retarget {
namespace {

using Eigen::Vector3d;

std::string Data(const std::string& path) {
  return absl::StrCat(REACH_SOURCE_DIR, "/tests/data/", path);
}

struct Rig {
  Skeleton skeleton;
  Characterization roles;
  Pose reference;
  import::BvhClip clip;
};

// As the retargeter test loads rigs (the Character Creator clip's first
// frame is its retarget pose).
bool LoadRig(const std::string& file, Rig* rig) {
  SkeletonDef def;
  if (file.find(".bvh") != std::string::npos) {
    absl::StatusOr<import::BvhClip> read = import::ImportBvh(Data(file));
    if (!read.ok()) return false;
    rig->clip = *std::move(read);
    def = rig->clip.skeleton.def;
  } else if (file.find(".json") != std::string::npos) {
    absl::StatusOr<SkeletonDef> read =
        testing::LoadSkeletonJson(testing::ExamplePath(file));
    if (!read.ok()) return false;
    def = *std::move(read);
  } else {
    absl::StatusOr<import::ImportedSkeleton> read =
        import::ImportGltf(Data(file));
    if (!read.ok()) return false;
    def = read->def;
  }
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(def);
  if (!skeleton.ok()) return false;
  rig->skeleton = *std::move(skeleton);
  rig->reference = RestPose(rig->skeleton);
  if (file.find("ccrig") != std::string::npos) {
    rig->clip.FramePose(0, &rig->reference);
  }
  absl::StatusOr<Characterization> roles =
      Characterize(rig->skeleton, {}, &rig->reference);
  if (!roles.ok()) return false;
  rig->roles = *std::move(roles);
  return true;
}

double LegLength(const Characterization& c, int k,
                 const std::vector<Transform>& g) {
  const Leg& l = c.legs[k];
  return (g[l.shin].translation - g[l.thigh].translation).norm() +
         (g[l.foot].translation - g[l.shin].translation).norm();
}

struct Figures {
  double slide = 0.0, source_slide = 0.0, source_toe_slide = 0.0;
  double excess = 0.0;
  double limb_mean = 0.0, limb_max = 0.0, jitter = 0.0, p50_us = 0.0;
  // Target over the source's motion on the target's own bones.
  double own_jitter = 0.0;
  // The largest per-frame model-space turn of a mapped joint beyond its
  // source's largest (testing::StepBeyondSource), degrees, and its role.
  double step_excess = 0.0;
  std::string step_role;
  int step_frame = 0;  // The clip frame of that joint's largest step.
  // --detail: per limb bone, its mean direction error (degrees); per
  // mapped joint, its position's jitter over its source's and its model
  // turn's over its source's.
  std::vector<std::pair<std::string, double>> bones, joints;
  std::vector<double> turns;  // Per joint: its turn's jitter over its source's.
  // Per joint: its position's jitter over its own bones' (own), that
  // motion's over the source's (predicted), its lever and its source's.
  std::vector<double> own, predicted, lever, source_lever;
  // Per joint: its distance from the pelvis, target's and source's.
  std::vector<double> reach, source_reach;
};

double Angle(const Vector3d& a, const Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

bool Measure(const Rig& source, const Rig& target, Figures* fig) {
  const RetargetSide from{&source.skeleton, &source.roles, source.reference};
  const absl::StatusOr<Pose> aligned =
      AlignLimbs(from, {&target.skeleton, &target.roles, target.reference});
  if (!aligned.ok()) return false;
  const absl::StatusOr<Retargeter> made =
      Retargeter::Create(from, {&target.skeleton, &target.roles, *aligned}, {});
  if (!made.ok()) return false;
  const Retargeter& r = *made;
  const Characterization& sc = source.roles;
  const Characterization& tc = target.roles;
  std::vector<Transform> sref(source.skeleton.num_joints()),
      tref(target.skeleton.num_joints());
  ComputeGlobals(source.skeleton, source.reference, absl::MakeSpan(sref));
  ComputeGlobals(target.skeleton, r.transfer().target_reference(),
                 absl::MakeSpan(tref));
  std::array<double, 2> s_leg, t_leg;
  for (int k = 0; k < 2; ++k) {
    s_leg[k] = LegLength(sc, k, sref);
    t_leg[k] = LegLength(tc, k, tref);
  }
  const double s_legs = s_leg[0], t_legs = t_leg[0];
  // Jitter joints: mapped target joints and their source counterparts.
  std::vector<std::pair<int, int>> joints;
  for (const RoleAssignment& a : tc.roles) {
    const int s = r.transfer().source_of()[a.joint];
    if (s >= 0 && r.transfer().source_next_of(a.joint) < 0) {
      joints.push_back({a.joint, s});
    }
  }
  // Limb bones (upper arm, forearm, thigh, shin), as the quality meter
  // measures them: the target bone against its retarget-pose direction
  // turned as its source joint turned.
  struct Bone {
    int a, b;
    std::string name;
    double sum = 0.0;
  };
  std::vector<Bone> bones;
  for (int k = 0; k < 2; ++k) {
    const Arm& a = tc.arms[k];
    const Leg& l = tc.legs[k];
    const char* side = k == kLeft ? "L " : "R ";
    for (const auto& [x, y, n] :
         {std::tuple{a.upper_arm, a.forearm, "upper arm"},
          std::tuple{a.forearm, a.hand, "forearm"},
          std::tuple{l.thigh, l.shin, "thigh"},
          std::tuple{l.shin, l.foot, "shin"}}) {
      if (x >= 0 && y >= 0 && r.transfer().source_of()[x] >= 0) {
        bones.push_back({x, y, absl::StrCat(side, n)});
      }
    }
  }
  std::vector<std::vector<Vector3d>> s_track, t_track, s_turns, t_turns,
      o_track;
  // The source's motion on the target's own bones: model-space rotations
  // and positions of every target joint, parents first.
  const Skeleton& ts = target.skeleton;
  const Pose& tref_pose = r.transfer().target_reference();
  const int t_pelvis = tc.pelvis;
  const int s_pelvis = r.transfer().source_of()[t_pelvis];
  std::vector<Eigen::Quaterniond> own_rotation(ts.num_joints());
  std::vector<Vector3d> own_position(ts.num_joints());
  RetargetState state;
  RetargetScratch scratch;
  RetargetFrameResult result;
  QualityMeter meter(r);
  Pose sp, tp;
  std::vector<Transform> s(source.skeleton.num_joints()),
      t(target.skeleton.num_joints()), ps, pt;
  std::vector<double> s_step(source.skeleton.num_joints(), 0.0),
      t_step(target.skeleton.num_joints(), 0.0);
  std::vector<int> t_step_frame(target.skeleton.num_joints(), 0);
  std::array<bool, 2> standing_before = {false, false};
  std::array<Vector3d, 2> t_start, s_start, toe_start;
  std::vector<double> times;
  const double dt = source.clip.frame_time;
  const double up_speed = r.options().contact_speed;
  const double up_height = r.options().contact_height;
  for (int f = 1; f < source.clip.num_frames; ++f) {
    source.clip.FramePose(f, &sp);
    const auto t0 = std::chrono::steady_clock::now();
    if (!r.Apply(sp, dt, state, scratch, &tp, &result).ok()) return false;
    const auto t1 = std::chrono::steady_clock::now();
    times.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    meter.Add(sp, tp, result, state);
    ComputeGlobals(source.skeleton, sp, absl::MakeSpan(s));
    ComputeGlobals(target.skeleton, tp, absl::MakeSpan(t));
    for (Bone& b : bones) {
      const int sa = r.transfer().source_of()[b.a];
      const Eigen::Quaterniond turn = r.transfer().align() * s[sa].rotation *
                                      sref[sa].rotation.conjugate() *
                                      r.transfer().align().conjugate();
      b.sum += Angle(turn * (tref[b.b].translation - tref[b.a].translation),
                     t[b.b].translation - t[b.a].translation);
    }
    for (int k = 0; k < 2 && f > 1; ++k) {
      const Vector3d sa = s[sc.legs[k].foot].translation;
      const Vector3d ta = t[tc.legs[k].foot].translation;
      const double s_speed =
          (sa - ps[sc.legs[k].foot].translation).norm() / dt / s_leg[k];
      const double t_speed =
          (ta - pt[tc.legs[k].foot].translation).norm() / dt / t_leg[k];
      fig->excess = std::max(fig->excess, t_speed - s_speed);
      const double height =
          (r.source_vertical().dot(sa) - state.source_floor) / s_leg[k];
      // Hysteresis: in stance below the height and speed, out of it above
      // 1.5x the height or the speed.
      const bool standing =
          standing_before[k]
              ? height < 1.5 * up_height && s_speed < 1.5 * up_speed
              : height < up_height && s_speed < up_speed;
      if (standing) {
        const int toe = sc.legs[k].toe;
        if (!standing_before[k]) {
          t_start[k] = ta;
          s_start[k] = sa;
          if (toe >= 0) toe_start[k] = s[toe].translation;
        }
        if (toe >= 0) {
          Vector3d dto = s[toe].translation - toe_start[k];
          dto -= r.source_vertical().dot(dto) * r.source_vertical();
          fig->source_toe_slide =
              std::max(fig->source_toe_slide, dto.norm() / s_leg[k]);
        }
        Vector3d dtm = ta - t_start[k];
        dtm -= r.floor_up().dot(dtm) * r.floor_up();
        Vector3d dsm = sa - s_start[k];
        dsm -= r.source_vertical().dot(dsm) * r.source_vertical();
        fig->slide = std::max(fig->slide, dtm.norm() / t_leg[k]);
        fig->source_slide = std::max(fig->source_slide, dsm.norm() / s_leg[k]);
      }
      standing_before[k] = standing;
    }
    if (f > 1) {
      for (size_t j = 0; j < s.size(); ++j) {
        s_step[j] = std::max(s_step[j],
                             s[j].rotation.angularDistance(ps[j].rotation));
      }
      for (size_t j = 0; j < t.size(); ++j) {
        const double step = t[j].rotation.angularDistance(pt[j].rotation);
        if (step > t_step[j]) {
          t_step[j] = step;
          t_step_frame[j] = f;
        }
      }
    }
    ps = s;
    pt = t;
    std::vector<Vector3d>& a = s_track.emplace_back();
    std::vector<Vector3d>& b = t_track.emplace_back();
    std::vector<Vector3d>& ar = s_turns.emplace_back();
    std::vector<Vector3d>& br = t_turns.emplace_back();
    const Eigen::Quaterniond& align = r.transfer().align();
    for (int j = 0; j < ts.num_joints(); ++j) {
      const int p = ts.joint(j).parent;
      const Transform& local = tref_pose.local[j];
      own_rotation[j] =
          r.transfer().source_of()[j] >= 0
              ? Eigen::Quaterniond(r.transfer().Turn(j, scratch.transfer) *
                                   tref[j].rotation)
              : p >= 0 ? Eigen::Quaterniond(own_rotation[p] * local.rotation)
                       : tref[j].rotation;
      if (j == t_pelvis && s_pelvis >= 0) {
        own_position[j] =
            tref[j].translation +
            r.transfer().pelvis_scale() *
                (align * (s[s_pelvis].translation - sref[s_pelvis].translation));
      } else {
        own_position[j] = p >= 0 ? Vector3d(own_position[p] +
                                            own_rotation[p] * local.translation)
                                 : tref[j].translation;
      }
    }
    std::vector<Vector3d>& o = o_track.emplace_back();
    for (const auto& [tj, sj] : joints) {
      o.push_back(own_position[tj] / t_legs);
    }
    for (const auto& [tj, sj] : joints) {
      a.push_back(s[sj].translation / s_legs);
      b.push_back(t[tj].translation / t_legs);
      // Each joint's model-space turn from its retarget pose (the source's
      // in the target's frame), as the images of the three axes: its
      // rotation's jitter, whatever the bone's length.
      const Eigen::Quaterniond st = align * s[sj].rotation *
                                    sref[sj].rotation.conjugate() *
                                    align.conjugate();
      const Eigen::Quaterniond tt =
          t[tj].rotation * tref[tj].rotation.conjugate();
      for (int axis = 0; axis < 3; ++axis) {
        ar.push_back(st * Vector3d::Unit(axis));
        br.push_back(tt * Vector3d::Unit(axis));
      }
    }
  }
  const double frames = static_cast<double>(s_track.size());
  for (const Bone& b : bones) {
    fig->bones.push_back({b.name, b.sum / frames * 180.0 / M_PI});
  }
  double s_sum = 0.0, t_sum = 0.0, o_sum = 0.0;
  std::vector<double> s_joint(joints.size(), 0.0), t_joint(joints.size(), 0.0),
      o_joint(joints.size(), 0.0);
  auto third = [](const std::vector<std::vector<Vector3d>>& p, size_t i,
                  size_t j) {
    return (p[i][j] - 3.0 * p[i - 1][j] + 3.0 * p[i - 2][j] - p[i - 3][j])
        .norm();
  };
  for (size_t i = 3; i < s_track.size(); ++i) {
    for (size_t j = 0; j < joints.size(); ++j) {
      s_joint[j] += third(s_track, i, j);
      t_joint[j] += third(t_track, i, j);
      o_joint[j] += third(o_track, i, j);
      s_sum += third(s_track, i, j);
      t_sum += third(t_track, i, j);
      o_sum += third(o_track, i, j);
    }
  }
  std::vector<double> s_turn(joints.size(), 0.0), t_turn(joints.size(), 0.0);
  for (size_t i = 3; i < s_turns.size(); ++i) {
    for (size_t j = 0; j < 3 * joints.size(); ++j) {
      s_turn[j / 3] += third(s_turns, i, j);
      t_turn[j / 3] += third(t_turns, i, j);
    }
  }
  for (size_t j = 0; j < joints.size(); ++j) {
    fig->joints.push_back({target.skeleton.joint(joints[j].first).name,
                           s_joint[j] > 0.0 ? t_joint[j] / s_joint[j] : 0.0});
    fig->turns.push_back(s_turn[j] > 0.0 ? t_turn[j] / s_turn[j] : 0.0);
    fig->own.push_back(o_joint[j] > 0.0 ? t_joint[j] / o_joint[j] : 0.0);
    fig->predicted.push_back(s_joint[j] > 0.0 ? o_joint[j] / s_joint[j] : 0.0);
    // The lever: to the nearest mapped ancestor (whose turn moves it).
    const auto [tj, sj] = joints[j];
    int ta = ts.joint(tj).parent;
    while (ta >= 0 && r.transfer().source_of()[ta] < 0) {
      ta = ts.joint(ta).parent;
    }
    const int sa = ta >= 0 ? r.transfer().source_of()[ta] : -1;
    fig->lever.push_back(
        ta >= 0 ? (tref[tj].translation - tref[ta].translation).norm() / t_legs
                : 0.0);
    fig->source_lever.push_back(
        sa >= 0 ? (sref[sj].translation - sref[sa].translation).norm() / s_legs
                : 0.0);
    fig->reach.push_back(
        (tref[tj].translation - tref[t_pelvis].translation).norm() / t_legs);
    fig->source_reach.push_back(
        s_pelvis >= 0
            ? (sref[sj].translation - sref[s_pelvis].translation).norm() /
                  s_legs
            : 0.0);
  }
  const reach::testing::StepExcess steps =
      reach::testing::StepBeyondSource(r.transfer(), tc, t_step, s_step);
  fig->step_excess = steps.degrees;
  fig->step_role = steps.role;
  if (steps.joint >= 0) fig->step_frame = t_step_frame[steps.joint];
  fig->jitter = s_sum > 0.0 ? t_sum / s_sum : 0.0;
  fig->own_jitter = o_sum > 0.0 ? t_sum / o_sum : 0.0;
  const RetargetQuality q = meter.Result();
  fig->limb_mean = q.limb_bones_mean_deg;
  fig->limb_max = q.limb_bones_max_deg;
  std::sort(times.begin(), times.end());
  fig->p50_us = times.empty() ? 0.0 : times[times.size() / 2];
  return true;
}

}  // namespace
}  // namespace reach::retarget

int main(int argc, char** argv) {
  using namespace reach::retarget;
  std::string only;
  bool detail = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--pairs") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else if (std::strcmp(argv[i], "--detail") == 0) {
      detail = true;
    } else {
      std::fprintf(stderr,
                   "usage: retarget_figures [--pairs SUBSTRING] [--detail]\n");
      return 2;
    }
  }
  const char* sources[] = {
      "mocap/cmu_01_01_jump.bvh",        "mocap/cmu_02_01_walk.bvh",
      "mocap/cmu_06_15_shoot_ccrig.bvh", "mocap/cmu_131_03_hop.bvh",
      "mocap/cmu_141_16_wave.bvh",       "rigs/Boxing_Toes.bvh"};
  const char* targets[] = {"rigs/Boxing_Toes.bvh", "rigs/BCN_Epileptic.glb",
                           "gltf/RiggedFigure.glb", "humanoid.skeleton.json",
                           "humanoid_limited.skeleton.json"};
  std::printf(
      "| source | target | stance slide (legs) | source ankle's | source "
      "toe's | excess (legs/s) | limb bones mean/max (deg) | jitter | own "
      "bones' | step beyond source's (deg) | us/frame |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  Figures worst;
  int failed = 0;
  for (const char* sname : sources) {
    Rig source;
    if (!LoadRig(sname, &source)) {
      std::printf("| %s | (load failed) |\n", sname);
      ++failed;
      continue;
    }
    for (const char* tname : targets) {
      if (std::string(sname) == tname) continue;
      const std::string pair = absl::StrCat(sname, " ", tname);
      if (!only.empty() && pair.find(only) == std::string::npos) continue;
      Rig target;
      Figures fig;
      if (!LoadRig(tname, &target) || !Measure(source, target, &fig)) {
        std::printf("| %s | %s | (failed) |\n", sname, tname);
        ++failed;
        continue;
      }
      std::printf(
          "| %s | %s | %.4f | %.4f | %.4f | %.2f | %.2f / %.1f | %.2f | %.2f "
          "| %.2f (%s, frame %d) | %.1f |\n",
          sname, tname, fig.slide, fig.source_slide, fig.source_toe_slide,
          fig.excess, fig.limb_mean, fig.limb_max, fig.jitter, fig.own_jitter,
          fig.step_excess, fig.step_role.c_str(), fig.step_frame, fig.p50_us);
      if (detail) {
        std::printf("|   | limb bones' mean error (deg):");
        for (const auto& [name, e] : fig.bones) {
          std::printf(" %s %.2f,", name.c_str(), e);
        }
        std::printf(" |\n|   | joints' jitter over the source's:");
        for (size_t j = 0; j < fig.joints.size(); ++j) {
          std::printf(
              " %s %.2f (turn %.2f, own %.2f, pred %.2f, lever %.3f/%.3f, "
              "from pelvis %.2f/%.2f),",
              fig.joints[j].first.c_str(), fig.joints[j].second, fig.turns[j],
              fig.own[j], fig.predicted[j], fig.lever[j], fig.source_lever[j],
              fig.reach[j], fig.source_reach[j]);
        }
        std::printf(" |\n");
      }
      worst.slide = std::max(worst.slide, fig.slide);
      worst.excess = std::max(worst.excess, fig.excess);
      worst.limb_mean = std::max(worst.limb_mean, fig.limb_mean);
      worst.limb_max = std::max(worst.limb_max, fig.limb_max);
      worst.jitter = std::max(worst.jitter, fig.jitter);
      worst.own_jitter = std::max(worst.own_jitter, fig.own_jitter);
      worst.step_excess = std::max(worst.step_excess, fig.step_excess);
    }
  }
  std::printf(
      "| worst | | %.4f | | | %.2f | %.2f / %.1f | %.2f | %.2f | %.2f | |\n",
      worst.slide, worst.excess, worst.limb_mean, worst.limb_max, worst.jitter,
      worst.own_jitter, worst.step_excess);
  return failed == 0 ? 0 : 1;
}
