#include "server/solve_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "wire/convert.h"
#include "server/ik_service.h"
#include "server/solve_call.h"

namespace reach {
namespace {

absl::Status FromGrpc(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

}  // namespace

RejectedStream::RejectedStream(IkService* service, const grpc::Status& status) {
  service->metrics().RpcHandled(Rpc::kSolveStream, status.error_code(),
                                absl::ZeroDuration());
  Finish(status);
}

SolveStreamReactor::SolveStreamReactor(IkService* service,
                                       grpc::CallbackServerContext* context)
    : service_(service), context_(context), start_(absl::Now()) {}

void SolveStreamReactor::Start() {
  absl::MutexLock lock(&mu_);
  MaybeRead();
}

void SolveStreamReactor::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  Pump();
}

void SolveStreamReactor::OnReadDone(bool ok) {
  // The read's buffer is this callback's until the next StartRead, which
  // only Pump issues (with mu_ held, after read_in_flight_ is cleared).
  Frame frame;
  if (ok) {
    frame.bytes = static_cast<int64_t>(read_buffer_.Length());
    const grpc::Status parsed =
        grpc::SerializationTraits<v1::SolveRequest>::Deserialize(
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
    service_->metrics().MessageReceived(Rpc::kSolveStream);
    ++frames_read_;
    if (!frame.error.ok()) {
      frame.error = absl::InvalidArgumentError(absl::StrCat(
          "frame ", frames_read_,
          " of this stream (counting from 1) is not a valid "
          "reach.v1.SolveRequest; it is answered in its turn with sequence "
          "0 and the stream goes on"));
    } else if (!charge_.TryAdd(&service_->budget(), frame.bytes)) {
      frame.error = absl::ResourceExhaustedError(absl::StrCat(
          "the server's buffers are full (--max_buffered_bytes=",
          service_->budget().limit(), "); frame not solved"));
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

void SolveStreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (ok) {
    service_->metrics().MessageSent(Rpc::kSolveStream);
    outgoing_bytes_ -= outgoing_.front().bytes;
    charge_.Shrink(outgoing_.front().bytes);
    outgoing_.pop_front();
  } else {
    cancelled_ = true;  // The client is gone; nothing more can be sent.
    stop_solving_.store(true, std::memory_order_relaxed);
  }
  Pump();
}

void SolveStreamReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  stop_solving_.store(true, std::memory_order_relaxed);
  Pump();
}

void SolveStreamReactor::OnDone() {
  service_->StreamDone(this);
  Unref();
}

void SolveStreamReactor::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

void SolveStreamReactor::Pump() {
  MaybeSolve();
  MaybeWrite();
  MaybeRead();
  MaybeFinish();
}

v1::SolveResponse& SolveStreamReactor::PushAnswer(
    v1::SolveResponse&& response) {
  Answer& answer = outgoing_.emplace_back();
  answer.response.Swap(&response);
  answer.bytes = static_cast<int64_t>(answer.response.ByteSizeLong());
  outgoing_bytes_ += answer.bytes;
  // Answers are charged whether or not they fit: they are owed, and the
  // window bounds them (a full budget refuses the frames that follow).
  charge_.Add(&service_->budget(), answer.bytes);
  return answer.response;
}

void SolveStreamReactor::AnswerWithError(uint64_t sequence,
                                         const absl::Status& status) {
  v1::SolveResponse response;
  response.set_sequence(sequence);
  ToProto(status, response.mutable_error());
  PushAnswer(std::move(response));
}

void SolveStreamReactor::PopFrame() {
  pending_bytes_ -= pending_.front().bytes;
  charge_.Shrink(pending_.front().bytes);
  pending_.pop_front();
}

bool SolveStreamReactor::TakeNextFrame() {
  const ServiceOptions& options = service_->options();
  int skipped = 0;
  bool taken = false;
  while (!cancelled_ && !pending_.empty() &&
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
      v1::SolveResponse response;
      response.set_sequence(frame.request.sequence());
      response.set_skipped(true);
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

void SolveStreamReactor::MaybeSolve() {
  while (!solve_in_flight_ && TakeNextFrame()) {
    solve_in_flight_ = true;
    task_queued_ = absl::Now();
    refs_.fetch_add(1, std::memory_order_relaxed);  // The task's.
    SolverPool::Task task = [this](SolveScratch& scratch) {
      SolveFrames(scratch);
    };
    const grpc::Status queued =
        service_->Submit(context_, absl::MakeSpan(&task, 1));
    if (!queued.ok()) {
      // Not the last reference: gRPC's is held while Pump runs.
      refs_.fetch_sub(1, std::memory_order_relaxed);
      solve_in_flight_ = false;
      AnswerWithError(solving_.sequence(), FromGrpc(queued));
    }
  }
}

void SolveStreamReactor::SolveFrames(SolveScratch& scratch) {
  absl::Duration waited;
  {
    absl::MutexLock lock(&mu_);
    waited = absl::Now() - task_queued_;
  }
  // Frames already queued when one finishes are solved in the same task (up
  // to a bound, for fairness between streams): no hand-off and no wake-up
  // per frame.
  for (int solved = 1;; ++solved) {
    const grpc::Status wait = service_->CheckQueueWait(waited);
    if (solved == 1 && !wait.ok()) {
      solve_status_ = FromGrpc(wait);
    } else {
      SolveFrame(scratch);
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
              absl::StrCat("SolveStream frame: ", solve_status_.ToString()));
        }
        AnswerWithError(solving_.sequence(), solve_status_);
      }
      more = solved < kFramesPerTask && TakeNextFrame();
      if (!more) solve_in_flight_ = false;
      Pump();
    }
    if (!more) break;
  }
  Unref();  // With mu_ released: this may delete the reactor.
}

void SolveStreamReactor::SolveFrame(SolveScratch& scratch) {
  solved_.Clear();
  std::shared_ptr<const LoadedSkeleton> skeleton =
      service_->registry().Load(solving_.skeleton_id());
  if (skeleton == nullptr) {
    solve_status_ = UnknownSkeleton(solving_.skeleton_id());
    return;
  }
  if (skeleton->id != warm_skeleton_id_) {
    warm_.local.clear();  // A new skeleton starts from its rest pose.
    warm_skeleton_id_ = skeleton->id;
    if (watched != nullptr) watched->SetSkeleton(skeleton->id);
  }
  solve_status_ =
      SolveOne(*skeleton, solving_, &warm_, service_->options().solve_limits,
               service_->SolveDeadline(context_, &stop_solving_), scratch,
               &solved_);
  service_->metrics().Record(scratch.tally);
  // The solution is the next frame's warm start; the scratch pose is
  // rewritten by the next solve, so a swap saves the copy.
  if (solve_status_.ok()) {
    warm_.local.swap(scratch.pose.local);
    if (watched != nullptr) {
      watched->Published(skeleton->skeleton, skeleton->id, solving_, warm_,
                         solved_);
    }
  }
}

void SolveStreamReactor::MaybeWrite() {
  if (write_in_flight_ || cancelled_ || outgoing_.empty()) return;
  write_in_flight_ = true;
  bool own_buffer = false;
  write_buffer_.Clear();  // The previous write is done with it.
  grpc::SerializationTraits<v1::SolveResponse>::Serialize(
      outgoing_.front().response, &write_buffer_, &own_buffer);
  StartWrite(&write_buffer_);
}

bool SolveStreamReactor::WindowFull() const {
  const ServiceOptions& options = service_->options();
  return static_cast<int>(pending_.size()) >= options.stream_window ||
         static_cast<int>(outgoing_.size()) >= options.stream_window ||
         pending_bytes_ + outgoing_bytes_ >= options.stream_window_bytes;
}

void SolveStreamReactor::MaybeRead() {
  if (read_in_flight_ || reads_done_ || cancelled_ || draining_ || finished_ ||
      WindowFull()) {
    return;
  }
  read_in_flight_ = true;
  StartRead(&read_buffer_);
}

void SolveStreamReactor::MaybeFinish() {
  if (finished_ || solve_in_flight_ || write_in_flight_) return;
  grpc::Status status;
  if (cancelled_) {
    status = grpc::Status::CANCELLED;
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
  service_->metrics().RpcHandled(Rpc::kSolveStream, status.error_code(),
                                 absl::Now() - start_);
  Finish(status);
}

}  // namespace reach
