// Joint limits: ConstrainRotation per joint type, hinge angles and their
// 2pi bookkeeping, and WithinLimits agreeing with ConstrainRotation.
#include "solvers/limits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/testing/models.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::RandomRotation;
using ::reach::testing::Rng;

constexpr double kPi = M_PI;
constexpr double kTwoPi = 2.0 * M_PI;

// Distance between two quaternions as rotations (q and -q are the same),
// coefficient-wise so it stays accurate for tiny differences.
double QuatDistance(const Quaterniond& a, const Quaterniond& b) {
  return std::min((a.coeffs() - b.coeffs()).norm(),
                  (a.coeffs() + b.coeffs()).norm());
}

Vector3d RandomUnit(Rng& rng) {
  std::normal_distribution<double> n(0.0, 1.0);
  return Vector3d(n(rng), n(rng), n(rng)).normalized();
}

// A unit vector perpendicular to `axis`.
Vector3d Perpendicular(const Vector3d& axis) { return axis.unitOrthogonal(); }

Joint MakeFixed(const Quaterniond& rest) {
  Joint j;
  j.name = "fixed";
  j.type = JointType::kFixed;
  j.rest.rotation = rest;
  return j;
}

Joint MakeHinge(const Quaterniond& rest, const Vector3d& axis, double lo,
                double hi) {
  Joint j;
  j.name = "hinge";
  j.type = JointType::kHinge;
  j.rest.rotation = rest;
  j.axis = axis.normalized();
  j.min_angle_rad = lo;
  j.max_angle_rad = hi;
  return j;
}

Joint MakeBall(const Quaterniond& rest, const Vector3d& axis, double lo,
               double hi, double max_swing) {
  Joint j;
  j.name = "ball";
  j.type = JointType::kBall;
  j.rest.rotation = rest;
  j.axis = axis.normalized();
  j.min_angle_rad = lo;
  j.max_angle_rad = hi;
  j.max_swing_rad = max_swing;
  return j;
}

const Quaterniond kRest = AxisAngle(Vector3d(1, -2, 0.5).normalized(), 0.8);
const Vector3d kAxis = Vector3d(0.3, 0.4, -1.0).normalized();

// --- Fixed -----------------------------------------------------------------

TEST(ConstrainRotationTest, FixedReturnsRest) {
  const Joint joint = MakeFixed(kRest);
  Rng rng(1);
  for (int trial = 0; trial < 100; ++trial) {
    const Quaterniond q = ConstrainRotation(joint, RandomRotation(rng));
    EXPECT_EQ(q.coeffs(), kRest.coeffs()) << trial;
  }
}

// --- Hinge -----------------------------------------------------------------

TEST(ConstrainRotationTest, HingeProjectsOffAxisRotationOntoAxis) {
  const Joint joint = MakeHinge(kRest, kAxis, -kInf, kInf);
  const Vector3d perp = Perpendicular(kAxis);
  const Quaterniond local =
      kRest * AxisAngle(perp, 0.4) * AxisAngle(kAxis, 0.7);
  const Quaterniond q = ConstrainRotation(joint, local);
  EXPECT_LT(QuatDistance(q, kRest * AxisAngle(kAxis, 0.7)), 1e-12);
  EXPECT_NEAR(HingeAngle(joint, q), 0.7, 1e-12);
  EXPECT_NEAR(HingeAngle(joint, local), 0.7, 1e-12);
  EXPECT_FALSE(WithinLimits(joint, local, 1e-3));
  EXPECT_TRUE(WithinLimits(joint, q, 1e-9));
}

TEST(ConstrainRotationTest, HingeClampsToRange) {
  const Joint joint = MakeHinge(kRest, kAxis, -0.5, 1.0);
  struct Case {
    double in;
    double want;
  };
  for (const Case& c : {Case{1.3, 1.0}, Case{-0.9, -0.5}, Case{0.2, 0.2},
                        Case{1.0, 1.0}, Case{-0.5, -0.5}}) {
    const Quaterniond q = ConstrainRotation(joint, HingeRotation(joint, c.in));
    EXPECT_LT(QuatDistance(q, HingeRotation(joint, c.want)), 1e-12) << c.in;
    EXPECT_NEAR(HingeAngle(joint, q), c.want, 1e-12) << c.in;
    EXPECT_NEAR(ConstrainHingeAngle(joint, c.in), c.want, 1e-15) << c.in;
  }
}

TEST(ConstrainRotationTest, HingePicksTheNearestBoundOnTheCircle) {
  const Joint joint = MakeHinge(kRest, kAxis, -0.5, 1.0);
  struct Case {
    double in;
    double want;
  };
  // -2.9 is numerically closer to -0.5 but, as a rotation (3.38), closer to
  // 1.0 going the other way round.
  for (const Case& c :
       {Case{3.0, 1.0}, Case{2.5, 1.0}, Case{-2.0, -0.5}, Case{-2.9, 1.0},
        Case{-2.7, -0.5}, Case{5.0, -0.5}, Case{-5.0, 1.0}}) {
    EXPECT_EQ(ConstrainHingeAngle(joint, c.in), c.want) << c.in;
    const Quaterniond q = ConstrainRotation(joint, HingeRotation(joint, c.in));
    EXPECT_NEAR(HingeAngle(joint, q), c.want, 1e-12) << c.in;
  }
}

TEST(ConstrainRotationTest, HingeKeepsTwoPiEquivalentInsideRange) {
  // [3.0, 4.5] holds -2.5 + 2pi = 3.78: the rotation is allowed as it is.
  const Joint joint = MakeHinge(kRest, kAxis, 3.0, 4.5);
  const Quaterniond local = HingeRotation(joint, -2.5);
  EXPECT_NEAR(ConstrainHingeAngle(joint, -2.5), -2.5 + kTwoPi, 1e-15);
  const Quaterniond q = ConstrainRotation(joint, local);
  EXPECT_LT(QuatDistance(q, local), 1e-12);
  EXPECT_NEAR(HingeAngle(joint, q), -2.5 + kTwoPi, 1e-12);
  EXPECT_TRUE(WithinLimits(joint, local, 0.0));

  // And the other way: [-6, -4] holds 1.0 - 2pi.
  const Joint negative = MakeHinge(kRest, kAxis, -6.0, -4.0);
  EXPECT_NEAR(ConstrainHingeAngle(negative, 1.0), 1.0 - kTwoPi, 1e-15);
  EXPECT_LT(
      QuatDistance(ConstrainRotation(negative, HingeRotation(negative, 1.0)),
                   HingeRotation(negative, 1.0)),
      1e-12);
  EXPECT_TRUE(WithinLimits(negative, HingeRotation(negative, 1.0), 0.0));
}

TEST(ConstrainRotationTest, HingeRangeBeyondPiReachesAnglesBeyondPi) {
  // A range of (0, 2pi): 4.0 is inside, -1.0 (= 5.28) is inside too.
  const Joint joint = MakeHinge(kRest, kAxis, 0.0, kTwoPi);
  EXPECT_EQ(ConstrainHingeAngle(joint, 4.0), 4.0);
  EXPECT_NEAR(ConstrainHingeAngle(joint, -1.0), kTwoPi - 1.0, 1e-15);
  const Quaterniond q = ConstrainRotation(joint, HingeRotation(joint, 4.0));
  EXPECT_NEAR(HingeAngle(joint, q), 4.0, 1e-12);
}

TEST(ConstrainRotationTest, UnlimitedHingeKeepsEveryAngle) {
  const Joint joint = MakeHinge(kRest, kAxis, -kInf, kInf);
  for (double a : {-6.0, -3.5, -1.0, 0.0, 2.0, 3.5, 6.2}) {
    EXPECT_EQ(ConstrainHingeAngle(joint, a), a);
    const Quaterniond local = HingeRotation(joint, a);
    EXPECT_LT(QuatDistance(ConstrainRotation(joint, local), local), 1e-12) << a;
  }
}

// A range with one infinite bound holds every rotation: no clamping, and
// the angle stays finite (HingeRotation(inf) would be NaN).
TEST(ConstrainRotationTest, HingeWithOneInfiniteBoundStaysFinite) {
  const Joint joint = MakeHinge(kRest, kAxis, 1.0, kInf);
  const double angle = ConstrainHingeAngle(joint, -5.5);  // = 0.78 + 2pi k.
  EXPECT_TRUE(std::isfinite(angle)) << angle;
  const Quaterniond q = ConstrainRotation(joint, HingeRotation(joint, -5.5));
  EXPECT_TRUE(q.coeffs().allFinite()) << q.coeffs().transpose();
}

TEST(ConstrainRotationTest, HingeWithOneInfiniteBoundAllowsEveryRotation) {
  // [1, inf) holds -5.5 + 4pi = 7.07 and (-inf, -1] holds 5.5 - 4pi = -7.07:
  // a clamp to the finite bound would move an allowed rotation.
  const Joint above = MakeHinge(kRest, kAxis, 1.0, kInf);
  EXPECT_NEAR(ConstrainHingeAngle(above, -5.5), -5.5 + 2 * kTwoPi, 1e-15);
  EXPECT_LT(QuatDistance(ConstrainRotation(above, HingeRotation(above, -5.5)),
                         HingeRotation(above, -5.5)),
            1e-12);
  const Joint below = MakeHinge(kRest, kAxis, -kInf, -1.0);
  EXPECT_NEAR(ConstrainHingeAngle(below, 5.5), 5.5 - 2 * kTwoPi, 1e-15);
  // Exactly a multiple of 2pi beyond the bound: the bound itself.
  EXPECT_EQ(ConstrainHingeAngle(below, -1.0 + kTwoPi), -1.0);
  for (double a : {-6.0, -3.0, 0.0, 2.0, 6.2}) {
    const double c = ConstrainHingeAngle(above, a);
    EXPECT_GE(c, 1.0) << a;
    EXPECT_NEAR(std::remainder(c - a, kTwoPi), 0.0, 1e-14) << a;
    const double d = ConstrainHingeAngle(below, a);
    EXPECT_LE(d, -1.0) << a;
    EXPECT_NEAR(std::remainder(d - a, kTwoPi), 0.0, 1e-14) << a;
  }
}

// --- Ball ------------------------------------------------------------------

TEST(ConstrainRotationTest, BallClampsSwingToCone) {
  const Joint joint = MakeBall(kRest, kAxis, -kInf, kInf, 0.5);
  const Vector3d perp = Perpendicular(kAxis);
  const Quaterniond local =
      kRest * AxisAngle(perp, 1.2) * AxisAngle(kAxis, 0.3);
  const Quaterniond q = ConstrainRotation(joint, local);
  EXPECT_LT(
      QuatDistance(q, kRest * AxisAngle(perp, 0.5) * AxisAngle(kAxis, 0.3)),
      1e-12);
  // The twist axis ends up exactly on the cone's rim.
  const Vector3d rest_dir = kRest * kAxis;
  EXPECT_NEAR(std::acos((q * kAxis).dot(rest_dir)), 0.5, 1e-9);
}

TEST(ConstrainRotationTest, BallInsideConeIsUnchanged) {
  const Joint joint = MakeBall(kRest, kAxis, -1.0, 1.0, 0.5);
  const Vector3d perp = Perpendicular(kAxis);
  const Quaterniond local =
      kRest * AxisAngle(perp, 0.4) * AxisAngle(kAxis, -0.9);
  EXPECT_EQ(ConstrainRotation(joint, local).coeffs(), local.coeffs());
}

TEST(ConstrainRotationTest, BallClampsTwist) {
  const Joint joint = MakeBall(kRest, kAxis, -0.2, 0.4, kInf);
  const Vector3d perp = Perpendicular(kAxis);
  struct Case {
    double twist;
    double want;
  };
  for (const Case& c :
       {Case{0.9, 0.4}, Case{-1.0, -0.2}, Case{3.0, 0.4}, Case{0.1, 0.1}}) {
    const Quaterniond local =
        kRest * AxisAngle(perp, 0.3) * AxisAngle(kAxis, c.twist);
    const Quaterniond q = ConstrainRotation(joint, local);
    EXPECT_LT(QuatDistance(
                  q, kRest * AxisAngle(perp, 0.3) * AxisAngle(kAxis, c.want)),
              1e-12)
        << c.twist;
  }
}

TEST(ConstrainRotationTest, BallTwistCountsModuloTwoPi) {
  // A twist of 4.0 is the rotation 4.0 - 2pi = -2.28, below the range: it
  // clamps to -0.2.
  const Joint joint = MakeBall(kRest, kAxis, -0.2, 0.4, kInf);
  const Quaterniond q = ConstrainRotation(joint, kRest * AxisAngle(kAxis, 4.0));
  EXPECT_LT(QuatDistance(q, kRest * AxisAngle(kAxis, -0.2)), 1e-12);
}

// ProjectIntoLimits with the previous frame's answer: a twist wanted beyond
// the range, swept across the half turn, stays at the bound it was held at
// (the nearest bound on the circle flips from one end to the other there:
// a wrist of +-1.2 rad turned 137.5 degrees in a frame), and moves to the
// other bound only past the antipode of the one held.
TEST(ProjectIntoLimitsTest, TwistSweptAcrossTheHalfTurnStaysAtItsBound) {
  const Joint ball = MakeBall(kRest, kAxis, -1.2, 1.2, 0.9);
  const Joint hinge = MakeHinge(kRest, kAxis, -1.2, 1.2);
  const Vector3d perp = Perpendicular(kAxis);
  for (const Joint* joint : {&ball, &hinge}) {
    const double swing = joint == &ball ? 0.1 : 0.0;
    auto wanted = [&](double twist) {
      return Quaterniond(kRest * AxisAngle(perp, swing) *
                         AxisAngle(kAxis, twist));
    };
    // From inside the range past its low end, on past the half turn.
    Quaterniond previous = wanted(-1.0);
    double largest = 0.0;
    for (double twist = -1.0; twist > -kPi - 1.0; twist -= 0.01) {
      Quaterniond q = wanted(twist);
      ProjectIntoLimits(*joint, &previous, &q);
      ASSERT_TRUE(WithinLimits(*joint, q, 1e-9)) << twist;
      largest = std::max(largest, q.angularDistance(previous));
      previous = q;
    }
    // The last wanted twist, -pi - 1 (pi - 1 on the circle), is nearer the
    // high bound, yet the answer stays at the low one: no step larger than
    // the sweep's 0.01 (the swing, 0.1, does not move).
    EXPECT_LT(largest, 0.0101) << joint->name;
    Quaterniond nearest = wanted(-kPi - 1.0);
    ProjectIntoLimits(*joint, &nearest);
    EXPECT_LT(QuatDistance(nearest, ConstrainRotation(*joint, wanted(1.2))),
              1e-9)
        << joint->name;
    EXPECT_LT(QuatDistance(previous, ConstrainRotation(*joint, wanted(-1.2))),
              1e-9)
        << joint->name;
    // Swept on past the antipode of the bound held (-1.2 - pi, which is
    // -1.2 + pi on the circle), the high bound is met first turning from
    // it the shorter way.
    Quaterniond past = wanted(-1.2 + kPi - 0.05);
    ProjectIntoLimits(*joint, &previous, &past);
    EXPECT_LT(QuatDistance(past, ConstrainRotation(*joint, wanted(1.2))), 1e-9)
        << joint->name;
    // Inside the range the previous answer changes nothing.
    Quaterniond inside = wanted(0.3);
    EXPECT_FALSE(ProjectIntoLimits(*joint, &previous, &inside));
  }
}

// A ball's twist is read in [-pi, pi]; a half turn may read as -pi while
// the range ends at +pi (the same rotation). Found by the solve_request
// fuzzer: the joint counted as outside its limits, so solvers "corrected"
// an allowed pose.
TEST(WithinLimitsTest, BallTwistOfAHalfTurnIsInsideARangeEndingAtPi) {
  const Joint up = MakeBall(kRest, kAxis, 0.5, kPi, kInf);
  const Joint down = MakeBall(kRest, kAxis, -kPi, -0.5, kInf);
  for (double turn : {kPi, -kPi, kPi - 1e-15, -kPi + 1e-15}) {
    const Quaterniond q = kRest * AxisAngle(kAxis, turn);
    EXPECT_TRUE(WithinLimits(up, q, 1e-12)) << turn;
    EXPECT_TRUE(WithinLimits(up, Quaterniond(-q.coeffs()), 1e-12)) << turn;
    EXPECT_TRUE(WithinLimits(down, q, 1e-12)) << turn;
    EXPECT_LT(QuatDistance(ConstrainRotation(up, q), q), 1e-12) << turn;
    EXPECT_LT(QuatDistance(ConstrainRotation(down, q), q), 1e-12) << turn;
  }
  // Just outside the range on the other side still counts as outside.
  EXPECT_FALSE(WithinLimits(up, kRest * AxisAngle(kAxis, 0.4), 1e-12));
  EXPECT_FALSE(WithinLimits(down, kRest * AxisAngle(kAxis, -0.4), 1e-12));
}

TEST(AngleWithinTest, CountsModuloTwoPi) {
  EXPECT_TRUE(AngleWithin(-kPi, 0.5, kPi, 0.0));
  EXPECT_TRUE(AngleWithin(kPi, -kPi, -0.5, 0.0));
  EXPECT_TRUE(AngleWithin(-kPi - 1e-9, 0.5, kPi, 1e-8));
  EXPECT_FALSE(AngleWithin(0.4, 0.5, kPi, 0.05));
  EXPECT_TRUE(AngleWithin(0.46, 0.5, kPi, 0.05));
  EXPECT_DOUBLE_EQ(TwistInRange(-kPi, 0.5, kPi), kPi);
  EXPECT_DOUBLE_EQ(TwistInRange(0.2, 0.5, kPi), 0.2);
}

TEST(ConstrainRotationTest, BallClampsSwingAndTwistTogether) {
  const Joint joint = MakeBall(kRest, kAxis, -0.2, 0.4, 0.5);
  const Vector3d perp = Perpendicular(kAxis);
  const Quaterniond local =
      kRest * AxisAngle(perp, -2.0) * AxisAngle(kAxis, 1.5);
  const Quaterniond q = ConstrainRotation(joint, local);
  EXPECT_LT(
      QuatDistance(q, kRest * AxisAngle(perp, -0.5) * AxisAngle(kAxis, 0.4)),
      1e-12);
}

// The excess a solver locks columns by: how far each part was moved, read
// from rotations built with known swing and twist.
TEST(ConstrainRotationTest, ReportsHowFarEachPartWasOutside) {
  const Joint ball = MakeBall(kRest, kAxis, -0.2, 0.4, 0.5);
  const Vector3d perp = Perpendicular(kAxis);
  struct Case {
    double swing, twist, want_swing, want_twist;
  };
  for (const Case& c : {Case{-2.0, 1.5, 1.5, 1.1}, Case{0.3, 0.1, 0.0, 0.0},
                        Case{0.7, 0.1, 0.2, 0.0}, Case{0.3, -0.5, 0.0, 0.3},
                        // 4.0 is the twist 4.0 - 2pi, 2pi - 4.2 below -0.2.
                        Case{0.0, 4.0, 0.0, 2 * kPi - 4.2}}) {
    const Quaterniond local =
        kRest * AxisAngle(perp, c.swing) * AxisAngle(kAxis, c.twist);
    LimitExcess excess;
    excess.twist = excess.swing = -1.0;  // Overwritten.
    const Quaterniond q = ConstrainRotation(ball, local, &excess);
    EXPECT_TRUE(WithinLimits(ball, q, 1e-12)) << c.swing << " " << c.twist;
    if (c.want_swing == 0.0 && c.want_twist == 0.0) {
      EXPECT_EQ(q.coeffs(), local.coeffs()) << c.swing << " " << c.twist;
    }
    EXPECT_NEAR(excess.swing, c.want_swing, 1e-12) << c.swing << " " << c.twist;
    EXPECT_NEAR(excess.twist, c.want_twist, 1e-12) << c.swing << " " << c.twist;
  }
  // A twist range near a half turn: -3.0 is 3.28, 0.28 past 3.0 (the raw
  // difference to the bound, 6.0, is the same rotation).
  LimitExcess excess;
  ConstrainRotation(MakeBall(kRest, kAxis, 0.5, 3.0, kInf),
                    kRest * AxisAngle(kAxis, -3.0), &excess);
  EXPECT_NEAR(excess.twist, 2 * kPi - 6.0, 1e-12);
  // A hinge range beyond pi holds -2.5 as 3.78: nothing outside.
  ConstrainRotation(MakeHinge(kRest, kAxis, 3.0, 4.5),
                    kRest * AxisAngle(kAxis, -2.5), &excess);
  EXPECT_NEAR(excess.twist, 0.0, 1e-12);
  // A hinge: its angle past a bound, and swing off its axis.
  const Joint hinge = MakeHinge(kRest, kAxis, -0.5, 1.0);
  ConstrainRotation(hinge, kRest * AxisAngle(perp, 0.25) * AxisAngle(kAxis, 1.3),
                    &excess);
  EXPECT_NEAR(excess.twist, 0.3, 1e-12);
  EXPECT_NEAR(excess.swing, 0.25, 1e-12);
  ConstrainRotation(hinge, HingeRotation(hinge, 0.2), &excess);
  EXPECT_EQ(excess.twist, 0.0);
  EXPECT_NEAR(excess.swing, 0.0, 1e-15);
  // A fixed joint: the whole rotation from rest.
  ConstrainRotation(MakeFixed(kRest), kRest * AxisAngle(perp, 0.6), &excess);
  EXPECT_NEAR(excess.twist, 0.6, 1e-12);
  EXPECT_EQ(excess.swing, 0.0);
}

// The trig-free test a solver's step uses: never "inside" where
// ConstrainRotation would move the rotation, including swings a rounding
// error from a zero or tiny cone, and inside for rotations well within.
TEST(StrictlyInsideTest, AgreesWithConstrainRotation) {
  const Vector3d perp = Perpendicular(kAxis);
  Rng rng(7);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (const Joint& ball :
       {MakeBall(kRest, kAxis, -0.2, 0.4, 0.5), MakeBall(kRest, kAxis, -kPi, kPi, 0.0),
        MakeBall(kRest, kAxis, -0.3, 0.3, 1e-6), MakeBall(kRest, kAxis, 0.5, 3.0, kInf),
        MakeBall(kRest, kAxis, -kInf, kInf, 2.0), MakeBall(kRest, kAxis, 0.1, 0.1, kPi)}) {
    const BallBounds bounds = HalfAngleBounds(ball);
    int inside = 0;
    for (int trial = 0; trial < 4000; ++trial) {
      // Swings from 1e-12 to 3 rad about random directions across the
      // axis, twists across the whole circle, either quaternion sign.
      const double swing = std::pow(10.0, -12.0 + 12.5 * (0.5 + 0.5 * unit(rng)));
      const Vector3d across =
          (AxisAngle(kAxis, kPi * unit(rng)) * perp).normalized();
      Quaterniond local = (kRest * AxisAngle(across, swing) *
                           AxisAngle(kAxis, kPi * unit(rng)))
                              .normalized();
      if (trial % 2) local.coeffs() = -local.coeffs();
      if (!StrictlyInside(ball, bounds, local)) continue;
      ++inside;
      EXPECT_EQ(ConstrainRotation(ball, local).coeffs(), local.coeffs())
          << "swing " << swing << " trial " << trial;
      EXPECT_TRUE(WithinLimits(ball, local, 0.0)) << "swing " << swing;
    }
    if (ball.max_swing_rad < 0.01 || ball.min_angle_rad == ball.max_angle_rad) {
      EXPECT_EQ(inside, 0) << ball.max_swing_rad;
    } else {
      EXPECT_GT(inside, 100) << ball.max_swing_rad;
    }
  }
}

TEST(ConstrainRotationTest, UnconstrainedBallIsReturnedUnchanged) {
  const Joint joint = MakeBall(kRest, kAxis, -kInf, kInf, kInf);
  ASSERT_FALSE(joint.IsConstrained());
  Rng rng(2);
  for (int trial = 0; trial < 100; ++trial) {
    const Quaterniond q = RandomRotation(rng);
    EXPECT_EQ(ConstrainRotation(joint, q).coeffs(), q.coeffs());
    const Quaterniond negated(-q.coeffs());
    EXPECT_EQ(ConstrainRotation(joint, negated).coeffs(), negated.coeffs());
    EXPECT_TRUE(WithinLimits(joint, q, 0.0));
  }
}

// --- HingeAngle / HingeRotation ---------------------------------------------

TEST(HingeAngleTest, InvertsHingeRotationOverTheFullRange) {
  Rng rng(3);
  std::uniform_real_distribution<double> angle(-kTwoPi, kTwoPi);
  for (int trial = 0; trial < 200; ++trial) {
    const Joint joint =
        MakeHinge(RandomRotation(rng), RandomUnit(rng), -kInf, kInf);
    std::vector<double> angles = {0.0, 1.0,  -1.0,          kPi,           -kPi,
                                  3.5, -3.5, kTwoPi - 1e-6, -kTwoPi + 1e-6};
    for (int k = 0; k < 20; ++k) {
      const double a = angle(rng);
      if (a > -kTwoPi) angles.push_back(a);
    }
    for (double a : angles) {
      EXPECT_NEAR(HingeAngle(joint, HingeRotation(joint, a)), a, 1e-12)
          << "trial " << trial << " angle " << a;
    }
  }
}

TEST(HingeAngleTest, FullTurnIsTwoPiWithIdentityRest) {
  const Joint joint =
      MakeHinge(Quaterniond::Identity(), Vector3d::UnitZ(), -kInf, kInf);
  EXPECT_NEAR(HingeAngle(joint, HingeRotation(joint, kTwoPi)), kTwoPi, 1e-12);
}

TEST(HingeAngleTest, HingeRotationIsRestTimesAxisAngle) {
  const Joint joint = MakeHinge(kRest, kAxis, -kInf, kInf);
  for (double a : {-5.0, -0.3, 0.0, 2.0, 4.0}) {
    const Quaterniond want = kRest * Quaterniond(Eigen::AngleAxisd(a, kAxis));
    EXPECT_LT((HingeRotation(joint, a).coeffs() - want.coeffs()).norm(), 1e-15)
        << a;
  }
}

TEST(HingeAngleTest, IgnoresSwing) {
  const Joint joint = MakeHinge(kRest, kAxis, -kInf, kInf);
  const Quaterniond local =
      kRest * AxisAngle(Perpendicular(kAxis), 1.1) * AxisAngle(kAxis, -2.2);
  EXPECT_NEAR(HingeAngle(joint, local), -2.2, 1e-12);
}

// --- HingeAngleWithinLimits ------------------------------------------------

// Ranges that touch the awkward places: +-pi (where atan2 wraps), +-2pi (the
// widest allowed, where the quaternion's sign tells equivalents apart), a
// zero-width range, one infinite bound, none, and ordinary ones.
std::vector<Joint> HingesOfEveryRange(Rng& rng) {
  std::vector<Joint> joints;
  const double ranges[][2] = {
      {-kPi, kPi},        {0.0, kPi},        {-kPi, 0.0},
      {-kTwoPi, kTwoPi},  {0.0, kTwoPi},     {-kTwoPi, 0.0},
      {kPi, kTwoPi},      {-kTwoPi, -kPi},   {-2.8973, 2.8973},
      {-3.0718, -0.0698}, {-0.0175, 3.7525}, {0.3, 0.3},
      {-0.5, 1.0},        {1.0, kInf},       {-kInf, -1.0},
      {-kInf, kInf}};
  for (int k = 0; k < 6; ++k) {
    const Quaterniond rest =
        k == 0 ? Quaterniond::Identity() : RandomRotation(rng);
    const Vector3d axis = k == 0 ? Vector3d::UnitZ() : RandomUnit(rng);
    for (const auto& r : ranges)
      joints.push_back(MakeHinge(rest, axis, r[0], r[1]));
  }
  return joints;
}

TEST(HingeAngleWithinLimitsTest, RotationWrittenAtABoundReadsBackInside) {
  Rng rng(5);
  int raw_outside = 0;
  int samples = 0;
  for (const Joint& joint : HingesOfEveryRange(rng)) {
    const double lo = joint.min_angle_rad, hi = joint.max_angle_rad;
    std::vector<double> angles;
    for (double b : {lo, hi}) {
      if (!std::isfinite(b)) continue;
      // The bound and its neighbours a few ulp inside and outside.
      double up = b, down = b;
      for (int u = 0; u < 4; ++u) {
        angles.push_back(up);
        angles.push_back(down);
        up = std::nextafter(up, kInf);
        down = std::nextafter(down, -kInf);
      }
    }
    for (double a : angles) {
      const double written = ConstrainHingeAngle(joint, a);
      for (const Quaterniond& q :
           {HingeRotation(joint, written),
            HingeRotation(joint, written).normalized()}) {
        ++samples;
        const double raw = HingeAngle(joint, q);
        raw_outside += !(raw >= lo && raw <= hi);
        const double r = HingeAngleWithinLimits(joint, q);
        EXPECT_TRUE(lo <= r && r <= hi)
            << "[" << lo << ", " << hi << "] wrote " << written << " got " << r;
        // The same rotation: the written angle, or a 2pi-equivalent of it.
        EXPECT_LT(QuatDistance(HingeRotation(joint, r), q), 1e-15)
            << "[" << lo << ", " << hi << "] wrote " << written << " got " << r;
        EXPECT_NEAR(std::remainder(r - written, kTwoPi), 0.0, 1e-14);
      }
    }
  }
  // The read-back HingeAngle alone would have failed the strict check.
  EXPECT_GT(raw_outside, 0) << samples << " samples";
}

TEST(HingeAngleWithinLimitsTest, AnyRotationReadsBackInsideAndAgrees) {
  Rng rng(6);
  for (const Joint& joint : HingesOfEveryRange(rng)) {
    const double lo = joint.min_angle_rad, hi = joint.max_angle_rad;
    for (int trial = 0; trial < 300; ++trial) {
      // Pure hinge rotations (of either quaternion sign) and, every third,
      // one with swing off the axis.
      Quaterniond q = HingeRotation(
          joint, std::uniform_real_distribution<double>(-kTwoPi, kTwoPi)(rng));
      if (trial % 3 == 1) q.coeffs() = -q.coeffs();
      if (trial % 3 == 2) q = RandomRotation(rng);
      const double r = HingeAngleWithinLimits(joint, q);
      ASSERT_TRUE(lo <= r && r <= hi)
          << "[" << lo << ", " << hi << "] trial " << trial << " got " << r;
      if (!std::isfinite(lo) && !std::isfinite(hi)) {
        EXPECT_TRUE(-kPi <= r && r <= kPi) << r;
      }
      // Inside the limits (up to rounding), the rotation is reported as it
      // is; outside, as ConstrainRotation would move it.
      const Quaterniond pure = ConstrainRotation(
          MakeHinge(joint.rest.rotation, joint.axis, -kInf, kInf), q);
      const Quaterniond want =
          WithinLimits(joint, pure, 1e-12) ? pure : ConstrainRotation(joint, q);
      EXPECT_LT(QuatDistance(HingeRotation(joint, r), want), 1e-14)
          << "[" << lo << ", " << hi << "] trial " << trial;
    }
  }
}

TEST(HingeAngleWithinLimitsTest, KeepsTheTrackedAngleInRangesWiderThanPi) {
  // In [-2pi, 2pi] both 4.0 and 4.0 - 2pi are allowed: the quaternion's
  // sign says which one the solver wrote.
  const Joint joint = MakeHinge(kRest, kAxis, -kTwoPi, kTwoPi);
  for (double a : {4.0, 4.0 - kTwoPi, -5.0, -5.0 + kTwoPi, 0.5}) {
    EXPECT_NEAR(HingeAngleWithinLimits(joint, HingeRotation(joint, a)), a,
                1e-14);
  }
  // Unlimited: the same rotations, reported in [-pi, pi].
  const Joint free = MakeHinge(kRest, kAxis, -kInf, kInf);
  EXPECT_NEAR(HingeAngleWithinLimits(free, HingeRotation(free, 4.0)),
              4.0 - kTwoPi, 1e-14);
  EXPECT_NEAR(HingeAngleWithinLimits(free, HingeRotation(free, -5.0)),
              -5.0 + kTwoPi, 1e-14);
}

TEST(HingeAngleWithinLimitsTest, ZeroWidthRangeIsExactlyItsValue) {
  const Joint joint = MakeHinge(kRest, kAxis, 0.3, 0.3);
  Rng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    EXPECT_EQ(HingeAngleWithinLimits(joint, RandomRotation(rng)), 0.3);
  }
  EXPECT_EQ(HingeAngleWithinLimits(joint, HingeRotation(joint, 0.3)), 0.3);
}

// --- WithinLimits ----------------------------------------------------------

// A hinge rotation whose quaternion has a negative w reads as an angle in
// (-2pi, -pi) or (pi, 2pi]; a range with one side unlimited, or far from
// zero, holds it at a 4pi-equivalent (solve_request fuzzer: a full-body
// root hinge with min pi, no max, turned 0.17 rad, was called outside).
TEST(WithinLimitsTest, HingeAngleCountsModuloTwoPiWhateverTheSign) {
  const Joint open_above = MakeHinge(kRest, kAxis, M_PI, kInf);
  const Joint open_below = MakeHinge(kRest, kAxis, -kInf, -M_PI);
  const Joint far = MakeHinge(kRest, kAxis, 3.5, 4.5);  // Holds -2.5 + 2pi.
  for (const double a : {0.171, -0.171, 2.0, -3.0, 6.1}) {
    for (const double sign : {1.0, -1.0}) {
      const Quaterniond q(sign * HingeRotation(open_above, a).coeffs());
      EXPECT_TRUE(WithinLimits(open_above, q, 1e-6)) << a << " " << sign;
      EXPECT_TRUE(WithinLimits(open_below, q, 0.0)) << a << " " << sign;
    }
  }
  for (const double sign : {1.0, -1.0}) {
    EXPECT_TRUE(WithinLimits(
        far, Quaterniond(sign * HingeRotation(far, -2.5).coeffs()), 0.0));
    EXPECT_FALSE(WithinLimits(
        far, Quaterniond(sign * HingeRotation(far, 0.3).coeffs()), 1e-6));
  }
}

TEST(WithinLimitsTest, FixedAllowsOnlyRest) {
  const Joint joint = MakeFixed(kRest);
  EXPECT_TRUE(WithinLimits(joint, kRest, 1e-6));
  EXPECT_TRUE(WithinLimits(joint, Quaterniond(-kRest.coeffs()), 1e-6));
  EXPECT_FALSE(WithinLimits(joint, kRest * AxisAngle(kAxis, 1e-3), 1e-4));
  EXPECT_TRUE(WithinLimits(joint, kRest * AxisAngle(kAxis, 1e-3), 2e-3));
}

TEST(WithinLimitsTest, HingeRejectsSwingBeyondTolerance) {
  const Joint joint = MakeHinge(kRest, kAxis, -1.0, 1.0);
  const Quaterniond off =
      kRest * AxisAngle(Perpendicular(kAxis), 1e-3) * AxisAngle(kAxis, 0.5);
  EXPECT_FALSE(WithinLimits(joint, off, 1e-4));
  EXPECT_TRUE(WithinLimits(joint, off, 2e-3));
}

TEST(WithinLimitsTest, BoundsHonourTolerance) {
  const Joint hinge = MakeHinge(kRest, kAxis, -1.0, 1.0);
  EXPECT_TRUE(WithinLimits(hinge, HingeRotation(hinge, 1.0 + 5e-7), 1e-6));
  EXPECT_FALSE(WithinLimits(hinge, HingeRotation(hinge, 1.0 + 2e-6), 1e-6));
  EXPECT_FALSE(WithinLimits(hinge, HingeRotation(hinge, -1.0 - 2e-6), 1e-6));

  const Joint ball = MakeBall(kRest, kAxis, -0.2, 0.4, 0.5);
  const Vector3d perp = Perpendicular(kAxis);
  EXPECT_TRUE(WithinLimits(ball, kRest * AxisAngle(perp, 0.5 + 5e-7), 1e-6));
  EXPECT_FALSE(WithinLimits(ball, kRest * AxisAngle(perp, 0.5 + 2e-6), 1e-6));
  EXPECT_TRUE(WithinLimits(ball, kRest * AxisAngle(kAxis, 0.4 + 5e-7), 1e-6));
  EXPECT_FALSE(WithinLimits(ball, kRest * AxisAngle(kAxis, 0.4 + 2e-6), 1e-6));
  EXPECT_FALSE(WithinLimits(ball, kRest * AxisAngle(kAxis, -0.2 - 2e-6), 1e-6));
}

// For random rotations, ConstrainRotation's output always passes
// WithinLimits, is a fixed point, leaves allowed rotations alone and, for
// hinges, is the nearest allowed rotation.
TEST(WithinLimitsTest, AgreesWithConstrainRotationOnRandomRotations) {
  Rng rng(4);
  std::vector<Joint> joints;
  for (int k = 0; k < 4; ++k) {
    const Quaterniond rest = RandomRotation(rng);
    const Vector3d axis = RandomUnit(rng);
    joints.push_back(MakeFixed(rest));
    joints.push_back(MakeHinge(rest, axis, -0.5, 1.0));
    joints.push_back(MakeHinge(rest, axis, 3.0, 4.5));
    joints.push_back(MakeHinge(rest, axis, -6.0, -4.0));
    joints.push_back(MakeHinge(rest, axis, 0.3, 0.3));
    joints.push_back(MakeHinge(rest, axis, -kTwoPi, kTwoPi));
    joints.push_back(MakeBall(rest, axis, -kInf, kInf, 0.7));
    joints.push_back(MakeBall(rest, axis, -0.3, 1.2, kInf));
    joints.push_back(MakeBall(rest, axis, -0.3, 1.2, 0.7));
    joints.push_back(MakeBall(rest, axis, -kPi, kPi, 2.5));
    joints.push_back(MakeBall(rest, axis, 0.0, 0.0, 0.0));
  }
  for (size_t j = 0; j < joints.size(); ++j) {
    const Joint& joint = joints[j];
    int inside = 0;
    for (int trial = 0; trial < 500; ++trial) {
      // Half the samples near the rest rotation, so some start inside.
      const Quaterniond q =
          trial % 2 == 0 ? RandomRotation(rng)
                         : joint.rest.rotation * RandomRotation(rng, 1.0);
      const Quaterniond c = ConstrainRotation(joint, q);
      ASSERT_NEAR(c.norm(), 1.0, 1e-12) << "joint " << j << " trial " << trial;
      EXPECT_TRUE(WithinLimits(joint, c, 1e-9))
          << "joint " << j << " trial " << trial;
      EXPECT_LT(QuatDistance(ConstrainRotation(joint, c), c), 1e-9)
          << "joint " << j << " trial " << trial;
      if (WithinLimits(joint, q, 0.0)) {
        ++inside;
        EXPECT_LT(QuatDistance(c, q), 1e-12)
            << "joint " << j << " trial " << trial;
      } else if (!WithinLimits(joint, q, 1e-6)) {
        EXPECT_GT(QuatDistance(c, q), 1e-7)
            << "joint " << j << " trial " << trial;
      }
      if (joint.type == JointType::kHinge) {
        // Nearest: no allowed hinge angle is closer to q.
        const double d = AngleBetween(c, q);
        for (int s = 0; s <= 20; ++s) {
          const double a = joint.min_angle_rad +
                           (joint.max_angle_rad - joint.min_angle_rad) * s / 20;
          EXPECT_LE(d, AngleBetween(HingeRotation(joint, a), q) + 1e-7)
              << "joint " << j << " trial " << trial << " a " << a;
        }
      }
    }
    if (joint.type == JointType::kBall && joint.max_swing_rad > 0.0) {
      EXPECT_GT(inside, 0) << "joint " << j;
    }
  }
}

}  // namespace
}  // namespace reach
