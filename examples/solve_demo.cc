// reach_demo: solves sample chains with every solver and prints what it did.
//
// - a leg (hip, knee hinge, ankle): two-bone with a pole, soft IK, stretch;
// - a 10-joint tentacle: every iterative solver on one reachable and one
//   unreachable target;
// - the 7-DOF Franka Emika Panda with its joint limits: a 6-D pose target
//   with DLS from the mid-limit seed;
// - four goals at once (two feet, two hands) on a small humanoid.
//
// Every reported error is measured by forward kinematics of the returned
// pose. Usage: reach_demo (no arguments).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using Eigen::Vector3d;

Skeleton MustCreate(SkeletonDef def) {
  auto s = Skeleton::Create(std::move(def));
  if (!s.ok()) {
    std::fprintf(stderr, "bad skeleton: %s\n", s.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*s);
}

std::string Fmt(const Vector3d& v) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "(%.4f, %.4f, %.4f)", v.x(), v.y(), v.z());
  return buf;
}

// Solves `goals` from `start` and prints one line per goal.
Pose SolveAndReport(const Skeleton& skeleton, const std::vector<Goal>& goals,
                    const Pose& start, const char* label) {
  Workspace ws;
  Pose pose = start;
  std::vector<GoalResult> results(goals.size());
  // Warm once so the timing below is a steady-state solve.
  if (auto s = Solve(skeleton, goals, ws, &pose, absl::MakeSpan(results));
      !s.ok()) {
    std::printf("  %s: rejected: %s\n", label, s.ToString().c_str());
    return start;
  }
  pose = start;
  const auto t0 = std::chrono::steady_clock::now();
  const absl::Status status =
      Solve(skeleton, goals, ws, &pose, absl::MakeSpan(results));
  const double us = std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  if (!status.ok()) {
    std::printf("  %s: rejected: %s\n", label, status.ToString().c_str());
    return start;
  }
  for (size_t i = 0; i < goals.size(); ++i) {
    const GoalResult& r = results[i];
    std::printf(
        "  %-28s %-18s target %-30s %s  error %.2e%s  iterations %3d\n",
        goals.size() > 1
            ? (std::string(label) + " #" + std::to_string(i)).c_str()
            : label,
        std::string(SolverName(r.solver)).c_str(), Fmt(goals[i].target).c_str(),
        r.reached ? "reached    " : "NOT reached", r.position_error,
        goals[i].target_orientation
            ? (" / " + std::to_string(r.orientation_error_rad) + " rad").c_str()
            : "",
        r.iterations);
  }
  std::printf("  %-28s %.1f us for the whole solve\n", "", us);
  return pose;
}

void LegDemo() {
  std::printf("Leg: hip (ball) -> knee (hinge about X, 0..2.6 rad) -> ankle\n");
  SkeletonDef def = testing::TwoBoneLegDef(/*hinge_knee=*/true);
  def.joints[1].min_angle_rad = 0.0;
  def.joints[1].max_angle_rad = 2.6;
  const Skeleton leg = MustCreate(def);
  const Pose rest = RestPose(leg);
  Goal goal;
  goal.chain = leg.FindChain("leg");
  goal.solver = SolverKind::kTwoBone;
  goal.target = Vector3d(0.25, 0.35, 0.2);
  goal.pole = Vector3d(0.1, 0.6, 1.0);
  const Pose solved = SolveAndReport(leg, {goal}, rest, "knee towards +Z pole");
  const int knee = leg.FindJoint("knee");
  std::printf("  %-28s knee at %s, knee angle %.3f rad\n", "",
              Fmt(testing::GlobalOf(leg, solved, knee).translation).c_str(),
              HingeAngle(leg.joint(knee), solved.local[knee].rotation));
  Goal far = goal;
  far.target = Vector3d(0.1, 1.0, 0) + Vector3d(1.2, -0.6, 0);
  SolveAndReport(leg, {far}, rest, "beyond reach: straightens");
  Goal near = goal;
  near.target =
      Vector3d(0.1, 1.0, 0) + 0.86 * Vector3d(1, -0.5, 0).normalized();
  SolveAndReport(leg, {near}, rest, "99% of reach");
  near.options.soft = 0.1;
  SolveAndReport(leg, {near}, rest, "99% of reach, soft 0.1");
  far.options.max_stretch = 1.6;
  SolveAndReport(leg, {far}, rest, "beyond reach, stretch 1.6");
  std::printf("\n");
}

void TentacleDemo() {
  std::printf("Tentacle: 10 ball joints, every iterative solver\n");
  testing::Rng rng(10);
  testing::RandomChainOptions options;
  options.joints = 10;
  options.with_base = false;
  const Skeleton tentacle = MustCreate(testing::RandomChainDef(rng, options));
  const Pose rest = RestPose(tentacle);
  const int tip = tentacle.chain(0).joints.back();
  const Vector3d reachable =
      testing::GlobalOf(tentacle, testing::RandomPose(tentacle, rng, 0.9), tip)
          .translation;
  for (SolverKind kind :
       {SolverKind::kFabrik, SolverKind::kCcd, SolverKind::kJacobianTranspose,
        SolverKind::kJacobianPinv, SolverKind::kJacobianDls,
        SolverKind::kGradientDescent}) {
    Goal goal;
    goal.chain = 0;
    goal.solver = kind;
    goal.target = reachable;
    goal.options.max_iterations = 1000;
    SolveAndReport(tentacle, {goal}, rest, "reachable");
    goal.target = Vector3d(20, 5, -3);
    SolveAndReport(tentacle, {goal}, rest, "unreachable");
  }
  std::printf("\n");
}

void PandaDemo() {
  std::printf("Franka Emika Panda: 7 limited hinges, 6-D pose target\n");
  const Skeleton panda = MustCreate(testing::PandaDef());
  const Pose seed = testing::PandaMidLimitPose(panda);
  const std::vector<int> joints = testing::PandaJointIndices(panda);
  testing::Rng rng(3);
  const int flange = panda.FindJoint("panda_flange");
  const Transform want =
      testing::GlobalOf(panda, testing::RandomPose(panda, rng, 1.0), flange);
  Goal goal;
  goal.chain = 0;
  goal.target = want.translation;
  goal.target_orientation = want.rotation;
  goal.options.tolerance = 1e-5;
  goal.options.orientation_tolerance_rad = 1e-5;
  const Pose solved = SolveAndReport(panda, {goal}, seed, "flange pose (AUTO)");
  std::printf("  %-28s joint angles:", "");
  for (int j : joints) {
    std::printf(" %.3f", HingeAngle(panda.joint(j), solved.local[j].rotation));
  }
  std::printf("\n\n");
}

void HumanoidDemo() {
  std::printf("Humanoid (31 joints): two feet and two hands in one solve\n");
  const Skeleton body = MustCreate(testing::HumanoidDef());
  // Targets where a crouching, reaching pose puts the ankles and wrists.
  testing::Rng rng(8);
  const Pose crouch = testing::RandomPose(body, rng, 1.2);
  std::vector<Goal> goals;
  for (int c = 0; c < body.num_chains(); ++c) {
    Goal g;
    g.chain = c;
    g.target = testing::GlobalOf(body, crouch, body.chain(c).joints.back())
                   .translation;
    g.pole = g.target + Vector3d(0, 0, 1);
    goals.push_back(g);
  }
  SolveAndReport(body, goals, RestPose(body), "feet and hands");
}

}  // namespace
}  // namespace reach

int main() {
  std::printf(
      "Reach solver demo: every error below is measured by forward "
      "kinematics of the returned pose.\n\n");
  reach::LegDemo();
  reach::TentacleDemo();
  reach::PandaDemo();
  reach::HumanoidDemo();
  return 0;
}
