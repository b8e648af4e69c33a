// Proves that solves allocate nothing once the workspace is warm: this
// binary links the solver library built with EIGEN_RUNTIME_NO_MALLOC and
// asserts on (any Eigen heap allocation aborts), and counts every
// operator new (std containers, strings) while a solve runs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/counting_new.h"
#include "tests/testing/models.h"

#ifndef EIGEN_RUNTIME_NO_MALLOC
#error "no_allocation_test must be built against reach_solvers_nomalloc"
#endif

namespace reach {
namespace {

using ::reach::testing::GlobalOf;
using ::reach::testing::Rng;

// Counts heap allocations (operator new and Eigen's) inside a scope.
class AllocationGuard {
 public:
  AllocationGuard() {
    Eigen::internal::set_is_malloc_allowed(false);
    ::reach::testing::StartCountingNew();
  }
  ~AllocationGuard() {
    ::reach::testing::StopCountingNew();
    Eigen::internal::set_is_malloc_allowed(true);
  }
  long count() const { return ::reach::testing::CountedNew(); }
};

struct Case {
  std::string name;
  SkeletonDef def;
  std::vector<Goal> goals;
};

Skeleton MustCreate(const SkeletonDef& def) {
  auto s = Skeleton::Create(def);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

// Goals of every solver on a 10-joint chain, reachable and not, with and
// without pole and orientation.
std::vector<Case> Cases() {
  std::vector<Case> cases;
  Rng rng(77);
  testing::RandomChainOptions options;
  options.joints = 10;
  const SkeletonDef chain = testing::RandomChainDef(rng, options);
  const Skeleton skeleton = MustCreate(chain);
  const int tip = skeleton.chain(0).joints.back();
  const Transform reachable =
      GlobalOf(skeleton, testing::RandomPose(skeleton, rng, 0.8), tip);
  for (SolverKind kind :
       {SolverKind::kAuto, SolverKind::kFabrik, SolverKind::kCcd,
        SolverKind::kJacobianTranspose, SolverKind::kJacobianPinv,
        SolverKind::kJacobianDls, SolverKind::kGradientDescent}) {
    Goal goal;
    goal.chain = 0;
    goal.solver = kind;
    goal.target = reachable.translation;
    goal.pole = Eigen::Vector3d(3, 1, 2);
    Goal far = goal;
    far.target = Eigen::Vector3d(40, 10, -20);
    Goal pose6 = goal;
    pose6.target_orientation = reachable.rotation;
    Goal adhoc = goal;
    adhoc.chain = -1;
    adhoc.root_joint = skeleton.chain(0).joints[0];
    adhoc.tip_joint = tip;
    adhoc.weight = 0.5;
    cases.push_back(
        {std::string(SolverName(kind)), chain, {goal, far, pose6, adhoc}});
  }
  SkeletonDef limited = chain;
  for (size_t k = 1; k + 1 < limited.joints.size(); ++k) {
    limited.joints[k].type = k % 2 ? JointType::kHinge : JointType::kBall;
    limited.joints[k].axis = Eigen::Vector3d::UnitZ();
    limited.joints[k].min_angle_rad = -1.0;
    limited.joints[k].max_angle_rad = 1.0;
    limited.joints[k].max_swing_rad = k % 2 ? kInf : 0.8;
  }
  for (SolverKind kind :
       {SolverKind::kFabrik, SolverKind::kCcd, SolverKind::kJacobianDls,
        SolverKind::kJacobianPinv, SolverKind::kGradientDescent}) {
    Goal goal;
    goal.chain = 0;
    goal.solver = kind;
    goal.target = reachable.translation;
    Goal restarting = goal;
    restarting.target = Eigen::Vector3d(40, 10, -20);  // Out of reach.
    // Restarts are the Jacobian solvers' and gradient descent's option.
    if (kind != SolverKind::kFabrik && kind != SolverKind::kCcd) {
      restarting.options.max_restarts = 3;
    }
    cases.push_back({std::string(SolverName(kind)) + "_limited",
                     limited,
                     {goal, restarting}});
  }
  const SkeletonDef leg = testing::TwoBoneLegDef(/*hinge_knee=*/true);
  Goal leg_goal;
  leg_goal.chain = 0;
  leg_goal.solver = SolverKind::kTwoBone;
  leg_goal.target = Eigen::Vector3d(0.3, 0.4, 0.2);
  leg_goal.pole = Eigen::Vector3d(0, 0.5, 1);
  leg_goal.options.soft = 0.1;
  Goal stretch = leg_goal;
  stretch.options.max_stretch = 1.5;
  stretch.target = Eigen::Vector3d(1.5, 0.2, 0.3);
  cases.push_back({"two_bone", leg, {leg_goal, stretch}});
  // Four limbs and then a spine-to-hand goal that moves their parents: the
  // stale-global bookkeeping between goals must not allocate either.
  const SkeletonDef humanoid = testing::HumanoidDef();
  const Skeleton body = MustCreate(humanoid);
  std::vector<Goal> limbs;
  for (int c = 0; c < 4; ++c) {
    Goal g;
    g.chain = c;
    g.target = GlobalOf(body, testing::RandomPose(body, rng, 1.0),
                        body.chain(c).joints.back())
                   .translation;
    limbs.push_back(g);
  }
  Goal reach_up;
  reach_up.root_joint = body.FindJoint("spine0");
  reach_up.tip_joint = body.FindJoint("l_wrist");
  reach_up.target = Eigen::Vector3d(0.3, 1.9, 0.2);
  limbs.push_back(reach_up);
  limbs.push_back(limbs[3]);  // The right arm again, below the moved spine.
  cases.push_back({"humanoid", humanoid, limbs});
  return cases;
}

TEST(NoAllocationTest, SolvesAllocateNothingOnceWarm) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Skeleton skeleton = MustCreate(c.def);
    Workspace ws;
    const Pose rest = RestPose(skeleton);
    Pose pose = rest;
    std::vector<GoalResult> results(c.goals.size());
    // Warm-up sizes the workspace for this skeleton.
    ASSERT_TRUE(
        Solve(skeleton, c.goals, ws, &pose, absl::MakeSpan(results)).ok());
    for (int round = 0; round < 3; ++round) {
      pose.local = rest.local;  // Same size: a copy, no allocation.
      long count;
      absl::Status status;
      {
        AllocationGuard guard;
        status = Solve(skeleton, c.goals, ws, &pose, absl::MakeSpan(results));
        count = guard.count();
      }
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(count, 0) << "allocations during a warm solve";
    }
  }
}

// Time budgets and a call deadline with a cancellation flag: the clock
// reads and the budget's restarts allocate nothing either.
TEST(NoAllocationTest, TimedSolvesAllocateNothingOnceWarm) {
  std::atomic<bool> cancelled{false};
  Deadline deadline = Deadline::In(60000.0);
  deadline.cancelled = &cancelled;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Skeleton skeleton = MustCreate(c.def);
    std::vector<Goal> goals = c.goals;
    for (Goal& goal : goals) {
      // Short budgets: an unreachable goal restarts until its budget ends.
      goal.options.time_budget_ms = 0.5;
    }
    Workspace ws;
    const Pose rest = RestPose(skeleton);
    Pose pose = rest;
    std::vector<GoalResult> results(goals.size());
    ASSERT_TRUE(Solve(skeleton, goals, ws, &pose, absl::MakeSpan(results),
                      SolveLimits(), deadline)
                    .ok());
    for (int round = 0; round < 2; ++round) {
      pose.local = rest.local;
      long count;
      absl::Status status;
      {
        AllocationGuard guard;
        status = Solve(skeleton, goals, ws, &pose, absl::MakeSpan(results),
                       SolveLimits(), deadline);
        count = guard.count();
      }
      ASSERT_TRUE(status.ok()) << status;
      EXPECT_EQ(count, 0) << "allocations during a warm timed solve";
    }
  }
}

// The full-body solver on the humanoid: feet with orientation and poles,
// hands, a head look-at, pelvis free; a warm-started second frame too.
TEST(NoAllocationTest, FullBodySolvesAllocateNothingOnceWarm) {
  const Skeleton body = MustCreate(testing::HumanoidDef());
  std::vector<Goal> goals;
  auto add = [&](const char* joint, Eigen::Vector3d target, int priority) {
    Goal g;
    g.solver = SolverKind::kFullBody;
    g.tip_joint = body.FindJoint(joint);
    g.target = target;
    g.priority = priority;
    goals.push_back(g);
    return &goals.back();
  };
  add("l_ankle", Eigen::Vector3d(0.1, 0.08, 0.05), 0)->pole =
      Eigen::Vector3d(0.1, 0.5, 1.0);
  add("r_ankle", Eigen::Vector3d(-0.1, 0.05, -0.05), 0)->target_orientation =
      Eigen::Quaterniond::Identity();
  add("l_wrist", Eigen::Vector3d(0.4, 1.0, 0.3), 1);
  add("r_wrist", Eigen::Vector3d(-0.4, 1.2, 0.3), 1);
  add("head", Eigen::Vector3d(0.5, 1.6, 1.0), 2)->aim_axis =
      Eigen::Vector3d::UnitZ();
  Workspace ws;
  const Pose rest = RestPose(body);
  Pose pose = rest;
  std::vector<GoalResult> results(goals.size());
  ASSERT_TRUE(Solve(body, goals, ws, &pose, absl::MakeSpan(results)).ok());
  for (int round = 0; round < 3; ++round) {
    if (round < 2) pose.local = rest.local;  // The last one warm-starts.
    goals[2].target.x() += 0.01;
    long count;
    absl::Status status;
    {
      AllocationGuard guard;
      status = Solve(body, goals, ws, &pose, absl::MakeSpan(results));
      count = guard.count();
    }
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(count, 0) << "allocations during a warm full-body solve";
    EXPECT_GT(results[0].iterations, 0);
  }
  // A foot 3 m below the floor (further from the other than both legs
  // span) and a hand out of reach: the solve demotes goals and restores
  // levels (the goals sorted into new levels), still without allocating.
  // (1.5 m below, the foot is reached: the pelvis drops into a split.)
  goals[0].target.y() -= 3.0;
  goals[3].target = Eigen::Vector3d(-6, 9, 5);
  pose.local = rest.local;
  long count;
  {
    AllocationGuard guard;
    ASSERT_TRUE(Solve(body, goals, ws, &pose, absl::MakeSpan(results)).ok());
    count = guard.count();
  }
  EXPECT_EQ(count, 0) << "allocations during a full-body solve that stalls";
  EXPECT_FALSE(results[0].reached);
}

// A full-body solve from the rest pose that makes a second attempt (a foot
// just out of reach of the pinned pelvis: the knee, a hinge at rest, is
// bent for it) allocates nothing once a first one has run.
TEST(NoAllocationTest, AFullBodySecondAttemptAllocatesNothing) {
  SkeletonDef def = testing::HumanoidDef();
  for (JointDef& joint : def.joints) {
    if (joint.name == "l_knee" || joint.name == "r_knee") {
      joint.type = JointType::kHinge;
      joint.axis = Eigen::Vector3d::UnitX();
      joint.min_angle_rad = 0.0;
      joint.max_angle_rad = 2.5;
    }
  }
  const Skeleton body = MustCreate(def);
  const Pose rest = RestPose(body);
  std::vector<Transform> globals(body.num_joints());
  ComputeGlobals(body, rest, absl::MakeSpan(globals));
  const int hip = body.FindJoint("l_hip");
  Goal g;
  g.solver = SolverKind::kFullBody;
  g.tip_joint = body.FindJoint("l_ankle");
  // First within reach (0.9 leg lengths from the hip, down and forward):
  // one attempt sizes the Workspace. Then 1.1 leg lengths: the pelvis is
  // pinned, so the foot stays short and a second attempt runs, on buffers
  // the first solve never used.
  const double leg =
      (globals[g.tip_joint].translation - globals[hip].translation).norm();
  const Eigen::Vector3d down_forward = Eigen::Vector3d(0, -1, 1).normalized();
  g.target = globals[hip].translation + 0.9 * leg * down_forward;
  FullBodyOptions options;
  options.root_mode = RootMode::kPinned;
  options.max_iterations = 16;
  Workspace ws;
  GoalResult result;
  Pose pose = rest;
  ASSERT_TRUE(Solve(body, absl::MakeSpan(&g, 1), ws, &pose,
                    absl::MakeSpan(&result, 1), SolveLimits(), {}, options)
                  .ok());
  EXPECT_TRUE(result.reached);
  pose = rest;
  g.target = globals[hip].translation + 1.1 * leg * down_forward;
  long count;
  absl::Status status;
  {
    AllocationGuard guard;
    status = Solve(body, absl::MakeSpan(&g, 1), ws, &pose,
                   absl::MakeSpan(&result, 1), SolveLimits(), {}, options);
    count = guard.count();
  }
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_FALSE(result.reached);
  EXPECT_GT(result.iterations, 16) << "no second attempt";
  EXPECT_EQ(count, 0) << "allocations in a solve with a second attempt";
}

TEST(NoAllocationTest, GuardCatchesAnAllocation) {
  // The counter must see a plain allocation, or the test above proves
  // nothing.
  AllocationGuard guard;
  auto* v = new std::vector<int>(100);
  const long count = guard.count();
  delete v;
  EXPECT_GE(count, 1);
}

TEST(NoAllocationDeathTest, EigenHeapAllocationAborts) {
  // Eigen's run-time check is armed in this build: a dynamic matrix made
  // while allocation is forbidden must abort.
  EXPECT_DEATH(
      {
        Eigen::internal::set_is_malloc_allowed(false);
        Eigen::MatrixXd m(16, 16);
        m.setZero();
      },
      "");
}

}  // namespace
}  // namespace reach
