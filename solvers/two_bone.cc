#include "solvers/two_bone.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "solvers/bend_plane.h"
#include "solvers/limits.h"
#include "solvers/two_bone_lanes.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;

constexpr double kTiny = 1e-12;
using two_bone_lanes::kFarSq;
using two_bone_lanes::kTinySq;

// The offset `to - from` of two finite points, and its squared norm. When
// it is farther than kFarSq it is replaced by an offset in the same
// direction, 1e20 chain lengths long (computed without overflow);
// `scale_sq` bounds the chain's squared length.
inline Vector3d NearOffset(const Vector3d& to, const Vector3d& from,
                           double scale_sq, double* norm_sq) {
  Vector3d offset = to - from;
  *norm_sq = offset.squaredNorm();
  if (*norm_sq <= kFarSq) return offset;
  const double far = 1e20 * std::max(std::sqrt(scale_sq), 1.0);
  const double s =
      1.0 / std::max(to.cwiseAbs().maxCoeff(), from.cwiseAbs().maxCoeff());
  offset = to * s - from * s;
  offset *= far / offset.norm();
  *norm_sq = offset.squaredNorm();
  return offset;
}

// q v q* for a quaternion q of any norm: v turned by q's rotation, times
// |q|^2.
inline Vector3d ScaledRotate(const Quaterniond& q, const Vector3d& v) {
  const Vector3d u = q.vec();
  return (q.w() * q.w() - u.squaredNorm()) * v + (2.0 * u.dot(v)) * u +
         (2.0 * q.w()) * u.cross(v);
}

// The smallest rotation taking direction `from` to direction `to`, as
// (|f||t| + f.t, f x t) / (|f||t|): the unit half-angle quaternion times
// sqrt(2 (1 + cos angle)). Leaving it unnormalised keeps a square root and a
// division off the solver's critical path (the root's rotation is
// normalised once at the end). `norm_sq` receives its squared norm.
// Identity when either vector is shorter than kTiny; a half turn about a
// perpendicular axis when they are opposite.
Quaterniond ScaledAim(const Vector3d& from, const Vector3d& to,
                      double* norm_sq) {
  const double ff = from.squaredNorm();
  const double tt = to.squaredNorm();
  *norm_sq = 1.0;
  if (!(ff > kTinySq) || !(tt > kTinySq)) return Quaterniond::Identity();
  const double ft = std::sqrt(ff * tt);
  const double inv = 1.0 / ft;
  const Vector3d c = from.cross(to) * inv;
  const Quaterniond q((ft + from.dot(to)) * inv, c.x(), c.y(), c.z());
  const double q_sq = q.squaredNorm();
  if (q_sq < 1e-30) {
    const Vector3d axis = from.unitOrthogonal();
    return Quaterniond(0.0, axis.x(), axis.y(), axis.z());
  }
  *norm_sq = q_sq;
  return q;
}

// Distance from the root A to the tip when the mid joint turns by theta about
// the unit axis n through B. With ab = B - A and me = C - B split into parts
// along and across n:
//   |ab + R(n, theta) me|^2 = k + 2 (a cos(theta) + b sin(theta))
// where k = |ab|^2 + |me|^2 + 2 ab.me_par, a = ab.me_perp and
// b = ab.(n x me_perp). For bones perpendicular to n this is the law of
// cosines; for a hinge with offsets it is its exact generalisation.
struct MidGeometry {
  double k = 0.0;
  double a = 0.0;
  double b = 0.0;
  double r_sq = 0.0;  // a^2 + b^2
  Vector3d me_par;    // Part of the second bone along n...
  Vector3d me_perp;   // ...across it...
  Vector3d me_side;   // ...and n x me_perp.

  MidGeometry(const Vector3d& ab, const Vector3d& me, const Vector3d& n) {
    me_par = me.dot(n) * n;
    me_perp = me - me_par;
    me_side = n.cross(me_perp);
    a = ab.dot(me_perp);
    b = ab.dot(me_side);
    r_sq = a * a + b * b;
    k = ab.squaredNorm() + me.squaredNorm() + 2.0 * ab.dot(me_par);
  }
  // A ball mid joint bends about the normal of the plane of its bones,
  // `normal` = ab x me (length `normal_norm` > 0), across both bones:
  // me_par = 0, b = -|normal| and r^2 = |ab|^2 |me|^2, with no
  // normalisation on the way.
  // `inv_normal_norm` is 1 / normal_norm.
  MidGeometry(const Vector3d& ab, const Vector3d& me, const Vector3d& normal,
              double normal_norm, double inv_normal_norm, double ab_sq,
              double me_sq)
      : k(ab_sq + me_sq),
        a(ab.dot(me)),
        b(-normal_norm),
        r_sq(ab_sq * me_sq),
        me_par(Vector3d::Zero()),
        me_perp(me),
        me_side(normal.cross(me) * inv_normal_norm) {}
  double DistanceAt(double theta) const {
    return std::sqrt(
        std::max(0.0, k + 2.0 * (a * std::cos(theta) + b * std::sin(theta))));
  }
  // Both turns that make the distance sqrt(distance_sq) (clamped to what
  // the chain spans), as cosine and sine, without trigonometry: solving
  // a cos + b sin = h with h = (distance^2 - k) / 2 and q = sqrt(r^2 - h^2)
  // gives (cos, sin) = (a h -+ b q, b h +- a q) / r^2.
  void Turns(double distance_sq, double cos_turn[2],
             double sin_turn[2]) const {
    const double r = std::sqrt(r_sq);
    const double h_free = 0.5 * (distance_sq - k);
    const double h = std::clamp(h_free, -r, r);
    // Clamped: fully extended (or folded) exactly. r_sq - r^2 is rounding,
    // and its square root would turn the bend by ~1e-8 rad.
    const double q =
        std::abs(h_free) >= r ? 0.0 : std::sqrt(std::max(0.0, r_sq - h * h));
    const double inv = 1.0 / r_sq;  // In parallel with the square roots.
    cos_turn[0] = (a * h - b * q) * inv;
    sin_turn[0] = (b * h + a * q) * inv;
    cos_turn[1] = (a * h + b * q) * inv;
    sin_turn[1] = (b * h - a * q) * inv;
  }
};

// Unit quaternion for the rotation about the unit `axis` whose angle has
// cosine c and sine s, by the half-angle formulas (no trigonometry).
Quaterniond FromCosSin(const Vector3d& axis, double c, double s) {
  // cos(a/2) = sqrt((1 + c) / 2); sin(a/2) = sin(a) / (2 cos(a/2)), which is
  // accurate while cos(a/2) is not small (|a| < 2pi/3); past that,
  // sin(a/2) = sqrt((1 - c) / 2) with the sign of sin(a).
  const double w = std::sqrt(std::max(0.0, 0.5 * (1.0 + c)));
  const double v =
      w > 0.5 ? s / (2.0 * w)
              : std::copysign(std::sqrt(std::max(0.0, 0.5 * (1.0 - c))), s);
  return Quaterniond(w, v * axis.x(), v * axis.y(), v * axis.z());
}

// The mid joint's turn, as cosine and sine: of the two solutions the
// smaller turn from the start pose (the larger cosine); on a tie the first,
// which for a straight chain bends towards line x n.
void ChooseFreeTurn(const MidGeometry& geo, double distance_sq,
                    double* cos_turn, double* sin_turn) {
  double c[2], s[2];
  geo.Turns(distance_sq, c, s);
  const int pick = c[1] > c[0] + 1e-12 ? 1 : 0;
  *cos_turn = c[pick];
  *sin_turn = s[pick];
}

double WrapPi(double a) { return std::remainder(a, 2.0 * M_PI); }

// A limited hinge's turn: among the two solutions, those inside its range
// first (the smaller turn on a tie), else the clamped angle that lands
// closest to `distance`. Returns the new hinge angle.
double ChooseHingeAngle(const Joint& mid, double hinge_angle,
                        const MidGeometry& geo, double distance) {
  double c[2], s[2];
  geo.Turns(distance * distance, c, s);
  double turns[2] = {std::atan2(s[0], c[0]), std::atan2(s[1], c[1])};
  if (std::abs(turns[1]) < std::abs(turns[0]) - 1e-9) {
    std::swap(turns[0], turns[1]);
  }
  double best_angle = hinge_angle;
  double best_error = kInf;
  for (double turn : turns) {
    const double angle = ConstrainHingeAngle(mid, hinge_angle + turn);
    // Hinge angles may lie in (-2pi, 2pi]; the geometry sees the turn modulo
    // 2pi.
    const double error =
        std::abs(geo.DistanceAt(WrapPi(angle - hinge_angle)) - distance);
    if (error < best_error - 1e-12) {
      best_error = error;
      best_angle = angle;
    }
  }
  return best_angle;
}

// A limb's fields where they are, for the kernel.
two_bone_lanes::LimbRefs LimbRefsOf(const Quaterniond& parent_rotation,
                                    const Transform& root,
                                    const Transform& mid, const Transform& tip,
                                    const Quaterniond& mid_local,
                                    const Vector3d& tip_local,
                                    const Vector3d& target,
                                    const Vector3d* pole) {
  return {root.translation.data(),
          mid.translation.data(),
          tip.translation.data(),
          tip_local.data(),
          target.data(),
          pole ? pole->data() : root.translation.data(),
          parent_rotation.coeffs().data(),
          root.rotation.coeffs().data(),
          mid.rotation.coeffs().data(),
          mid_local.coeffs().data(),
          pole != nullptr};
}

// The axis a straight two-bone chain bends about when its mid joint is a
// ball: StraightBendAxis (bend_plane.h) of the second bone, fixed in the
// mid joint's frame (the kernel, two_bone_lanes.h, computes the same).
// When the second bone has no length, any perpendicular of the chain's
// direction (`start_end`, else `line`); zero when neither has one.
Vector3d StraightLimbAxis(const Quaterniond& mid_rotation,
                          const Vector3d& tip_local, const Vector3d& start_end,
                          const Vector3d& line) {
  if (tip_local.squaredNorm() > kTinySq) {
    return StraightBendAxis(mid_rotation, tip_local);
  }
  const Vector3d chain_dir = start_end.squaredNorm() > kTinySq ? start_end : line;
  if (chain_dir.squaredNorm() > kTinySq) return chain_dir.unitOrthogonal();
  return Vector3d::Zero();
}

// Defined with SolveTwoBoneLimbs below.
bool SolveLimb(const two_bone_lanes::LimbRefs& limb, Quaterniond* root_local,
               Quaterniond* mid_local);

}  // namespace

// Square roots and divisions share one unit that is not fully pipelined;
// with ~15 of them per solve it, not the arithmetic, sets the speed. So the
// solve below compares squared lengths, multiplies by reciprocals, and
// keeps the root's turns unnormalised until one normalisation at the end.
int TwoBoneSolver::Solve(const ChainProblem& problem, Workspace& ws,
                         Pose& pose) const {
  const Skeleton& skeleton = *problem.skeleton;
  const Goal& goal = *problem.goal;
  const int ib = problem.joints[1];
  const int ic = problem.joints[2];
  const Joint& mid = skeleton.joint(ib);
  const Joint& tip = skeleton.joint(ic);
  Transform* g = ws.chain_globals.data();

  if (branch_free_ && TwoBoneFastPathApplies(skeleton, problem.joints, goal)) {
    const two_bone_lanes::LimbRefs limb = LimbRefsOf(
        problem.parent_global.rotation, g[0], g[1], g[2],
        pose.local[ib].rotation, pose.local[ic].translation, goal.target,
        goal.pole ? &*goal.pole : nullptr);
    if (SolveLimb(limb, &pose.local[problem.joints[0]].rotation,
                  &pose.local[ib].rotation)) {
      return 1;
    }
  }

  // A hinge mid joint held off its axis by the start pose (any pose is
  // accepted as a start) is first put on it, within its range: the bend
  // below turns about the axis and keeps whatever swing it starts with
  // (and may not turn at all, with a zero-length first bone), which no
  // hinge angle can report (found by the solve_request fuzzer: the
  // service's response, a hinge rotation within the range, put the tip
  // elsewhere than the error it reported).
  if (mid.type == JointType::kHinge) {
    Quaterniond& local = pose.local[ib].rotation;
    const Vector3d v = (mid.rest.rotation.conjugate() * local).vec();
    if ((v - v.dot(mid.axis) * mid.axis).squaredNorm() > 1e-24) {
      local = ConstrainRotation(mid, local);
      g[1] = g[0] * pose.local[ib];
      g[2] = g[1] * pose.local[ic];
    }
  }

  const Vector3d a = g[0].translation;
  const double max_stretch = goal.options.max_stretch;
  const bool stretch = max_stretch > 1.0;
  const double soft = goal.options.soft;
  // An upper bound of the chain's squared length, (l1 + l2)^2 <=
  // 2 (l1^2 + l2^2): the scale of the thresholds below.
  const double ab0_sq = (g[1].translation - a).squaredNorm();
  const double me0_sq = (g[2].translation - g[1].translation).squaredNorm();
  const double scale_sq = std::max(2.0 * (ab0_sq + me0_sq), kTinySq);

  double d_sq;
  const Vector3d to_target = NearOffset(goal.target, a, scale_sq, &d_sq);
  const bool has_target_dir = d_sq > kTinySq;
  double pole_sq = 0.0;
  const Vector3d pole_offset =
      goal.pole ? NearOffset(*goal.pole, a, scale_sq, &pole_sq) : Vector3d::Zero();

  // Distance the chain should span, squared. Soft IK (after Harris, "Soft
  // IK"): past (1 - soft) of the length the reach eases exponentially
  // towards full extension, so the knee never snaps straight.
  double distance_sq = d_sq;
  if (soft > 0.0 || stretch) {
    // Bone lengths: the rest lengths when stretching (so stretch never
    // compounds across frames), else the pose's.
    const double l1 = stretch ? g[0].scale * mid.rest.translation.norm()
                              : std::sqrt(ab0_sq);
    const double l2 = stretch ? g[0].scale * pose.local[ib].scale *
                                    tip.rest.translation.norm()
                              : std::sqrt(me0_sq);
    const double length = l1 + l2;
    const double d = std::sqrt(d_sq);
    double distance = d;
    if (soft > 0.0 && length > kTiny) {
      const double ease_start = (1.0 - soft) * length;
      const double ease_span = soft * length;
      if (d > ease_start) {
        distance = ease_start +
                   ease_span * (1.0 - std::exp(-(d - ease_start) / ease_span));
      }
    }
    if (stretch) {
      // Stretch the bones so the (softened) chain spans the target
      // distance, up to max_stretch.
      double s = 1.0;
      if (soft > 0.0) {
        if (distance > kTiny && d > distance)
          s = std::min(d / distance, max_stretch);
        distance *= s;
      } else if (length > kTiny && d > length) {
        s = std::min(d / length, max_stretch);
        distance = std::min(d, s * length);
      }
      pose.local[ib].translation = mid.rest.translation * s;
      pose.local[ic].translation = tip.rest.translation * s;
      g[1] = g[0] * pose.local[ib];
      g[2] = g[1] * pose.local[ic];
    }
    distance_sq = distance * distance;
  }

  const Vector3d ab = g[1].translation - a;
  const Vector3d me = g[2].translation - g[1].translation;
  const Vector3d start_end = g[2].translation - a;
  const double start_end_sq = start_end.squaredNorm();
  // The line the chain will lie along, L (not normalised): towards the
  // target, or its current direction when the target sits on the root.
  Vector3d line = to_target;
  if (!has_target_dir) {
    line = start_end_sq > kTinySq ? start_end : ab;
    if (!(line.squaredNorm() > kTinySq)) line.setZero();
  }
  const double line_sq = line.squaredNorm();
  const bool has_line = line_sq > kTinySq;
  const double inv_line_sq = has_line ? 1.0 / line_sq : 0.0;
  // The part of v across the line.
  auto across_line = [&](const Vector3d& v) -> Vector3d {
    return v - (v.dot(line) * inv_line_sq) * line;
  };

  // 1. Bend the mid joint so the root-tip distance matches. `bend_axis` is
  // its axis, model space: unit when set; zero only for a fixed mid joint
  // or zero-length bones.
  Vector3d bend_axis = Vector3d::Zero();
  const double ab_sq = ab.squaredNorm();
  const double me_sq = me.squaredNorm();
  const Vector3d normal = ab.cross(me);
  const double normal_sq = normal.squaredNorm();
  // A ball mid joint in a bent chain: the plane of the bones.
  const bool bent_ball = mid.type == JointType::kBall &&
                         normal_sq > 1e-18 * ab_sq * me_sq &&
                         normal_sq > kTinySq;
  double normal_norm = 0.0;
  double inv_normal_norm = 0.0;
  if (bent_ball) {
    normal_norm = std::sqrt(normal_sq);
    inv_normal_norm = 1.0 / normal_norm;
    bend_axis = normal * inv_normal_norm;
  } else if (mid.type == JointType::kHinge) {
    bend_axis = RotateVector(g[1].rotation, mid.axis);
  } else if (mid.type == JointType::kBall) {
    // Straight chain: bend about an axis fixed in the mid joint's own
    // frame, across the second bone (StraightLimbAxis). Not from the pole
    // or the model-space direction: those make the bend, and so the roll
    // of the whole limb, jump when the pole or the chain crosses the
    // chain's line; the twist below turns the bend towards the pole.
    bend_axis = StraightLimbAxis(g[1].rotation, pose.local[ic].translation,
                                 start_end, line);
  }

  // `tip_position` is where the tip joint ends up.
  Vector3d tip_position = g[2].translation;
  const bool has_bend_axis = bend_axis.squaredNorm() > 0.25;
  if (has_bend_axis) {
    const MidGeometry geo =
        bent_ball ? MidGeometry(ab, me, normal, normal_norm, inv_normal_norm,
                                ab_sq, me_sq)
                  : MidGeometry(ab, me, bend_axis);
    // r = 0: the second bone lies along the axis or the first has no
    // length; no turn changes the distance.
    if (geo.r_sq > 1e-24 * std::max(1.0, scale_sq * scale_sq)) {
      Quaterniond& local = pose.local[ib].rotation;
      bool tip_known = false;
      if (mid.type == JointType::kHinge && mid.IsLimited()) {
        local = HingeRotation(
            mid, ChooseHingeAngle(mid, HingeAngle(mid, local), geo,
                                  std::sqrt(distance_sq)));
      } else {
        // Turning about the bend axis through the mid joint: in the joint's
        // own frame the axis is the hinge axis, or the model-space bend
        // axis brought into the frame.
        double cos_turn, sin_turn;
        ChooseFreeTurn(geo, distance_sq, &cos_turn, &sin_turn);
        const Vector3d local_axis = mid.type == JointType::kHinge
                                        ? mid.axis
                                        : RotateVector(g[1].rotation.conjugate(),
                                                       bend_axis);
        local = local * FromCosSin(local_axis, cos_turn, sin_turn);
        if (mid.IsLimited()) {
          local = ConstrainRotation(mid, local);
        } else {
          // Rodrigues: the second bone turned about the bend axis. Cheaper
          // than forward kinematics, and off the path to the root's turn.
          tip_position = g[1].translation + geo.me_par +
                         cos_turn * geo.me_perp + sin_turn * geo.me_side;
          tip_known = true;
        }
      }
      if (!tip_known) {
        g[1] = g[0] * pose.local[ib];
        g[2] = g[1] * pose.local[ic];
        tip_position = g[2].translation;
      }
    }
  }

  // 2. Turn the root by the smallest rotation that points the tip at the
  // target (keeps the start pose's twist). Unnormalised (see ScaledAim).
  double aim_sq = 1.0;
  const Quaterniond aim = has_target_dir
                              ? ScaledAim(tip_position - a, to_target, &aim_sq)
                              : Quaterniond::Identity();

  // 3. Twist about the line so the mid joint faces the pole: by the angle
  // from the mid joint's direction across the line, m, to the pole's, p,
  // as the unnormalised half-angle quaternion (|m||p| + m.p, L (L . m x p)
  // / |L|^2). m is the mid joint's offset turned by the unnormalised aim,
  // so |aim|^2 times too long: only its direction counts.
  Quaterniond twist = Quaterniond::Identity();
  if (goal.pole && has_line) {
    const Vector3d pole_dir = across_line(pole_offset);
    if (pole_dir.squaredNorm() > 1e-18 * scale_sq) {
      const double aim_sq_sq = aim_sq * aim_sq;
      Vector3d mid_dir = across_line(ScaledRotate(aim, g[1].translation - a));
      if (mid_dir.squaredNorm() <=
              1e-18 * std::max(ab_sq, kTinySq) * aim_sq_sq &&
          has_bend_axis) {
        // Straight chain: the side a positive bend would take.
        const double side =
            mid.type == JointType::kHinge && mid.max_angle_rad <= 0.0 ? -1.0
                                                                      : 1.0;
        mid_dir = side * across_line(line.cross(ScaledRotate(aim, bend_axis)));
      }
      if (mid_dir.squaredNorm() > kTinySq * aim_sq_sq) {
        const double c = mid_dir.dot(pole_dir);
        const double s = line.dot(mid_dir.cross(pole_dir));
        // |m||p| sin(angle) = s / |L|.
        const double r = std::sqrt(c * c + s * s * inv_line_sq);
        const Vector3d axis = (s * inv_line_sq) * line;
        // Opposite directions leave (0, 0): a half turn about the line.
        twist = r + c > 1e-15 * r
                    ? Quaterniond(r + c, axis.x(), axis.y(), axis.z())
                    : Quaterniond(0.0, line.x(), line.y(), line.z());
      }
    }
  }

  // The root's new local rotation, normalised once, then within its limits.
  const int ia = problem.joints[0];
  Quaterniond root_local =
      problem.parent_global.rotation.conjugate() * (twist * aim) *
      g[0].rotation;
  root_local.coeffs() *= 1.0 / std::sqrt(root_local.squaredNorm());
  const Joint& root = skeleton.joint(ia);
  if (root.IsConstrained() && !WithinLimits(root, root_local, 1e-9)) {
    // Every turn of the solved limb about the root-target line reaches the
    // target as well: take the one nearest the pole's (or the smallest
    // turn's) that the root's limits allow. Only when none does is the
    // root projected onto its limits, and the goal left unreached.
    const Quaterniond root_global =
        (problem.parent_global.rotation * root_local).normalized();
    const double turn =
        root.type == JointType::kBall && has_line
            ? NearestFeasibleTurn(root, problem.parent_global.rotation,
                                  root_global, line.normalized(), 0.0, -M_PI,
                                  M_PI)
            : std::numeric_limits<double>::quiet_NaN();
    if (std::isfinite(turn)) {
      root_local = problem.parent_global.rotation.conjugate() *
                   (AxisAngle(line.normalized(), turn) * root_global);
    }
    root_local = ConstrainRotation(root, root_local.normalized()).normalized();
  }
  pose.local[ia].rotation = root_local;
  if (goal.target_orientation) {
    g[0] = problem.parent_global * pose.local[ia];
    g[1] = g[0] * pose.local[ib];
    ApplyTipOrientation(problem, ws, pose);
  }
  return 1;
}

void FillTwoBoneLimb(const Quaterniond& parent_rotation,
                     const Transform& root, const Transform& mid,
                     const Transform& tip, const Quaterniond& mid_local,
                     const Vector3d& tip_local, const Goal& goal,
                     TwoBoneLimb* limb) {
  limb->parent_rotation = parent_rotation;
  limb->root = root;
  limb->mid = mid;
  limb->tip = tip;
  limb->mid_local = mid_local;
  limb->tip_local = tip_local;
  limb->target = goal.target;
  limb->has_pole = goal.pole.has_value();
  limb->pole = limb->has_pole ? *goal.pole : Vector3d::Zero();
}

void FillTwoBoneLimb(const Skeleton& skeleton,
                     absl::Span<const Transform> globals, const Pose& pose,
                     absl::Span<const int> chain, const Goal& goal,
                     TwoBoneLimb* limb) {
  const int parent = skeleton.joint(chain[0]).parent;
  FillTwoBoneLimb(
      parent >= 0 ? globals[parent].rotation : Quaterniond::Identity(),
      globals[chain[0]], globals[chain[1]], globals[chain[2]],
      pose.local[chain[1]].rotation, pose.local[chain[2]].translation, goal,
      limb);
}

namespace {

using two_bone_lanes::kBlockLanes;
using two_bone_lanes::LimbBlock;
using two_bone_lanes::LimbBlockResult;
using Rows = double (*)[kBlockLanes];

void SetColumn(Rows rows, int lane, const Vector3d& v) {
  rows[0][lane] = v.x();
  rows[1][lane] = v.y();
  rows[2][lane] = v.z();
}
void SetColumn(Rows rows, int lane, const Quaterniond& q) {
  rows[0][lane] = q.w();
  rows[1][lane] = q.x();
  rows[2][lane] = q.y();
  rows[3][lane] = q.z();
}
Quaterniond QuatColumn(const double (*rows)[kBlockLanes], int lane) {
  return Quaterniond(rows[0][lane], rows[1][lane], rows[2][lane],
                     rows[3][lane]);
}

// limbs[0..n-1] (1 <= n <= 4) into lanes 0..n-1; lanes n..width-1 repeat
// the last limb.
void Gather(const TwoBoneLimb* limbs, int n, int width, LimbBlock* block) {
  for (int lane = 0; lane < width; ++lane) {
    const TwoBoneLimb& limb = limbs[std::min(lane, n - 1)];
    SetColumn(block->root, lane, limb.root.translation);
    SetColumn(block->mid, lane, limb.mid.translation);
    SetColumn(block->tip, lane, limb.tip.translation);
    SetColumn(block->tip_local, lane, limb.tip_local);
    SetColumn(block->target, lane, limb.target);
    SetColumn(block->pole, lane,
              limb.has_pole ? limb.pole : limb.root.translation);
    SetColumn(block->parent, lane, limb.parent_rotation);
    SetColumn(block->root_rotation, lane, limb.root.rotation);
    SetColumn(block->mid_rotation, lane, limb.mid.rotation);
    SetColumn(block->mid_local, lane, limb.mid_local);
    block->has_pole[lane] = limb.has_pole ? 1.0 : 0.0;
  }
}

void Scatter(const LimbBlockResult& block, int n, TwoBoneLimbResult* out) {
  for (int lane = 0; lane < n; ++lane) {
    out[lane].root_local = QuatColumn(block.root_local, lane);
    out[lane].mid_local = QuatColumn(block.mid_local, lane);
    out[lane].solved = block.ok[lane] > 0.0;
  }
}

// Whether two_bone_avx2.cc's builds (AVX2 and FMA) run here.
bool CpuHasAvx2Fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}
const bool kCpuHasAvx2Fma = CpuHasAvx2Fma();
bool use_avx2_fma = kCpuHasAvx2Fma;  // UseBaselineTwoBoneKernel.

bool SolveLimb(const two_bone_lanes::LimbRefs& limb, Quaterniond* root_local,
               Quaterniond* mid_local) {
  double* root = root_local->coeffs().data();
  double* mid = mid_local->coeffs().data();
#if defined(__x86_64__)
  if (use_avx2_fma) return two_bone_lanes::SolveOneAvx2(limb, root, mid);
#endif
  return two_bone_lanes::SolveOne(limb, root, mid);
}

TwoBoneLimbResult SolveOneLimb(const TwoBoneLimb& limb) {
  TwoBoneLimbResult result;
  result.solved = SolveLimb(
      LimbRefsOf(limb.parent_rotation, limb.root, limb.mid, limb.tip,
                 limb.mid_local, limb.tip_local, limb.target,
                 limb.has_pole ? &limb.pole : nullptr),
      &result.root_local, &result.mid_local);
  return result;
}

}  // namespace

void UseBaselineTwoBoneKernel(bool baseline) {
  use_avx2_fma = kCpuHasAvx2Fma && !baseline;
}

void SolveTwoBoneLimbs(absl::Span<const TwoBoneLimb> limbs,
                       absl::Span<TwoBoneLimbResult> out) {
  const int n = static_cast<int>(limbs.size());
  for (int i = 0; i < n; i += kBlockLanes) {
    const int m = std::min(kBlockLanes, n - i);
    if (m == 1) {
      out[i] = SolveOneLimb(limbs[i]);
      continue;
    }
    LimbBlock block;
    LimbBlockResult solved;
#if defined(__x86_64__)
    if (use_avx2_fma) {
      // Every width from one build, so that a limb's result does not
      // depend on the limbs solved with it.
      Gather(&limbs[i], m, kBlockLanes, &block);
      two_bone_lanes::SolveBlockAvx2(block, &solved);
      Scatter(solved, m, &out[i]);
      continue;
    }
#endif
    Gather(&limbs[i], m, m == 2 ? 2 : kBlockLanes, &block);
    two_bone_lanes::SolveBlock<two_bone_lanes::Lanes2>(block, 0, &solved);
    if (m > 2) {
      two_bone_lanes::SolveBlock<two_bone_lanes::Lanes2>(block, 2, &solved);
    }
    Scatter(solved, m, &out[i]);
  }
}

}  // namespace reach
