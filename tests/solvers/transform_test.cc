// Transform algebra and the shared rotation helpers: composition, inverse,
// SmallestRotation, the rotation-vector maps and the swing-twist split.
#include "solvers/transform.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tests/testing/models.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::RandomRotation;
using ::reach::testing::Rng;

constexpr double kPi = M_PI;

// Distance between two quaternions as rotations (q and -q are the same).
// Coefficient-wise, so it stays accurate for tiny differences.
double QuatDistance(const Quaterniond& a, const Quaterniond& b) {
  return std::min((a.coeffs() - b.coeffs()).norm(),
                  (a.coeffs() + b.coeffs()).norm());
}

Vector3d RandomVector(Rng& rng, double scale = 1.0) {
  std::normal_distribution<double> n(0.0, scale);
  return Vector3d(n(rng), n(rng), n(rng));
}

Vector3d RandomUnit(Rng& rng) { return RandomVector(rng).normalized(); }

Transform RandomTransform(Rng& rng) {
  std::uniform_real_distribution<double> log_scale(-2.0, 2.0);
  Transform t;
  t.translation = RandomVector(rng, 3.0);
  t.rotation = RandomRotation(rng);
  t.scale = std::exp(log_scale(rng));
  return t;
}

// --- Transform -------------------------------------------------------------

TEST(TransformTest, IdentityMapsPointsToThemselves) {
  const Vector3d p(1.5, -2.0, 0.25);
  EXPECT_EQ(Transform::Identity() * p, p);
}

TEST(TransformTest, AppliesRotationThenScaleThenTranslation) {
  Transform t;
  t.translation = Vector3d(1, 2, 3);
  t.rotation = AxisAngle(Vector3d::UnitZ(), kPi / 2);
  t.scale = 2.0;
  // X turns to Y, doubles, then shifts.
  const Vector3d p = t * Vector3d(1, 0, 0);
  EXPECT_NEAR((p - Vector3d(1, 4, 3)).norm(), 0.0, 1e-15);
}

TEST(TransformTest, InverseRoundTripsPoints) {
  Rng rng(1);
  for (int trial = 0; trial < 200; ++trial) {
    const Transform t = RandomTransform(rng);
    const Vector3d p = RandomVector(rng, 5.0);
    const Vector3d forward = t.Inverse() * (t * p);
    const Vector3d backward = t * (t.Inverse() * p);
    EXPECT_LT((forward - p).norm(), 1e-12 * (1.0 + p.norm())) << trial;
    EXPECT_LT((backward - p).norm(), 1e-12 * (1.0 + p.norm())) << trial;
  }
}

TEST(TransformTest, InverseComposesToIdentity) {
  Rng rng(2);
  for (int trial = 0; trial < 100; ++trial) {
    const Transform t = RandomTransform(rng);
    const Transform id = t * t.Inverse();
    EXPECT_LT(id.translation.norm(), 1e-12) << trial;
    EXPECT_LT(QuatDistance(id.rotation, Quaterniond::Identity()), 1e-14);
    EXPECT_NEAR(id.scale, 1.0, 1e-14);
    const Transform id2 = t.Inverse() * t;
    EXPECT_LT(id2.translation.norm(), 1e-12) << trial;
    EXPECT_NEAR(id2.scale, 1.0, 1e-14);
  }
}

TEST(TransformTest, InverseOfScaledTransformHasReciprocalScale) {
  Transform t;
  t.translation = Vector3d(0, 0, 4);
  t.scale = 4.0;
  const Transform inv = t.Inverse();
  EXPECT_DOUBLE_EQ(inv.scale, 0.25);
  EXPECT_NEAR((inv.translation - Vector3d(0, 0, -1)).norm(), 0.0, 1e-15);
  EXPECT_NEAR((inv * Vector3d(0, 0, 8) - Vector3d(0, 0, 1)).norm(), 0.0, 1e-15);
}

TEST(TransformTest, CompositionAppliesChildFirst) {
  Rng rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    const Transform a = RandomTransform(rng);
    const Transform b = RandomTransform(rng);
    const Vector3d p = RandomVector(rng, 2.0);
    const Vector3d composed = (a * b) * p;
    const Vector3d nested = a * (b * p);
    EXPECT_LT((composed - nested).norm(), 1e-11 * (1.0 + nested.norm()))
        << trial;
    EXPECT_DOUBLE_EQ((a * b).scale, a.scale * b.scale);
  }
}

TEST(TransformTest, CompositionIsAssociativeWithScale) {
  Rng rng(4);
  for (int trial = 0; trial < 200; ++trial) {
    const Transform a = RandomTransform(rng);
    const Transform b = RandomTransform(rng);
    const Transform c = RandomTransform(rng);
    const Transform left = (a * b) * c;
    const Transform right = a * (b * c);
    EXPECT_LT((left.translation - right.translation).norm(),
              1e-11 * (1.0 + right.translation.norm()))
        << trial;
    EXPECT_LT(QuatDistance(left.rotation, right.rotation), 1e-14) << trial;
    EXPECT_NEAR(left.scale / right.scale, 1.0, 1e-14) << trial;
  }
}

TEST(TransformTest, InverseOfCompositionIsReversedInverses) {
  Rng rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    const Transform a = RandomTransform(rng);
    const Transform b = RandomTransform(rng);
    const Transform lhs = (a * b).Inverse();
    const Transform rhs = b.Inverse() * a.Inverse();
    EXPECT_LT((lhs.translation - rhs.translation).norm(),
              1e-10 * (1.0 + rhs.translation.norm()))
        << trial;
    EXPECT_LT(QuatDistance(lhs.rotation, rhs.rotation), 1e-14) << trial;
    EXPECT_NEAR(lhs.scale / rhs.scale, 1.0, 1e-14) << trial;
  }
}

// --- AngleBetween / AxisAngle -----------------------------------------------

TEST(AxisAngleTest, RotatesAboutTheAxisByTheAngle) {
  const Quaterniond q = AxisAngle(Vector3d::UnitZ(), kPi / 2);
  EXPECT_LT((q * Vector3d::UnitX() - Vector3d::UnitY()).norm(), 1e-15);
  EXPECT_NEAR(q.norm(), 1.0, 1e-15);
}

TEST(AngleBetweenTest, IsTheRelativeRotationAngleIgnoringSign) {
  const Vector3d axis = Vector3d(1, 2, -2).normalized();
  const Quaterniond a = AxisAngle(axis, 0.3);
  const Quaterniond b = AxisAngle(axis, 1.5);
  EXPECT_NEAR(AngleBetween(a, b), 1.2, 1e-12);
  EXPECT_NEAR(AngleBetween(a, Quaterniond(-b.coeffs())), 1.2, 1e-12);
  // Angles beyond pi are the short way round.
  EXPECT_NEAR(AngleBetween(Quaterniond::Identity(), AxisAngle(axis, 4.0)),
              2 * kPi - 4.0, 1e-12);
}

// --- SmallestRotation ------------------------------------------------------

TEST(SmallestRotationTest, MapsFromToToForRandomVectors) {
  Rng rng(11);
  std::uniform_real_distribution<double> log_len(-6.0, 6.0);
  for (int trial = 0; trial < 1000; ++trial) {
    const Vector3d from = RandomUnit(rng) * std::pow(10.0, log_len(rng));
    const Vector3d to = RandomUnit(rng) * std::pow(10.0, log_len(rng));
    const Quaterniond q = SmallestRotation(from, to);
    ASSERT_NEAR(q.norm(), 1.0, 1e-14) << trial;
    const Vector3d a = from.normalized();
    const Vector3d b = to.normalized();
    EXPECT_LT((q * a - b).norm(), 1e-12) << trial;
    // Smallest: the angle is the angle between the vectors and the axis is
    // perpendicular to both.
    const double angle = std::atan2(a.cross(b).norm(), a.dot(b));
    EXPECT_NEAR(2.0 * std::atan2(q.vec().norm(), q.w()), angle, 1e-12) << trial;
    EXPECT_GE(q.w(), 0.0);
    EXPECT_NEAR(q.vec().dot(a), 0.0, 1e-12) << trial;
    EXPECT_NEAR(q.vec().dot(b), 0.0, 1e-12) << trial;
  }
}

TEST(SmallestRotationTest, ParallelVectorsGiveIdentity) {
  const Vector3d v(0.3, -1.0, 2.0);
  const Quaterniond q = SmallestRotation(v, 7.0 * v);
  EXPECT_LT(QuatDistance(q, Quaterniond::Identity()), 1e-15);
}

TEST(SmallestRotationTest, OppositeVectorsGiveUnitHalfTurn) {
  Rng rng(12);
  std::vector<Vector3d> cases = {Vector3d::UnitX(), Vector3d::UnitY(),
                                 Vector3d::UnitZ(), Vector3d(1, 1, 1),
                                 Vector3d(0, 0, -3)};
  for (int i = 0; i < 50; ++i) cases.push_back(RandomVector(rng, 2.0));
  for (const Vector3d& v : cases) {
    const Quaterniond q = SmallestRotation(v, -2.5 * v);
    ASSERT_TRUE(q.coeffs().allFinite()) << v.transpose();
    EXPECT_NEAR(q.norm(), 1.0, 1e-15) << v.transpose();
    EXPECT_NEAR(AngleBetween(q, Quaterniond::Identity()), kPi, 1e-12)
        << v.transpose();
    EXPECT_LT((q * v.normalized() + v.normalized()).norm(), 1e-12)
        << v.transpose();
    // The half-turn axis is perpendicular to v.
    EXPECT_NEAR(q.vec().dot(v.normalized()), 0.0, 1e-12) << v.transpose();
  }
}

TEST(SmallestRotationTest, NearlyOppositeVectorsStillMapAccurately) {
  const Vector3d from = Vector3d::UnitX();
  for (double off : {1e-2, 1e-4, 1e-5}) {
    const Vector3d to = Vector3d(-1.0, off, 0.0).normalized();
    const Quaterniond q = SmallestRotation(from, to);
    EXPECT_NEAR(q.norm(), 1.0, 1e-14) << off;
    EXPECT_LT((q * from - to).norm(), 1e-10) << off;
  }
}

TEST(SmallestRotationTest, ZeroLengthInputGivesIdentity) {
  const Vector3d v(1.0, 2.0, 3.0);
  for (const auto& [from, to] :
       {std::pair{Vector3d::Zero().eval(), v},
        std::pair{v, Vector3d::Zero().eval()},
        std::pair{Vector3d::Zero().eval(), Vector3d::Zero().eval()},
        std::pair{Vector3d(1e-13, 0, 0), v},
        std::pair{v, Vector3d(0, 0, -5e-13)}}) {
    const Quaterniond q = SmallestRotation(from, to);
    EXPECT_EQ(q.coeffs(), Quaterniond::Identity().coeffs())
        << from.transpose() << " -> " << to.transpose();
  }
}

TEST(SmallestRotationTest, CustomMinLengthIsHonoured) {
  const Vector3d from(1e-3, 0, 0);
  const Vector3d to(0, 1, 0);
  EXPECT_EQ(SmallestRotation(from, to, 1e-2).coeffs(),
            Quaterniond::Identity().coeffs());
  const Quaterniond q = SmallestRotation(from, to, 1e-4);
  EXPECT_LT((q * Vector3d::UnitX() - Vector3d::UnitY()).norm(), 1e-15);
}

TEST(SmallestRotationTest, NeverReturnsANonUnitQuaternion) {
  // Lengths straddling min_length, including denormals, and NaN input.
  Rng rng(13);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double lengths[] = {0.0,   1e-310, 1e-300, 1e-20, 1e-13, 1e-12,
                            2e-12, 1e-11,  1e-6,   1.0,   1e6,   1e100};
  for (double la : lengths) {
    for (double lb : lengths) {
      const Vector3d a = RandomUnit(rng) * la;
      const Vector3d b = RandomUnit(rng) * lb;
      for (const Vector3d& to : {b, (-a).eval()}) {
        const Quaterniond q = SmallestRotation(a, to);
        ASSERT_TRUE(q.coeffs().allFinite()) << la << " " << lb;
        EXPECT_NEAR(q.norm(), 1.0, 1e-14) << la << " " << lb;
      }
    }
  }
  const Quaterniond q =
      SmallestRotation(Vector3d(nan, 0, 0), Vector3d::UnitY());
  EXPECT_EQ(q.coeffs(), Quaterniond::Identity().coeffs());
}

// --- RotationVector / FromRotationVector -----------------------------------

TEST(RotationVectorTest, KnownValues) {
  EXPECT_EQ(RotationVector(Quaterniond::Identity()), Vector3d::Zero());
  const Vector3d v = RotationVector(AxisAngle(Vector3d::UnitY(), 0.75));
  EXPECT_LT((v - Vector3d(0, 0.75, 0)).norm(), 1e-15);
  // The negated quaternion is the same rotation.
  const Vector3d w =
      RotationVector(Quaterniond(-AxisAngle(Vector3d::UnitY(), 0.75).coeffs()));
  EXPECT_LT((w - Vector3d(0, 0.75, 0)).norm(), 1e-15);
}

TEST(RotationVectorTest, RoundTripsRandomRotationVectors) {
  Rng rng(21);
  std::uniform_real_distribution<double> angle(0.0, kPi);
  for (int trial = 0; trial < 1000; ++trial) {
    const Vector3d v = RandomUnit(rng) * angle(rng);
    const Quaterniond q = FromRotationVector(v);
    EXPECT_NEAR(q.norm(), 1.0, 1e-14);
    EXPECT_LT((RotationVector(q) - v).norm(), 1e-12) << trial;
    // exp agrees with Eigen's angle-axis.
    const Quaterniond eigen(Eigen::AngleAxisd(v.norm(), v.normalized()));
    EXPECT_LT(QuatDistance(q, eigen), 1e-14) << trial;
  }
}

TEST(RotationVectorTest, RoundTripsRandomQuaternions) {
  Rng rng(22);
  for (int trial = 0; trial < 1000; ++trial) {
    const Quaterniond q = RandomRotation(rng);
    const Vector3d v = RotationVector(q);
    EXPECT_LE(v.norm(), kPi + 1e-15);
    EXPECT_LT(QuatDistance(FromRotationVector(v), q), 1e-13) << trial;
  }
}

TEST(RotationVectorTest, RoundTripsTinyAngles) {
  const Vector3d axis = Vector3d(3, -1, 2).normalized();
  for (double angle :
       {1e-300, 1e-20, 1e-14, 1e-13, 5e-13, 1e-12, 2e-12, 1e-10, 1e-8, 1e-6}) {
    const Vector3d v = angle * axis;
    const Quaterniond q = FromRotationVector(v);
    EXPECT_NEAR(q.norm(), 1.0, 1e-15) << angle;
    const Vector3d back = RotationVector(q);
    EXPECT_LT((back - v).norm(), 1e-12 * angle) << angle;
  }
  EXPECT_EQ(FromRotationVector(Vector3d::Zero()).coeffs(),
            Quaterniond::Identity().coeffs());
}

TEST(RotationVectorTest, RoundTripsNearPi) {
  const Vector3d axis = Vector3d(-1, 4, 0.5).normalized();
  for (double angle : {kPi - 1e-3, kPi - 1e-6, kPi - 1e-9, kPi - 1e-12}) {
    const Vector3d v = angle * axis;
    const Vector3d back = RotationVector(FromRotationVector(v));
    EXPECT_LT((back - v).norm(), 1e-12) << kPi - angle;
  }
  // Exactly pi: either axis sign is the same rotation.
  const Vector3d half = RotationVector(FromRotationVector(kPi * axis));
  EXPECT_NEAR(half.norm(), kPi, 1e-12);
  EXPECT_NEAR(std::abs(half.normalized().dot(axis)), 1.0, 1e-12);
}

TEST(RotationVectorTest, AnglesBeyondPiComeBackTheShortWay) {
  const Vector3d axis = Vector3d(1, 1, 0).normalized();
  const Vector3d back = RotationVector(FromRotationVector(4.0 * axis));
  EXPECT_LT((back - (4.0 - 2 * kPi) * axis).norm(), 1e-12);
}

// --- SwingTwist ------------------------------------------------------------

TEST(SwingTwistTest, RecomposesRandomRotations) {
  Rng rng(31);
  for (int trial = 0; trial < 1000; ++trial) {
    const Quaterniond q = RandomRotation(rng);
    const Vector3d axis = RandomUnit(rng);
    Quaterniond swing;
    const double twist = SwingTwist(q, axis, &swing);
    EXPECT_GT(twist, -2 * kPi);
    EXPECT_LE(twist, 2 * kPi);
    EXPECT_NEAR(swing.norm(), 1.0, 1e-12) << trial;
    // q == swing * twist, coefficient for coefficient (the sign is kept).
    EXPECT_LT((q.coeffs() - (swing * AxisAngle(axis, twist)).coeffs()).norm(),
              1e-12)
        << trial;
    // The swing turns about an axis perpendicular to `axis`.
    EXPECT_NEAR(swing.vec().dot(axis), 0.0, 1e-12) << trial;
  }
}

TEST(SwingTwistTest, RecoversKnownSwingAndTwist) {
  const Vector3d axis = Vector3d(0, 1, 1).normalized();
  const Vector3d perp = Vector3d(1, 0, 0);
  for (double twist_in : {-3.5, -2.0, -0.4, 0.0, 0.4, 2.0, 3.5, 6.0}) {
    for (double swing_in : {0.0, 0.3, 1.4, 2.9}) {
      const Quaterniond want_swing = AxisAngle(perp, swing_in);
      const Quaterniond q = want_swing * AxisAngle(axis, twist_in);
      Quaterniond swing;
      const double twist = SwingTwist(q, axis, &swing);
      EXPECT_NEAR(twist, twist_in, 1e-12) << twist_in << " " << swing_in;
      EXPECT_LT((swing.coeffs() - want_swing.coeffs()).norm(), 1e-12)
          << twist_in << " " << swing_in;
    }
  }
}

TEST(SwingTwistTest, TwistBeyondPiKeepsItsSign) {
  const Vector3d axis = Vector3d(0.2, -0.5, 1.0).normalized();
  Quaterniond swing;
  EXPECT_NEAR(SwingTwist(AxisAngle(axis, 3.5), axis, &swing), 3.5, 1e-12);
  EXPECT_LT(QuatDistance(swing, Quaterniond::Identity()), 1e-12);
  EXPECT_NEAR(SwingTwist(AxisAngle(axis, -3.5), axis, &swing), -3.5, 1e-12);
  EXPECT_NEAR(SwingTwist(AxisAngle(axis, 5.9), axis, &swing), 5.9, 1e-12);
  EXPECT_NEAR(SwingTwist(AxisAngle(axis, 2 * kPi), axis, &swing), 2 * kPi,
              1e-12);
  // Reversing the axis negates the twist.
  EXPECT_NEAR(SwingTwist(AxisAngle(axis, 3.5), -axis, &swing), -3.5, 1e-12);
}

TEST(SwingTwistTest, HalfTurnPerpendicularToAxisIsAllSwing) {
  const Vector3d axis = Vector3d::UnitZ();
  const Quaterniond q = AxisAngle(Vector3d::UnitX(), kPi);
  Quaterniond swing;
  const double twist = SwingTwist(q, axis, &swing);
  EXPECT_EQ(twist, 0.0);
  EXPECT_EQ(swing.coeffs(), q.coeffs());
}

}  // namespace
}  // namespace reach
