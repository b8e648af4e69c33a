#include "server/solve_stream.h"

#include <memory>

#include "server/frame_stream_impl.h"
#include "server/registry.h"
#include "server/solve_call.h"
#include "server/stream_watch.h"

namespace reach {

absl::Status SolveFrames::Answer(IkService& service, const Deadline& deadline,
                                 WatchedStream* watched,
                                 const Request& request, SolveScratch& scratch,
                                 Response* out) {
  out->Clear();
  absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> got =
      service.registry().Get(request.skeleton_id());
  if (!got.ok()) return got.status();
  std::shared_ptr<const LoadedSkeleton> skeleton = *std::move(got);
  if (skeleton->id != warm_skeleton_id) {
    warm.local.clear();  // A new skeleton starts from its rest pose.
    warm_skeleton_id = skeleton->id;
    if (watched != nullptr) watched->SetSkeleton(skeleton->id);
  }
  const absl::Status status =
      SolveOne(*skeleton, request, &warm, service.options().solve_limits,
               deadline, scratch, out);
  service.metrics().Record(scratch.tally);
  // The solution is the next frame's warm start; the scratch pose is
  // rewritten by the next solve, so a swap saves the copy.
  if (status.ok()) {
    warm.local.swap(scratch.pose.local);
    if (watched != nullptr) {
      watched->Published(skeleton->skeleton, skeleton->id, request, warm,
                         *out);
    }
  }
  return status;
}

template class FrameStream<SolveFrames>;

}  // namespace reach
