// Chain solvers on a live stream: every solver, warm-started through full
// extension and back in 24 directions, with and without a pole, on a leg
// with a ball knee and one with a hinge knee. Checked by the independent
// forward kinematics of tests/testing/sweep.h against TWO_BONE on the same
// sweep (the geometric minimum of the per-frame joint step).
#include <gtest/gtest.h>

#include <string>

#include "solvers/solve.h"
#include "tests/testing/models.h"
#include "tests/testing/sweep.h"

namespace reach {
namespace {

using ::reach::testing::RunSweep;
using ::reach::testing::SphereDirections;
using ::reach::testing::SweepSpec;
using ::reach::testing::SweepStats;

struct SweepCase {
  SolverKind solver;
  bool hinge_knee;
  bool pole;
};

std::string CaseName(const ::testing::TestParamInfo<SweepCase>& info) {
  return std::string(SolverName(info.param.solver)) +
         (info.param.hinge_knee ? "_HingeKnee" : "_BallKnee") +
         (info.param.pole ? "_Pole" : "_NoPole");
}

class SweepTest : public ::testing::TestWithParam<SweepCase> {};

// The pole for sweep `d`: across the sweep's line in a direction that turns
// from sweep to sweep, and a little along it (a pole is a point, not a
// direction).
Eigen::Vector3d PoleOffset(const Eigen::Vector3d& direction, int d) {
  const Eigen::Vector3d e1 = direction.unitOrthogonal();
  const Eigen::Vector3d e2 = direction.cross(e1);
  return 0.5 * (std::cos(d * 1.3) * e1 + std::sin(d * 1.3) * e2) +
         0.3 * direction;
}

TEST_P(SweepTest, NoFlipsNoPopsNoStalls) {
  const SweepCase& c = GetParam();
  auto skeleton = Skeleton::Create(testing::TwoBoneLegDef(c.hinge_knee));
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const Pose rest = RestPose(*skeleton);
  const std::vector<Eigen::Vector3d> directions = SphereDirections(24);
  for (int d = 0; d < static_cast<int>(directions.size()); ++d) {
    SweepSpec spec;
    spec.solver = c.solver;
    spec.direction = directions[d];
    if (c.pole) spec.pole_offset = PoleOffset(directions[d], d);
    const SweepStats stats = RunSweep(*skeleton, rest, spec);
    spec.solver = SolverKind::kTwoBone;
    const SweepStats minimum = RunSweep(*skeleton, rest, spec);
    SCOPED_TRACE("direction " + std::to_string(d));
    EXPECT_EQ(stats.solve_errors, 0);
    EXPECT_EQ(stats.bad_rotations, 0);
    EXPECT_EQ(stats.wrong_side_frames, 0);
    EXPECT_EQ(stats.unreached_reachable, 0)
        << "worst error " << stats.worst_reachable_error << " x tolerance";
    EXPECT_LE(stats.max_step_rad, 1.5 * minimum.max_step_rad)
        << "TWO_BONE's largest step " << minimum.max_step_rad;
    if (c.pole) {
      EXPECT_LE(stats.max_pole_angle_deg, 1.0);
    }
  }
}

std::vector<SweepCase> AllCases() {
  std::vector<SweepCase> cases;
  for (SolverKind solver :
       {SolverKind::kTwoBone, SolverKind::kFabrik, SolverKind::kCcd,
        SolverKind::kJacobianTranspose, SolverKind::kJacobianPinv,
        SolverKind::kJacobianDls, SolverKind::kGradientDescent}) {
    for (bool hinge : {false, true}) {
      for (bool pole : {false, true}) cases.push_back({solver, hinge, pole});
    }
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EverySolver, SweepTest,
                         ::testing::ValuesIn(AllCases()), CaseName);

}  // namespace
}  // namespace reach
