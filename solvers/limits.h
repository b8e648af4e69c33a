// Joint limits: projecting a local rotation onto what a joint allows.
//
// Angles are measured from the joint's rest rotation, in the joint's own
// frame: delta = rest.rotation^-1 * local.rotation.
#ifndef REACH_SOLVERS_LIMITS_H_
#define REACH_SOLVERS_LIMITS_H_

#include "solvers/skeleton.h"

namespace reach {

// The nearest rotation the joint allows to `local` (a local rotation):
// fixed -> rest; hinge -> the twist of delta about the axis, its angle
// clamped to [min, max]; ball -> swing clamped to the cone, twist clamped to
// [min, max]. An unconstrained ball joint returns `local` unchanged.
Eigen::Quaterniond ConstrainRotation(const Joint& joint,
                                     const Eigen::Quaterniond& local);

// How far ConstrainRotation moved a rotation, by part (radians, 0 when it
// was inside): `twist`, a hinge's angle or a ball's twist, brought into
// its range (a fixed joint's whole rotation); `swing`, a ball's swing
// brought into its cone (a hinge's swing off its axis).
struct LimitExcess {
  double twist = 0.0;
  double swing = 0.0;
};

// ConstrainRotation, also writing how far outside the limits `local` was:
// one decomposition serves both (a solver that locks what hit a limit).
Eigen::Quaterniond ConstrainRotation(const Joint& joint,
                                     const Eigen::Quaterniond& local,
                                     LimitExcess* excess);

// A start pose's rotation brought into the joint's limits before a solve:
// when `local` lies outside them by more than 1e-12 rad (a hinge turned
// off its axis counts), it becomes ConstrainRotation's nearest allowed
// rotation (normalised) and true is returned; otherwise it is left
// untouched, bit for bit. An unconstrained ball joint is never moved.
bool ProjectIntoLimits(const Joint& joint, Eigen::Quaterniond* local);

// The same, continuous from frame to frame: a hinge's angle or a ball's
// twist beyond a range with two finite bounds goes to the bound met first
// turning from `previous`'s (the joint's answer on the frame before, within
// its limits) toward the wanted one the shorter way, not to the bound
// nearest on the circle, which flips from one end of the range to the other
// as the wanted angle crosses the antipode of the range's middle (a wrist
// twist of +-1.2 rad wanted near the half turn: 137.5 degrees in a frame).
// It flips only as the wanted angle crosses the antipode of `previous`'s
// (a bound's, when held there). Null `previous`: ProjectIntoLimits above.
// Swing is clamped as there (along its own great circle).
bool ProjectIntoLimits(const Joint& joint, const Eigen::Quaterniond* previous,
                       Eigen::Quaterniond* local);

// ConstrainRotation choosing a bound as ProjectIntoLimits(joint, previous,
// local) does (null `previous`: ConstrainRotation's nearest bound).
Eigen::Quaterniond ConstrainRotationFrom(const Joint& joint,
                                         const Eigen::Quaterniond& local,
                                         const Eigen::Quaterniond* previous,
                                         LimitExcess* excess);

// Moves a rotation held at a bound of the joint's limits into the middle
// of its range, where an iterative solver stalled against it can start
// again: a hinge within `within_rad` of a bound of its angle turns to the
// middle of its range (a radian in from a bound whose other side is open);
// a limited ball's twist within `within_rad` of a bound of its range goes
// to the middle of it, and its swing, within `within_rad` of its cone, to
// half the cone about the same axis. Returns whether it moved `local`.
bool MoveOffBounds(const Joint& joint, Eigen::Quaterniond* local,
                   double within_rad);

// Hinge angle of `local` about the joint's axis, from rest, in (-2pi, 2pi].
// The quaternion's sign carries angles beyond +-pi. Any swing off the axis
// is ignored.
double HingeAngle(const Joint& joint, const Eigen::Quaterniond& local);

// rest.rotation * AngleAxis(angle_rad, axis), keeping the sign convention of
// HingeAngle (HingeAngle(j, HingeRotation(j, a)) == a for a in (-2pi, 2pi]).
Eigen::Quaterniond HingeRotation(const Joint& joint, double angle_rad);

// Among the 2pi-equivalents of a hinge angle, one inside the joint's
// [min, max] (the angle itself when it is inside, then angle -+ 2pi; with
// one infinite bound, the equivalent nearest the finite one); failing that,
// the bound nearest on the circle. The result always lies in [min, max].
double ConstrainHingeAngle(const Joint& joint, double angle_rad);

// The angle a solve reports for a hinge joint whose local rotation is
// `local`: HingeAngle, then brought into [min, max], so that
// min <= angle <= max holds exactly (strict comparisons, no tolerance):
// - inside [min, max]: HingeAngle itself (whose sign follows the
//   quaternion's, so a range wider than 2pi keeps the angle the solver
//   tracked);
// - within 1e-12 rad beyond a bound: that bound. A rotation written at a
//   bound (HingeRotation(j, max)) reads back up to a few ulp beyond it, as
//   rounding in the half-angle sine and cosine and the rest rotation's
//   product leaves it;
// - otherwise ConstrainHingeAngle: a 2pi-equivalent inside, or the nearest
//   bound (for rotations truly outside the range, which solvers never
//   return for a joint they move);
// - an unlimited hinge (both bounds infinite): in [-pi, pi].
// HingeRotation(j, HingeAngleWithinLimits(j, q)) is q to rounding (or -q, the
// same rotation, when the angle was wrapped or moved by 2pi); any swing off
// the axis is ignored.
double HingeAngleWithinLimits(const Joint& joint,
                              const Eigen::Quaterniond& local);

// A ball joint's limits as the half-angle functions StrictlyInside compares
// with, for checks without trigonometry (a solver's per-step test).
struct BallBounds {
  double cos_half_swing = 0.0;  // +inf: never inside (a cone under 0.01).
  double tan_half_min = 0.0;
  double tan_half_max = 0.0;
};
BallBounds HalfAngleBounds(const Joint& ball);

// Whether `local` lies strictly inside ball joint `ball`'s cone and twist
// range (`bounds` = HalfAngleBounds(ball)). False when in doubt: at a
// bound, a twist of a half turn, or a cone narrower than 0.01 rad (whose
// cosine is too flat near 0 for rounding in the quaternion's norm to be
// told from a swing beyond it). When true, ConstrainRotation returns
// `local` unchanged.
bool StrictlyInside(const Joint& ball, const BallBounds& bounds,
                    const Eigen::Quaterniond& local);

// Whether `local` satisfies the joint's type and limits within
// `tolerance_rad`. Hinge angles count modulo 2pi (the same rotation).
bool WithinLimits(const Joint& joint, const Eigen::Quaterniond& local,
                  double tolerance_rad);

// Among `angle` and angle -+ 2pi, the first inside [lo, hi]; `angle` when
// none is. A ball's twist is read in [-pi, pi] and its range lies in
// [-pi, pi], so a twist of -pi is inside a range ending at pi (the same
// rotation): compare the representative, never the raw reading.
double TwistInRange(double angle, double lo, double hi);

// Whether `angle`, modulo 2pi, lies in [lo - tolerance, hi + tolerance].
bool AngleWithin(double angle, double lo, double hi, double tolerance);

// Clamps an angle to [lo, hi].
inline double ClampAngle(double a, double lo, double hi) {
  return a < lo ? lo : (a > hi ? hi : a);
}

}  // namespace reach

#endif  // REACH_SOLVERS_LIMITS_H_
