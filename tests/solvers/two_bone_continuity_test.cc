// TWO_BONE is a continuous function of target and pole away from the true
// singularities (target on the root, pole on the root-target line), also
// from a straight start: the limb's roll never jumps. Checked with the
// independent forward kinematics of tests/testing/sweep.h.
#include <gtest/gtest.h>

#include <cmath>

#include "solvers/solve.h"
#include "solvers/two_bone.h"
#include "tests/testing/models.h"
#include "tests/testing/sweep.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::IndependentFk;

constexpr double kDeg = M_PI / 180.0;

// The leg: hip at (0, 1, 0), knee 0.45 and ankle 0.42 straight
// down, a toe 0.05 below and 0.12 in front of the ankle (it shows the
// limb's roll); chain "leg" hip..ankle; knee a ball joint.
SkeletonDef LegWithToe() {
  SkeletonDef def;
  def.joints.resize(4);
  def.joints[0].name = "hip";
  def.joints[0].rest.translation = Vector3d(0, 1, 0);
  def.joints[1].name = "knee";
  def.joints[1].parent = 0;
  def.joints[1].rest.translation = Vector3d(0, -0.45, 0);
  def.joints[2].name = "ankle";
  def.joints[2].parent = 1;
  def.joints[2].rest.translation = Vector3d(0, -0.42, 0);
  def.joints[3].name = "toe";
  def.joints[3].parent = 2;
  def.joints[3].rest.translation = Vector3d(0, -0.05, 0.12);
  def.chains.push_back({"leg", "hip", "ankle"});
  return def;
}

double Angle(const Quaterniond& a, const Quaterniond& b) {
  const Quaterniond d = a.conjugate() * b;
  return 2.0 * std::atan2(d.vec().norm(), std::abs(d.w()));
}

class TwoBoneContinuityTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto created = Skeleton::Create(LegWithToe());
    ASSERT_TRUE(created.ok()) << created.status();
    skeleton_ = std::move(*created);
  }

  // Solves from the straight rest pose (a unary Solve without a start
  // pose), through the general path when GetParam() is false.
  Pose SolveFromRest(const Vector3d& target,
                     const std::optional<Vector3d>& pole) {
    Goal goal;
    goal.chain = 0;
    goal.solver = SolverKind::kTwoBone;
    goal.target = target;
    goal.pole = pole;
    Pose pose = RestPose(skeleton_);
    if (GetParam()) {
      Workspace ws;
      GoalResult result;
      EXPECT_TRUE(Solve(skeleton_, {goal}, ws, &pose, {&result, 1}).ok());
      return pose;
    }
    // The general path alone, as Solve would call it.
    Workspace ws;
    ws.Reserve(skeleton_.num_joints());
    ChainProblem problem;
    problem.skeleton = &skeleton_;
    problem.joints = skeleton_.chain(0).joints;
    problem.goal = &goal;
    ComputeChainGlobals(problem, pose, ws);
    TwoBoneSolver(/*branch_free=*/false).Solve(problem, ws, pose);
    return pose;
  }

  Skeleton skeleton_;
  const Vector3d hip_ = Vector3d(0, 1, 0);
};

TEST_P(TwoBoneContinuityTest, PoleAcrossTheRestLineTurnsTheHipSmoothly) {
  const Vector3d target = hip_ + Vector3d(0.05, -0.6, 0.3);
  // The case first: poles 2e-9 apart on either side of the rest
  // line gave hip rotations 180 degrees apart and a toe 0.24 m away.
  const Pose a = SolveFromRest(target, hip_ + Vector3d(-1e-9, -0.5, 0));
  const Pose b = SolveFromRest(target, hip_ + Vector3d(1e-9, -0.5, 0));
  EXPECT_LT(Angle(a.local[0].rotation, b.local[0].rotation), 1e-6);
  EXPECT_LT((IndependentFk(skeleton_, a).position[3] -
             IndependentFk(skeleton_, b).position[3])
                .norm(),
            1e-6);
  // The pole 1 mm per step across the rest line, in x and in z.
  for (int axis : {0, 2}) {
    Pose previous;
    double largest = 0.0;
    for (int step = -50; step <= 50; ++step) {
      Vector3d offset(0, -0.5, 0);
      offset[axis] = 0.001 * step;
      const Pose pose = SolveFromRest(target, hip_ + offset);
      const auto fk = IndependentFk(skeleton_, pose);
      ASSERT_LT((fk.position[2] - target).norm(), 1e-9);
      if (step > -50) {
        largest = std::max(
            largest, Angle(previous.local[0].rotation, pose.local[0].rotation));
      }
      previous = pose;
    }
    EXPECT_LE(largest, 1.0 * kDeg) << "axis " << axis;
  }
}

TEST_P(TwoBoneContinuityTest, TargetSweepWithoutPoleTurnsTheHipSmoothly) {
  // Targets 1 mm apart on circles around the leg's rest line and across
  // it: without a pole the roll comes from the limb's rest frame, so it
  // follows the target without jumps (no pole, no model-space axis).
  for (double radius : {0.05, 0.3}) {
    Pose previous;
    double largest = 0.0;
    const int steps = static_cast<int>(2 * M_PI * radius / 0.001);
    for (int s = 0; s <= steps; ++s) {
      const double a = 2 * M_PI * s / steps;
      const Vector3d target =
          hip_ + Vector3d(radius * std::cos(a), -0.6, radius * std::sin(a));
      const Pose pose = SolveFromRest(target, std::nullopt);
      ASSERT_LT((IndependentFk(skeleton_, pose).position[2] - target).norm(),
                1e-9);
      if (s > 0) {
        largest = std::max(
            largest, Angle(previous.local[0].rotation, pose.local[0].rotation));
      }
      previous = pose;
    }
    EXPECT_LE(largest, 1.0 * kDeg) << "radius " << radius;
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, TwoBoneContinuityTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Kernel" : "GeneralPath";
                         });

}  // namespace
}  // namespace reach
