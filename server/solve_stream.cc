#include "server/solve_stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/convert.h"
#include "server/ik_service.h"
#include "server/solve_call.h"

namespace reach {

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
  absl::MutexLock lock(&mu_);
  read_in_flight_ = false;
  if (!ok) {
    reads_done_ = true;  // The client half-closed, or the call is over.
  } else {
    service_->metrics().MessageReceived(Rpc::kSolveStream);
    pending_.emplace_back().Swap(&read_buffer_);
  }
  Pump();
}

void SolveStreamReactor::OnWriteDone(bool ok) {
  absl::MutexLock lock(&mu_);
  write_in_flight_ = false;
  if (ok) {
    service_->metrics().MessageSent(Rpc::kSolveStream);
    outgoing_.pop_front();
  } else {
    cancelled_ = true;  // The client is gone; nothing more can be sent.
  }
  Pump();
}

void SolveStreamReactor::OnCancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  Pump();
}

void SolveStreamReactor::OnDone() {
  service_->StreamDone(this);
  delete this;
}

void SolveStreamReactor::Pump() {
  MaybeSolve();
  MaybeWrite();
  MaybeRead();
  MaybeFinish();
}

void SolveStreamReactor::AnswerWithError(uint64_t sequence,
                                         const absl::Status& status) {
  v1::SolveResponse& response = outgoing_.emplace_back();
  response.set_sequence(sequence);
  ToProto(status, response.mutable_error());
}

bool SolveStreamReactor::TakeNextFrame() {
  const int window = service_->options().stream_window;
  if (cancelled_ || pending_.empty() ||
      static_cast<int>(outgoing_.size()) >= window) {
    return false;
  }
  // Latest wins: a droppable frame with a newer frame behind it is answered
  // as skipped, in order, without solving.
  int skipped = 0;
  while (pending_.size() > 1 && pending_.front().latest_wins()) {
    v1::SolveResponse& response = outgoing_.emplace_back();
    response.set_sequence(pending_.front().sequence());
    response.set_skipped(true);
    pending_.pop_front();
    ++skipped;
  }
  if (skipped > 0) service_->metrics().FramesSkipped(skipped);
  solving_.Swap(&pending_.front());
  pending_.pop_front();
  return true;
}

void SolveStreamReactor::MaybeSolve() {
  while (!solve_in_flight_ && TakeNextFrame()) {
    solve_in_flight_ = true;
    SolverPool::Task task = [this](SolveScratch& scratch) {
      SolveFrames(scratch);
    };
    if (!service_->pool().TrySubmit(task)) {
      solve_in_flight_ = false;
      AnswerWithError(solving_.sequence(),
                      absl::ResourceExhaustedError(
                          "the solver queue is full; frame not solved"));
    }
  }
}

void SolveStreamReactor::SolveFrames(SolveScratch& scratch) {
  // Frames already queued when one finishes are solved in the same task (up
  // to a bound, for fairness between streams): no hand-off and no wake-up
  // per frame.
  for (int solved = 1;; ++solved) {
    SolveFrame(scratch);
    absl::MutexLock lock(&mu_);
    if (solve_status_.ok()) {
      outgoing_.emplace_back().Swap(&solved_);
    } else {
      if (solve_status_.code() == absl::StatusCode::kInternal ||
          solve_status_.code() == absl::StatusCode::kUnknown) {
        service_->error_log().Error(
            absl::StrCat("SolveStream frame: ", solve_status_.ToString()));
      }
      AnswerWithError(solving_.sequence(), solve_status_);
    }
    const bool more = solved < kFramesPerTask && TakeNextFrame();
    if (!more) solve_in_flight_ = false;
    Pump();
    if (!more) return;
  }
}

void SolveStreamReactor::SolveFrame(SolveScratch& scratch) {
  solved_.Clear();
  std::shared_ptr<const RegisteredSkeleton> skeleton =
      service_->registry().Find(solving_.skeleton_id());
  if (skeleton == nullptr) {
    solve_status_ = UnknownSkeleton(solving_.skeleton_id());
    return;
  }
  if (skeleton->id != warm_skeleton_id_) {
    warm_.local.clear();  // A new skeleton starts from its rest pose.
    warm_skeleton_id_ = skeleton->id;
  }
  solve_status_ =
      SolveOne(*skeleton, solving_, &warm_, service_->options().solve_limits,
               FromGrpcDeadline(context_->deadline()), scratch, &solved_);
  service_->metrics().Record(scratch.tally);
  // The solution is the next frame's warm start; the scratch pose is
  // rewritten by the next solve, so a swap saves the copy.
  if (solve_status_.ok()) warm_.local.swap(scratch.pose.local);
}

void SolveStreamReactor::MaybeWrite() {
  if (write_in_flight_ || cancelled_ || outgoing_.empty()) return;
  write_in_flight_ = true;
  StartWrite(&outgoing_.front());
}

void SolveStreamReactor::MaybeRead() {
  const int window = service_->options().stream_window;
  if (read_in_flight_ || reads_done_ || cancelled_ || draining_ || finished_ ||
      static_cast<int>(pending_.size()) >= window ||
      static_cast<int>(outgoing_.size()) >= window) {
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
                          "the server is shutting down; every frame it read "
                          "was answered");
  } else {
    return;
  }
  finished_ = true;
  service_->metrics().RpcHandled(Rpc::kSolveStream, status.error_code(),
                                 absl::Now() - start_);
  Finish(status);
}

}  // namespace reach
