#include "retarget/retargeter.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/limits.h"
#include "solvers/solve.h"

namespace reach::retarget {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// Full-body priorities: feet first, then hands.
constexpr int kFeetPriority = 0;
constexpr int kHandsPriority = 1;
// A foot's turn on a leg with limits, apart from its place (Apply).
constexpr int kFeetTurnPriority = 2;
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
  return absl::InvalidArgumentError(
      absl::StrCat("options.", field, " = ", value, ": must be in ",
                   lo_open ? "(" : "[", lo, ", ", hi, "]"));
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

// A foot catching up with its live goal after a stance closes the gap by
// at most this many of its leg lengths per second: so it moves no faster
// than the live goal plus this (a swing takes about 0.4 s; the source's
// own creep over a stance, which a held foot does not follow, is up to
// 0.2 leg lengths).
constexpr double kCatchUpSpeed = 0.5;
// Its last part eased out (an exponential of this many seconds), so the
// foot comes to its live goal without a jolt.
constexpr double kCatchUpTail = 0.1;
// A held foot the leg cannot reach on the floor from where the transfer
// put the thigh (at the end of a stance the source's ankle rolls forward
// over the toe and its leg straightens; the held ankle stays behind) lifts
// as far as the leg's reach needs, eased in over kLiftEase leg lengths of
// that need (quadratic, so the foot leaves the floor without a jolt):
// the body keeps the source's motion (the same rig on both sides gives
// back the source's pelvis exactly).
constexpr double kLiftEase = 0.005;
// A pelvis moving away from held feet its legs' limits cannot fold to
// eases into the move over this many leg lengths of need (quadratic), so
// the hips do not jerk as a crouch deepens past what the knees allow.
constexpr double kRiseEase = 0.02;

double Smoothstep(double x) {
  x = std::clamp(x, 0.0, 1.0);
  return x * x * (3.0 - 2.0 * x);
}

// The nearest `limb`'s end can come to its start within its middle
// joint's limits, the joints between as in the rest pose (`rest`: its
// globals); 0 when the middle joint is unlimited (a leg of a rig without
// limits is not held off anything). A hinge (a knee of one degree of
// freedom): the least distance over its range, sampled every 1/4 degree
// and refined; a ball: its bone swung by its cone away from the start's
// bone.
double MinReach(const Skeleton& skeleton, const std::vector<Transform>& rest,
                int start_joint, int middle_joint, int end_joint) {
  if (middle_joint < 0) return 0.0;
  const Joint& knee = skeleton.joint(middle_joint);
  if (!knee.IsLimited()) return 0.0;
  const Vector3d start = rest[start_joint].translation;
  const Vector3d middle = rest[middle_joint].translation;
  const Vector3d lower = rest[end_joint].translation - middle;
  if (knee.type == JointType::kHinge) {
    // The end turns with the hinge's local rotation, HingeRotation(angle),
    // under the parent's rest rotation.
    const int p = knee.parent;
    const Quaterniond parent =
        p >= 0 ? rest[p].rotation : Quaterniond::Identity();
    const Vector3d local = rest[middle_joint].rotation.conjugate() * lower;
    const double lo = std::max(knee.min_angle_rad, -M_PI);
    const double hi = std::min(knee.max_angle_rad, M_PI);
    if (!(hi >= lo)) return 0.0;
    auto distance = [&](double angle) {
      return (middle - start + parent * (HingeRotation(knee, angle) * local))
          .norm();
    };
    constexpr int kSamples = 1440;
    double best = distance(lo), best_angle = lo;
    for (int i = 1; i <= kSamples; ++i) {
      const double a = lo + (hi - lo) * i / kSamples;
      const double d = distance(a);
      if (d < best) best = d, best_angle = a;
    }
    // Golden-section refinement around the best sample.
    double a = std::max(lo, best_angle - (hi - lo) / kSamples);
    double b = std::min(hi, best_angle + (hi - lo) / kSamples);
    for (int i = 0; i < 40; ++i) {
      const double m1 = b - 0.618033988749895 * (b - a);
      const double m2 = a + 0.618033988749895 * (b - a);
      if (distance(m1) < distance(m2)) {
        b = m2;
      } else {
        a = m1;
      }
    }
    return std::min(best, distance(0.5 * (a + b)));
  }
  if (knee.type == JointType::kBall && std::isfinite(knee.max_swing_rad)) {
    // The bend (the angle between the two bones' directions) can grow by
    // the cone's half-angle at most.
    const Vector3d upper = middle - start;
    const double a = upper.norm(), b = lower.norm();
    if (!(a > 0.0) || !(b > 0.0)) return 0.0;
    const double bend =
        std::acos(std::clamp(upper.dot(lower) / (a * b), -1.0, 1.0));
    const double most = std::min(M_PI, bend + knee.max_swing_rad);
    return std::sqrt(
        std::max(0.0, a * a + b * b + 2.0 * a * b * std::cos(most)));
  }
  return 0.0;
}

}  // namespace

bool Stance(bool before, double height, double speed,
            const RetargetOptions& options) {
  return before
             ? height < 1.5 * options.contact_height &&
                   speed < 1.5 * options.contact_speed
             : height < options.contact_height && speed < options.contact_speed;
}

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
      if (ts.joint(j).IsLimited()) out->limited = true;
      if (j == t_start) break;
    }
    // Its bones from start to end (built end first, then reversed).
    for (int c = t_end; c != t_start; c = ts.joint(c).parent) {
      const int j = ts.joint(c).parent;
      int turned_by = j;
      while (turned_by >= 0 && transfer->source_of()[turned_by] < 0) {
        turned_by = ts.joint(turned_by).parent;
      }
      out->bones.push_back({turned_by, tg[c].translation - tg[j].translation});
    }
    std::reverse(out->bones.begin(), out->bones.end());
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
  // Each leg's nearest reach (MinReach): where its knee cannot fold as far
  // as the source's, the pelvis moves away from held feet (Apply).
  {
    std::vector<Transform> rest(ts.num_joints());
    ComputeGlobals(ts, RestPose(ts), absl::MakeSpan(rest));
    for (Limb& leg : legs) {
      if (leg.end >= 0) {
        leg.min_reach = MinReach(ts, rest, leg.start, leg.middle, leg.end);
      }
    }
  }
  absl::StatusOr<Skeleton> solving = SolvingSkeleton(ts, limb);
  if (!solving.ok()) return solving.status();

  Retargeter r(*std::move(transfer), *std::move(solving));
  r.options_ = options;
  r.arms_ = arms;
  r.legs_ = legs;
  r.pelvis_ = tc.pelvis;
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
  // The frame before's answer, for limited joints' sides (RetargetState).
  const Pose* previous = state.started ? &state.previous : nullptr;
  // The frame before's source and transfer (the limbs' aim, Transfer::Apply).
  const FrameBefore before =
      state.started
          ? FrameBefore{&state.previous_source, &state.previous_transferred, dt}
          : FrameBefore{};
  transfer_.Apply(source, scratch.transfer, target, previous, before);
  state.previous_transferred.local = target->local;
  state.previous_source = scratch.transfer.source_globals;
  const std::vector<Transform>& sg = scratch.transfer.source_globals;
  const std::vector<Transform>& tg = scratch.transfer.target_globals;
  const Quaterniond& align = transfer_.align();

  scratch.goals.clear();
  scratch.goals.reserve(6);  // Feet, hands, feet's turns (below).
  RetargetFrameResult frame;
  // A limb's goal. A hand's: where it is when each bone of the arm, with
  // the target's lengths, turns as its source joint turns (the transfer's
  // unlimited pose of the arm), from the arm's start where the transfer put
  // it; so the elbow bends as the performer's whatever the two rigs'
  // upper-arm-to-forearm proportions (the source hand's direction and
  // extension on an arm whose forearm is relatively longer bend the elbow
  // otherwise: 5-7 degrees off per arm bone on the jump), and on a limited
  // rig the solve brings the arm as near it as the limits allow. A foot's:
  // the thigh plus the source leg's direction times its extension ratio
  // times the target leg's length (UE's IK Retargeter rule), so the foot's
  // height follows the source's as the hips do (scaled by the legs'
  // ratio) and a foot on the source's floor is on the target's; placing
  // it along the leg's bones instead costs the solve 10 % more iterations
  // (retarget_bench) for legs whose bones were already within 1-2 degrees.
  auto add_goal = [&](const Limb& limb, int priority,
                      bool along_bones) -> Goal* {
    if (limb.end < 0) return nullptr;
    Vector3d end = tg[limb.start].translation;
    if (along_bones) {
      for (const Limb::Bone& bone : limb.bones) {
        end += bone.turned_by >= 0
                   ? Vector3d(transfer_.Turn(bone.turned_by, scratch.transfer) *
                              bone.offset)
                   : bone.offset;
      }
    } else {
      const Vector3d reach =
          sg[limb.source_end].translation - sg[limb.source_start].translation;
      const double extension = std::min(reach.norm() / limb.source_length, 1.0);
      const Vector3d direction =
          reach.norm() > 0.0
              ? Vector3d(align * reach.normalized())
              : Vector3d(tg[limb.end].translation - tg[limb.start].translation)
                    .normalized();
      end += direction * (extension * limb.target_length);
    }
    Goal& goal = scratch.goals.emplace_back();
    goal.solver = SolverKind::kFullBody;
    goal.tip_joint = limb.end;
    goal.root_joint = limb.start;
    goal.priority = priority;
    goal.options.tolerance = tolerance_;
    goal.options.orientation_tolerance_rad = kOrientationTolerance;
    goal.target = end;
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
      goal->pole =
          tg[limb.middle].translation + away.normalized() * limb.target_length;
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
    state.target_floor =
        floor_up_.dot(transfer_.target_hips_reference() +
                      transfer_.pelvis_scale() * (align * (below - p)));
  }
  // Feet: goals (live, lifted to the floor, held or catching up, lifted
  // where the leg cannot reach them on the floor), then poles.
  std::array<Goal*, 2> feet = {nullptr, nullptr};
  std::array<Vector3d, 2> live;
  std::array<double, 2> reach = {0.0, 0.0};
  for (int k = 0; k < 2; ++k) {
    const Limb& leg = legs_[k];
    RetargetState::Foot& foot = state.feet[k];
    Goal* goal = feet[k] = add_goal(leg, kFeetPriority, /*along_bones=*/false);
    if (goal == nullptr) continue;
    // No lower than the floor plus the ankle's height.
    const double lowest =
        state.target_floor + options_.ankle_height * leg.target_length;
    live[k] = goal->target;
    const double h = floor_up_.dot(goal->target);
    if (h < lowest) goal->target += (lowest - h) * floor_up_;
    // A held foot stretches the leg no more than the source's stretches
    // (nor than 0.98 of its length if the source's is more bent): the last
    // degrees to straight turn the knee fast for a small move of the foot,
    // and cost the solve an iteration (retarget_bench: 0.995 is 18 % slower
    // per frame); a held foot beyond this lifts (below).
    constexpr double kHeldReach = 0.98;
    const Vector3d thigh = tg[leg.start].translation;
    reach[k] =
        std::min(leg.target_length, std::max((goal->target - thigh).norm(),
                                             kHeldReach * leg.target_length));
    // The source foot's stance (Stance): its ankle low and slow.
    const Vector3d at = sg[leg.source_end].translation;
    const double height =
        (source_up_.dot(at) - state.source_floor) / leg.source_length;
    const double step = state.started ? (at - foot.last_source).norm() : 0.0;
    const double speed = state.started ? step / dt / leg.source_length : 0.0;
    foot.last_source = at;
    const bool stance = Stance(foot.contact, height, speed, options_);
    if (options_.plant_feet) {
      // Along the floor only: up and down a held foot follows the live
      // goal (a heel lifting to step or jump, a floor not quite level).
      if (stance) {
        // Planted where the goal is on the stance's first frame (the live
        // goal, or where a catch-up has brought it: no jump), and held
        // there until the source foot leaves the stance.
        // A foot the leg's limits held off its goal on the frame before
        // (a knee at the end of its range as the source foot lands in a
        // crouch) is planted where it was, not made to jump to its goal.
        if (!foot.contact) {
          foot.planted =
              foot.held_off ? foot.solved : goal->target + foot.offset;
        }
        const Vector3d d = foot.planted - goal->target;
        foot.offset = d - floor_up_.dot(d) * floor_up_;
        foot.released_for = 0.0;
      } else if (foot.offset.squaredNorm() > 0.0) {
        // Catching up with the live goal after a release: the offset
        // shrinks by at most kCatchUpSpeed leg lengths per second (so the
        // foot moves no faster than the live goal plus that), the rate
        // eased in over release_seconds and out over kCatchUpTail.
        foot.released_for += dt;
        const double ease =
            options_.release_seconds > 0.0
                ? Smoothstep(foot.released_for / options_.release_seconds)
                : 1.0;
        const double left = foot.offset.norm();
        const double allowed =
            std::min(ease * kCatchUpSpeed * dt * leg.target_length,
                     left * (1.0 - std::exp(-dt / kCatchUpTail)));
        foot.offset *= std::max(0.0, left - allowed) / left;
      }
      goal->target += foot.offset;
      frame.feet[k].planted = stance;
      // The stance's hold on the pelvis (below), eased in and out.
      const double to = stance ? 1.0 : 0.0;
      const double rate = options_.release_seconds > 0.0 && state.started
                              ? dt / options_.release_seconds
                              : 1.0;
      foot.rise_weight += std::clamp(to - foot.rise_weight, -rate, rate);
    }
    foot.contact = stance;
  }
  // Where a leg's limits cannot fold it as far as the source's (a knee
  // stopping at its range's end in a deep crouch), a held foot nearer the
  // thigh than the leg's nearest reach is out of reach: the pelvis moves
  // away from it until it is not, rather than the foot slide. The least
  // move: out along the line from the foot to the thigh (straight up for a
  // foot under the hip; a rise straight up would have to grow without bound
  // in speed as the foot comes out level with the edge of the reach), for
  // two feet by turns (three passes; the hips mostly rise). Each foot's
  // push is weighted by its stance (eased in over a stance's first
  // release_seconds and out after, so a stance beginning or ending in a
  // crouch does not jolt the pelvis), and its start eased (quadratic over
  // kRiseEase leg lengths of need, aiming kRiseEase / 2 beyond the reach so
  // the ease costs nothing) so the hips do not jerk as a crouch deepens.
  if (options_.plant_feet && pelvis_ >= 0) {
    Vector3d move = Vector3d::Zero();
    for (int pass = 0; pass < 3; ++pass) {
      for (int k = 0; k < 2; ++k) {
        const Limb& leg = legs_[k];
        const double weight = Smoothstep(state.feet[k].rise_weight);
        if (feet[k] == nullptr || !(leg.min_reach > 0.0) || weight <= 0.0) {
          continue;
        }
        const Vector3d v = tg[leg.start].translation + move - feet[k]->target;
        const double ease = kRiseEase * leg.target_length;
        const double need = leg.min_reach + 0.5 * ease - v.norm();
        if (need <= 0.0) continue;
        // Away from the foot (straight up for a thigh exactly on it).
        const Vector3d out =
            v.norm() > 0.0 ? Vector3d(v.normalized()) : floor_up_;
        const double push =
            need < ease ? need * need / (2.0 * ease) : need - 0.5 * ease;
        // `v` has the passes' move so far: this pushes only what is left.
        move += weight * push * out;
      }
    }
    if (move.squaredNorm() > 0.0) {
      std::vector<Transform>& globals = scratch.transfer.target_globals;
      const int p = transfer_.target_skeleton().joint(pelvis_).parent;
      const Transform parent_global = p >= 0 ? globals[p] : Transform();
      target->local[pelvis_].translation =
          parent_global.Inverse() * (globals[pelvis_].translation + move);
      UpdateGlobalsFrom(transfer_.target_skeleton(), *target, pelvis_,
                        absl::MakeSpan(globals));
      frame.pelvis_move = move.norm();
    }
  }
  for (int k = 0; k < 2; ++k) {
    const Limb& leg = legs_[k];
    const RetargetState::Foot& foot = state.feet[k];
    Goal* goal = feet[k];
    if (goal == nullptr || !options_.plant_feet) continue;
    {
      const Vector3d thigh = tg[leg.start].translation;
      // Held or catching up, and out of the leg's reach on the floor:
      // lifted until it is within it (its place along the floor kept).
      const Vector3d v = goal->target - thigh;
      const double vu = floor_up_.dot(v);
      const double across2 = (v - vu * floor_up_).squaredNorm();
      if (foot.offset.squaredNorm() > 0.0 && vu < 0.0 &&
          across2 < reach[k] * reach[k]) {
        const double need = -vu - std::sqrt(reach[k] * reach[k] - across2);
        const double ease = kLiftEase * leg.target_length;
        if (need > 0.0) {
          goal->target +=
              (need < ease ? need * need / (2.0 * ease) : need - 0.5 * ease) *
              floor_up_;
        }
      }
    }
  }
  for (int k = 0; k < 2; ++k) {
    Goal* goal = feet[k];
    if (goal == nullptr) continue;
    const Limb& leg = legs_[k];
    // A held or catching-up foot no farther from the thigh than its reach
    // (what lifting could not bring within it, and the ease's remainder).
    const Vector3d from_thigh = goal->target - tg[leg.start].translation;
    if (from_thigh.norm() > reach[k]) {
      goal->target = tg[leg.start].translation +
                     from_thigh * (reach[k] / from_thigh.norm());
    }
    // A foot goal within kRiseEase leg lengths of the leg's nearest reach
    // (its knee held at the end of its range: where a held foot pushes the
    // pelvis away, above) has no turn: the ankle alone turns the foot,
    // after the solve (below).
    if (leg.limited && leg.min_reach > 0.0 &&
        (goal->target - tg[leg.start].translation).norm() <
            leg.min_reach + kRiseEase * leg.target_length) {
      goal->target_orientation.reset();
    }
    set_pole(leg, goal);
    frame.feet[k].active = true;
    frame.feet[k].goal = goal->target;
    frame.feet[k].adjusted = goal->target != live[k];
  }
  for (int k = 0; k < 2; ++k) {
    Goal* goal = add_goal(arms_[k], kHandsPriority, /*along_bones=*/true);
    if (goal == nullptr) continue;
    set_pole(arms_[k], goal);
    frame.hands[k].active = true;
    frame.hands[k].goal = goal->target;
  }
  state.started = true;

  bool solved_any = false;
  std::array<int, 2> turn_goal = {-1, -1};  // Feet's turns apart (below).
  if (!scratch.goals.empty()) {
    scratch.results.reserve(6);  // With the feet's turns apart (below).
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
            goal.target_orientation
                ? end.rotation.angularDistance(*goal.target_orientation)
                : 0.0;
        out.reached = out.position_error <= tolerance_ &&
                      out.orientation_error_rad <= kOrientationTolerance;
      }
    } else {
      absl::Status solved = Solve(solving_, scratch.goals, scratch.workspace,
                                  target, absl::MakeSpan(scratch.results),
                                  SolveLimits(), deadline, full_body_);
      if (!solved.ok()) return solved;
      solved_any = true;
      // On a leg with limits a held foot's place comes before its turn: a
      // foot turned out beyond what the hip's and ankle's twist allow, or
      // pitched beyond the ankle's cone with the knee folded to its end, is
      // otherwise traded off its place (0.03-0.06 leg lengths on the Boxing
      // clip's crouch, for a turn 0.2-1 degree nearer). Where the solve
      // left a held foot short of its place (ten times the tolerance), it
      // solves again from there with the foot's turn a goal of its own,
      // after the hands', that cannot move the foot from its place. Only
      // then: on other frames the two are met together, and putting the
      // turn last everywhere changes the solve's answers for nothing (the
      // hop's jitter 1.30 -> 1.31, the wave's limb bones 2.81 -> 2.95).
      bool again = false;
      for (int k = 0; k < 2; ++k) {
        if (feet[k] == nullptr || !legs_[k].limited || !options_.plant_feet ||
            !feet[k]->target_orientation ||
            !(state.feet[k].contact ||
              state.feet[k].offset.squaredNorm() > 0.0)) {
          continue;
        }
        const size_t g = feet[k] - scratch.goals.data();
        if (!(scratch.results[g].position_error > 10.0 * tolerance_)) continue;
        Goal turn = *feet[k];
        turn.priority = kFeetTurnPriority;
        feet[k]->target_orientation.reset();
        turn_goal[k] = static_cast<int>(scratch.goals.size());
        scratch.goals.push_back(turn);
        again = true;
      }
      if (again) {
        scratch.results.resize(scratch.goals.size());
        solved = Solve(solving_, scratch.goals, scratch.workspace, target,
                       absl::MakeSpan(scratch.results), SolveLimits(), deadline,
                       full_body_);
        if (!solved.ok()) return solved;
      }
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
    // A foot goal without its turn (a leg folded as far as its limits let
    // it, above) turns as the transferred foot by its ankle alone, as near
    // as the ankle's limits allow (its place is the solve's; the ankle's
    // turn does not move it): the turn chased by the whole leg, with the
    // knee and the hip's twist at their bounds, swung the leg's plane by up
    // to 31 degrees in a frame against the source's 1 (the Boxing clip's
    // crouch), the solve landing on one of two answers frame to frame.
    // Where the solve left a foot short of its goal (by more than ten times
    // the tolerance: the leg's limits hold it off), for a stance that
    // begins on the next frame.
    bool globals = false;
    scratch.solved_globals.resize(target->local.size());  // Sized once.
    for (int k = 0; k < 2; ++k) {
      const Limb& leg = legs_[k];
      RetargetState::Foot& foot = state.feet[k];
      foot.held_off = frame.feet[k].active && leg.limited &&
                      frame.feet[k].position_error > 10.0 * tolerance_;
      const bool turn = solved_any && frame.feet[k].active &&
                        !feet[k]->target_orientation && turn_goal[k] < 0;
      if (!foot.held_off && !turn) continue;
      if (!globals) {
        ComputeGlobals(solving_, *target,
                       absl::MakeSpan(scratch.solved_globals));
        globals = true;
      }
      if (foot.held_off) {
        foot.solved = scratch.solved_globals[leg.end].translation;
      }
      if (!turn) continue;
      const int p = solving_.joint(leg.end).parent;
      const Quaterniond parent = p >= 0 ? scratch.solved_globals[p].rotation
                                        : Quaterniond::Identity();
      Quaterniond& local = target->local[leg.end].rotation;
      local = (parent.conjugate() * tg[leg.end].rotation).normalized();
      ProjectIntoLimits(
          solving_.joint(leg.end),
          previous != nullptr ? &previous->local[leg.end].rotation : nullptr,
          &local);
      LimbResult& r = frame.feet[k];
      r.orientation_error_rad =
          (parent * local).angularDistance(tg[leg.end].rotation);
      r.reached = r.reached && r.orientation_error_rad <= kOrientationTolerance;
    }
    for (int k = 0; k < 2; ++k) {
      if (turn_goal[k] < 0) continue;
      const GoalResult& out = scratch.results[turn_goal[k]];
      frame.feet[k].reached = frame.feet[k].reached && out.reached;
      frame.feet[k].orientation_error_rad = out.orientation_error_rad;
    }
  }
  if (result != nullptr) *result = frame;
  // Same size from the second frame on: assignment reuses its storage.
  state.previous.local = target->local;
  return absl::OkStatus();
}

}  // namespace reach::retarget
