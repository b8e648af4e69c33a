// One solve request, from wire message to wire message: FromProto -> Solve
// -> ToProto, with the solve's metrics. Runs on a solver-pool worker with
// that worker's scratch; no math here (that is solvers/).
#ifndef REACH_SERVER_SOLVE_CALL_H_
#define REACH_SERVER_SOLVE_CALL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "reach/v1/solve.pb.h"
#include "server/batch_wire.h"
#include "server/retarget_call.h"
#include "server/solve_tally.h"
#include "solvers/chain_solver.h"
#include "solvers/deadline.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/solve.h"

namespace reach {

class Metrics;
class Registry;
struct LoadedSkeleton;

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
  std::vector<uint32_t> changed_joints;  // AppendSolvedItem's scratch.
  // Retarget frames (RetargetService).
  RetargetFrameScratch retarget;
  // Solve metrics not yet recorded; the caller records them with
  // Metrics::Record when it sees fit (after each solve, or each batch chunk).
  SolveTally tally;
};

// SolveOne's solve without its response (goals, request.full_body and the
// start pose converted, then reach::Solve): on success the start pose,
// solution and results are in scratch.start, scratch.pose and
// scratch.results, and the solve's metrics are added to scratch.tally.
// `deadline` (the call's, FromGrpcDeadline) bounds the solve: every goal
// stops when it passes, keeping its best pose (reach::Solve).
absl::Status SolvePose(const LoadedSkeleton& skeleton,
                       const v1::SolveRequest& request, const Pose* warm_start,
                       const SolveLimits& limits, const Deadline& deadline,
                       SolveScratch& scratch);

// Solves `request` against `skeleton` into `response` (which gets the
// request's sequence). The start pose is request.start_pose when set, else
// `warm_start` when non-null and sized for the skeleton, else the rest pose.
// On error nothing but the sequence is written. The solve's metrics are
// added to scratch.tally.
absl::Status SolveOne(const LoadedSkeleton& skeleton,
                      const v1::SolveRequest& request, const Pose* warm_start,
                      const SolveLimits& limits, const Deadline& deadline,
                      SolveScratch& scratch, v1::SolveResponse* response);

// SolveBatch's work on one worker: parses items [begin, end) of a split
// SolveBatchRequest, solves each against its skeleton in `registry` (the
// batch's skeleton_id when the item names none), and appends each
// SolveResponse, framed as a SolveBatchResponse item, to `out`. A bad item
// (unparseable, unknown skeleton, invalid goal) gets its own error. The
// scratch's request and response messages are reused item after item. The
// chunk's solve metrics are recorded into `metrics` once, at the end.
// `deadline` (the call's) bounds every item's solve.
void SolveBatchItems(const BatchRequestView& batch, int begin, int end,
                     const Registry& registry, const SolveLimits& limits,
                     const Deadline& deadline, Metrics* metrics,
                     SolveScratch& scratch, std::string* out);

}  // namespace reach

#endif  // REACH_SERVER_SOLVE_CALL_H_
