// solve: one goal on one chain.
#include <cmath>
#include <cstdio>
#include <string>

#include "client/cli/common.h"
#include "server/convert.h"

namespace reach::cli {
namespace {

struct SolveFlags {
  std::string skeleton;
  std::string chain;
  std::string target;
  std::string pole;
  std::string orientation;
  std::string solver = "auto";
  int max_iterations = 0;
  int max_restarts = 0;
  double time_budget_ms = 0;
  double tolerance = 0;
  bool angles = false;
  bool json = false;
};

// "limits [lo, hi]" (an unset side: inf) or "unlimited", for a hinge joint.
std::string Limits(const v1::Joint& joint) {
  if (!joint.has_min_angle_rad() && !joint.has_max_angle_rad()) {
    return "unlimited";
  }
  char text[64];
  std::snprintf(text, sizeof(text), "limits [%.6g, %.6g]",
                joint.has_min_angle_rad() ? joint.min_angle_rad() : -INFINITY,
                joint.has_max_angle_rad() ? joint.max_angle_rad() : INFINITY);
  return text;
}

int RunSolve(const Globals& globals, const SolveFlags& flags) {
  v1::SolveRequest request;
  request.set_skeleton_id(flags.skeleton);
  v1::Goal* goal = request.add_goals();
  goal->set_chain(flags.chain);
  absl::StatusOr<v1::Solver> solver = ParseSolver(flags.solver);
  if (!solver.ok()) return Fail(solver.status(), kExitUsage);
  goal->set_solver(*solver);
  absl::StatusOr<Eigen::Vector3d> target = ParseVec3(flags.target, "--target");
  if (!target.ok()) return Fail(target.status(), kExitUsage);
  ToProto(*target, goal->mutable_target());
  if (!flags.pole.empty()) {
    absl::StatusOr<Eigen::Vector3d> pole = ParseVec3(flags.pole, "--pole");
    if (!pole.ok()) return Fail(pole.status(), kExitUsage);
    ToProto(*pole, goal->mutable_pole());
  }
  if (!flags.orientation.empty()) {
    absl::StatusOr<Eigen::Quaterniond> q =
        ParseQuat(flags.orientation, "--orientation");
    if (!q.ok()) return Fail(q.status(), kExitUsage);
    ToProto(*q, goal->mutable_target_orientation());
  }
  goal->mutable_options()->set_max_iterations(flags.max_iterations);
  goal->mutable_options()->set_max_restarts(flags.max_restarts);
  goal->mutable_options()->set_time_budget_ms(flags.time_budget_ms);
  goal->mutable_options()->set_tolerance(flags.tolerance);
  request.set_return_globals(!flags.json);

  auto client = MakeClient(globals);
  absl::StatusOr<v1::SolveResponse> response = client->Solve(request);
  if (!response.ok()) return FailRpc(response.status());
  if (flags.json) {
    std::printf("%s\n", ToJson(*response).c_str());
    return kExitOk;
  }
  absl::StatusOr<v1::GetSkeletonResponse> skeleton =
      client->GetSkeleton(flags.skeleton);
  if (!skeleton.ok()) return FailRpc(skeleton.status());
  const auto name = [&](uint32_t joint) -> std::string {
    return joint < static_cast<uint32_t>(skeleton->skeleton().joints_size())
               ? skeleton->skeleton().joints(joint).name()
               : "?";
  };
  const v1::GoalResult& result = response->results(0);
  std::printf("chain %s: %s, position error %.3g, orientation error %.3g rad, "
              "%d iterations\n",
              flags.chain.c_str(), result.reached() ? "reached" : "NOT reached",
              result.position_error(), result.orientation_error_rad(),
              result.iterations());
  for (int i = 0; i < response->rotated_joints_size() &&
                  4 * i + 3 < response->rotations_size();
       ++i) {
    const uint32_t joint = response->rotated_joints(i);
    const double* q = response->rotations().data() + 4 * i;
    std::printf("  %-24s rotation (w,x,y,z) %.6f %.6f %.6f %.6f",
                name(joint).c_str(), q[0], q[1], q[2], q[3]);
    if (static_cast<int>(joint) < response->globals_size()) {
      const v1::Vec3& p = response->globals(joint).translation();
      std::printf("  at %.4f,%.4f,%.4f", p.x(), p.y(), p.z());
    }
    std::printf("\n");
  }
  if (flags.angles) {
    // The angles as the server reports them: inside the limits exactly;
    // printed to 1e-9 rad, which rounds a bound to the bound's own digits.
    if (response->hinge_joints_size() == 0) {
      std::printf("  (the solve moved no hinge joint)\n");
    }
    for (int i = 0; i < response->hinge_joints_size() &&
                    i < response->hinge_angles_rad_size();
         ++i) {
      const uint32_t joint = response->hinge_joints(i);
      const double angle = response->hinge_angles_rad(i);
      const std::string limits =
          joint < static_cast<uint32_t>(skeleton->skeleton().joints_size())
              ? Limits(skeleton->skeleton().joints(joint))
              : "";
      std::printf("  %-24s angle %+.9f rad (%+.4f deg)  %s\n",
                  name(joint).c_str(), angle, angle * 180.0 / M_PI,
                  limits.c_str());
    }
  }
  return kExitOk;
}

}  // namespace

void AddSolveCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<SolveFlags>();
  CLI::App* solve = app.add_subcommand(
      "solve", "Solve one goal: move a chain's tip to a target.");
  solve->add_option("--skeleton", flags->skeleton, "Skeleton id")->required();
  solve->add_option("--chain", flags->chain, "Chain name")->required();
  solve->add_option("--target", flags->target,
                    "Target position x,y,z (model space)")
      ->required();
  solve->add_option("--pole", flags->pole,
                    "Pole position x,y,z: where the middle joint should point");
  solve->add_option("--orientation", flags->orientation,
                    "Target orientation of the tip, quaternion w,x,y,z");
  solve->add_option("--solver", flags->solver, "One of: " + SolverNames())
      ->capture_default_str();
  solve->add_option("--max-iterations", flags->max_iterations,
                    "Iteration cap (0: the solver's default)")
      ->check(CLI::NonNegativeNumber);
  solve->add_option("--max-restarts", flags->max_restarts,
                    "Iterative solvers: attempts from random configurations "
                    "within the limits when the first one stalls (e.g. a "
                    "straight arm at a singularity)")
      ->check(CLI::Range(0, 1000));
  solve
      ->add_option("--time-budget-ms", flags->time_budget_ms,
                   "Wall-clock budget of the solve, ms (0: none; at most "
                   "60000): iterative solvers stop when it runs out, and the "
                   "Jacobian family and gradient descent restart until "
                   "reached or out of time (--max-restarts is then ignored)")
      ->check(CLI::Range(0.0, 60000.0));
  solve->add_option("--tolerance", flags->tolerance,
                    "Position tolerance, model units (0: the default)")
      ->check(CLI::NonNegativeNumber);
  solve->add_flag("--angles", flags->angles,
                  "Print the angle (radians from rest about the axis, inside "
                  "the limits) of every hinge joint the solve moved; --json "
                  "always carries them as hingeJoints and hingeAnglesRad");
  solve->add_flag("--json", flags->json, "Print the response as JSON");
  solve->callback([=, &globals] {
    *run = [=, &globals] { return RunSolve(globals, *flags); };
  });
}

}  // namespace reach::cli
