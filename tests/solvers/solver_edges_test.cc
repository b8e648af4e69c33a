// Every chain solver at the edges users meet: poles (also through AUTO on
// a leg with real limits), the straight-start symmetry band, targets and
// poles far beyond double's comfort, soft IK, and options a solver cannot
// apply. Checked by the independent forward kinematics of
// tests/testing/sweep.h.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <string>

#include "solvers/chain_solver.h"
#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/models.h"
#include "tests/testing/sweep.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::IndependentFk;
using ::reach::testing::Rng;

constexpr SolverKind kEverySolver[] = {
    SolverKind::kTwoBone,           SolverKind::kFabrik,
    SolverKind::kCcd,               SolverKind::kJacobianTranspose,
    SolverKind::kJacobianPinv,      SolverKind::kJacobianDls,
    SolverKind::kGradientDescent};
Skeleton MustCreate(SkeletonDef def) {
  auto created = Skeleton::Create(std::move(def));
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *std::move(created) : Skeleton();
}

struct Outcome {
  absl::Status status;
  Pose pose;
  GoalResult result;
};
Outcome SolveFrom(const Skeleton& skeleton, const Goal& goal,
                  const Pose& start) {
  Outcome out{absl::OkStatus(), start, GoalResult()};
  Workspace ws;
  out.status = Solve(skeleton, {goal}, ws, &out.pose, {&out.result, 1});
  return out;
}

using ::reach::testing::KneePoleAngleDeg;

std::string Name(SolverKind kind) { return std::string(SolverName(kind)); }

TEST(PoleTest, EverySolverPutsTheKneeOnThePolePlane) {
  // The case: the knee starts forward, the pole is behind.
  for (bool hinge : {false, true}) {
    const Skeleton leg = MustCreate(testing::TwoBoneLegDef(hinge));
    Pose forward = RestPose(leg);
    forward.local[0].rotation = AxisAngle(Vector3d::UnitX(), -0.4);
    forward.local[1].rotation = AxisAngle(Vector3d::UnitX(), 0.8);
    Rng rng(11);
    for (SolverKind solver : kEverySolver) {
      for (int t = 0; t < 40; ++t) {
        // Reachable targets (the ankle of a random pose), poles behind and
        // to the side, from the bent start and the straight rest pose.
        const Pose random = testing::RandomPose(leg, rng, 1.2);
        const Vector3d target = IndependentFk(leg, random).position[2];
        const Vector3d hip = IndependentFk(leg, forward).position[0];
        const double side = (t % 4 - 1.5) * 0.3;
        const Vector3d pole = hip + Vector3d(side, -0.5, -0.6);
        Goal goal;
        goal.chain = 0;
        goal.solver = solver;
        goal.target = target;
        goal.pole = pole;
        // Linear convergence: room for the transpose, gradient descent and
        // CCD on targets across the leg's range (the pole is under test).
        goal.options.max_iterations = 2000;
        const Outcome out =
            SolveFrom(leg, goal, t % 2 == 0 ? forward : RestPose(leg));
        ASSERT_TRUE(out.status.ok()) << out.status;
        const auto fk = IndependentFk(leg, out.pose);
        EXPECT_LE((fk.position[2] - target).norm(), out.result.tolerance)
            << Name(solver) << " trial " << t;
        EXPECT_LE(KneePoleAngleDeg(fk.position[0], fk.position[1], target,
                                   pole),
                  1.0)
            << Name(solver) << (hinge ? " hinge" : " ball") << " trial " << t;
      }
    }
  }
}

// A leg with real limits (testing::LimitedLegDef).
TEST(PoleTest, RealisticLimitedLegKeepsThePoleWhereTheLimitsAllowIt) {
  const Skeleton leg = MustCreate(testing::LimitedLegDef());
  Rng rng(12);
  for (SolverKind solver :
       {SolverKind::kAuto, SolverKind::kFabrik, SolverKind::kCcd,
        SolverKind::kJacobianPinv, SolverKind::kJacobianDls,
        SolverKind::kGradientDescent, SolverKind::kJacobianTranspose}) {
    int reached = 0;
    int on_pole = 0;
    constexpr int kTrials = 100;
    for (int t = 0; t < kTrials; ++t) {
      // A random pose within the limits is the witness: its knee lies in
      // the plane of hip, target and the pole beyond it, so the limits
      // allow the pole.
      const Pose random = testing::RandomPose(leg, rng, 1.5);
      const auto witness = IndependentFk(leg, random);
      const Vector3d hip = witness.position[0];
      const Vector3d target = witness.position[2];
      if ((witness.position[1] - hip)
              .cross(target - hip)
              .norm() < 0.05) {
        continue;  // Nearly straight: the pole plane is ill defined.
      }
      const Vector3d pole = hip + 2.0 * (witness.position[1] - hip);
      Goal goal;
      goal.chain = 0;
      goal.solver = solver;
      goal.target = target;
      goal.pole = pole;
      const Outcome out = SolveFrom(leg, goal, RestPose(leg));
      ASSERT_TRUE(out.status.ok()) << out.status;
      const auto fk = IndependentFk(leg, out.pose);
      for (int j : {0, 1}) {
        EXPECT_TRUE(WithinLimits(leg.joint(j), out.pose.local[j].rotation,
                                 1e-6))
            << Name(solver) << " trial " << t << " joint " << j;
      }
      if ((fk.position[2] - target).norm() > out.result.tolerance) continue;
      ++reached;
      on_pole += KneePoleAngleDeg(hip, fk.position[1], target, pole) <= 1.0;
    }
    SCOPED_TRACE(Name(solver));
    if (solver == SolverKind::kAuto) {
      // AUTO: the two-bone path, turned into the hip's limits.
      EXPECT_EQ(reached, on_pole);
      EXPECT_GE(reached, 85);
    } else {
      EXPECT_GE(on_pole, reached * 95 / 100) << reached << " reached";
    }
  }
}

// Chains that start straight: the leg (ball knee, hinge knee) and five
// ball joints along +X.
std::vector<Skeleton> StraightChains() {
  std::vector<Skeleton> out;
  out.push_back(MustCreate(testing::TwoBoneLegDef(false)));
  out.push_back(MustCreate(testing::TwoBoneLegDef(true)));
  out.push_back(MustCreate(testing::StraightChainDef(5, 0.2)));
  return out;
}

TEST(SymmetryBandTest, TargetsNearAStraightChainsLineAreSolved) {
  // Float32 noise puts a "straight below" target 1e-8 to 1e-5 rad off the
  // line: every solver reaches it, as it does targets on the line.
  for (const Skeleton& chain : StraightChains()) {
    const std::vector<int>& joints = chain.chain(0).joints;
    const auto rest = IndependentFk(chain, RestPose(chain));
    const Vector3d root = rest.position[joints.front()];
    const Vector3d line = rest.position[joints.back()] - root;
    for (SolverKind solver : kEverySolver) {
      if (solver == SolverKind::kTwoBone && joints.size() != 3) continue;
      for (double offset :
           {0.0, 1e-12, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4}) {
        for (const Vector3d& target :
             testing::NearLineTargets(root, line, offset)) {
          Goal goal;
          goal.chain = 0;
          goal.solver = solver;
          goal.target = target;
          const Outcome out = SolveFrom(chain, goal, RestPose(chain));
          ASSERT_TRUE(out.status.ok()) << out.status;
          const double error =
              (IndependentFk(chain, out.pose).position[joints.back()] -
               goal.target)
                  .norm();
          EXPECT_LE(error, out.result.tolerance)
              << Name(solver) << " offset " << offset << " on "
              << joints.size() << " joints";
        }
      }
    }
  }
}

TEST(OverflowTest, NoSolverReturnsANonFiniteOrNonUnitRotation) {
  std::vector<Skeleton> chains = StraightChains();
  chains.push_back(MustCreate(testing::PandaDef()));
  const double kFar[] = {1e10, 1e100, 1e300, DBL_MAX};
  for (const Skeleton& chain : chains) {
    for (SolverKind solver : kEverySolver) {
      if (solver == SolverKind::kTwoBone && chain.chain(0).joints.size() != 3)
        continue;
      for (double far : kFar) {
        for (const Vector3d& direction :
             {Vector3d(1, 0, 0), Vector3d(-1, 1, 0), Vector3d(1, -1, 1)}) {
          Goal goal;
          goal.chain = 0;
          goal.solver = solver;
          goal.target = far * direction;
          // Poles where a chain can turn to face them (not the Panda's
          // hinge root).
          if (chain.joint(chain.chain(0).joints[0]).type == JointType::kBall) {
            goal.pole = Vector3d(far, -far, far);
          }
          if (solver == SolverKind::kJacobianDls) {
            goal.target_orientation = Quaterniond::Identity();
          }
          // Warm-started: a second solve from the first one's answer.
          Pose pose = RestPose(chain);
          for (int frame = 0; frame < 2; ++frame) {
            const Outcome out = SolveFrom(chain, goal, pose);
            ASSERT_TRUE(out.status.ok())
                << Name(solver) << " " << far << ": " << out.status;
            for (const Transform& t : out.pose.local) {
              ASSERT_TRUE(t.rotation.coeffs().allFinite()) << Name(solver);
              EXPECT_NEAR(t.rotation.norm(), 1.0, 1e-9) << Name(solver);
            }
            EXPECT_FALSE(std::isnan(out.result.position_error));
            EXPECT_FALSE(out.result.reached);
            pose = out.pose;
          }
        }
      }
    }
  }
}

// A hinge turning a far point towards another: the cross and dot products
// of the raw vectors overflow (inf - inf = NaN) unless they are scaled first.
TEST(OverflowTest, HingeTurnTowardsFarPointsIsFinite) {
  Joint hinge;
  hinge.type = JointType::kHinge;
  hinge.axis = Vector3d::UnitZ();
  Transform global;
  for (double far : {1.0, 1e100, 1e200, 1e300}) {
    const Quaterniond turn = TurnTowards(hinge, global, Vector3d(far, far, 0),
                                         Vector3d(-far, far, 0));
    ASSERT_TRUE(turn.coeffs().allFinite()) << far;
    EXPECT_LT(AngleBetween(turn, AxisAngle(Vector3d::UnitZ(), M_PI / 2)), 1e-12)
        << far;
  }
}

TEST(SoftTest, EverySolverEasesIntoFullExtension) {
  // soft 0.1: past 90% of the length the reach eases towards full
  // extension and never gets there; every solver lands on the eased
  // distance (TWO_BONE's formula) instead of the target.
  const Skeleton leg = MustCreate(testing::TwoBoneLegDef(false));
  const Vector3d hip = IndependentFk(leg, RestPose(leg)).position[0];
  const double length = 0.45 + 0.42;
  for (SolverKind solver : kEverySolver) {
    for (double fraction : {0.95, 1.0, 1.3}) {
      Goal goal;
      goal.chain = 0;
      goal.solver = solver;
      goal.target = hip + fraction * length * Vector3d(0.6, -0.8, 0);
      goal.options.soft = 0.1;
      const Outcome out = SolveFrom(leg, goal, RestPose(leg));
      ASSERT_TRUE(out.status.ok()) << out.status;
      const double reach =
          (IndependentFk(leg, out.pose).position[2] - hip).norm();
      const double d = fraction * length;
      const double eased =
          0.9 * length + 0.1 * length * (1.0 - std::exp(-(d - 0.9 * length) /
                                                       (0.1 * length)));
      EXPECT_NEAR(reach, eased, 2 * out.result.tolerance)
          << Name(solver) << " at " << fraction;
      EXPECT_LT(reach, length) << Name(solver);
      EXPECT_FALSE(out.result.reached);
    }
  }
}

TEST(ContractTest, IterativeSolversLeaveTheChainGlobalsOfTheirResult) {
  // Solve's bend alignment reads ws.chain_globals after a solver: they
  // must be the returned pose's forward kinematics.
  std::vector<Skeleton> chains = StraightChains();
  chains.push_back(MustCreate(testing::PandaDef()));
  Rng rng(21);
  for (const Skeleton& skeleton : chains) {
    const std::vector<int>& joints = skeleton.chain(0).joints;
    const int n = static_cast<int>(joints.size());
    for (SolverKind solver : kEverySolver) {
      if (solver == SolverKind::kTwoBone) continue;
      for (int t = 0; t < 10; ++t) {
        const Pose random = testing::RandomPose(skeleton, rng, 1.0);
        const auto goal_fk = IndependentFk(skeleton, random);
        Goal goal;
        goal.chain = 0;
        goal.solver = solver;
        goal.target = goal_fk.position[joints.back()] *
                      (t % 3 == 0 ? 3.0 : 1.0);  // Some out of reach.
        if (t % 2 == 1) {
          goal.target_orientation = goal_fk.rotation[joints.back()];
        }
        Pose pose = testing::RandomPose(skeleton, rng, 0.5);
        Workspace ws;
        ws.Reserve(skeleton.num_joints());
        ChainProblem problem;
        problem.skeleton = &skeleton;
        problem.joints = joints;
        problem.goal = &goal;
        const int parent = skeleton.joint(joints[0]).parent;
        const auto start_fk = IndependentFk(skeleton, pose);
        if (parent >= 0) {
          problem.parent_global.rotation = start_fk.rotation[parent];
          problem.parent_global.translation = start_fk.position[parent];
        }
        ComputeChainGlobals(problem, pose, ws);
        for (int k = 0; k + 1 < n; ++k) {
          ws.lengths[k] = (ws.chain_globals[k + 1].translation -
                           ws.chain_globals[k].translation)
                              .norm();
          problem.chain_length += ws.lengths[k];
        }
        problem.tolerance = 1e-5 * problem.chain_length;
        problem.orientation_tolerance_rad = 1e-4;
        problem.max_iterations = 64;
        GetSolver(solver).Solve(problem, ws, pose);
        const auto fk = IndependentFk(skeleton, pose);
        for (int k = 0; k < n; ++k) {
          EXPECT_LT((ws.chain_globals[k].translation - fk.position[joints[k]])
                        .norm(),
                    1e-9 * problem.chain_length)
              << Name(solver) << " joint " << k << " trial " << t;
          EXPECT_LT(AngleBetween(ws.chain_globals[k].rotation,
                                 fk.rotation[joints[k]]),
                    1e-9)
              << Name(solver) << " joint " << k << " trial " << t;
        }
      }
    }
  }
}

TEST(OptionsTest, OptionsASolverCannotApplyAreRefusedNamingTheField) {
  const Skeleton leg = MustCreate(testing::TwoBoneLegDef(false));
  const Skeleton chain = MustCreate(testing::StraightChainDef(5, 0.2));
  struct Case {
    const Skeleton* skeleton;
    SolverKind solver;
    void (*set)(SolveOptions*);
    const char* field;
  };
  const Case cases[] = {
      {&chain, SolverKind::kFabrik,
       [](SolveOptions* o) { o->max_stretch = 1.5; }, "options.max_stretch"},
      {&chain, SolverKind::kAuto,
       [](SolveOptions* o) { o->max_stretch = 1.5; }, "options.max_stretch"},
      {&leg, SolverKind::kCcd, [](SolveOptions* o) { o->damping = 0.1; },
       "options.damping"},
      {&leg, SolverKind::kTwoBone,
       [](SolveOptions* o) { o->max_step_rad = 0.1; }, "options.max_step_rad"},
      {&leg, SolverKind::kFabrik,
       [](SolveOptions* o) { o->max_restarts = 5; }, "options.max_restarts"},
      {&leg, SolverKind::kCcd, [](SolveOptions* o) { o->max_restarts = 5; },
       "options.max_restarts"},
  };
  for (const Case& c : cases) {
    Goal goal;
    goal.chain = 0;
    goal.solver = c.solver;
    goal.target = Vector3d(0.3, 0.5, 0.2);
    c.set(&goal.options);
    const Outcome out = SolveFrom(*c.skeleton, goal, RestPose(*c.skeleton));
    EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument)
        << c.field;
    EXPECT_NE(out.status.message().find(std::string("goals[0].") + c.field),
              std::string::npos)
        << out.status;
  }
  // A pole that no turn of the chain can honour: a hinge root (the Panda),
  // or a target orientation at a tip that cannot be turned back.
  {
    const Skeleton panda = MustCreate(testing::PandaDef());
    Goal goal;
    goal.chain = 0;
    goal.solver = SolverKind::kJacobianDls;
    goal.target = Vector3d(0.4, 0.1, 0.5);
    goal.pole = Vector3d(0, 1, 1);
    const Outcome out = SolveFrom(panda, goal, RestPose(panda));
    EXPECT_EQ(out.status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status.message().find("goals[0].pole"), std::string::npos)
        << out.status;
    SkeletonDef fixed_tip = testing::StraightChainDef(5, 0.2);
    fixed_tip.joints.back().type = JointType::kFixed;
    const Skeleton chain_fixed = MustCreate(fixed_tip);
    goal.target = Vector3d(0.5, 0.3, 0.1);
    goal.target_orientation = Eigen::Quaterniond::Identity();
    const Outcome oriented =
        SolveFrom(chain_fixed, goal, RestPose(chain_fixed));
    EXPECT_EQ(oriented.status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(oriented.status.message().find("goals[0].pole"),
              std::string::npos)
        << oriented.status;
  }
  // The same options where they apply are accepted.
  Goal goal;
  goal.chain = 0;
  goal.target = Vector3d(0.3, 0.5, 0.2);
  goal.solver = SolverKind::kJacobianDls;
  goal.options.damping = 0.1;
  goal.options.max_step_rad = 0.3;
  goal.options.max_restarts = 3;
  goal.options.soft = 0.05;
  EXPECT_TRUE(SolveFrom(leg, goal, RestPose(leg)).status.ok());
  goal.solver = SolverKind::kTwoBone;
  goal.options = SolveOptions();
  goal.options.max_stretch = 1.5;
  EXPECT_TRUE(SolveFrom(leg, goal, RestPose(leg)).status.ok());
}

}  // namespace
}  // namespace reach
