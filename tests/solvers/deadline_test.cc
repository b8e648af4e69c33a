// Time budgets, deadlines and cancellation: checked by what they do to
// iteration counts and poses, never by how long anything took (timings are
// in bench/budget_bench.cc).
#include "solvers/deadline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "solvers/stall_guard.h"
#include "tests/testing/models.h"

namespace reach {
namespace {


using Eigen::Vector3d;
using ::reach::testing::GlobalOf;
using ::reach::testing::RestartsFor;
using ::reach::testing::Rng;
using ::testing::HasSubstr;
using Clock = Deadline::Clock;

const SolverKind kIterative[] = {SolverKind::kFabrik,
                                 SolverKind::kCcd,
                                 SolverKind::kJacobianTranspose,
                                 SolverKind::kJacobianPinv,
                                 SolverKind::kJacobianDls,
                                 SolverKind::kGradientDescent};

// A random chain of `joints` whose inner joints are hinges about X limited
// to [-0.2, 2.4] (RestartTest's chain: DLS alone reaches about half of its
// targets).
Skeleton LimitedChain(Rng& rng, int joints) {
  auto skeleton = Skeleton::Create(testing::HingeRestartChainDef(rng, joints));
  EXPECT_TRUE(skeleton.ok()) << skeleton.status();
  return std::move(*skeleton);
}

struct Outcome {
  absl::Status status;
  Pose pose;
  GoalResult result;
};

Outcome SolveWith(const Skeleton& skeleton, const Goal& goal, const Pose& start,
                  const Deadline& deadline = {}) {
  Workspace ws;
  Outcome out{absl::OkStatus(), start, GoalResult()};
  out.status = Solve(skeleton, {goal}, ws, &out.pose, {&out.result, 1},
                     SolveLimits(), deadline);
  return out;
}

bool SameRotations(const Pose& a, const Pose& b) {
  for (size_t j = 0; j < a.local.size(); ++j) {
    if (a.local[j].rotation.coeffs() != b.local[j].rotation.coeffs()) {
      return false;
    }
  }
  return true;
}

double LargestRotationChange(const Pose& a, const Pose& b) {
  double d = 0.0;
  for (size_t j = 0; j < a.local.size(); ++j) {
    d = std::max(d, AngleBetween(a.local[j].rotation, b.local[j].rotation));
  }
  return d;
}

TEST(TimeBudgetTest, ValidationNamesTheField) {
  Rng rng(1);
  const Skeleton skeleton = LimitedChain(rng, 5);
  Goal goal;
  goal.chain = 0;
  // Where the tip already is: reached at once, so no budget is spent.
  goal.target =
      GlobalOf(skeleton, RestPose(skeleton), skeleton.chain(0).joints.back())
          .translation;
  for (double bad :
       {-1.0, -1e-9, 60000.5, 1e9, std::numeric_limits<double>::quiet_NaN(),
        std::numeric_limits<double>::infinity()}) {
    goal.options.time_budget_ms = bad;
    const Outcome out = SolveWith(skeleton, goal, RestPose(skeleton));
    EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(out.status.message()),
                HasSubstr("goals[0].options.time_budget_ms"))
        << bad;
  }
  for (double good : {0.0, 0.5, 5.0, 60000.0}) {
    goal.options.time_budget_ms = good;
    EXPECT_TRUE(SolveWith(skeleton, goal, RestPose(skeleton)).status.ok())
        << good;
  }
}

TEST(DeadlineTest, WithBudgetTakesTheEarlierAndKeepsTheFlag) {
  const std::atomic<bool> flag{false};
  Deadline none;
  EXPECT_FALSE(none.IsSet());
  EXPECT_FALSE(none.Expired());
  EXPECT_FALSE(none.WithBudget(0.0).IsSet());  // 0: no budget.

  const Clock::time_point before = Clock::now();
  const Deadline budgeted = none.WithBudget(5.0);
  const Clock::time_point after = Clock::now();
  EXPECT_GE(budgeted.at, before + std::chrono::milliseconds(5));
  EXPECT_LE(budgeted.at, after + std::chrono::milliseconds(5));

  Deadline call;  // A call deadline an hour away, cancellable.
  call.at = Clock::now() + std::chrono::hours(1);
  call.cancelled = &flag;
  const Deadline goal = call.WithBudget(5.0);
  EXPECT_LT(goal.at, call.at);  // The budget comes first.
  EXPECT_EQ(goal.cancelled, &flag);
  Deadline soon = call;  // A call deadline a millisecond away.
  soon.at = Clock::now() + std::chrono::milliseconds(1);
  EXPECT_EQ(soon.WithBudget(5000.0).at, soon.at);  // The call's comes first.
  EXPECT_EQ(call.WithBudget(0.0).at, call.at);

  Deadline past;
  past.at = Clock::now() - std::chrono::seconds(1);
  EXPECT_TRUE(past.Expired());
  EXPECT_TRUE(Deadline::In(-5.0).Expired());
  EXPECT_FALSE(Deadline::In(1e300).IsSet());  // Beyond a year: none.
  EXPECT_FALSE(Deadline::In(std::nan("")).IsSet());
  std::atomic<bool> raised{true};
  Deadline cancelled;
  cancelled.cancelled = &raised;
  EXPECT_TRUE(cancelled.IsSet());
  EXPECT_FALSE(cancelled.has_time_limit());
  EXPECT_TRUE(cancelled.Expired());
}

// The guard looks at the deadline on its first call and every 8th after,
// and otherwise decides exactly as the untimed guard does.
TEST(StallGuardTest, LooksAtTheDeadlineEveryEighthIteration) {
  std::atomic<bool> flag{false};
  Deadline deadline;
  deadline.cancelled = &flag;
  StallGuard guard(deadline, /*tolerance=*/1e-6);
  double error = 1.0;
  for (int call = 0; call < 3; ++call)
    EXPECT_TRUE(guard.KeepGoing(error *= 0.5));
  flag = true;  // Raised before call 3: seen at call 8.
  for (int call = 3; call < 8; ++call) {
    EXPECT_TRUE(guard.KeepGoing(error *= 0.5)) << call;
  }
  EXPECT_FALSE(guard.KeepGoing(error *= 0.5));

  Deadline past;
  past.at = Clock::now() - std::chrono::seconds(1);
  StallGuard expired(past, 1e-6);
  EXPECT_FALSE(expired.KeepGoing(1.0));  // The very first call.
  StallGuard done(past, 1e-6);
  EXPECT_FALSE(done.KeepGoing(1e-7));  // Within tolerance: done anyway.

  // A deadline that does not expire changes nothing: the same answers as
  // the untimed guard, stalls included.
  Deadline far;
  far.at = Clock::now() + std::chrono::hours(1);
  StallGuard timed(far, 1e-3, /*patience=*/3);
  StallGuard untimed(1e-3, /*patience=*/3);
  const double errors[] = {1.0, 0.5, 0.5, 0.49999, 0.5, 0.4, 0.4, 0.4,
                           0.4, 0.3, 0.3, 0.3,     0.3, 0.3, 0.3, 0.3};
  for (double e : errors) EXPECT_EQ(timed.KeepGoing(e), untimed.KeepGoing(e));
}

// A deadline already past, or a cancellation flag already raised, stops
// every iterative solver before its first iteration, however many
// iterations and restarts the goal allows, and the pose is the start pose.
TEST(DeadlineTest, ExpiredDeadlineOrRaisedFlagReturnsTheStartPose) {
  Rng rng(2);
  const Skeleton skeleton = LimitedChain(rng, 7);
  const Pose start = testing::RandomPose(skeleton, rng, 1.0);
  std::atomic<bool> raised{true};
  Deadline past;
  past.at = Clock::now() - std::chrono::seconds(1);
  Deadline cancelled;
  cancelled.cancelled = &raised;
  for (SolverKind kind : kIterative) {
    for (const Deadline& deadline : {past, cancelled}) {
      for (double budget : {0.0, 60000.0}) {
        SCOPED_TRACE(std::string(SolverName(kind)) + " budget " +
                     std::to_string(budget));
        Goal goal;
        goal.chain = 0;
        goal.solver = kind;
        goal.target = Vector3d(30, -10, 5);  // Far out of reach.
        goal.options.max_iterations = 100000;
        goal.options.max_restarts = RestartsFor(kind, 1000);
        goal.options.time_budget_ms = budget;
        const Outcome out = SolveWith(skeleton, goal, start, deadline);
        ASSERT_TRUE(out.status.ok()) << out.status;
        EXPECT_EQ(out.result.iterations, 0);
        EXPECT_FALSE(out.result.reached);
        EXPECT_TRUE(std::isfinite(out.result.position_error));
        // Unmoved, up to the hinges' re-projection onto their axes.
        EXPECT_LT(LargestRotationChange(out.pose, start), 1e-12);
        // Measured on the returned pose.
        const Vector3d tip =
            GlobalOf(skeleton, out.pose, skeleton.chain(0).joints.back())
                .translation;
        EXPECT_NEAR(out.result.position_error, (tip - goal.target).norm(),
                    1e-12);
      }
    }
  }
}

// A deadline that does not expire and a flag that is never raised change
// nothing: bit for bit the untimed solve.
TEST(DeadlineTest, UnexpiredDeadlineLeavesTheSolveUnchanged) {
  Rng rng(3);
  const Skeleton skeleton = LimitedChain(rng, 7);
  const int tip = skeleton.chain(0).joints.back();
  std::atomic<bool> lowered{false};
  Deadline far;
  far.at = Clock::now() + std::chrono::hours(1);
  far.cancelled = &lowered;
  for (SolverKind kind : kIterative) {
    for (int t = 0; t < 5; ++t) {
      Goal goal;
      goal.chain = 0;
      goal.solver = kind;
      goal.target =
          t == 4
              ? Vector3d(30, -10, 5)
              : GlobalOf(skeleton, testing::RandomPose(skeleton, rng, 1.0), tip)
                    .translation;
      goal.options.max_restarts = RestartsFor(kind, t % 3);
      const Outcome plain = SolveWith(skeleton, goal, RestPose(skeleton));
      const Outcome timed = SolveWith(skeleton, goal, RestPose(skeleton), far);
      ASSERT_TRUE(plain.status.ok() && timed.status.ok());
      EXPECT_EQ(timed.result.iterations, plain.result.iterations)
          << SolverName(kind) << " " << t;
      EXPECT_TRUE(SameRotations(timed.pose, plain.pose))
          << SolverName(kind) << " " << t;
    }
  }
}

// With a time budget the restarts are bounded by time, not by
// max_restarts: a goal that its first attempts miss and a later restart
// reaches is reached under a budget with max_restarts = 1, exactly as with
// 1000 counted restarts (the same deterministic sequence), and takes more
// iterations than max_restarts alone allows.
TEST(TimeBudgetTest, RestartsContinuePastMaxRestartsUntilReached) {
  int found = 0;
  Rng rng(17);
  for (int t = 0; t < 400 && found < 6; ++t) {
    const Skeleton skeleton = LimitedChain(rng, 3 + t % 6);
    const int tip = skeleton.chain(0).joints.back();
    for (SolverKind kind : {SolverKind::kJacobianDls, SolverKind::kJacobianPinv,
                            SolverKind::kGradientDescent}) {
      Goal goal;
      goal.chain = 0;
      goal.solver = kind;
      goal.target =
          GlobalOf(skeleton, testing::RandomPose(skeleton, rng, 1.0), tip)
              .translation;
      goal.options.max_restarts = 1;
      const Outcome counted_once =
          SolveWith(skeleton, goal, RestPose(skeleton));
      if (counted_once.result.reached) continue;
      goal.options.max_restarts = 1000;
      const Outcome counted = SolveWith(skeleton, goal, RestPose(skeleton));
      if (!counted.result.reached) continue;
      ++found;
      SCOPED_TRACE(std::string(SolverName(kind)) + " chain " +
                   std::to_string(t));
      goal.options.max_restarts = 1;
      goal.options.time_budget_ms = 60000.0;  // Far more than it needs.
      const Outcome timed = SolveWith(skeleton, goal, RestPose(skeleton));
      ASSERT_TRUE(timed.status.ok());
      EXPECT_TRUE(timed.result.reached);
      EXPECT_GT(timed.result.iterations, counted_once.result.iterations);
      EXPECT_EQ(timed.result.iterations, counted.result.iterations);
      EXPECT_TRUE(SameRotations(timed.pose, counted.pose));
      // The same with max_restarts = 0: the budget alone turns restarts on.
      goal.options.max_restarts = 0;
      const Outcome no_count = SolveWith(skeleton, goal, RestPose(skeleton));
      EXPECT_TRUE(no_count.result.reached);
      EXPECT_EQ(no_count.result.iterations, counted.result.iterations);
    }
  }
  EXPECT_GE(found, 6);
}

// An unreachable goal with a budget and no restart count: the restarts
// would never end on their own; the budget ends them. The result is the
// best attempt's, within the limits, not reached.
TEST(TimeBudgetTest, BudgetEndsTheRestartsOfAnUnreachableGoal) {
  Rng rng(4);
  const Skeleton skeleton = LimitedChain(rng, 6);
  for (SolverKind kind :
       {SolverKind::kJacobianDls, SolverKind::kJacobianPinv,
        SolverKind::kJacobianTranspose, SolverKind::kGradientDescent}) {
    SCOPED_TRACE(SolverName(kind));
    Goal goal;
    goal.chain = 0;
    goal.solver = kind;
    goal.target = Vector3d(30, -10, 5);
    goal.options.max_iterations = 16;
    goal.options.time_budget_ms = 2.0;
    const Outcome out = SolveWith(skeleton, goal, RestPose(skeleton));
    ASSERT_TRUE(out.status.ok());
    EXPECT_FALSE(out.result.reached);
    EXPECT_TRUE(std::isfinite(out.result.position_error));
    for (int j : skeleton.chain(0).joints) {
      EXPECT_TRUE(out.pose.local[j].rotation.coeffs().allFinite());
      EXPECT_TRUE(
          WithinLimits(skeleton.joint(j), out.pose.local[j].rotation, 1e-9));
    }
  }
}

}  // namespace
}  // namespace reach
