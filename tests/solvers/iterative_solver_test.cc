// Named degenerate cases for every iterative solver (FABRIK, CCD, the
// Jacobian family, gradient descent), checked by forward kinematics.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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

// A straight chain of `bones` unit-length bones along +Y from the origin,
// all ball joints, chain "chain" root..tip.
SkeletonDef StraightChainDef(int bones) {
  SkeletonDef def;
  for (int k = 0; k <= bones; ++k) {
    JointDef j;
    j.name = "j" + std::to_string(k);
    j.parent = k - 1;
    if (k > 0) j.rest.translation = Vector3d(0, 1, 0);
    def.joints.push_back(j);
  }
  def.chains.push_back({"chain", "j0", "j" + std::to_string(bones)});
  return def;
}

class IterativeSolverTest : public ::testing::TestWithParam<SolverKind> {
 protected:
  void Build(SkeletonDef def) {
    auto created = Skeleton::Create(std::move(def));
    ASSERT_TRUE(created.ok()) << created.status();
    skeleton_ = std::move(*created);
    tip_ = skeleton_.chain(0).joints.back();
  }

  Goal MakeGoal(const Vector3d& target) const {
    Goal goal;
    goal.chain = 0;
    goal.solver = GetParam();
    goal.target = target;
    // Gradient descent and the transpose converge linearly: give them room.
    goal.options.max_iterations = 2000;
    return goal;
  }

  testing::Solved SolveFromRest(const Goal& goal) const {
    auto solved = SolveOne(skeleton_, goal, RestPose(skeleton_));
    EXPECT_TRUE(solved.ok()) << solved.status();
    return solved.ok() ? *solved : testing::Solved{RestPose(skeleton_), {}};
  }

  Vector3d Tip(const Pose& pose) const {
    return GlobalOf(skeleton_, pose, tip_).translation;
  }

  void ExpectBonesKept(const Pose& pose) const {
    testing::ExpectBoneLengthsKept(skeleton_, RestPose(skeleton_), pose);
  }

  Skeleton skeleton_;
  int tip_ = -1;
};

TEST_P(IterativeSolverTest, ReachesTargetOnStraightChainLine) {
  Build(StraightChainDef(4));
  const auto solved = SolveFromRest(MakeGoal(Vector3d(0, 2.5, 0)));
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error;
  EXPECT_NEAR((Tip(solved.pose) - Vector3d(0, 2.5, 0)).norm(),
              solved.result.position_error, 1e-12);
  ExpectBonesKept(solved.pose);
}

TEST_P(IterativeSolverTest, BeyondReachPointsStraightAtTarget) {
  Build(StraightChainDef(4));
  const Vector3d target(3, 4, 5);
  const auto solved = SolveFromRest(MakeGoal(target));
  EXPECT_FALSE(solved.result.reached);
  const Vector3d want = 4.0 * target.normalized();
  EXPECT_LT((Tip(solved.pose) - want).norm(), 1e-3);
  ExpectBonesKept(solved.pose);
}

TEST_P(IterativeSolverTest, TargetAtRootStaysFinite) {
  Build(StraightChainDef(3));
  const auto solved = SolveFromRest(MakeGoal(Vector3d::Zero()));
  EXPECT_TRUE(Tip(solved.pose).allFinite());
  for (const Transform& t : solved.pose.local) {
    EXPECT_TRUE(t.rotation.coeffs().allFinite());
    EXPECT_NEAR(t.rotation.norm(), 1.0, 1e-9);
  }
  ExpectBonesKept(solved.pose);
  // Three unit bones can fold back onto the root exactly.
  EXPECT_LT(solved.result.position_error, 0.05);
}

TEST_P(IterativeSolverTest, ZeroLengthBone) {
  SkeletonDef def = StraightChainDef(4);
  def.joints[2].rest.translation.setZero();
  Build(def);
  const Vector3d target(1.2, 1.5, -0.7);
  const auto solved = SolveFromRest(MakeGoal(target));
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error;
  EXPECT_TRUE(Tip(solved.pose).allFinite());
}

TEST_P(IterativeSolverTest, SameResultUnderTranslatedRotatedScaledRoot) {
  Rng rng(21);
  testing::RandomChainOptions options;
  options.joints = 6;
  options.with_base = false;
  const SkeletonDef def = testing::RandomChainDef(rng, options);
  Build(def);
  const Pose random = testing::RandomPose(skeleton_, rng, 0.8);
  const Vector3d target = Tip(random);
  const auto plain = SolveFromRest(MakeGoal(target));
  ASSERT_TRUE(plain.result.reached);

  Transform root;
  root.translation = Vector3d(-4, 2, 9);
  root.rotation = testing::RandomRotation(rng);
  root.scale = 0.01;  // Centimetres to metres, say.
  SkeletonDef moved_def = def;
  moved_def.joints[0].rest = root * moved_def.joints[0].rest;
  Build(moved_def);
  const auto moved = SolveFromRest(MakeGoal(root * target));
  EXPECT_TRUE(moved.result.reached) << moved.result.position_error;
  EXPECT_EQ(moved.result.iterations, plain.result.iterations);
  EXPECT_LT((root.Inverse() * Tip(moved.pose) - target).norm(), 1e-4);
}

TEST_P(IterativeSolverTest, HingeLimitsHold) {
  // A planar arm of hinges with limits; targets from random poses within
  // the limits.
  SkeletonDef def = StraightChainDef(4);
  for (int k = 0; k < 4; ++k) {
    def.joints[k].type = JointType::kHinge;
    def.joints[k].axis = Vector3d::UnitZ();
    def.joints[k].min_angle_rad = -1.2;
    def.joints[k].max_angle_rad = 1.5;
  }
  Build(def);
  Rng rng(31);
  int reached = 0;
  for (int t = 0; t < 50; ++t) {
    const Vector3d target = Tip(testing::RandomPose(skeleton_, rng, 1.0));
    const auto solved = SolveFromRest(MakeGoal(target));
    for (int j : skeleton_.chain(0).joints) {
      EXPECT_TRUE(
          WithinLimits(skeleton_.joint(j), solved.pose.local[j].rotation, 1e-9))
          << "joint " << j << " trial " << t;
    }
    reached += solved.result.reached;
  }
  std::printf("%s planar hinge solve rate: %d/50\n",
              std::string(SolverName(GetParam())).c_str(), reached);
  EXPECT_GE(reached, 25);
}

TEST_P(IterativeSolverTest, TargetOrientationReachedByTip) {
  Rng rng(41);
  testing::RandomChainOptions options;
  options.joints = 6;
  Build(testing::RandomChainDef(rng, options));
  const Pose random = testing::RandomPose(skeleton_, rng, 0.7);
  Goal goal = MakeGoal(Tip(random));
  goal.target_orientation = GlobalOf(skeleton_, random, tip_).rotation;
  const auto solved = SolveFromRest(goal);
  EXPECT_TRUE(solved.result.reached) << solved.result.position_error << " "
                                     << solved.result.orientation_error_rad;
  EXPECT_NEAR(AngleBetween(GlobalOf(skeleton_, solved.pose, tip_).rotation,
                           *goal.target_orientation),
              solved.result.orientation_error_rad, 1e-9);
}

INSTANTIATE_TEST_SUITE_P(
    AllIterative, IterativeSolverTest,
    ::testing::Values(SolverKind::kFabrik, SolverKind::kCcd,
                      SolverKind::kJacobianTranspose, SolverKind::kJacobianPinv,
                      SolverKind::kJacobianDls, SolverKind::kGradientDescent),
    [](const ::testing::TestParamInfo<SolverKind>& info) {
      return std::string(SolverName(info.param));
    });

// Chains of hinges with tight ranges defeat single attempts from rest;
// random restarts within the limits fix most of them, deterministically.
TEST(RestartTest, RestartsRaiseTheSolveRateWithinLimits) {
  for (SolverKind kind : {SolverKind::kJacobianDls, SolverKind::kJacobianPinv,
                          SolverKind::kGradientDescent}) {
    Rng rng(17);
    int single = 0;
    int restarted = 0;
    constexpr int kTrials = 60;
    for (int t = 0; t < kTrials; ++t) {
      auto skeleton =
          Skeleton::Create(testing::HingeRestartChainDef(rng, 3 + t % 6));
      ASSERT_TRUE(skeleton.ok());
      const int tip = skeleton->chain(0).joints.back();
      Goal goal;
      goal.chain = 0;
      goal.solver = kind;
      goal.target =
          GlobalOf(*skeleton, testing::RandomPose(*skeleton, rng, 1.0), tip)
              .translation;
      const Pose rest = RestPose(*skeleton);
      auto once = SolveOne(*skeleton, goal, rest);
      goal.options.max_restarts = 20;
      auto again = SolveOne(*skeleton, goal, rest);
      auto repeat = SolveOne(*skeleton, goal, rest);
      ASSERT_TRUE(once.ok() && again.ok() && repeat.ok());
      single += once->result.reached;
      restarted += again->result.reached;
      // Never worse than one attempt; deterministic; limits hold.
      EXPECT_LE(again->result.position_error,
                once->result.position_error + 1e-12);
      EXPECT_EQ(again->result.position_error, repeat->result.position_error);
      for (int j : skeleton->chain(0).joints) {
        EXPECT_TRUE(WithinLimits(skeleton->joint(j),
                                 again->pose.local[j].rotation, 1e-9));
      }
    }
    std::printf(
        "%s hinge chains: %d/%d in one attempt, %d/%d with 20 restarts\n",
        std::string(SolverName(kind)).c_str(), single, kTrials, restarted,
        kTrials);
    EXPECT_GT(restarted, single);
    EXPECT_GE(restarted, kTrials * 9 / 10);
  }
}

TEST(FabrikSolverTest, PoleTurnsInnerJointsTowardsIt) {
  auto skeleton = Skeleton::Create(StraightChainDef(3));
  ASSERT_TRUE(skeleton.ok());
  for (const Vector3d& pole : {Vector3d(5, 1.5, 0), Vector3d(0, 1.5, -5)}) {
    Goal goal;
    goal.chain = 0;
    goal.solver = SolverKind::kFabrik;
    goal.target = Vector3d(0, 2.2, 0.4);
    goal.pole = pole;
    const auto solved = SolveOne(*skeleton, goal, RestPose(*skeleton));
    ASSERT_TRUE(solved.ok());
    EXPECT_TRUE(solved->result.reached)
        << solved->result.position_error << " after "
        << solved->result.iterations;
    const Vector3d u = goal.target.normalized();
    const Vector3d pole_side = (pole - pole.dot(u) * u).normalized();
    for (int j : {1, 2}) {
      const Vector3d p = GlobalOf(*skeleton, solved->pose, j).translation;
      EXPECT_GT((p - p.dot(u) * u).dot(pole_side), 0.0) << "joint " << j;
    }
  }
}

}  // namespace
}  // namespace reach
