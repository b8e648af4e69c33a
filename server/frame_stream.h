// A stream of frames (SolveStream, RetargetStream): one call. Frames are
// read ahead into a bounded window, answered one at a time in order on the
// solver pool (so a stream never uses more
// than one worker, and many streams run in parallel), and answered in order
// with one outstanding write. What a frame is and how it is answered is the
// stream's Kind (solve_stream.h's SolveFrames: a frame without a start pose
// starts from the previous solution; retarget_service.h's RetargetFrames:
// one retarget state per stream). latest_wins frames that have a newer
// frame queued behind them are answered as skipped.
//
// The stream is a raw method: frames arrive as bytes and are parsed here,
// so a frame that does not parse is answered in order with an in-band
// INVALID_ARGUMENT error (sequence 0, the message names the frame's
// position) and the stream goes on, instead of ending as if the client had
// half-closed.
//
// Back-pressure: when the window of unread-by-the-client responses or of
// unsolved frames is full (stream_window frames, or stream_window_bytes
// bytes), the stream stops reading, so a slow client slows its own sender
// through gRPC flow control instead of growing memory. Frames read ahead
// and answers unsent are charged on the service's memory budget; a frame
// that does not fit is answered with RESOURCE_EXHAUSTED in band.
//
// Lifetime: gRPC's OnDone and the pool task each hold a reference; the
// last to let go deletes the reactor, so a task never runs on a finished
// reactor.
#ifndef REACH_SERVER_FRAME_STREAM_H_
#define REACH_SERVER_FRAME_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "server/memory_budget.h"
#include "server/auth.h"
#include "server/metrics.h"
#include "server/stream_watch.h"

namespace reach {

class IkService;
struct SolveScratch;

// What the service keeps of an open stream of any kind.
class StreamReactor
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // Starts the first read.
  virtual void Start() = 0;
  // Shutdown: stop reading, answer the frames already read, then finish
  // with UNAVAILABLE. Frames the client sent that were not yet read are not
  // answered.
  virtual void Drain() = 0;
  // The caller's token was revoked: stop solving and reading, and finish
  // with UNAUTHENTICATED `why` (frames not yet answered are not).
  virtual void Revoke(const std::string& why) = 0;
  // The stream as the viewer lists and watches it (set before Start).
  std::shared_ptr<WatchedStream> watched;
  // Who opened it (set before Start): checked again when tokens change.
  Caller caller;
  // Its caller's share of the byte budget (set before Start; outlives the
  // derived stream's charge).
  std::shared_ptr<MemoryBudget> share;
};

// A Kind provides:
//   using Request, Response;             // The frame's messages.
//   static constexpr Rpc kRpc;           // For the metrics and logs.
//   static constexpr const char* kRequestType;  // "reach.v1.SolveRequest"
//   // Answers a frame into `out` (or says why not); the stream's state
//   // carries in the Kind.
//   absl::Status Answer(IkService&, const Deadline&, WatchedStream*,
//                       const Request&, SolveScratch&, Response* out);
//   // A latest_wins frame answered as skipped, in its turn.
//   void Skipped(const Request&);
// Request and Response have sequence(); Request has latest_wins();
// Response has set_sequence, mutable_error (v1::Error) and set_skipped.
template <typename Kind>
class FrameStream final : public StreamReactor {
 public:
  FrameStream(IkService* service, grpc::CallbackServerContext* context,
              Kind kind);
  void Start() override;
  void Drain() override;
  void Revoke(const std::string& why) override;

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  using Request = typename Kind::Request;
  using Response = typename Kind::Response;
  // A frame read and not yet answered: its request, or why it cannot be
  // answered (in its turn), and the bytes it holds.
  struct Frame {
    Request request;
    absl::Status error;
    int64_t bytes = 0;
  };
  // An answer not yet written, and its size.
  struct Answer {
    Response response;
    int64_t bytes = 0;
  };

  // The pool task: answers solving_, then any frames queued meanwhile (at
  // most kFramesPerTask), each in order.
  void SolveFrames(SolveScratch& scratch);
  // Queues a task that carries on with solving_ (already taken) behind the
  // work waiting for a thread; false when the pool takes no more (then the
  // caller carries on itself).
  bool Yield() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the next frame to answer into solving_ (answering error frames,
  // and latest_wins frames that have a newer frame behind them, in order);
  // false when there is none or the answers window is full.
  bool TakeNextFrame() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PopFrame() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues an answer, charging its bytes.
  Response& PushAnswer(Response&& response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Each advances the state machine as far as it can. mu_ held.
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeSolve() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeWrite() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeRead() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFinish() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerWithError(uint64_t sequence, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WindowFull() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops a reference (gRPC's in OnDone, or a pool task's); the last one
  // deletes the reactor. Call with mu_ not held.
  void Unref();

  static constexpr int kFramesPerTask = 16;

  IkService* const service_;
  grpc::CallbackServerContext* const context_;
  const absl::Time start_;
  // gRPC's reference, plus one while a pool task is queued or running.
  std::atomic<int> refs_{1};
  // Raised on cancellation; the running solve's Deadline watches it.
  std::atomic<bool> stop_solving_{false};

  absl::Mutex mu_;
  grpc::ByteBuffer read_buffer_;   // Target of the outstanding read.
  grpc::ByteBuffer write_buffer_;  // Source of the outstanding write.
  std::deque<Frame> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<Answer> outgoing_ ABSL_GUARDED_BY(mu_);
  int64_t pending_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outgoing_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // pending_bytes_ + outgoing_bytes_ on the service's budget.
  BudgetCharge charge_ ABSL_GUARDED_BY(mu_);
  int64_t frames_read_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool solve_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time task_queued_ ABSL_GUARDED_BY(mu_);
  bool yielded_ ABSL_GUARDED_BY(mu_) = false;  // The queued task yielded.
  std::string revoked_ ABSL_GUARDED_BY(mu_);   // Revoke's why.

  // Owned by the solve task while solve_in_flight_ (the Kind too: the
  // stream's state).
  Request solving_;
  Response solved_;
  absl::Status solve_status_;
  Kind kind_;
};

// A stream refused at the door (too many streams, shutting down): finishes
// at once with the given status.
class RejectedStream final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RejectedStream(Metrics& metrics, Rpc rpc, const grpc::Status& status) {
    metrics.RpcHandled(rpc, status.error_code(), absl::ZeroDuration());
    Finish(status);
  }
  void OnDone() override { delete this; }
};

}  // namespace reach

#endif  // REACH_SERVER_FRAME_STREAM_H_
