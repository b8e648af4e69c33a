// TWO_BONE: results checked by an independent forward-kinematics pass
// (GlobalOf), including the named degenerate cases.
#include <gtest/gtest.h>

#include <cmath>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/expectations.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using Eigen::Vector3d;
using ::reach::testing::BoneLengths;
using ::reach::testing::GlobalOf;
using ::reach::testing::Rng;
using ::reach::testing::SolveOne;
using ::reach::testing::TwoBoneLegDef;

constexpr double kLength = 0.45 + 0.42;

class TwoBoneSolverTest : public ::testing::Test {
 protected:
  void SetUp() override { Build(TwoBoneLegDef()); }

  void Build(SkeletonDef def) {
    auto created = Skeleton::Create(std::move(def));
    ASSERT_TRUE(created.ok()) << created.status();
    skeleton_ = std::move(*created);
    hip_ = skeleton_.FindJoint("hip");
    knee_ = skeleton_.FindJoint("knee");
    ankle_ = skeleton_.FindJoint("ankle");
  }

  Goal MakeGoal(const Vector3d& target) const {
    Goal goal;
    goal.chain = 0;
    goal.solver = SolverKind::kTwoBone;
    goal.target = target;
    return goal;
  }

  testing::Solved SolveFrom(const Goal& goal, const Pose& start) const {
    auto solved = SolveOne(skeleton_, goal, start);
    EXPECT_TRUE(solved.ok()) << solved.status();
    return solved.ok() ? *solved : testing::Solved{start, {}};
  }
  testing::Solved SolveFromRest(const Goal& goal) const {
    return SolveFrom(goal, RestPose(skeleton_));
  }

  Vector3d Pos(const Pose& pose, int joint) const {
    return GlobalOf(skeleton_, pose, joint).translation;
  }

  void ExpectBonesKept(const Pose& pose) const {
    testing::ExpectBoneLengthsKept(skeleton_, RestPose(skeleton_), pose);
  }

  Skeleton skeleton_;
  int hip_ = -1, knee_ = -1, ankle_ = -1;
};

TEST_F(TwoBoneSolverTest, ReachesRandomReachableTargets) {
  Rng rng(7);
  int reached = 0;
  constexpr int kTrials = 500;
  for (int t = 0; t < kTrials; ++t) {
    // The target is the ankle of a random pose: reachable by construction.
    const Pose random = testing::RandomPose(skeleton_, rng, 2.5);
    const Vector3d target = Pos(random, ankle_);
    const auto solved = SolveFromRest(MakeGoal(target));
    const double error = (Pos(solved.pose, ankle_) - target).norm();
    EXPECT_NEAR(error, solved.result.position_error, 1e-12);
    if (error <= 1e-9) ++reached;
    EXPECT_TRUE(solved.result.reached) << "trial " << t << " error " << error;
    ExpectBonesKept(solved.pose);
  }
  std::printf("two_bone solve rate: %d/%d\n", reached, kTrials);
  EXPECT_EQ(reached, kTrials);
}

TEST_F(TwoBoneSolverTest, BeyondReachStraightensTowardTarget) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + Vector3d(2.0, -1.0, 0.5);
  const auto solved = SolveFromRest(MakeGoal(target));
  const Vector3d dir = (target - hip).normalized();
  EXPECT_FALSE(solved.result.reached);
  EXPECT_NEAR(solved.result.position_error, (target - hip).norm() - kLength,
              1e-9);
  EXPECT_LT((Pos(solved.pose, ankle_) - (hip + kLength * dir)).norm(), 1e-9);
  EXPECT_LT((Pos(solved.pose, knee_) - (hip + 0.45 * dir)).norm(), 1e-9);
}

// Targets and poles so far away that their squared distances overflow only
// give directions: the chain straightens towards the target, with the knee
// turned to the pole's side, and nothing becomes NaN.
TEST_F(TwoBoneSolverTest, AstronomicallyFarTargetAndPole) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  for (double far : {1e60, 1e160, 1e300}) {
    Goal goal = MakeGoal(Vector3d(far, 0.5 * far, 0.0));
    goal.pole = Vector3d(0.0, 0.0, far);
    const auto solved = SolveFromRest(goal);
    const Vector3d dir = Vector3d(1.0, 0.5, 0.0).normalized();
    EXPECT_LT((Pos(solved.pose, ankle_) - (hip + kLength * dir)).norm(), 1e-9)
        << far;
    EXPECT_LT((Pos(solved.pose, knee_) - (hip + 0.45 * dir)).norm(), 1e-9)
        << far;
    for (const Transform& local : solved.pose.local) {
      EXPECT_TRUE(local.rotation.coeffs().allFinite()) << far;
      EXPECT_NEAR(local.rotation.norm(), 1.0, 1e-12) << far;
    }
    // The miss is the target's distance, |(1, 0.5, 0)| far, less the leg.
    EXPECT_FALSE(solved.result.reached);
    EXPECT_NEAR(solved.result.position_error / (far * std::sqrt(1.25)), 1.0,
                1e-12)
        << far;
  }
}

TEST_F(TwoBoneSolverTest, ReachesTargetAtExactlyFullExtension) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + kLength * Vector3d(1, 1, 1).normalized();
  const auto solved = SolveFromRest(MakeGoal(target));
  EXPECT_TRUE(solved.result.reached);
  EXPECT_LT(solved.result.position_error, 1e-9);
}

TEST_F(TwoBoneSolverTest, TargetAtRootFoldsWithoutNaN) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const auto solved = SolveFromRest(MakeGoal(hip));
  const Vector3d ankle = Pos(solved.pose, ankle_);
  ASSERT_TRUE(ankle.allFinite());
  // The closest a 0.45 / 0.42 chain gets to its root is 0.03.
  EXPECT_NEAR((ankle - hip).norm(), 0.45 - 0.42, 1e-9);
  EXPECT_FALSE(solved.result.reached);
  ExpectBonesKept(solved.pose);
}

TEST_F(TwoBoneSolverTest, StraightChainWithTargetOnItsLine) {
  // The rest leg is straight down; the target is straight down, closer.
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + Vector3d(0, -0.6, 0);
  const auto solved = SolveFromRest(MakeGoal(target));
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error;
  ExpectBonesKept(solved.pose);
}

TEST_F(TwoBoneSolverTest, PoleChoosesTheBendSide) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + Vector3d(0, -0.6, 0);
  for (const Vector3d& side : {Vector3d(0, 0, 1), Vector3d(0, 0, -1),
                               Vector3d(1, 0, 0), Vector3d(-1, 0, 1)}) {
    Goal goal = MakeGoal(target);
    goal.pole = hip + Vector3d(0, -0.3, 0) + side;
    const auto solved = SolveFromRest(goal);
    EXPECT_TRUE(solved.result.reached);
    const Vector3d knee = Pos(solved.pose, knee_);
    const Vector3d across =
        knee - hip - (knee - hip).dot(Vector3d::UnitY()) * Vector3d::UnitY();
    // The knee's offset from the hip-target line points at the pole.
    const Vector3d want = side.normalized();
    EXPECT_GT(across.normalized().dot(want), 1.0 - 1e-9)
        << "side " << side.transpose() << " knee " << knee.transpose();
  }
}

TEST_F(TwoBoneSolverTest, PoleFlipTurnsKneeAcrossAndBack) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + Vector3d(0.2, -0.6, 0.1);
  Goal goal = MakeGoal(target);
  goal.pole = target + Vector3d(0, 0, 1);
  const auto front = SolveFromRest(goal);
  goal.pole = target + Vector3d(0, 0, -1);
  const auto back = SolveFrom(goal, front.pose);  // Warm start, pole flipped.
  EXPECT_TRUE(front.result.reached);
  EXPECT_TRUE(back.result.reached);
  EXPECT_GT(Pos(front.pose, knee_).z(), hip.z());
  EXPECT_LT(Pos(back.pose, knee_).z(), hip.z());
}

TEST_F(TwoBoneSolverTest, PoleOnRootTargetLineIsIgnored) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + Vector3d(0.3, -0.5, 0.1);
  Goal goal = MakeGoal(target);
  goal.pole = hip + 2.0 * (target - hip);
  const auto solved = SolveFromRest(goal);
  EXPECT_TRUE(solved.result.reached);
  EXPECT_TRUE(Pos(solved.pose, knee_).allFinite());
}

TEST_F(TwoBoneSolverTest, PoleOnStraightChainFacesKneeAxis) {
  // Beyond reach the leg is straight; with a hinge knee the pole still
  // decides the twist: the knee's bending direction faces it.
  Build(TwoBoneLegDef(/*hinge_knee=*/true));
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  Goal goal = MakeGoal(hip + Vector3d(0, -3, 0));
  goal.pole = hip + Vector3d(1, -0.5, 0);
  const auto solved = SolveFromRest(goal);
  const Transform knee = GlobalOf(skeleton_, solved.pose, knee_);
  // A positive knee angle moves the knee towards line x axis, i.e. -Y x X.
  const Vector3d knee_side =
      (-Vector3d::UnitY()).cross(knee.rotation * Vector3d::UnitX());
  EXPECT_GT(knee_side.dot(Vector3d::UnitX()), 1.0 - 1e-9);
}

TEST_F(TwoBoneSolverTest, ZeroLengthBone) {
  SkeletonDef def = TwoBoneLegDef();
  def.joints[1].rest.translation.setZero();  // Thigh of length 0.
  Build(def);
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d target = hip + 0.42 * Vector3d(1, -1, 0).normalized();
  const auto solved = SolveFromRest(MakeGoal(target));
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error;
  EXPECT_TRUE(Pos(solved.pose, ankle_).allFinite());
}

TEST_F(TwoBoneSolverTest, SameResultUnderTranslatedRotatedScaledRoot) {
  Rng rng(11);
  const Pose random = testing::RandomPose(skeleton_, rng, 2.0);
  const Vector3d target = Pos(random, ankle_);
  Goal goal = MakeGoal(target);
  goal.pole = target + Vector3d(0.3, 0.2, 0.9);
  const auto plain = SolveFromRest(goal);

  SkeletonDef def = TwoBoneLegDef();
  Transform root;
  root.translation = Vector3d(3, -2, 5);
  root.rotation = testing::RandomRotation(rng);
  root.scale = 2.5;
  def.joints[0].rest = root * def.joints[0].rest;
  Build(def);
  Goal moved = goal;
  moved.target = root * target;
  moved.pole = root * *goal.pole;
  const auto solved = SolveFromRest(moved);
  EXPECT_TRUE(solved.result.reached);
  const Vector3d knee_back = root.Inverse() * Pos(solved.pose, knee_);
  Build(TwoBoneLegDef());
  EXPECT_LT((knee_back - Pos(plain.pose, knee_)).norm(), 1e-9);
}

TEST_F(TwoBoneSolverTest, SoftIkEasesIntoFullExtension) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d dir = Vector3d(0.2, -1, 0.1).normalized();
  double previous = 0.0;
  for (double d = 0.70; d <= 1.2; d += 0.01) {
    Goal goal = MakeGoal(hip + d * dir);
    goal.options.soft = 0.1;
    const auto solved = SolveFromRest(goal);
    const double reach = (Pos(solved.pose, ankle_) - hip).norm();
    if (d <= 0.9 * kLength) {
      EXPECT_NEAR(reach, d, 1e-9);  // Below the soft zone: exact.
    } else {
      EXPECT_LT(reach, d);  // Inside: eased, never straight.
      EXPECT_LT(reach, kLength);
    }
    EXPECT_GT(reach, previous);  // Monotonic: no snap.
    previous = reach;
  }
}

TEST_F(TwoBoneSolverTest, StretchReachesUpToItsLimit) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  const Vector3d dir = Vector3d(0, -1, 0.3).normalized();
  Goal goal = MakeGoal(hip + 1.1 * kLength * dir);
  goal.options.max_stretch = 1.2;
  auto solved = SolveFromRest(goal);
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error;
  EXPECT_NEAR(BoneLengths(skeleton_, solved.pose)[knee_], 0.45 * 1.1, 1e-9);

  goal.target = hip + 1.5 * kLength * dir;
  solved = SolveFromRest(goal);
  EXPECT_FALSE(solved.result.reached);
  EXPECT_NEAR(solved.result.position_error, 0.3 * kLength, 1e-9);

  // Stretch is measured from rest, so a stretched start pose does not
  // compound it.
  goal.target = hip + 1.1 * kLength * dir;
  const auto again = SolveFrom(goal, solved.pose);
  EXPECT_NEAR(BoneLengths(skeleton_, again.pose)[knee_], 0.45 * 1.1, 1e-9);
}

TEST_F(TwoBoneSolverTest, HingeKneeStaysInItsRange) {
  SkeletonDef def = TwoBoneLegDef(/*hinge_knee=*/true);
  def.joints[1].min_angle_rad = 0.0;
  def.joints[1].max_angle_rad = 2.6;
  Build(def);
  Rng rng(5);
  for (int t = 0; t < 200; ++t) {
    const Pose random = testing::RandomPose(skeleton_, rng, 2.5);
    const Vector3d target = Pos(random, ankle_);
    const auto solved = SolveFromRest(MakeGoal(target));
    EXPECT_TRUE(WithinLimits(skeleton_.joint(knee_),
                             solved.pose.local[knee_].rotation, 1e-9));
    EXPECT_TRUE(solved.result.reached) << "trial " << t;
  }
}

TEST_F(TwoBoneSolverTest, TargetOrientationTurnsTheTip) {
  Goal goal =
      MakeGoal(Pos(RestPose(skeleton_), hip_) + Vector3d(0.1, -0.7, 0.2));
  goal.target_orientation = Eigen::Quaterniond(
      Eigen::AngleAxisd(0.7, Vector3d(1, 2, 3).normalized()));
  const auto solved = SolveFromRest(goal);
  EXPECT_TRUE(solved.result.reached);
  EXPECT_LT(AngleBetween(GlobalOf(skeleton_, solved.pose, ankle_).rotation,
                         *goal.target_orientation),
            1e-9);
}

TEST_F(TwoBoneSolverTest, WeightBlendsFromStartPose) {
  const Vector3d hip = Pos(RestPose(skeleton_), hip_);
  Goal goal = MakeGoal(hip + Vector3d(0.3, -0.5, 0.2));
  goal.weight = 0.0;
  const auto none = SolveFromRest(goal);
  for (int j = 0; j < skeleton_.num_joints(); ++j) {
    EXPECT_LT(AngleBetween(none.pose.local[j].rotation,
                           skeleton_.joint(j).rest.rotation),
              1e-12);
  }
  goal.weight = 0.5;
  const auto half = SolveFromRest(goal);
  goal.weight = 1.0;
  const auto full = SolveFromRest(goal);
  const double half_error = (Pos(half.pose, ankle_) - goal.target).norm();
  EXPECT_GT(half_error, 1e-3);
  EXPECT_LT(half_error, (Pos(none.pose, ankle_) - goal.target).norm());
  EXPECT_TRUE(full.result.reached);
}

TEST_F(TwoBoneSolverTest, TargetAtCurrentTipChangesNothing) {
  Rng rng(3);
  const Pose start = testing::RandomPose(skeleton_, rng, 1.5);
  const auto solved = SolveFrom(MakeGoal(Pos(start, ankle_)), start);
  for (int j = 0; j < skeleton_.num_joints(); ++j) {
    EXPECT_LT(
        AngleBetween(solved.pose.local[j].rotation, start.local[j].rotation),
        1e-7)
        << "joint " << j;
  }
}

// A hip whose twist range ends at pi, started at a half turn about the
// thigh (read back as a twist of -pi): the solve bends the knee in its
// plane and swings the hip about an axis across the thigh, so the twist
// stays the half turn, inside the range. TWO_BONE must then leave the limb
// as a free hip would solve it. Before the twist counted modulo 2pi, the
// half turn read as -pi was judged outside [0.5, pi] and the limb was
// turned about the root-target line to a "feasible" twist (found by the
// solve_request fuzzer with the ball twist check).
TEST_F(TwoBoneSolverTest, HipTwistedByAHalfTurnAtItsPiLimitIsNotTurned) {
  SkeletonDef limited_def = TwoBoneLegDef();
  limited_def.joints[0].min_angle_rad = 0.5;
  limited_def.joints[0].max_angle_rad = M_PI;
  auto limited = Skeleton::Create(std::move(limited_def));
  ASSERT_TRUE(limited.ok()) << limited.status();
  const Joint& hip = limited->joint(hip_);

  Pose start = RestPose(skeleton_);
  // Half turn about the thigh (-Y, the hip's twist axis), knee bent in YZ.
  start.local[hip_].rotation = AxisAngle(Vector3d(0, -1, 0), -M_PI);
  start.local[knee_].rotation = AxisAngle(Vector3d::UnitX(), 0.5);
  EXPECT_TRUE(WithinLimits(hip, start.local[hip_].rotation, 1e-12));
  // A reachable target in the YZ plane through the hip.
  const Vector3d target = Pos(start, hip_) + Vector3d(0.0, -0.7, 0.25);

  const auto free = SolveFrom(MakeGoal(target), start);
  auto solved = SolveOne(*limited, MakeGoal(target), start);
  ASSERT_TRUE(solved.ok()) << solved.status();
  EXPECT_TRUE(solved->result.reached) << solved->result.position_error;
  EXPECT_LT(
      (GlobalOf(*limited, solved->pose, ankle_).translation - target).norm(),
      1e-9);
  EXPECT_TRUE(WithinLimits(hip, solved->pose.local[hip_].rotation, 1e-9));
  // The same limb as with a free hip: no turn about the line.
  for (int j : {hip_, knee_}) {
    EXPECT_LT(AngleBetween(solved->pose.local[j].rotation,
                           free.pose.local[j].rotation),
              1e-12)
        << j;
  }
  EXPECT_LT((GlobalOf(*limited, solved->pose, knee_).translation -
             Pos(free.pose, knee_))
                .norm(),
            1e-12);
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

struct KneeSolve {
  Joint knee;
  Pose start;
  testing::Solved solved;
};

// A TWO_BONE solve of `def`'s leg chain towards `target`, its knee (joint
// 1) started at `knee_start`. Checks that the result's error describes the
// returned pose (the ankle by forward kinematics).
KneeSolve SolveKneeFrom(SkeletonDef def, const Eigen::Quaterniond& knee_start,
                        const Vector3d& target) {
  absl::StatusOr<Skeleton> leg = Skeleton::Create(std::move(def));
  EXPECT_TRUE(leg.ok()) << leg.status();
  if (!leg.ok()) return {};
  Pose start = RestPose(*leg);
  start.local[leg->FindJoint("knee")].rotation = knee_start;
  Goal goal;
  goal.chain = 0;
  goal.solver = SolverKind::kTwoBone;
  goal.target = target;
  const absl::StatusOr<testing::Solved> solved =
      testing::SolveOne(*leg, goal, start);
  EXPECT_TRUE(solved.ok()) << solved.status();
  if (!solved.ok()) return {};
  const double error =
      (GlobalOf(*leg, solved->pose, leg->FindJoint("ankle")).translation -
       target)
          .norm();
  EXPECT_NEAR(error, solved->result.position_error, 1e-12);
  return {leg->joint(leg->FindJoint("knee")), start, *solved};
}

// Found by the solve_request fuzzer: a start pose holding an unlimited hinge
// knee off its axis. The knee's turn kept that swing, which no hinge angle
// can report, so the service's response (a pure hinge rotation) put the
// ankle elsewhere than the error it reported. The knee now comes back on its
// axis, and the result describes the returned pose.
TEST(TwoBoneHingeTest, AKneeStartedOffItsAxisIsReturnedOnIt) {
  const KneeSolve s = SolveKneeFrom(
      testing::TwoBoneLegDef(true),
      AxisAngle(Vector3d::UnitZ(), 0.4) * AxisAngle(Vector3d::UnitX(), 0.3),
      Vector3d(0.2, 0.35, 0.3));
  EXPECT_TRUE(WithinLimits(s.knee, s.solved.pose.local[1].rotation, 1e-12));
  EXPECT_TRUE(s.solved.result.reached) << s.solved.result.position_error;
}

// The same with a limited knee at the hip (a zero-length thigh, so the
// bend cannot turn it): a knee the solve moves is within its range.
TEST(TwoBoneHingeTest, AKneeStartedOffItsAxisAndOutOfRangeIsReturnedInside) {
  SkeletonDef def = testing::TwoBoneLegDef(true);
  def.joints[1].rest.translation = Vector3d::Zero();
  def.joints[1].min_angle_rad = 0.0;
  def.joints[1].max_angle_rad = 0.0;
  // Nearly a half turn about the knee axis (X), a little off it.
  const KneeSolve s = SolveKneeFrom(
      std::move(def), AxisAngle(Vector3d(1, 0.2, 0).normalized(), M_PI - 1e-4),
      Vector3d(0.5, 0.2, 0.3));
  const Eigen::Quaterniond& q = s.solved.pose.local[1].rotation;
  // Left as it started (the bend cannot turn it), or moved within range.
  if (q.coeffs() != s.start.local[1].rotation.coeffs()) {
    EXPECT_TRUE(WithinLimits(s.knee, q, 1e-12));
  }
}

}  // namespace
}  // namespace reach
