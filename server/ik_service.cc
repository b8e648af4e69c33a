#include "server/ik_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/batch_wire.h"
#include "server/convert.h"
#include "server/solve_call.h"
#include "server/solve_stream.h"

namespace reach {
namespace {

bool DeadlinePassed(const grpc::CallbackServerContext* context) {
  return context->deadline() <= std::chrono::system_clock::now();
}

grpc::Status QueueFull(const SolverPool& pool) {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("the solver queue is full (", pool.queue_depth(),
                   " tasks waiting); retry with backoff"));
}

const grpc::Status kDeadlineBeforeSolve(
    grpc::StatusCode::DEADLINE_EXCEEDED,
    "the deadline passed before a solver thread was free");

}  // namespace

// A SolveBatch call in flight: its items are split into chunks, one pool
// task each. A chunk's worker parses, solves and serializes its own items
// into its own output; the last chunk to finish joins the outputs into the
// response and finishes the call.
struct BatchCall {
  IkService::UnaryCall unary;
  grpc::CallbackServerContext* context;
  grpc::Slice request;  // The request's bytes, contiguous.
  BatchRequestView view;  // Items and default skeleton id, into `request`.
  std::vector<std::string> outputs;  // Serialized response items per chunk.
  grpc::ByteBuffer* response;
  std::atomic<int> remaining{0};
  std::atomic<bool> expired{false};
};

namespace {

// Hands the chunks' outputs to gRPC without copying them.
grpc::ByteBuffer JoinOutputs(std::vector<std::string>& outputs) {
  std::vector<grpc::Slice> slices;
  slices.reserve(outputs.size());
  for (std::string& output : outputs) {
    if (output.empty()) continue;
    auto* owned = new std::string(std::move(output));
    slices.emplace_back(
        owned->data(), owned->size(),
        [](void* p) { delete static_cast<std::string*>(p); }, owned);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

}  // namespace

IkService::IkService(Registry* registry, SolverPool* pool, Metrics* metrics,
                     const ServiceOptions& options)
    : registry_(registry), pool_(pool), metrics_(metrics), options_(options) {
  metrics_->SetSkeletons(registry_->size());
  SetMessageAllocatorFor_Solve(&solve_allocator_);
}

IkService::UnaryCall IkService::BeginUnary(grpc::CallbackServerContext* context,
                                           Rpc rpc) {
  metrics_->RpcStarted(rpc);
  metrics_->MessageReceived(rpc);
  return UnaryCall{context->DefaultReactor(), rpc, absl::Now()};
}

grpc::ServerUnaryReactor* IkService::Finish(const UnaryCall& call,
                                            const grpc::Status& status) {
  metrics_->RpcHandled(call.rpc, status.error_code(), absl::Now() - call.start);
  if (status.ok()) metrics_->MessageSent(call.rpc);
  call.reactor->Finish(status);
  return call.reactor;
}

grpc::ServerUnaryReactor* IkService::RegisterSkeleton(
    grpc::CallbackServerContext* context,
    const v1::RegisterSkeletonRequest* request,
    v1::RegisterSkeletonResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kRegisterSkeleton);
  if (!request->has_skeleton()) {
    return Finish(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "skeleton: required"));
  }
  absl::StatusOr<RegisterResult> result =
      registry_->Register(request->skeleton());
  if (!result.ok()) {
    if (result.status().code() != absl::StatusCode::kInvalidArgument) {
      error_log_.Error(
          absl::StrCat("RegisterSkeleton: ", result.status().ToString()));
    }
    return Finish(call, ToGrpcStatus(result.status()));
  }
  response->set_skeleton_id(result->id);
  response->set_version(result->version);
  response->set_created(result->created);
  metrics_->SetSkeletons(registry_->size());
  return Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* IkService::GetSkeleton(
    grpc::CallbackServerContext* context, const v1::GetSkeletonRequest* request,
    v1::GetSkeletonResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kGetSkeleton);
  std::shared_ptr<const RegisteredSkeleton> found =
      registry_->Find(request->skeleton_id());
  if (found == nullptr) {
    return Finish(call, ToGrpcStatus(UnknownSkeleton(request->skeleton_id())));
  }
  response->set_skeleton_id(found->id);
  response->set_version(found->version);
  *response->mutable_skeleton() = found->definition;
  return Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* IkService::ListSkeletons(
    grpc::CallbackServerContext* context,
    const v1::ListSkeletonsRequest* request,
    v1::ListSkeletonsResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kListSkeletons);
  int page_size = request->page_size();
  if (page_size < 0 || page_size > options_.max_page_size) {
    return Finish(
        call,
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("page_size: ", page_size, " is not in [0, ",
                                  options_.max_page_size, "]")));
  }
  if (page_size == 0) page_size = std::min(100, options_.max_page_size);
  absl::StatusOr<SkeletonPage> page =
      registry_->List(page_size, request->page_token());
  if (!page.ok()) {
    return Finish(call, ToGrpcStatus(page.status()));
  }
  for (const auto& skeleton : page->skeletons) {
    v1::SkeletonSummary* summary = response->add_skeletons();
    summary->set_skeleton_id(skeleton->id);
    summary->set_version(skeleton->version);
    summary->set_name(skeleton->definition.name());
    summary->set_joint_count(skeleton->skeleton.num_joints());
    for (const v1::Chain& chain : skeleton->definition.chains()) {
      summary->add_chains(chain.name());
    }
  }
  response->set_next_page_token(page->next_page_token);
  return Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* IkService::DeleteSkeleton(
    grpc::CallbackServerContext* context,
    const v1::DeleteSkeletonRequest* request,
    v1::DeleteSkeletonResponse* /*response*/) {
  const UnaryCall call = BeginUnary(context, Rpc::kDeleteSkeleton);
  absl::Status status = registry_->Delete(request->skeleton_id());
  if (!status.ok() && status.code() != absl::StatusCode::kNotFound &&
      status.code() != absl::StatusCode::kInvalidArgument) {
    error_log_.Error(absl::StrCat("DeleteSkeleton: ", status.ToString()));
  }
  metrics_->SetSkeletons(registry_->size());
  return Finish(call, ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* IkService::Solve(grpc::CallbackServerContext* context,
                                           const v1::SolveRequest* request,
                                           v1::SolveResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kSolve);
  std::shared_ptr<const RegisteredSkeleton> skeleton =
      registry_->Find(request->skeleton_id());
  if (skeleton == nullptr) {
    return Finish(call, ToGrpcStatus(UnknownSkeleton(request->skeleton_id())));
  }
  SolverPool::Task task = [this, context, request, response, call,
                           skeleton =
                               std::move(skeleton)](SolveScratch& scratch) {
    if (context->IsCancelled()) {
      Finish(call, grpc::Status::CANCELLED);
      return;
    }
    if (DeadlinePassed(context)) {
      Finish(call, kDeadlineBeforeSolve);
      return;
    }
    const absl::Status status = SolveOne(
        *skeleton, *request, /*warm_start=*/nullptr, options_.solve_limits,
        FromGrpcDeadline(context->deadline()), scratch, response);
    metrics_->Record(scratch.tally);
    if (!status.ok()) response->Clear();
    Finish(call, ToGrpcStatus(status));
  };
  if (!pool_->TrySubmit(task)) {
    return Finish(call, QueueFull(*pool_));
  }
  return call.reactor;
}

grpc::ServerUnaryReactor* IkService::SolveBatch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kSolveBatch);
  auto batch = std::make_shared<BatchCall>();
  if (!request->DumpToSingleSlice(&batch->request).ok()) {
    return Finish(call, grpc::Status(grpc::StatusCode::INTERNAL,
                                     "could not read the request's bytes"));
  }
  const absl::Status split = SplitBatchItems(
      absl::string_view(reinterpret_cast<const char*>(batch->request.begin()),
                        batch->request.size()),
      options_.max_batch, &batch->view);
  if (!split.ok()) return Finish(call, ToGrpcStatus(split));
  // Skeleton ids are lower-case hex; anything unprintable is refused here,
  // before it could reach an error message (which must be UTF-8).
  for (const char c : batch->view.skeleton_id) {
    if (c < 0x20 || c > 0x7e) {
      return Finish(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       "skeleton_id: not printable ASCII"));
    }
  }
  const int n = static_cast<int>(batch->view.items.size());
  if (n == 0) {  // (SplitBatchItems refused more than max_batch.)
    return Finish(
        call,
        grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("items: has ", n, " entries; allowed 1 to ",
                                  options_.max_batch, " (--max_batch)")));
  }

  const int chunks = std::min(n, 2 * pool_->threads());
  batch->unary = call;
  batch->context = context;
  batch->response = response;
  batch->outputs.resize(chunks);
  batch->remaining = chunks;

  std::vector<SolverPool::Task> tasks;
  tasks.reserve(chunks);
  for (int c = 0; c < chunks; ++c) {
    const int begin = static_cast<int>(static_cast<int64_t>(n) * c / chunks);
    const int end =
        static_cast<int>(static_cast<int64_t>(n) * (c + 1) / chunks);
    tasks.push_back([this, batch, c, begin, end](SolveScratch& scratch) {
      if (batch->context->IsCancelled() || DeadlinePassed(batch->context)) {
        batch->expired = true;
      } else {
        SolveBatchItems(batch->view, begin, end, *registry_,
                        options_.solve_limits,
                        FromGrpcDeadline(batch->context->deadline()), metrics_,
                        scratch, &batch->outputs[c]);
      }
      if (batch->remaining.fetch_sub(1) == 1) {
        if (batch->expired) {
          Finish(batch->unary, batch->context->IsCancelled()
                                   ? grpc::Status::CANCELLED
                                   : kDeadlineBeforeSolve);
        } else {
          grpc::ByteBuffer joined = JoinOutputs(batch->outputs);
          batch->response->Swap(&joined);
          Finish(batch->unary, grpc::Status::OK);
        }
      }
    });
  }
  if (!pool_->TrySubmitAll(absl::MakeSpan(tasks))) {
    return Finish(call, QueueFull(*pool_));
  }
  return call.reactor;
}

grpc::ServerBidiReactor<v1::SolveRequest, v1::SolveResponse>*
IkService::SolveStream(grpc::CallbackServerContext* context) {
  metrics_->RpcStarted(Rpc::kSolveStream);
  absl::MutexLock lock(&streams_mu_);
  if (shutting_down_) {
    return new RejectedStream(this,
                              grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                           "the server is shutting down"));
  }
  if (static_cast<int>(streams_.size()) >= options_.max_streams) {
    return new RejectedStream(
        this, grpc::Status(
                  grpc::StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("too many open streams (", streams_.size(),
                               "; --max_streams=", options_.max_streams, ")")));
  }
  auto* stream = new SolveStreamReactor(this, context);
  streams_.insert(stream);
  metrics_->SetActiveStreams(static_cast<int>(streams_.size()));
  stream->Start();
  return stream;
}

void IkService::StreamDone(SolveStreamReactor* stream) {
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
  metrics_->SetActiveStreams(static_cast<int>(streams_.size()));
}

void IkService::BeginShutdown() {
  absl::MutexLock lock(&streams_mu_);
  shutting_down_ = true;
  for (SolveStreamReactor* stream : streams_) stream->Drain();
}

int IkService::active_streams() const {
  absl::MutexLock lock(&streams_mu_);
  return static_cast<int>(streams_.size());
}

}  // namespace reach
