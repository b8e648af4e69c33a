#include "server/solve_call.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_wire.h"
#include "wire/convert.h"
#include "server/metrics.h"
#include "server/registry.h"

namespace reach {

absl::Status SolvePose(const LoadedSkeleton& registered,
                       const v1::SolveRequest& request, const Pose* warm_start,
                       const SolveLimits& limits, const Deadline& deadline,
                       SolveScratch& scratch) {
  const Skeleton& skeleton = registered.skeleton;
  if (request.goals_size() == 0) {
    return absl::InvalidArgumentError("goals: at least one goal is required");
  }
  if (request.goals_size() > limits.max_goals) {
    return absl::InvalidArgumentError(
        absl::StrCat("goals: has ", request.goals_size(),
                     " entries; the limit is ", limits.max_goals,
                     " (--max_goals)"));
  }
  absl::Status status = FromProto(skeleton, request.goals(), &scratch.goals);
  if (!status.ok()) return status;
  FullBodyOptions full_body;
  status = FromProto(skeleton, request.full_body(), &full_body);
  if (!status.ok()) return status;

  if (request.has_start_pose()) {
    status = FromProto(skeleton, request.start_pose(), &scratch.start);
    if (!status.ok()) return status;
  } else if (warm_start != nullptr &&
             static_cast<int>(warm_start->local.size()) ==
                 skeleton.num_joints()) {
    scratch.start.local.assign(warm_start->local.begin(),
                               warm_start->local.end());
  } else {
    // The rest pose as Solve normalises it: Solve recognises it and skips
    // validating and normalising it again, and joints no goal moves keep
    // their bits (so a response does not report them changed).
    scratch.start.local.assign(skeleton.rest_locals().begin(),
                               skeleton.rest_locals().end());
  }
  scratch.pose.local.assign(scratch.start.local.begin(),
                            scratch.start.local.end());
  scratch.results.resize(scratch.goals.size());

  const absl::Time begin = absl::Now();
  status = Solve(skeleton, scratch.goals, scratch.ws, &scratch.pose,
                 absl::MakeSpan(scratch.results), limits, deadline, full_body);
  const absl::Duration elapsed = absl::Now() - begin;
  if (!status.ok()) return status;

  int label = static_cast<int>(scratch.results[0].solver);
  for (const GoalResult& r : scratch.results) {
    scratch.tally.GoalDone(r.solver, r.reached, r.iterations,
                           r.position_error);
    if (static_cast<int>(r.solver) != label) label = kMixedSolverLabel;
  }
  scratch.tally.SolveDone(label, elapsed);
  return absl::OkStatus();
}

absl::Status SolveOne(const LoadedSkeleton& registered,
                      const v1::SolveRequest& request, const Pose* warm_start,
                      const SolveLimits& limits, const Deadline& deadline,
                      SolveScratch& scratch, v1::SolveResponse* response) {
  response->set_sequence(request.sequence());
  if (absl::Status status =
          SolvePose(registered, request, warm_start, limits, deadline, scratch);
      !status.ok()) {
    return status;
  }
  const Skeleton& skeleton = registered.skeleton;
  ToProto(skeleton, scratch.start, scratch.pose, scratch.results, response);
  if (request.return_globals()) {
    ComputeGlobals(skeleton, scratch.pose, absl::MakeSpan(scratch.ws.globals));
    ToProto(absl::MakeConstSpan(scratch.ws.globals)
                .subspan(0, skeleton.num_joints()),
            response);
  }
  return absl::OkStatus();
}

void SolveBatchItems(const BatchRequestView& batch, int begin, int end,
                     const Registry& registry, const SolveLimits& limits,
                     const Deadline& deadline, Metrics* metrics,
                     SolveScratch& scratch, std::string* out) {
  v1::SolveRequest& item = scratch.request;
  v1::SolveResponse& result = scratch.response;
  out->reserve(out->size() + static_cast<size_t>(end - begin) * 512);
  std::shared_ptr<const LoadedSkeleton> skeleton;
  for (int i = begin; i < end; ++i) {
    const absl::string_view bytes = batch.items[i];
    absl::Status status;
    if (!item.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
      item.Clear();
      status = absl::InvalidArgumentError(
          absl::StrCat("items[", i, "]: not a valid SolveRequest"));
    } else {
      const absl::string_view id = item.skeleton_id().empty()
                                       ? batch.skeleton_id
                                       : absl::string_view(item.skeleton_id());
      absl::Status unloaded;
      if (skeleton == nullptr || skeleton->id != id) {
        absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> got =
            registry.Get(id);
        skeleton = got.ok() ? *std::move(got) : nullptr;
        unloaded = got.status();
      }
      if (skeleton == nullptr) {
        status = unloaded.ok() ? UnknownSkeleton(id) : unloaded;
      } else if (!item.return_globals()) {
        // The common case: the response written straight from the solve.
        status = SolvePose(*skeleton, item, /*warm_start=*/nullptr, limits,
                           deadline, scratch);
        if (status.ok()) {
          AppendSolvedItem(skeleton->skeleton, item.sequence(), scratch.start,
                           scratch.pose, scratch.results,
                           &scratch.changed_joints, out);
          continue;
        }
      } else {
        result.Clear();
        status = SolveOne(*skeleton, item, /*warm_start=*/nullptr, limits,
                          deadline, scratch, &result);
      }
    }
    if (!status.ok()) {
      result.Clear();
      result.set_sequence(item.sequence());
      ToProto(status, result.mutable_error());
    }
    AppendBatchItem(result, out);
  }
  metrics->Record(scratch.tally);
}

}  // namespace reach
