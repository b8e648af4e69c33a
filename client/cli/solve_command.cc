// solve: one goal on one chain from flags, or a whole SolveRequest (many
// goals, e.g. a full-body problem) from a protobuf JSON file.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "client/cli/common.h"
#include "importers/import_error.h"
#include "wire/convert.h"
#include "wire/json.h"

namespace reach::cli {
namespace {

struct SolveFlags {
  std::string request;  // A SolveRequest JSON file; "-": stdin.
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

// SOLVER_FULL_BODY -> "full_body": the name --solver takes.
std::string SolverLabel(v1::Solver solver) {
  const std::string name = v1::Solver_Name(solver);
  if (name.empty()) return absl::StrCat("solver ", static_cast<int>(solver));
  return absl::AsciiStrToLower(name.substr(7));  // After "SOLVER_".
}

// How a goal of a request file is named in the output: its index and what
// it moves ("goal 4 (joint head, look-at)").
std::string GoalLabel(const v1::Goal& goal, int i) {
  std::string what =
      goal.chain().empty()
          ? absl::StrCat("joint ",
                         goal.root_joint().empty()
                             ? ""
                             : absl::StrCat(goal.root_joint(), ".."),
                         goal.tip_joint())
          : absl::StrCat("chain ", goal.chain());
  if (goal.has_aim_axis()) absl::StrAppend(&what, ", look-at");
  if (goal.priority() != 0) {
    absl::StrAppend(&what, ", priority ", goal.priority());
  }
  return absl::StrCat("goal ", i, " (", what, ")");
}

// One result per line: "LABEL: reached, position error ..., orientation
// error ... rad, N iterations, SOLVER".
void PrintResult(const std::string& label, const v1::GoalResult& result) {
  std::printf(
      "%s: %s, position error %.3g, orientation error %.3g rad, "
      "%d iterations, %s\n",
      label.c_str(), result.reached() ? "reached" : "NOT reached",
      result.position_error(), result.orientation_error_rad(),
      result.iterations(), SolverLabel(result.solver()).c_str());
}

// The single goal the flags describe.
int RequestFromFlags(const SolveFlags& flags, v1::SolveRequest* request) {
  if (flags.skeleton.empty() || flags.chain.empty() || flags.target.empty()) {
    return Fail(absl::InvalidArgumentError(
                    "--skeleton, --chain and --target are required (or "
                    "--request FILE)"),
                kExitUsage);
  }
  request->set_skeleton_id(flags.skeleton);
  v1::Goal* goal = request->add_goals();
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
  request->set_return_globals(!flags.json);
  return kExitOk;
}

// The request in --request: protobuf JSON of reach.v1.SolveRequest, its
// skeleton_id taken from --skeleton when it names none.
int RequestFromFile(const SolveFlags& flags, v1::SolveRequest* request) {
  std::string text;
  if (flags.request == "-") {
    std::ostringstream in;
    in << std::cin.rdbuf();
    text = std::move(in).str();
  } else if (absl::Status s = import::ReadFile(flags.request, &text); !s.ok()) {
    return Fail(s, kExitFileError);
  }
  // Bare NaN / Infinity (as Python's json writes them) read as protobuf
  // JSON's quoted ones: the server's validation then names the field.
  const absl::Status parsed = JsonToMessage(text, request);
  if (!parsed.ok()) {
    return Fail(absl::InvalidArgumentError(
                    absl::StrCat(flags.request == "-" ? "stdin" : flags.request,
                                 ": not a reach.v1.SolveRequest in JSON: ",
                                 std::string(parsed.message()))),
                kExitFileError);
  }
  if (request->skeleton_id().empty()) {
    if (flags.skeleton.empty()) {
      return Fail(absl::InvalidArgumentError(
                      "--skeleton: required (the request names no "
                      "skeletonId)"),
                  kExitUsage);
    }
    request->set_skeleton_id(flags.skeleton);
  }
  // The joints' positions for the listing (the JSON output is the
  // response as the request asked for it).
  if (!flags.json) request->set_return_globals(true);
  return kExitOk;
}

int RunSolve(const Globals& globals, const SolveFlags& flags) {
  v1::SolveRequest request;
  const int built = flags.request.empty() ? RequestFromFlags(flags, &request)
                                          : RequestFromFile(flags, &request);
  if (built != kExitOk) return built;

  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);
  absl::StatusOr<v1::SolveResponse> response = client->Solve(request);
  if (!response.ok()) return FailRpc(response.status());
  // Exit 6 when the server answered but a goal was left unreached (after
  // printing the answer, which says which and how far).
  bool all_reached = response->results_size() > 0;
  for (const v1::GoalResult& result : response->results()) {
    all_reached = all_reached && result.reached();
  }
  const int done = all_reached ? kExitOk : kExitNotReached;
  if (flags.json) {
    std::printf("%s\n", ToJson(*response).c_str());
    return done;
  }
  absl::StatusOr<v1::GetSkeletonResponse> skeleton =
      client->GetSkeleton(request.skeleton_id());
  if (!skeleton.ok()) return FailRpc(skeleton.status());
  const auto name = [&](uint32_t joint) -> std::string {
    return joint < static_cast<uint32_t>(skeleton->skeleton().joints_size())
               ? skeleton->skeleton().joints(joint).name()
               : "?";
  };
  if (flags.request.empty()) {
    PrintResult(absl::StrCat("chain ", flags.chain), response->results(0));
  } else {
    int reached = 0;
    for (int i = 0; i < response->results_size(); ++i) {
      const v1::GoalResult& result = response->results(i);
      reached += result.reached();
      PrintResult(i < request.goals_size() ? GoalLabel(request.goals(i), i)
                                           : absl::StrCat("goal ", i),
                  result);
    }
    std::printf("%d of %d goals reached\n", reached, response->results_size());
  }
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
  for (int i = 0; i < response->translated_joints_size() &&
                  3 * i + 2 < response->translations_size();
       ++i) {
    const uint32_t joint = response->translated_joints(i);
    const double* t = response->translations().data() + 3 * i;
    std::printf("  %-24s translation (local) %.6f %.6f %.6f\n",
                name(joint).c_str(), t[0], t[1], t[2]);
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
  return done;
}

}  // namespace

void AddSolveCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<SolveFlags>();
  CLI::App* solve = app.add_subcommand(
      "solve",
      "Solve one goal (move a chain's tip to a target: --skeleton, --chain, "
      "--target), or every goal of a request file (--request: a "
      "reach.v1.SolveRequest in protobuf JSON, e.g. a full-body problem), "
      "and print each goal's result. Exits 6 when the server answered but a "
      "goal was not reached.");
  auto* request =
      solve->add_option("--request", flags->request,
                        "A SolveRequest in protobuf JSON (\"-\": stdin): "
                        "several goals, full-body options, a start pose. Its "
                        "skeletonId may be left out for --skeleton. Prints "
                        "one line per goal: reached, position and "
                        "orientation errors, iterations, solver");
  solve->add_option("--skeleton", flags->skeleton, "Skeleton id");
  auto* chain = solve->add_option("--chain", flags->chain, "Chain name");
  auto* target = solve->add_option("--target", flags->target,
                                   "Target position x,y,z (model space)");
  auto* pole = solve->add_option(
      "--pole", flags->pole,
      "Pole position x,y,z: where the middle joint should point");
  auto* orientation =
      solve->add_option("--orientation", flags->orientation,
                        "Target orientation of the tip, quaternion w,x,y,z");
  auto* solver =
      solve->add_option("--solver", flags->solver, "One of: " + SolverNames())
          ->capture_default_str();
  auto* iterations = solve
                         ->add_option("--max-iterations", flags->max_iterations,
                                      "Iteration cap (0: the solver's default)")
                         ->check(NonNegative());
  auto* restarts =
      solve
          ->add_option("--max-restarts", flags->max_restarts,
                       "Iterative solvers: attempts from random configurations "
                       "within the limits when the first one stalls (e.g. a "
                       "straight arm at a singularity)")
          ->check(CLI::Range(0, 1000));
  auto* budget =
      solve
          ->add_option(
              "--time-budget-ms", flags->time_budget_ms,
              "Wall-clock budget of the solve, ms (0: none; at most "
              "60000): iterative solvers stop when it runs out, and the "
              "Jacobian family and gradient descent restart until "
              "reached or out of time (--max-restarts is then ignored)")
          ->check(CLI::Range(0.0, 60000.0));
  auto* tolerance =
      solve
          ->add_option("--tolerance", flags->tolerance,
                       "Position tolerance, model units (0: the default)")
          ->check(NonNegative());
  // The single goal's flags describe what a request file holds itself.
  for (CLI::Option* single : {chain, target, pole, orientation, solver,
                              iterations, restarts, budget, tolerance}) {
    request->excludes(single);
  }
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
