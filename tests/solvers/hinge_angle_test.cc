// The joint angle a solve reports for every hinge it moved: read back with
// HingeAngleWithinLimits, it lies inside the hinge's range exactly (a strict
// lo <= angle <= hi), and it is the solved rotation's angle, checked by a
// rotation -> angle computation written here (not the library's).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/models.h"

namespace reach {
namespace {


using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::GlobalOf;
using ::reach::testing::RestartsFor;
using ::reach::testing::Rng;

constexpr double kPi = M_PI;
constexpr double kTwoPi = 2.0 * M_PI;

// This test's own reading of a hinge's angle: the rotation relative to
// rest, q_rel = rest^-1 q = (cos(a/2), sin(a/2) axis), gives a = 2 atan2(
// q_rel.vec . axis, q_rel.w), in [-2pi, 2pi] (the quaternion's sign picks
// between a and a -+ 2pi, the same rotation). *swing gets the part of
// q_rel.vec off the axis (0 for a pure hinge rotation).
double AngleOf(const Joint& joint, const Quaterniond& q, double* swing) {
  const Quaterniond rel = joint.rest.rotation.conjugate() * q;
  const double along = rel.vec().dot(joint.axis);
  *swing = (rel.vec() - along * joint.axis).norm();
  return 2.0 * std::atan2(along, rel.w());
}

// Distance between two quaternions as rotations (q and -q are the same).
double QuatDistance(const Quaterniond& a, const Quaterniond& b) {
  return std::min((a.coeffs() - b.coeffs()).norm(),
                  (a.coeffs() + b.coeffs()).norm());
}

struct Tally {
  int solves = 0;
  int angles = 0;       // Hinge angles checked.
  int at_bound = 0;     // ...reported exactly at a bound (clamped).
  int raw_outside = 0;  // ...whose plain HingeAngle failed the strict check.
  double worst_agreement = 0.0;
};

// Checks every hinge of `chain` that the solve moved (its rotation differs
// from `start`, bit for bit).
void CheckHinges(const Skeleton& skeleton, absl::Span<const int> chain,
                 const Pose& start, const Pose& solved, const std::string& what,
                 Tally* tally) {
  ++tally->solves;
  for (int j : chain) {
    const Joint& joint = skeleton.joint(j);
    if (joint.type != JointType::kHinge) continue;
    const Quaterniond& q = solved.local[j].rotation;
    if (q.coeffs() == start.local[j].rotation.coeffs()) continue;
    const double lo = joint.min_angle_rad, hi = joint.max_angle_rad;
    const double angle = HingeAngleWithinLimits(joint, q);
    ++tally->angles;
    tally->at_bound += angle == lo || angle == hi;
    const double raw = HingeAngle(joint, q);
    tally->raw_outside += !(lo <= raw && raw <= hi);

    // Strictly inside: no tolerance.
    EXPECT_TRUE(lo <= angle && angle <= hi)
        << what << " joint " << joint.name << ": " << angle << " outside ["
        << lo << ", " << hi << "]";
    // The solved rotation is a pure hinge rotation whose angle, read here,
    // is the reported one (modulo 2pi: the same rotation).
    double swing = 0.0;
    const double read = AngleOf(joint, q, &swing);
    EXPECT_LT(swing, 1e-15) << what << " joint " << joint.name;
    EXPECT_NEAR(std::remainder(read - angle, kTwoPi), 0.0, 1e-14)
        << what << " joint " << joint.name << " read " << read << " reported "
        << angle;
    // The rotation regenerated from the angle (what the service returns)
    // is the solved rotation to rounding, and reads back as the angle.
    const Quaterniond regenerated = HingeRotation(joint, angle);
    const double agreement = QuatDistance(regenerated, q);
    tally->worst_agreement = std::max(tally->worst_agreement, agreement);
    EXPECT_LT(agreement, 1e-15) << what << " joint " << joint.name;
    const double reread = AngleOf(joint, regenerated, &swing);
    EXPECT_NEAR(std::remainder(reread - angle, 2 * kTwoPi), 0.0, 1e-14)
        << what << " joint " << joint.name;
    // Unless the reported angle moved by 2pi (an unlimited hinge wrapped to
    // [-pi, pi], or the equivalent inside a range), even the quaternion's
    // sign agrees.
    if (std::abs(angle - raw) < kPi) {
      EXPECT_LT((regenerated.coeffs() - q.coeffs()).norm(), 1e-15)
          << what << " joint " << joint.name;
    }
  }
}

void Report(const char* name, const Tally& t) {
  std::printf(
      "%s: %d solves, %d hinge angles, %d at a bound; plain HingeAngle "
      "outside the limits for %d (%.2f%%); worst |HingeRotation(angle) - q| "
      "%.2g\n",
      name, t.solves, t.angles, t.at_bound, t.raw_outside,
      t.angles > 0 ? 100.0 * t.raw_outside / t.angles : 0.0, t.worst_agreement);
}

// The Panda (7 hinges with the manufacturer's limits) under every solver
// that handles hinges: targets from random configurations (reachable), out
// of reach (the arm stretches into its limits), 6-D targets, restarts, and
// partial weights.
TEST(SolvedHingeAngleTest, PandaAnglesAreInsideTheLimitsAndAgreeWithRotations) {
  auto skeleton = Skeleton::Create(testing::PandaDef());
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const absl::Span<const int> chain = skeleton->chain(0).joints;
  const int tip = chain.back();
  Rng rng(15);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  Workspace ws;
  Tally tally;
  for (int t = 0; t < 120; ++t) {
    const Transform goal_pose =
        GlobalOf(*skeleton, testing::RandomPose(*skeleton, rng, kPi), tip);
    const Pose start = t % 2 ? testing::PandaMidLimitPose(*skeleton)
                             : testing::RandomPose(*skeleton, rng, kPi);
    for (SolverKind kind :
         {SolverKind::kAuto, SolverKind::kFabrik, SolverKind::kCcd,
          SolverKind::kJacobianTranspose, SolverKind::kJacobianPinv,
          SolverKind::kJacobianDls, SolverKind::kGradientDescent}) {
      Goal goal;
      goal.chain = 0;
      goal.solver = kind;
      switch (t % 5) {
        case 0:
        case 1:
          goal.target = goal_pose.translation;
          break;
        case 2:  // Out of reach: the arm straightens into its limits.
          goal.target = 3.0 * Vector3d(unit(rng), unit(rng), unit(rng));
          break;
        case 3:
          goal.target = goal_pose.translation;
          goal.target_orientation = goal_pose.rotation;
          goal.options.max_restarts = RestartsFor(kind, 3);
          break;
        case 4:
          goal.target = goal_pose.translation;
          goal.weight = 0.6;
          break;
      }
      Pose pose = start;
      GoalResult result;
      ASSERT_TRUE(Solve(*skeleton, {goal}, ws, &pose, {&result, 1}).ok());
      CheckHinges(
          *skeleton, chain, start, pose,
          std::string(SolverName(kind)) + " target " + std::to_string(t),
          &tally);
    }
  }
  Report("Panda", tally);
  EXPECT_GT(tally.angles, 3000);
  EXPECT_GT(tally.at_bound, 100);  // Clamped angles were exercised.
}

// Chains of hinges whose ranges touch +-pi and +-2pi (where atan2 wraps and
// where the quaternion's sign tells equivalents apart), zero-width, one
// infinite bound, and none, about random axes under random rest rotations.
TEST(SolvedHingeAngleTest, RangesTouchingPiAndTwoPiReadBackInside) {
  const double ranges[][2] = {
      {-kPi, kPi},   {0.0, kPi},     {-kPi, 0.0},   {-kTwoPi, kTwoPi},
      {0.0, kTwoPi}, {-kTwoPi, 0.0}, {kPi, kTwoPi}, {-kTwoPi, -kPi},
      {-0.5, 0.5},   {0.3, 0.3},     {1.0, kInf},   {-kInf, -1.0},
      {-kInf, kInf}, {-kPi, 3.0},    {-3.0, kPi},   {2.0, 2.0 + kPi}};
  constexpr int kRanges = sizeof(ranges) / sizeof(ranges[0]);
  Rng rng(16);
  std::uniform_int_distribution<int> pick(0, kRanges - 1);
  Workspace ws;
  Tally tally;
  for (int t = 0; t < 150; ++t) {
    testing::RandomChainOptions options;
    options.joints = 4 + t % 5;
    SkeletonDef def = testing::RandomChainDef(rng, options);
    for (size_t k = 1; k + 1 < def.joints.size(); ++k) {
      JointDef& j = def.joints[k];
      j.type = JointType::kHinge;
      j.axis = Vector3d(std::normal_distribution<double>()(rng),
                        std::normal_distribution<double>()(rng),
                        std::normal_distribution<double>()(rng));
      const auto& r =
          ranges[(t + k) % 3 == 0 ? pick(rng) : (t * 7 + k) % kRanges];
      j.min_angle_rad = r[0];
      j.max_angle_rad = r[1];
    }
    auto skeleton = Skeleton::Create(def);
    ASSERT_TRUE(skeleton.ok()) << skeleton.status();
    const absl::Span<const int> chain = skeleton->chain(0).joints;
    const Pose start = testing::RandomPose(*skeleton, rng, kPi);
    const Vector3d reachable =
        GlobalOf(*skeleton, testing::RandomPose(*skeleton, rng, kPi),
                 chain.back())
            .translation;
    for (SolverKind kind :
         {SolverKind::kFabrik, SolverKind::kCcd, SolverKind::kJacobianPinv,
          SolverKind::kJacobianDls, SolverKind::kGradientDescent}) {
      for (const Vector3d& target : {reachable, Vector3d(20, -5, 9)}) {
        Goal goal;
        goal.chain = 0;
        goal.solver = kind;
        goal.target = target;
        goal.options.max_restarts = RestartsFor(kind, t % 3);
        Pose pose = start;
        GoalResult result;
        ASSERT_TRUE(Solve(*skeleton, {goal}, ws, &pose, {&result, 1}).ok());
        CheckHinges(
            *skeleton, chain, start, pose,
            std::string(SolverName(kind)) + " chain " + std::to_string(t),
            &tally);
      }
    }
  }
  Report("ranges touching pi and 2pi", tally);
  EXPECT_GT(tally.angles, 3000);
  EXPECT_GT(tally.at_bound, 100);
}

}  // namespace
}  // namespace reach
