#include "retarget/retargeter.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/solve.h"

namespace reach::retarget {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// Full-body priorities: feet first, then hands.
constexpr int kFeetPriority = 0;
constexpr int kHandsPriority = 1;
// Goal tolerances: 1e-4 of the body's size (0.18 mm on a 1.8 m body, a
// fifth of the 1 mm the retarget must meet) and 1e-3 rad (0.06 degrees);
// the full-body defaults (1e-5, 1e-4 rad) cost a third more iterations.
constexpr double kPositionTolerance = 1e-4;
constexpr double kOrientationTolerance = 1e-3;

// `value` in [lo, hi] ((lo, hi] when `lo_open`), naming the option.
absl::Status CheckRange(double value, const char* field, double lo, double hi,
                        bool lo_open = false) {
  if ((lo_open ? value > lo : value >= lo) && value <= hi) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("options.", field, " = ",
                                                 value, ": must be in ",
                                                 lo_open ? "(" : "[", lo, ", ",
                                                 hi, "]"));
}

// The target skeleton with every joint stiff (stiffness 1) except those on
// the limbs' paths, which keep their own.
absl::StatusOr<Skeleton> SolvingSkeleton(const Skeleton& target,
                                         const std::vector<char>& limb) {
  SkeletonDef def;
  def.joints.reserve(target.num_joints());
  for (int j = 0; j < target.num_joints(); ++j) {
    const Joint& joint = target.joint(j);
    JointDef d;
    d.name = joint.name;
    d.parent = joint.parent;
    d.rest = joint.rest;
    d.type = joint.type;
    d.axis = joint.axis;
    d.min_angle_rad = joint.min_angle_rad;
    d.max_angle_rad = joint.max_angle_rad;
    d.max_swing_rad = joint.max_swing_rad;
    d.stiffness = limb[j] ? joint.stiffness : 1.0;
    def.joints.push_back(std::move(d));
  }
  SkeletonLimits limits;
  limits.max_joints = std::max(limits.max_joints, target.num_joints());
  return Skeleton::Create(std::move(def), limits);
}

double Smoothstep(double x) {
  x = std::clamp(x, 0.0, 1.0);
  return x * x * (3.0 - 2.0 * x);
}

}  // namespace

absl::Status ValidateRetargetOptions(const RetargetOptions& o) {
  if (o.source_floor && !std::isfinite(*o.source_floor)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.source_floor = ", *o.source_floor, ": must be finite"));
  }
  absl::Status s = CheckRange(o.contact_height, "contact_height", 0.0, 10.0,
                              /*lo_open=*/true);
  if (s.ok()) {
    s = CheckRange(o.contact_speed, "contact_speed", 0.0, 10.0,
                   /*lo_open=*/true);
  }
  if (s.ok()) s = CheckRange(o.ankle_height, "ankle_height", 0.0, 1.0);
  if (s.ok()) s = CheckRange(o.release_seconds, "release_seconds", 0.0, 10.0);
  if (s.ok()) s = CheckRange(o.max_iterations, "max_iterations", 1, 1000);
  if (s.ok()) s = CheckRange(o.pelvis_scale, "pelvis_scale", 0.0, 1e6);
  return s;
}

absl::StatusOr<Retargeter> Retargeter::Create(const RetargetSide& source,
                                              const RetargetSide& target,
                                              const RetargetOptions& options) {
  const absl::Status valid = ValidateRetargetOptions(options);
  if (!valid.ok()) return valid;
  absl::StatusOr<Transfer> transfer =
      Transfer::Create(source, target, options.pelvis_scale);
  if (!transfer.ok()) return transfer.status();
  const Skeleton& ss = *source.skeleton;
  const Skeleton& ts = *target.skeleton;
  const Characterization& sc = *source.roles;
  const Characterization& tc = *target.roles;
  std::vector<Transform> sg(ss.num_joints()), tg(ts.num_joints());
  ComputeGlobals(ss, source.reference, absl::MakeSpan(sg));
  ComputeGlobals(ts, transfer->target_reference(), absl::MakeSpan(tg));

  // The limbs with IK: both rigs need the limb's start and end; the joints
  // from start to end (twist joints included) turn.
  std::vector<char> limb(ts.num_joints(), 0);
  std::array<Limb, 2> arms, legs;
  auto make = [&](int s_start, int s_mid, int s_end, int t_start, int t_mid,
                  int t_end, bool on, const Vector3d& bend, Limb* out) {
    if (!on || s_start < 0 || s_end < 0 || t_start < 0 || t_end < 0) return;
    auto length = [](const std::vector<Transform>& g, int a, int m, int b) {
      if (m < 0) return (g[b].translation - g[a].translation).norm();
      return (g[m].translation - g[a].translation).norm() +
             (g[b].translation - g[m].translation).norm();
    };
    // The middle joints must lie on the path (an override could break it).
    const int sm = s_mid >= 0 && PathLength(ss, s_start, s_mid) > 0 &&
                           PathLength(ss, s_mid, s_end) > 0
                       ? s_mid
                       : -1;
    const int tm = t_mid >= 0 && PathLength(ts, t_start, t_mid) > 0 &&
                           PathLength(ts, t_mid, t_end) > 0
                       ? t_mid
                       : -1;
    if (PathLength(ss, s_start, s_end) < 0 ||
        PathLength(ts, t_start, t_end) < 0) {
      return;
    }
    out->start = t_start;
    out->middle = tm;
    out->end = t_end;
    out->source_start = s_start;
    out->source_end = s_end;
    out->source_length = length(sg, s_start, sm, s_end);
    out->start_ref_inverse = tg[t_start].rotation.conjugate();
    out->bend_ref = bend;
    out->target_length = length(tg, t_start, tm, t_end);
    if (!(out->source_length > 0.0) || !(out->target_length > 0.0)) {
      *out = Limb();
      return;
    }
    for (int j = t_end;; j = ts.joint(j).parent) {
      limb[j] = 1;
      if (j == t_start) break;
    }
  };
  for (int k = 0; k < 2; ++k) {
    const Arm &sa = sc.arms[k], &ta = tc.arms[k];
    const Leg &sl = sc.legs[k], &tl = tc.legs[k];
    // Knees bend forward, elbows back.
    make(sa.upper_arm, sa.forearm, sa.hand, ta.upper_arm, ta.forearm, ta.hand,
         options.arm_ik[k], -tc.forward, &arms[k]);
    make(sl.thigh, sl.shin, sl.foot, tl.thigh, tl.shin, tl.foot,
         options.leg_ik[k], tc.forward, &legs[k]);
  }
  absl::StatusOr<Skeleton> solving = SolvingSkeleton(ts, limb);
  if (!solving.ok()) return solving.status();

  Retargeter r(*std::move(transfer), *std::move(solving));
  r.options_ = options;
  r.arms_ = arms;
  r.legs_ = legs;
  r.source_skeleton_ = &ss;
  r.source_up_ = Vertical(sc.up);
  r.floor_up_ = Vertical(tc.up);
  r.tolerance_ = kPositionTolerance * BodySize(r.solving_);
  r.full_body_.root_mode = RootMode::kPinned;
  r.full_body_.max_iterations = options.max_iterations;
  return r;
}

absl::Status Retargeter::Apply(const Pose& source, double dt,
                               RetargetState& state, RetargetScratch& scratch,
                               Pose* target, RetargetFrameResult* result,
                               const Deadline& deadline) const {
  const absl::Status valid = ValidatePose(*source_skeleton_, source);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("source: ", valid.message()));
  }
  if (state.started && !(dt > 0.0 && dt <= 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("dt = ", dt, ": must be in (0, 1e6] seconds"));
  }
  transfer_.Apply(source, scratch.transfer, target);
  const std::vector<Transform>& sg = scratch.transfer.source_globals;
  const std::vector<Transform>& tg = scratch.transfer.target_globals;
  const Quaterniond& align = transfer_.align();

  scratch.goals.clear();
  scratch.goals.reserve(4);
  RetargetFrameResult frame;
  // A limb's goal: the target limb's start plus the source's direction
  // times its extension ratio times the target limb's length.
  auto add_goal = [&](const Limb& limb, int priority) -> Goal* {
    if (limb.end < 0) return nullptr;
    const Vector3d reach =
        sg[limb.source_end].translation - sg[limb.source_start].translation;
    const double extension =
        std::min(reach.norm() / limb.source_length, 1.0);
    const Vector3d direction =
        reach.norm() > 0.0 ? Vector3d(align * reach.normalized())
                           : Vector3d(tg[limb.end].translation -
                                      tg[limb.start].translation)
                                 .normalized();
    Goal& goal = scratch.goals.emplace_back();
    goal.solver = SolverKind::kFullBody;
    goal.tip_joint = limb.end;
    goal.root_joint = limb.start;
    goal.priority = priority;
    goal.options.tolerance = tolerance_;
    goal.options.orientation_tolerance_rad = kOrientationTolerance;
    goal.target = tg[limb.start].translation +
                  direction * (extension * limb.target_length);
    goal.target_orientation = tg[limb.end].rotation;
    return &goal;
  };
  // A limb's pole: the transferred limb's own bend (its knee or elbow off
  // the line from its start to its end; the solve needs a pole, as without
  // one a ball-jointed knee or elbow is free to swing its bend about the
  // line), from the transferred knee or elbow. A transferred limb straight
  // to 1e-3 of its length has no side: then the way it bent in the
  // retarget pose (knees forward, elbows back), turned as its start joint
  // turned.
  auto set_pole = [&](const Limb& limb, Goal* goal) {
    if (limb.middle < 0) return;
    const Vector3d start = tg[limb.start].translation;
    const Vector3d line = tg[limb.end].translation - start;
    if (!(line.squaredNorm() > 0.0)) return;
    auto off_line = [&](Vector3d v) {
      return Vector3d(v - v.dot(line) / line.squaredNorm() * line);
    };
    Vector3d away = off_line(tg[limb.middle].translation - start);
    if (away.norm() <= 1e-3 * limb.target_length) {
      away = off_line(tg[limb.start].rotation *
                      (limb.start_ref_inverse * limb.bend_ref));
    }
    if (away.norm() > 1e-9 * limb.target_length) {
      goal->pole = tg[limb.middle].translation +
                   away.normalized() * limb.target_length;
    }
  };

  if (!state.started) {
    // The floors: the source's given or under this frame's lower ankle;
    // the target's, the source floor's point below the source hips mapped
    // as the hips are.
    if (options_.source_floor) {
      state.source_floor = *options_.source_floor;
    } else {
      state.source_floor = INFINITY;
      for (const Limb& leg : legs_) {
        if (leg.end < 0) continue;
        state.source_floor = std::min(
            state.source_floor, source_up_.dot(sg[leg.source_end].translation) -
                                    options_.ankle_height * leg.source_length);
      }
      if (!std::isfinite(state.source_floor)) state.source_floor = 0.0;
    }
    const Vector3d& p = transfer_.source_hips_reference();
    const Vector3d below =
        p - (source_up_.dot(p) - state.source_floor) * source_up_;
    state.target_floor = floor_up_.dot(
        transfer_.target_hips_reference() +
        transfer_.pelvis_scale() * (align * (below - p)));
  }
  for (int k = 0; k < 2; ++k) {
    const Limb& leg = legs_[k];
    RetargetState::Foot& foot = state.feet[k];
    Goal* goal = add_goal(leg, kFeetPriority);
    if (goal == nullptr) continue;
    // No lower than the floor plus the ankle's height.
    const double lowest =
        state.target_floor + options_.ankle_height * leg.target_length;
    auto lift = [&](Vector3d p) {
      const double h = floor_up_.dot(p);
      if (h < lowest) p += (lowest - h) * floor_up_;
      return p;
    };
    const Vector3d live = goal->target;
    goal->target = lift(goal->target);
    // A held foot stretches the leg no more than the source's stretches
    // (nor than 0.98 of its length if the source's is more bent): the last
    // degrees to straight turn the knee fast for a small move of the foot.
    constexpr double kHeldReach = 0.98;
    const double reach = std::min(
        leg.target_length,
        std::max((goal->target - tg[leg.start].translation).norm(),
                 kHeldReach * leg.target_length));
    if (options_.plant_feet) {
      // Contact from the source foot's height and smoothed speed.
      const Vector3d at = sg[leg.source_end].translation;
      const double height =
          (source_up_.dot(at) - state.source_floor) / leg.source_length;
      if (state.started) {
        const double speed = (at - foot.last_source).norm() / dt /
                             leg.source_length;
        // About 1/20 s of smoothing whatever the frame rate.
        const double keep = std::exp(-dt / 0.05);
        foot.speed = keep * foot.speed + (1.0 - keep) * speed;
      } else {
        foot.speed = 0.0;
      }
      foot.last_source = at;
      // In contact: low and slow; staying in contact, a little higher and
      // faster, but not rising more than kLiftLegs above where it landed
      // (a heel lifting to step or jump away).
      constexpr double kLiftLegs = 0.03;
      bool contact =
          foot.contact ? height < 1.5 * options_.contact_height &&
                             height < foot.landed_height + kLiftLegs &&
                             foot.speed < 2.0 * options_.contact_speed
                       : height < options_.contact_height &&
                             foot.speed < options_.contact_speed;
      if (foot.wait_lift) {
        // The last contact ended out of reach: none again until the source
        // foot leaves contact.
        if (!contact) foot.wait_lift = false;
        contact = false;
      }
      // A planted place holds the foot's place on the floor (its
      // horizontal position); up and down it follows the live goal (a heel
      // lifting to step or jump, a floor that is not quite level), so a
      // held foot never stretches the leg beyond what the source's does.
      auto hold = [&](const Vector3d& at, const Vector3d& place) {
        const Vector3d d = place - at;
        return Vector3d(at + d - floor_up_.dot(d) * floor_up_);
      };
      // A held place out of `reach` from where the transfer put the thigh
      // (the body does not chase it), or one the source has left behind
      // (its foot crept while slow: a pivot, a shuffle) by more than
      // kMaxDriftLegs, ends the contact; no new one starts until the
      // source foot leaves contact.
      constexpr double kMaxDriftLegs = 0.1;
      if (contact && foot.contact) {
        const Vector3d held = hold(live, foot.planted);
        if ((held - tg[leg.start].translation).norm() > reach ||
            (held - live).norm() > kMaxDriftLegs * leg.target_length) {
          contact = false;
          foot.wait_lift = true;
        }
      }
      // On its way back to the live goal from the last planted place.
      if (foot.release_left > 0.0) {
        foot.release_left = std::max(0.0, foot.release_left - dt);
        const double w =
            Smoothstep(1.0 - foot.release_left / options_.release_seconds);
        const Vector3d held = hold(goal->target, foot.release_from);
        goal->target = held + w * (goal->target - held);
      }
      if (contact && !foot.contact) {
        // Planted where the goal is now (a new contact during a release
        // starts from the blend: no jump).
        foot.landed_height = height;
        foot.planted = goal->target;
        foot.release_left = 0.0;
      } else if (!contact && foot.contact) {
        foot.release_from = foot.planted;
        foot.release_left = options_.release_seconds;
        goal->target = hold(goal->target, foot.planted);
      }
      foot.contact = contact;
      if (contact) {
        goal->target = hold(goal->target, foot.planted);
        frame.feet[k].planted = true;
      }
    }
    // A held or blending foot no farther from the thigh than `reach` (a
    // blend from a planted place can pass beyond it while the body rises).
    const Vector3d from_thigh = goal->target - tg[leg.start].translation;
    if (from_thigh.norm() > reach) {
      goal->target =
          tg[leg.start].translation + from_thigh * (reach / from_thigh.norm());
    }
    set_pole(leg, goal);
    frame.feet[k].active = true;
    frame.feet[k].goal = goal->target;
    frame.feet[k].adjusted = goal->target != live;
  }
  for (int k = 0; k < 2; ++k) {
    Goal* goal = add_goal(arms_[k], kHandsPriority);
    if (goal == nullptr) continue;
    set_pole(arms_[k], goal);
    frame.hands[k].active = true;
    frame.hands[k].goal = goal->target;
  }
  state.started = true;

  if (!scratch.goals.empty()) {
    scratch.results.resize(scratch.goals.size());
    if (deadline.Expired()) {
      // No time left (a batch's shared budget spent, or the call
      // cancelled): the transferred pose, its goals measured, unsolved.
      for (size_t g = 0; g < scratch.goals.size(); ++g) {
        const Goal& goal = scratch.goals[g];
        const Transform& end = tg[goal.tip_joint];
        GoalResult& out = scratch.results[g];
        out = GoalResult{};
        out.position_error = (end.translation - goal.target).norm();
        out.orientation_error_rad =
            end.rotation.angularDistance(*goal.target_orientation);
        out.reached = out.position_error <= tolerance_ &&
                      out.orientation_error_rad <= kOrientationTolerance;
      }
    } else {
      const absl::Status solved =
          Solve(solving_, scratch.goals, scratch.workspace, target,
                absl::MakeSpan(scratch.results), SolveLimits(), deadline,
                full_body_);
      if (!solved.ok()) return solved;
    }
    int g = 0;
    for (auto* limbs : {&frame.feet, &frame.hands}) {
      for (LimbResult& r : *limbs) {
        if (!r.active) continue;
        const GoalResult& out = scratch.results[g++];
        r.reached = out.reached;
        r.position_error = out.position_error;
        r.orientation_error_rad = out.orientation_error_rad;
        frame.iterations = std::max(frame.iterations, out.iterations);
      }
    }
  }
  if (result != nullptr) *result = frame;
  return absl::OkStatus();
}

}  // namespace reach::retarget
