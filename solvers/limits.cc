#include "solvers/limits.h"

#include <algorithm>
#include <cmath>

namespace reach {
namespace {

constexpr double kTwoPi = 2.0 * M_PI;

// How far beyond a bound a hinge angle read back from a rotation written at
// that bound may land by rounding alone (a few ulp of 2pi in practice).
constexpr double kReadBackSlack = 1e-12;

// Distance on the circle between two angles (rotations modulo 2pi).
double CircleDistance(double a, double b) {
  return std::abs(std::remainder(a - b, kTwoPi));
}

// The bound of [lo, hi] nearest to `angle` on the circle; an infinite bound
// is never nearest (the other one is finite, or `angle` would be inside).
double NearestBound(double angle, double lo, double hi) {
  if (!std::isfinite(lo)) return hi;
  if (!std::isfinite(hi)) return lo;
  return CircleDistance(angle, lo) <= CircleDistance(angle, hi) ? lo : hi;
}

// The bound of [lo, hi] an angle outside it is brought to. Without `from`
// (null), the bound nearest on the circle (NearestBound). With `from`, an
// angle inside the range (the previous frame's answer), the bound met first
// turning from `from` to `angle` the shorter way: the nearest bound flips
// from one end of the range to the other as `angle` crosses the antipode
// of the range's middle (a twist wanted near the half turn: 137.5 degrees
// in a frame on a wrist's +-1.2 rad), this one only as `angle` crosses the
// antipode of `from`, a bound's when `from` was held there.
double BoundFor(double angle, double lo, double hi, const double* from) {
  if (from == nullptr || !std::isfinite(lo) || !std::isfinite(hi) ||
      !(*from >= lo && *from <= hi)) {
    return NearestBound(angle, lo, hi);
  }
  const double turn = std::remainder(angle - *from, kTwoPi);
  if (turn == 0.0) return NearestBound(angle, lo, hi);
  return turn > 0.0 ? hi : lo;
}

// Picks, among the 2pi-equivalents of `angle` in (-2pi, 2pi], one inside
// [lo, hi]; failing that, the bound nearest on the circle. A range with one
// infinite bound holds every rotation: its equivalent nearest the finite
// bound (a few turns away when that bound lies more than 2pi from `angle`).
// The result is always inside [lo, hi].
double ConstrainHingeAngle(double angle, double lo, double hi,
                           const double* from = nullptr) {
  const double inside = TwistInRange(angle, lo, hi);
  if (inside >= lo && inside <= hi) return inside;
  if (!std::isfinite(lo) && std::isfinite(hi)) {
    // angle > hi: the largest equivalent at or below hi (std::min guards
    // against the product's rounding).
    return std::min(angle - kTwoPi * std::ceil((angle - hi) / kTwoPi), hi);
  }
  if (std::isfinite(lo) && !std::isfinite(hi)) {
    return std::max(angle + kTwoPi * std::ceil((lo - angle) / kTwoPi), lo);
  }
  return BoundFor(angle, lo, hi, from);
}

// Angle of a swing quaternion in [0, pi] and its unit axis.
double SwingAngle(const Eigen::Quaterniond& swing, Eigen::Vector3d* axis) {
  const double s = swing.vec().norm();
  if (s < 1e-15) {
    *axis = Eigen::Vector3d::UnitX();
    return 0.0;
  }
  const double sign = swing.w() < 0.0 ? -1.0 : 1.0;
  *axis = sign * swing.vec() / s;
  return 2.0 * std::atan2(s, std::abs(swing.w()));
}

double WrapPi(double a) { return std::remainder(a, kTwoPi); }

}  // namespace

double TwistInRange(double angle, double lo, double hi) {
  for (double candidate : {angle, angle - kTwoPi, angle + kTwoPi}) {
    if (candidate >= lo && candidate <= hi) return candidate;
  }
  return angle;
}

bool AngleWithin(double angle, double lo, double hi, double tolerance) {
  const double a = TwistInRange(angle, lo - tolerance, hi + tolerance);
  return a >= lo - tolerance && a <= hi + tolerance;
}

double ConstrainHingeAngle(const Joint& joint, double angle_rad) {
  return ConstrainHingeAngle(angle_rad, joint.min_angle_rad,
                             joint.max_angle_rad);
}

double HingeAngle(const Joint& joint, const Eigen::Quaterniond& local) {
  const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * local;
  Eigen::Quaterniond swing;
  return SwingTwist(delta, joint.axis, &swing);
}

double HingeAngleWithinLimits(const Joint& joint,
                              const Eigen::Quaterniond& local) {
  const double angle = HingeAngle(joint, local);
  const double lo = joint.min_angle_rad;
  const double hi = joint.max_angle_rad;
  if (!std::isfinite(lo) && !std::isfinite(hi)) return WrapPi(angle);
  if (angle >= lo && angle <= hi) return angle;
  // Rounding past a bound reports the bound, not a 2pi-equivalent: in a
  // range 2pi wide both would do, and the bound keeps the quaternion's sign.
  if (angle > hi && angle - hi <= kReadBackSlack) return hi;
  if (angle < lo && lo - angle <= kReadBackSlack) return lo;
  return ConstrainHingeAngle(angle, lo, hi);
}

Eigen::Quaterniond HingeRotation(const Joint& joint, double angle_rad) {
  const double half = 0.5 * angle_rad;
  const double s = std::sin(half);
  return joint.rest.rotation *
         Eigen::Quaterniond(std::cos(half), s * joint.axis.x(),
                            s * joint.axis.y(), s * joint.axis.z());
}

// The two-argument form measures nothing it is not asked for (a null
// `excess`): chain solvers call it every iteration.
Eigen::Quaterniond ConstrainRotation(const Joint& joint,
                                     const Eigen::Quaterniond& local) {
  return ConstrainRotation(joint, local, nullptr);
}

namespace {

// How far outside its range a previous answer's twist may read and still
// count as at the bound: a rotation written at a bound reads back a few ulp
// beyond it (HingeAngleWithinLimits), and one held at a bound is the case
// that matters.
constexpr double kPreviousSlack = 1e-9;

// The previous answer's twist (a hinge's angle, a ball's twist read in
// [-pi, pi]), its representative in the joint's range, rounding past a
// bound brought to it; NaN when it lies outside (BoundFor then takes the
// nearest bound).
double PreviousTwist(const Joint& joint, const Eigen::Quaterniond& previous) {
  const double lo = joint.min_angle_rad;
  const double hi = joint.max_angle_rad;
  const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * previous;
  Eigen::Quaterniond swing;
  double angle = SwingTwist(delta, joint.axis, &swing);
  if (joint.type != JointType::kHinge) angle = WrapPi(angle);
  angle = TwistInRange(angle, lo - kPreviousSlack, hi + kPreviousSlack);
  if (!(angle >= lo - kPreviousSlack && angle <= hi + kPreviousSlack)) {
    return NAN;
  }
  return ClampAngle(angle, lo, hi);
}

}  // namespace

Eigen::Quaterniond ConstrainRotation(const Joint& joint,
                                     const Eigen::Quaterniond& local,
                                     LimitExcess* excess) {
  return ConstrainRotationFrom(joint, local, nullptr, excess);
}

Eigen::Quaterniond ConstrainRotationFrom(const Joint& joint,
                                         const Eigen::Quaterniond& local,
                                         const Eigen::Quaterniond* previous,
                                         LimitExcess* excess) {
  if (excess != nullptr) *excess = LimitExcess();
  double from_twist = 0.0;
  const double* from = nullptr;
  if (previous != nullptr && joint.type != JointType::kFixed) {
    from_twist = PreviousTwist(joint, *previous);
    from = &from_twist;
  }
  switch (joint.type) {
    case JointType::kFixed:
      if (excess != nullptr) {
        excess->twist = AngleBetween(local, joint.rest.rotation);
      }
      return joint.rest.rotation;
    case JointType::kHinge: {
      const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * local;
      Eigen::Quaterniond swing;
      const double angle = SwingTwist(delta, joint.axis, &swing);
      const double clamped = ConstrainHingeAngle(
          angle, joint.min_angle_rad, joint.max_angle_rad, from);
      if (excess != nullptr) {
        excess->twist = std::abs(WrapPi(clamped - angle));
        Eigen::Vector3d unused;
        excess->swing = SwingAngle(swing, &unused);
      }
      return HingeRotation(joint, clamped);
    }
    case JointType::kBall: {
      if (!joint.IsConstrained()) return local;
      const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * local;
      Eigen::Quaterniond swing;
      const double twist = WrapPi(SwingTwist(delta, joint.axis, &swing));
      const double clamped_twist =
          AngleWithin(twist, joint.min_angle_rad, joint.max_angle_rad, 0.0)
              ? twist
              : BoundFor(twist, joint.min_angle_rad, joint.max_angle_rad, from);
      Eigen::Vector3d swing_axis;
      const double swing_angle = SwingAngle(swing, &swing_axis);
      const double clamped_swing =
          swing_angle > joint.max_swing_rad ? joint.max_swing_rad : swing_angle;
      if (clamped_twist == twist && clamped_swing == swing_angle) return local;
      if (excess != nullptr) {
        excess->twist = std::abs(WrapPi(clamped_twist - twist));
        excess->swing = swing_angle - clamped_swing;
      }
      const Eigen::Quaterniond new_swing(
          Eigen::AngleAxisd(clamped_swing, swing_axis));
      const Eigen::Quaterniond new_twist(
          Eigen::AngleAxisd(clamped_twist, joint.axis));
      return joint.rest.rotation * new_swing * new_twist;
    }
  }
  return local;
}

bool ProjectIntoLimits(const Joint& joint, Eigen::Quaterniond* local) {
  return ProjectIntoLimits(joint, nullptr, local);
}

bool ProjectIntoLimits(const Joint& joint, const Eigen::Quaterniond* previous,
                       Eigen::Quaterniond* local) {
  if (!joint.IsConstrained()) return false;
  constexpr double kOutside = 1e-12;
  if (joint.type == JointType::kHinge) {
    // The common case, a hinge on its axis inside its range, with one
    // atan2 (ConstrainRotation would rebuild the rotation).
    const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * *local;
    const Eigen::Vector3d v = delta.vec();
    const double p = v.dot(joint.axis);
    // |v across the axis| is sin(swing / 2): below 1e-13 the swing is
    // under kOutside.
    if ((v - p * joint.axis).squaredNorm() <= 1e-26 &&
        AngleWithin(2.0 * std::atan2(p, delta.w()), joint.min_angle_rad,
                    joint.max_angle_rad, 0.0)) {
      return false;
    }
  }
  LimitExcess excess;
  const Eigen::Quaterniond inside =
      ConstrainRotationFrom(joint, *local, previous, &excess);
  if (!(excess.twist > kOutside || excess.swing > kOutside)) return false;
  *local = inside.normalized();
  return true;
}

namespace {

// The middle of [lo, hi] (lo <= hi, at least one finite), or a radian in
// from the finite bound of a half-open range.
double RangeMiddle(double lo, double hi) {
  constexpr double kOpenRangeBend = 1.0;
  if (std::isfinite(lo) && std::isfinite(hi)) return 0.5 * (lo + hi);
  return std::isfinite(lo) ? lo + kOpenRangeBend : hi - kOpenRangeBend;
}

bool NearBound(double angle, double lo, double hi, double within) {
  return std::abs(angle - lo) <= within || std::abs(angle - hi) <= within;
}

}  // namespace

bool MoveOffBounds(const Joint& joint, Eigen::Quaterniond* local,
                   double within_rad) {
  const double lo = joint.min_angle_rad;
  const double hi = joint.max_angle_rad;
  const bool ranged = std::isfinite(lo) || std::isfinite(hi);
  if (joint.type == JointType::kHinge) {
    if (!ranged ||
        !NearBound(HingeAngleWithinLimits(joint, *local), lo, hi, within_rad)) {
      return false;
    }
    *local = HingeRotation(joint, RangeMiddle(lo, hi));
    return true;
  }
  if (joint.type != JointType::kBall || !joint.IsLimited()) return false;
  const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * *local;
  Eigen::Quaterniond swing;
  double twist = WrapPi(SwingTwist(delta, joint.axis, &swing));
  Eigen::Vector3d swing_axis;
  double swing_angle = SwingAngle(swing, &swing_axis);
  bool moved = false;
  if (ranged && NearBound(TwistInRange(twist, lo, hi), lo, hi, within_rad)) {
    twist = RangeMiddle(lo, hi);
    moved = true;
  }
  if (std::isfinite(joint.max_swing_rad) &&
      swing_angle >= joint.max_swing_rad - within_rad) {
    swing_angle = 0.5 * joint.max_swing_rad;
    moved = true;
  }
  if (!moved) return false;
  *local = (joint.rest.rotation *
            Eigen::Quaterniond(Eigen::AngleAxisd(swing_angle, swing_axis)) *
            Eigen::Quaterniond(Eigen::AngleAxisd(twist, joint.axis)))
               .normalized();
  return true;
}

BallBounds HalfAngleBounds(const Joint& ball) {
  constexpr double kNarrowCone = 0.01;
  BallBounds b;
  // Infinite bounds give -inf / +inf; a twist bound of +-pi a huge
  // tangent.
  b.cos_half_swing = ball.max_swing_rad < kNarrowCone ? kInf
                     : ball.max_swing_rad < M_PI
                         ? std::cos(0.5 * ball.max_swing_rad)
                         : -kInf;
  b.tan_half_min = std::isfinite(ball.min_angle_rad)
                       ? std::tan(0.5 * ball.min_angle_rad)
                       : -kInf;
  b.tan_half_max = std::isfinite(ball.max_angle_rad)
                       ? std::tan(0.5 * ball.max_angle_rad)
                       : kInf;
  return b;
}

bool StrictlyInside(const Joint& ball, const BallBounds& bounds,
                    const Eigen::Quaterniond& local) {
  // The twist's half-angle is atan2(p, w), in [-pi/2, pi/2] once w >= 0;
  // the swing's half-angle has cosine sqrt(w^2 + p^2) (SwingTwist). A NaN
  // product (w = 0, a half turn of twist) fails the comparisons.
  const Eigen::Quaterniond delta = ball.rest.rotation.conjugate() * local;
  double p = delta.vec().dot(ball.axis);
  double w = delta.w();
  if (w < 0.0) {
    p = -p;
    w = -w;
  }
  return std::sqrt(w * w + p * p) > bounds.cos_half_swing &&
         p > w * bounds.tan_half_min && p < w * bounds.tan_half_max;
}

bool WithinLimits(const Joint& joint, const Eigen::Quaterniond& local,
                  double tolerance_rad) {
  switch (joint.type) {
    case JointType::kFixed:
      return AngleBetween(local, joint.rest.rotation) <= tolerance_rad;
    case JointType::kHinge: {
      const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * local;
      Eigen::Quaterniond swing;
      const double angle = SwingTwist(delta, joint.axis, &swing);
      Eigen::Vector3d unused;
      if (SwingAngle(swing, &unused) > tolerance_rad) return false;
      // 2pi-periodic: the smallest equivalent of the angle at or above the
      // range's start must not pass its end. SwingTwist reads the angle
      // anywhere in (-2pi, 2pi], so trying only +-2pi misses ranges far
      // from it. A range 2pi wide or more (one side unlimited, too) holds
      // every rotation.
      const double lo = joint.min_angle_rad - tolerance_rad;
      const double hi = joint.max_angle_rad + tolerance_rad;
      if (!(hi - lo < kTwoPi)) return true;
      const double above = angle - kTwoPi * std::floor((angle - lo) / kTwoPi);
      return above <= hi;
    }
    case JointType::kBall: {
      const Eigen::Quaterniond delta = joint.rest.rotation.conjugate() * local;
      Eigen::Quaterniond swing;
      const double twist = WrapPi(SwingTwist(delta, joint.axis, &swing));
      Eigen::Vector3d unused;
      return SwingAngle(swing, &unused) <=
                 joint.max_swing_rad + tolerance_rad &&
             AngleWithin(twist, joint.min_angle_rad, joint.max_angle_rad,
                         tolerance_rad);
    }
  }
  return false;
}

}  // namespace reach
