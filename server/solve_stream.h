// One SolveStream call. Frames are read ahead into a bounded window, solved
// one at a time in order on the solver pool (so a stream never uses more
// than one worker, and many streams run in parallel), and answered in order
// with one outstanding write. A frame without a start pose starts from the
// stream's previous solution. latest_wins frames that have a newer frame
// queued behind them are answered as skipped.
//
// Back-pressure: when the window of unread-by-the-client responses or of
// unsolved frames is full, the stream stops reading, so a slow client
// slows its own sender through gRPC flow control instead of growing memory.
#ifndef REACH_SERVER_SOLVE_STREAM_H_
#define REACH_SERVER_SOLVE_STREAM_H_

#include <deque>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "reach/v1/solve.pb.h"
#include "solvers/pose.h"

namespace reach {

class IkService;
struct RegisteredSkeleton;
struct SolveScratch;

class SolveStreamReactor final
    : public grpc::ServerBidiReactor<v1::SolveRequest, v1::SolveResponse> {
 public:
  SolveStreamReactor(IkService* service, grpc::CallbackServerContext* context);
  // Starts the first read.
  void Start();
  // Shutdown: answer the frames already read, then finish with UNAVAILABLE.
  void Drain();

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  // The pool task: solves solving_, then any frames queued meanwhile (at
  // most kFramesPerTask), answering each in order.
  void SolveFrames(SolveScratch& scratch);
  // Solves solving_ into solved_ / solve_status_ with no lock held: only
  // the pool task touches them, and the warm pose, while solve_in_flight_.
  void SolveFrame(SolveScratch& scratch);
  // Moves the next frame to solve into solving_ (answering latest_wins
  // frames that have a newer frame behind them as skipped); false when
  // there is none or the answers window is full.
  bool TakeNextFrame() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each advances the state machine as far as it can. mu_ held.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeSolve() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeRead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerWithError(uint64_t sequence, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static constexpr int kFramesPerTask = 16;

  IkService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::Time start_;

  absl::Mutex mu_;
  v1::SolveRequest read_buffer_;  // Target of the outstanding read.
  std::deque<v1::SolveRequest> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::SolveResponse> outgoing_ ABSL_GUARDED_BY(mu_);
  bool read_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool solve_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;

  // Owned by the solve task while solve_in_flight_.
  v1::SolveRequest solving_;
  v1::SolveResponse solved_;
  absl::Status solve_status_;
  Pose warm_;
  std::string warm_skeleton_id_;
};

// A stream refused at the door (too many streams, shutting down): finishes
// at once with the given status.
class RejectedStream final
    : public grpc::ServerBidiReactor<v1::SolveRequest, v1::SolveResponse> {
 public:
  RejectedStream(IkService* service, const grpc::Status& status);
  void OnDone() override { delete this; }
};

}  // namespace reach

#endif  // REACH_SERVER_SOLVE_STREAM_H_
