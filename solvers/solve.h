// The solver library's entry point: validate, choose solvers, solve goals in
// order, measure the outcome.
#ifndef REACH_SOLVERS_SOLVE_H_
#define REACH_SOLVERS_SOLVE_H_

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "solvers/chain_solver.h"
#include "solvers/deadline.h"
#include "solvers/full_body.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// Request size limits enforced by Solve (the server exposes them as flags).
struct SolveLimits {
  int max_goals = 64;
  int max_iterations = 100000;  // Cap on SolveOptions::max_iterations.
};

// Number of joints on the path root..tip (both included), or -1 when root is
// not a proper ancestor of tip. Does not allocate.
int PathLength(const Skeleton& skeleton, int root, int tip);

// Checks goals against the skeleton, one field at a time; errors name it as
// "goals[i].field". Unknown chains and joints are NotFound, everything else
// InvalidArgument.
// Full-body goals and `full_body` are checked by ValidateFullBody.
absl::Status ValidateGoals(const Skeleton& skeleton,
                           absl::Span<const Goal> goals,
                           const SolveLimits& limits = {},
                           const FullBodyOptions& full_body = {});

// The solver AUTO picks for a goal on `chain` (root..tip):
// - a target orientation -> JACOBIAN_DLS;
// - three joints whose root is an unconstrained ball and whose mid joint is
//   an unconstrained ball or a hinge -> TWO_BONE;
// - every joint but the tip an unconstrained ball -> FABRIK;
// - otherwise (limits, hinges, fixed joints) -> JACOBIAN_DLS.
// A concrete solver in the goal is returned unchanged.
SolverKind ResolveSolver(const Skeleton& skeleton, absl::Span<const int> chain,
                         const Goal& goal);

// Solves `goals` in order on `pose`: in, the start pose (validated here);
// out, the solution. Goals on disjoint chains are independent; a goal whose
// chain shares joints with an earlier one starts from that goal's result.
// The goals whose solver is SOLVER_FULL_BODY are one problem (full_body.h,
// with `full_body`'s options), solved where the first of them stands.
// `results` must hold goals.size() entries. `ws` is the caller's scratch
// (one per thread); once warmed up on a skeleton, Solve allocates nothing.
// Its contents afterwards are scratch: ws.globals is not the returned pose's
// forward kinematics (Solve computes only what it measures; call
// ComputeGlobals for the rest). Nothing is written to `pose` when
// validation fails.
// `deadline` bounds the whole call (e.g. an RPC's deadline, and a flag
// raised when the RPC is cancelled): every goal's solve stops when it
// expires, keeping its best pose so far (each goal is still measured, and
// the call returns OK; `reached` tells). A goal's own time_budget_ms ends
// its solve earlier when it comes first.
absl::Status Solve(const Skeleton& skeleton, absl::Span<const Goal> goals,
                   Workspace& ws, Pose* pose, absl::Span<GoalResult> results,
                   const SolveLimits& limits = {},
                   const Deadline& deadline = {},
                   const FullBodyOptions& full_body = {});

}  // namespace reach

#endif  // REACH_SOLVERS_SOLVE_H_
