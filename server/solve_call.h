// One solve request, from wire message to wire message: FromProto -> Solve
// -> ToProto, with the solve's metrics. Runs on a solver-pool worker with
// that worker's scratch; no math here (that is solvers/).
#ifndef REACH_SERVER_SOLVE_CALL_H_
#define REACH_SERVER_SOLVE_CALL_H_

#include <vector>

#include "absl/status/status.h"
#include "reach/v1/solve.pb.h"
#include "solvers/chain_solver.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/solve.h"

namespace reach {

class Metrics;
struct RegisteredSkeleton;

// A worker's reusable buffers: after the first solves on a skeleton, a
// solve allocates nothing here (the response message still does).
struct SolveScratch {
  Workspace ws;
  Pose start;
  Pose pose;  // The solution after a successful SolveOne.
  std::vector<Goal> goals;
  std::vector<GoalResult> results;
  // SolveBatch items, parsed and answered one after another.
  v1::SolveRequest request;
  v1::SolveResponse response;
};

// Solves `request` against `skeleton` into `response` (which gets the
// request's sequence). The start pose is request.start_pose when set, else
// `warm_start` when non-null and sized for the skeleton, else the rest pose.
// On error nothing but the sequence is written. `metrics` may be null.
absl::Status SolveOne(const RegisteredSkeleton& skeleton,
                      const v1::SolveRequest& request, const Pose* warm_start,
                      const SolveLimits& limits, Metrics* metrics,
                      SolveScratch& scratch, v1::SolveResponse* response);

}  // namespace reach

#endif  // REACH_SERVER_SOLVE_CALL_H_
