// FrameStream's definitions (frame_stream.h), included only by the files
// that instantiate it for a Kind (solve_stream.cc, retarget_service.cc).
#ifndef REACH_SERVER_FRAME_STREAM_IMPL_H_
#define REACH_SERVER_FRAME_STREAM_IMPL_H_

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/call_status.h"
#include "server/frame_stream.h"
#include "server/ik_service.h"
#include "server/solve_call.h"
#include "wire/convert.h"

namespace reach {

inline absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

template <typename Kind>
FrameStream<Kind>::FrameStream(IkService* service,
                               grpc::CallbackServerContext* context, Kind kind)
    : service_(service),
      context_(context),
      start_(absl::Now()),
      kind_(std::move(kind)) {}

template <typename Kind>
void FrameStream<Kind>::Start() {
  absl::MutexLock lock(&mu_);
  MaybeRead();
}

template <typename Kind>
void FrameStream<Kind>::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  Pump();
}

template <typename Kind>
void FrameStream<Kind>::Revoke(const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (finished_ || !revoked_.empty()) return;
  revoked_ = why;
  stop_solving_.store(true, std::memory_order_relaxed);
  Pump();
}

template <typename Kind>
void FrameStream<Kind>::OnReadDone(bool ok) {
  // The read's buffer is this callback's until the next StartRead, which
  // only Pump issues (with mu_ held, after read_in_flight_ is cleared).
  Frame frame;
  if (ok) {
    frame.bytes = static_cast<int64_t>(read_buffer_.Length());
    const grpc::Status parsed =
        grpc::SerializationTraits<Request>::Deserialize(
            &read_buffer_, &frame.request);
    if (!parsed.ok()) {
      frame.request.Clear();
      frame.bytes = 0;
    }
    frame.error = parsed.ok() ? absl::OkStatus()
                              : absl::InvalidArgumentError("");
  }
  absl::MutexLock lock(&mu_);
  read_in_flight_ = false;
  if (!ok) {
    reads_done_ = true;  // The client half-closed, or the call is over.
  } else if (!finished_) {
    service_->metrics().MessageReceived(Kind::kRpc);
    ++frames_read_;
    if (!frame.error.ok()) {
      frame.error = absl::InvalidArgumentError(absl::StrCat(
          "frame ", frames_read_,
          " of this stream (counting from 1) is not a valid ",
          Kind::kRequestType,
          "; it is answered in its turn with sequence 0 and the stream goes "
          "on"));
    } else if (!charge_.TryAdd(share.get(), frame.bytes)) {
      frame.error = absl::ResourceExhaustedError(
          absl::StrCat(OverBudget(*share, frame.bytes).error_message(),
                       " (frame not solved)"));
      const uint64_t sequence = frame.request.sequence();
      frame.request.Clear();
      frame.request.set_sequence(sequence);
      frame.bytes = 0;
    }
    pending_bytes_ += frame.bytes;
    pending_.push_back(std::move(frame));
  }
  // (A frame read after the stream finished, while draining, is dropped:
  // the client was told only frames read before were answered.)
  Pump();
}

template <typename Kind>
void FrameStream<Kind>::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (ok) {
    service_->metrics().MessageSent(Kind::kRpc);
    outgoing_bytes_ -= outgoing_.front().bytes;
    charge_.Shrink(outgoing_.front().bytes);
    outgoing_.pop_front();
  } else {
    cancelled_ = true;  // The client is gone; nothing more can be sent.
    stop_solving_.store(true, std::memory_order_relaxed);
  }
  Pump();
}

template <typename Kind>
void FrameStream<Kind>::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  stop_solving_.store(true, std::memory_order_relaxed);
  Pump();
}

template <typename Kind>
void FrameStream<Kind>::OnDone() {
  service_->StreamDone(this);
  Unref();
}

template <typename Kind>
void FrameStream<Kind>::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

template <typename Kind>
void FrameStream<Kind>::Pump() {
  MaybeSolve();
  MaybeWrite();
  MaybeRead();
  MaybeFinish();
}

template <typename Kind>
typename Kind::Response& FrameStream<Kind>::PushAnswer(Response&& response) {
  Answer& answer = outgoing_.emplace_back();
  answer.response.Swap(&response);
  answer.bytes = static_cast<int64_t>(answer.response.ByteSizeLong());
  outgoing_bytes_ += answer.bytes;
  // Answers are charged whether or not they fit: they are owed, and the
  // window bounds them (a full budget refuses the frames that follow).
  charge_.Add(share.get(), answer.bytes);
  return answer.response;
}

template <typename Kind>
void FrameStream<Kind>::AnswerWithError(uint64_t sequence,
                                         const absl::Status& status) {
  Response response;
  response.set_sequence(sequence);
  ToProto(status, response.mutable_error());
  PushAnswer(std::move(response));
}

template <typename Kind>
void FrameStream<Kind>::PopFrame() {
  pending_bytes_ -= pending_.front().bytes;
  charge_.Shrink(pending_.front().bytes);
  pending_.pop_front();
}

template <typename Kind>
bool FrameStream<Kind>::TakeNextFrame() {
  const ServiceOptions& options = service_->options();
  int skipped = 0;
  bool taken = false;
  while (!cancelled_ && revoked_.empty() && !pending_.empty() &&
         static_cast<int>(outgoing_.size()) < options.stream_window &&
         outgoing_bytes_ < options.stream_window_bytes) {
    Frame& frame = pending_.front();
    if (!frame.error.ok()) {
      AnswerWithError(frame.request.sequence(), frame.error);
      PopFrame();
      continue;
    }
    // Latest wins: a droppable frame with a newer frame behind it is
    // answered as skipped, in order, without solving.
    if (pending_.size() > 1 && frame.request.latest_wins()) {
      Response response;
      response.set_sequence(frame.request.sequence());
      response.set_skipped(true);
      kind_.Skipped(frame.request);
      PushAnswer(std::move(response));
      PopFrame();
      ++skipped;
      continue;
    }
    solving_.Swap(&frame.request);
    PopFrame();
    taken = true;
    break;
  }
  if (skipped > 0) service_->metrics().FramesSkipped(skipped);
  return taken;
}

template <typename Kind>
void FrameStream<Kind>::MaybeSolve() {
  while (!solve_in_flight_ && TakeNextFrame()) {
    solve_in_flight_ = true;
    task_queued_ = absl::Now();
    refs_.fetch_add(1, std::memory_order_relaxed);  // The task's.
    SolverPool::Task task = [this](SolveScratch& scratch) {
      SolveFrames(scratch);
    };
    const grpc::Status queued = service_->Submit(
        context_, absl::MakeSpan(&task, 1), SolverPool::Lane::kStream);
    if (!queued.ok()) {
      // Not the last reference: gRPC's is held while Pump runs.
      refs_.fetch_sub(1, std::memory_order_relaxed);
      solve_in_flight_ = false;
      AnswerWithError(solving_.sequence(), FromGrpc(queued));
    }
  }
}

template <typename Kind>
void FrameStream<Kind>::SolveFrames(SolveScratch& scratch) {
  absl::Duration waited;
  bool yielded;
  {
    absl::MutexLock lock(&mu_);
    waited = absl::Now() - task_queued_;
    yielded = yielded_;
    yielded_ = false;
  }
  // Frames already queued when one finishes are solved in the same task
  // while no other work waits for a thread (up to a bound): no hand-off and
  // no wake-up per frame. When other work waits, the stream yields: its
  // next frame queues behind it (a stream once held a thread for 16 heavy
  // frames, 8 s, while every other call waited).
  for (int solved = 1;; ++solved) {
    // A frame that waited because its stream yielded was admitted already.
    const grpc::Status wait =
        yielded ? grpc::Status::OK : service_->CheckQueueWait(waited);
    if (solved == 1 && !wait.ok()) {
      solve_status_ = FromGrpc(wait);
    } else {
      solve_status_ = kind_.Answer(
          *service_, service_->SolveDeadline(context_, &stop_solving_),
          watched.get(), solving_, scratch, &solved_);
    }
    bool more;
    {
      absl::MutexLock lock(&mu_);
      if (solve_status_.ok()) {
        PushAnswer(std::move(solved_));
      } else {
        if (solve_status_.code() == absl::StatusCode::kInternal ||
            solve_status_.code() == absl::StatusCode::kUnknown) {
          service_->error_log().Error(
              absl::StrCat(RpcMethodName(Kind::kRpc), " frame: ",
                           solve_status_.ToString()));
        }
        AnswerWithError(solving_.sequence(), solve_status_);
      }
      more = solved < kFramesPerTask && TakeNextFrame();
      if (more && service_->pool().queue_depth() > 0 && Yield()) {
        // The task's reference passes to the queued one.
        Pump();
        return;
      }
      if (!more) solve_in_flight_ = false;
      Pump();
    }
    if (!more) break;
  }
  Unref();  // With mu_ released: this may delete the reactor.
}

template <typename Kind>
bool FrameStream<Kind>::Yield() {
  task_queued_ = absl::Now();
  yielded_ = true;
  SolverPool::Task task = [this](SolveScratch& scratch) {
    SolveFrames(scratch);
  };
  // No wait bound: the stream was admitted; yielding must not refuse it.
  if (service_->pool().Submit(absl::MakeSpan(&task, 1),
                              absl::InfiniteDuration(),
                              SolverPool::Lane::kStream) ==
      SolverPool::Admission::kQueued) {
    return true;
  }
  yielded_ = false;  // Full or stopping: carry on in this task.
  return false;
}

template <typename Kind>
void FrameStream<Kind>::MaybeWrite() {
  if (write_in_flight_ || cancelled_ || outgoing_.empty()) return;
  write_in_flight_ = true;
  bool own_buffer = false;
  write_buffer_.Clear();  // The previous write is done with it.
  grpc::SerializationTraits<Response>::Serialize(
      outgoing_.front().response, &write_buffer_, &own_buffer);
  StartWrite(&write_buffer_);
}

template <typename Kind>
bool FrameStream<Kind>::WindowFull() const {
  const ServiceOptions& options = service_->options();
  return static_cast<int>(pending_.size()) >= options.stream_window ||
         static_cast<int>(outgoing_.size()) >= options.stream_window ||
         pending_bytes_ + outgoing_bytes_ >= options.stream_window_bytes;
}

template <typename Kind>
void FrameStream<Kind>::MaybeRead() {
  if (read_in_flight_ || reads_done_ || cancelled_ || draining_ || finished_ ||
      !revoked_.empty() || WindowFull()) {
    return;
  }
  read_in_flight_ = true;
  StartRead(&read_buffer_);
}

template <typename Kind>
void FrameStream<Kind>::MaybeFinish() {
  if (finished_ || solve_in_flight_ || write_in_flight_) return;
  grpc::Status status;
  if (cancelled_) {
    status = grpc::Status::CANCELLED;
  } else if (!revoked_.empty()) {
    status = grpc::Status(grpc::StatusCode::UNAUTHENTICATED, revoked_);
  } else if (!pending_.empty() || !outgoing_.empty()) {
    return;  // Still answering.
  } else if (reads_done_) {
    status = grpc::Status::OK;
  } else if (draining_) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          absl::StrCat("the server is shutting down; all ",
                                       frames_read_,
                                       " frames it read were answered"));
  } else {
    return;
  }
  finished_ = true;
  service_->metrics().RpcHandled(Kind::kRpc, status.error_code(),
                                 absl::Now() - start_);
  Finish(status);
}

}  // namespace reach

#endif  // REACH_SERVER_FRAME_STREAM_IMPL_H_
