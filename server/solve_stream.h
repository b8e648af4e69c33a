// SolveStream's frames (see frame_stream.h): each a SolveRequest, answered
// by SolveOne; a frame without a start pose starts from the stream's
// previous solution (the rest pose on its first frame, or after its
// skeleton changes).
#ifndef REACH_SERVER_SOLVE_STREAM_H_
#define REACH_SERVER_SOLVE_STREAM_H_

#include <string>

#include "absl/status/status.h"
#include "reach/v1/solve.pb.h"
#include "server/frame_stream.h"
#include "server/metrics.h"
#include "solvers/deadline.h"
#include "solvers/pose.h"

namespace reach {

class WatchedStream;

struct SolveFrames {
  using Request = v1::SolveRequest;
  using Response = v1::SolveResponse;
  static constexpr Rpc kRpc = Rpc::kSolveStream;
  static constexpr const char* kRequestType = "reach.v1.SolveRequest";

  absl::Status Answer(IkService& service, const Deadline& deadline,
                      WatchedStream* watched, const Request& request,
                      SolveScratch& scratch, Response* out);
  void Skipped(const Request&) {}

  Pose warm;  // The previous solution.
  std::string warm_skeleton_id;
};

extern template class FrameStream<SolveFrames>;

}  // namespace reach

#endif  // REACH_SERVER_SOLVE_STREAM_H_
