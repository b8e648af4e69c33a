#include "server/ik_service.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "importers/skeleton_file.h"
#include "server/batch_wire.h"
#include "server/call_status.h"
#include "wire/convert.h"
#include "server/solve_call.h"
#include "server/solve_stream.h"

namespace reach {
namespace {

// What an import holds per byte of its input, at most: the input, the
// parser's tree of it and the skeleton and motion built from it. BVH, URDF
// and skeleton JSON take a few times their text; tinygltf's model of a
// glTF within the importers' limits takes up to ~31 (the worst file the
// defaults allow: +86 MB from 2.8 MB).
constexpr int64_t kImportBytesPerInputByte = 8;
constexpr int64_t kGltfImportBytesPerInputByte = 32;

std::string Milliseconds(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d), " ms");
}

// Bytes a Solve's response may take at most: every joint's rotation and
// translation, the goals' results, and the globals when asked for.
int64_t ResponseBound(int joints, int goals, bool return_globals) {
  constexpr int64_t kJointBytes = 96;     // Index, rotation, translation.
  constexpr int64_t kGlobalBytes = 96;    // A Transform.
  constexpr int64_t kResultBytes = 64;    // A GoalResult.
  return 64 + joints * kJointBytes + goals * kResultBytes +
         (return_globals ? joints * kGlobalBytes : 0);
}

}  // namespace

std::string OwnerOf(const grpc::CallbackServerContext& context,
                    const Caller& caller) {
  // Without auth, solves are not charged to anyone (no name): the peer.
  return caller.name.empty() ? PeerOwner(context.peer()) : caller.name;
}

std::shared_ptr<MemoryBudget> IkService::ShareOf(
    const grpc::CallbackServerContext& context, const Caller& caller) {
  if (budget_.limit() <= 0) {
    return std::shared_ptr<MemoryBudget>(std::shared_ptr<void>(), &budget_);
  }
  const int64_t limit = options_.max_buffered_bytes_per_caller > 0
                            ? options_.max_buffered_bytes_per_caller
                            : budget_.limit() / kCallerShare;
  const std::string owner = OwnerOf(context, caller);
  absl::MutexLock lock(&shares_mu_);
  std::weak_ptr<MemoryBudget>& slot = shares_[owner];
  std::shared_ptr<MemoryBudget> share = slot.lock();
  if (share == nullptr) {
    share = std::make_shared<MemoryBudget>(limit, &budget_);
    slot = share;
    // Callers come and go: forget those with no call holding their share.
    if (shares_.size() > 4096) {
      absl::erase_if(shares_,
                     [](const auto& entry) { return entry.second.expired(); });
    }
  }
  return share;
}

std::string DeletingOwner(const Caller& caller, bool peers_delete_any) {
  // An admin token deletes outright; a `register` token only what it
  // registered. Without auth, a peer (every one an admin) is held to what
  // it registered unless the operator said otherwise: any local process
  // could delete everyone's skeletons.
  const bool outright = caller.role == Role::kAdmin &&
                        (caller.authenticated || peers_delete_any);
  return outright ? std::string() : caller.name;
}

grpc::Status IkService::CheckQueueWait(absl::Duration waited) const {
  if (waited <= options_.max_queue_wait) return grpc::Status::OK;
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("waited ", Milliseconds(waited),
                   " for a solver thread (--max_queue_wait=",
                   Milliseconds(options_.max_queue_wait),
                   "); the server is overloaded, retry with backoff"));
}

grpc::Status IkService::Submit(const grpc::CallbackServerContext* context,
                               absl::Span<SolverPool::Task> tasks,
                               SolverPool::Lane lane) {
  absl::Duration max_wait = options_.max_queue_wait;
  bool deadline_first = false;
  if (context->deadline() != std::chrono::system_clock::time_point::max()) {
    const absl::Duration left =
        absl::FromChrono(context->deadline() - std::chrono::system_clock::now());
    if (left < max_wait) {
      max_wait = left;
      deadline_first = true;
    }
  }
  switch (pool_->Submit(tasks, max_wait, lane)) {
    case SolverPool::Admission::kQueued:
      return grpc::Status::OK;
    case SolverPool::Admission::kQueueFull:
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the solver queue is full (", pool_->queue_depth(),
                       " tasks waiting, --queue_capacity); retry with "
                       "backoff"));
    case SolverPool::Admission::kWaitTooLong:
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the solver queue's expected wait (",
                       Milliseconds(pool_->EstimatedWait(lane)),
                       ") is longer than ",
                       deadline_first
                           ? std::string("the call's deadline")
                           : absl::StrCat("--max_queue_wait=",
                                          Milliseconds(max_wait)),
                       "; the server is overloaded, retry with backoff"));
    case SolverPool::Admission::kStopping:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "the server is shutting down");
}

grpc::Status IkService::StartStatus(const grpc::CallbackServerContext* context,
                                    const UnaryCall& call) const {
  if (call.watched != nullptr &&
      call.watched->cancelled.load(std::memory_order_relaxed)) {
    return Cancelled();
  }
  if (DeadlinePassed(context)) return DeadlineBeforeSolve();
  return CheckQueueWait(absl::Now() - call.start);
}

Deadline IkService::SolveDeadline(const grpc::CallbackServerContext* context,
                                  const std::atomic<bool>* cancelled) const {
  Deadline deadline = FromGrpcDeadline(context->deadline());
  if (options_.max_solve > absl::ZeroDuration()) {
    deadline = deadline.WithBudget(absl::ToDoubleMilliseconds(options_.max_solve));
  }
  deadline.cancelled = cancelled;
  return deadline;
}

// A SolveBatch call in flight: its items are split into chunks, one pool
// task each. A chunk's worker parses, solves and serializes its own items
// into its own output; the last chunk to finish joins the outputs into the
// response and finishes the call.
struct BatchCall {
  IkService::UnaryCall unary;
  IkService::WatchedReactor* reactor;
  grpc::CallbackServerContext* context;
  grpc::Slice request;  // The request's bytes, contiguous.
  BatchRequestView view;  // Items and default skeleton id, into `request`.
  std::vector<std::string> outputs;  // Serialized response items per chunk.
  grpc::ByteBuffer* response;
  std::atomic<int> remaining{0};
  // The first refusal of a chunk (waited too long, cancelled, deadline),
  // guarded by the chunks' order: written before `remaining` drops.
  std::atomic<bool> refused{false};
  grpc::Status refusal;
  absl::Mutex refusal_mu;
  // When the items' solving must stop (steady-clock nanoseconds), set by
  // the first chunk to start: max_solve over the chunks that can run at
  // once, so all the workers together spend at most max_solve.
  std::atomic<int64_t> solve_until_ns{0};
  int parallel = 1;
  std::atomic<int64_t> output_bytes{0};
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
                     const ServiceOptions& options, const TokenAuth* auth)
    : registry_(registry),
      pool_(pool),
      metrics_(metrics),
      options_(options),
      no_auth_(auth == nullptr ? *TokenAuth::Open("", absl::ZeroDuration())
                               : nullptr),
      auth_(auth == nullptr ? no_auth_.get() : auth),
      budget_(options.max_buffered_bytes) {
  metrics_->SetSkeletons(registry_->size());
  SetMessageAllocatorFor_Solve(&solve_allocator_);
}

IkService::UnaryCall IkService::BeginUnary(grpc::CallbackServerContext* context,
                                           Rpc rpc, bool watched) {
  metrics_->RpcStarted(rpc);
  metrics_->MessageReceived(rpc);
  WatchedReactor* reactor = watched ? new WatchedReactor() : nullptr;
  return UnaryCall{reactor != nullptr
                       ? static_cast<grpc::ServerUnaryReactor*>(reactor)
                       : context->DefaultReactor(),
                   reactor, rpc, absl::Now(), Authenticate(*context, rpc)};
}

absl::StatusOr<Caller> IkService::Authenticate(
    const grpc::CallbackServerContext& context, Rpc rpc) const {
  // Registering (and deleting what one registered) needs `register`;
  // deleting another's skeleton needs `admin` (DeleteSkeleton checks).
  // The same holds for retarget profiles.
  const Role needed = rpc == Rpc::kRegisterSkeleton ||
                              rpc == Rpc::kImportSkeleton ||
                              rpc == Rpc::kDeleteSkeleton ||
                              rpc == Rpc::kCreateRetargetProfile ||
                              rpc == Rpc::kDeleteRetargetProfile ||
                              rpc == Rpc::kUpdateRetargetProfile
                          ? Role::kRegister
                          : Role::kSolve;
  return auth_->Check(context, needed, RpcMethodName(rpc));
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
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  if (!request->has_skeleton()) {
    return Finish(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "skeleton: required"));
  }
  absl::StatusOr<RegisterResult> result =
      RegisterFor(call, request->skeleton());
  if (!result.ok()) return Finish(call, ToGrpcStatus(result.status()));
  response->set_skeleton_id(result->id);
  response->set_version(result->version);
  response->set_created(result->created);
  return Finish(call, grpc::Status::OK);
}

absl::StatusOr<RegisterResult> IkService::RegisterFor(
    const UnaryCall& call, const v1::Skeleton& skeleton) {
  absl::StatusOr<RegisterResult> result =
      registry_->Register(skeleton, call.caller->name);
  if (!result.ok()) {
    if (!IsClientError(result.status())) {
      error_log_.Error(absl::StrCat(RpcMethodName(call.rpc), ": ",
                                    result.status().ToString()));
    }
    return result;
  }
  metrics_->SetSkeletons(registry_->size());
  return result;
}

grpc::ServerUnaryReactor* IkService::ImportSkeleton(
    grpc::CallbackServerContext* context,
    const v1::ImportSkeletonRequest* request,
    v1::ImportSkeletonResponse* response) {
  const UnaryCall call =
      BeginUnary(context, Rpc::kImportSkeleton, /*watched=*/true);
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  if (request->data().empty()) {
    return Finish(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "data: empty"));
  }
  import::SkeletonFormat format = import::SkeletonFormat::kUnknown;
  switch (request->format()) {
    case v1::SKELETON_FORMAT_JSON: format = import::SkeletonFormat::kJson; break;
    case v1::SKELETON_FORMAT_BVH: format = import::SkeletonFormat::kBvh; break;
    case v1::SKELETON_FORMAT_URDF: format = import::SkeletonFormat::kUrdf; break;
    case v1::SKELETON_FORMAT_GLTF: format = import::SkeletonFormat::kGltf; break;
    case v1::SKELETON_FORMAT_UNSPECIFIED: break;
    default:
      return Finish(call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       absl::StrCat("format: unknown value ",
                                                    request->format())));
  }
  // A parse holds its input and the parser's tree of it (a few times the
  // input for JSON and XML), and the answer echoes the skeleton: charged
  // on the caller's share of the byte budget before anything is parsed,
  // and parsed on a solver thread, so imports queue behind (and take
  // turns with) solves instead of taking every core beside them.
  const import::SkeletonFormat named =
      format != import::SkeletonFormat::kUnknown
          ? format
          : import::FormatOfFileName(request->file_name());
  const bool gltf = named == import::SkeletonFormat::kGltf ||
                    absl::StartsWith(request->data(), "glTF");
  const int64_t bytes =
      (gltf ? kGltfImportBytesPerInputByte : kImportBytesPerInputByte) *
      static_cast<int64_t>(request->data().size());
  call.watched->share = ShareOf(*context, *call.caller);
  if (!call.watched->charge.TryAdd(call.watched->share.get(), bytes)) {
    return Finish(call, OverBudget(*call.watched->share, bytes));
  }
  SolverPool::Task task = [this, context, request, response, call,
                           format](SolveScratch&) {
    if (grpc::Status start = StartStatus(context, call); !start.ok()) {
      Finish(call, start);
      return;
    }
    Finish(call, Import(call, *request, format, response));
  };
  if (grpc::Status queued = Submit(context, absl::MakeSpan(&task, 1));
      !queued.ok()) {
    return Finish(call, queued);
  }
  return call.reactor;
}

grpc::Status IkService::Import(const UnaryCall& call,
                               const v1::ImportSkeletonRequest& request,
                               import::SkeletonFormat format,
                               v1::ImportSkeletonResponse* response) {
  import::SkeletonFileOptions options;
  options.name = request.name();
  options.gltf_skin = request.gltf_skin();
  if (request.has_bvh_rest_frame()) {
    if (request.bvh_rest_frame() < 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("bvh_rest_frame: ",
                                       request.bvh_rest_frame(),
                                       " is negative (a frame, from 0)"));
    }
    options.bvh_rest_frame = request.bvh_rest_frame();
  }
  for (const v1::Chain& chain : request.chains()) {
    options.chains.push_back({chain.name(), chain.root(), chain.tip()});
  }
  options.named_file = !request.file_name().empty();
  const std::string file = request.file_name().empty()
                               ? std::string("data")
                               : ClientString(request.file_name());
  absl::StatusOr<import::ImportedFile> imported = import::ImportSkeletonBytes(
      request.data(), format, file, options);
  if (!imported.ok()) return ToGrpcStatus(imported.status());

  // The motion's size is known before anything is registered: refuse what
  // would not fit a response.
  const bool motion = request.return_motion() && imported->clip.has_value();
  if (motion) {
    const int64_t joints = imported->clip->skeleton.def.joints.size();
    const int64_t estimate =
        int64_t{imported->clip->num_frames} * (joints * 38 + 32);
    if (estimate > options_.max_response_bytes) {
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("return_motion: ", imported->clip->num_frames,
                       " frames of ", joints, " joints need about ", estimate,
                       " bytes, over --max_response_bytes=",
                       options_.max_response_bytes));
    }
    // The motion is answered too: charged beside the import's bytes.
    if (!call.watched->charge.TryAdd(call.watched->share.get(), estimate)) {
      return OverBudget(*call.watched->share, estimate);
    }
  }
  absl::StatusOr<RegisterResult> result = RegisterFor(call, imported->skeleton);
  if (!result.ok()) return ToGrpcStatus(result.status());
  response->set_skeleton_id(result->id);
  response->set_version(result->version);
  response->set_created(result->created);
  // What was stored (the same id: the same definition) is what the
  // import made.
  *response->mutable_skeleton() = imported->skeleton;
  if (motion) {
    const import::BvhClip& clip = *imported->clip;
    response->set_frame_time_s(clip.frame_time);
    response->mutable_motion()->Reserve(clip.num_frames);
    Pose pose;
    for (int f = 0; f < clip.num_frames; ++f) {
      clip.FramePose(f, &pose);
      ToProto(pose, response->add_motion());
    }
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* IkService::GetSkeleton(
    grpc::CallbackServerContext* context, const v1::GetSkeletonRequest* request,
    v1::GetSkeletonResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kGetSkeleton);
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> found =
      registry_->Get(request->skeleton_id());
  if (!found.ok()) return Finish(call, ToGrpcStatus(found.status()));
  response->set_skeleton_id((*found)->id);
  response->set_version((*found)->version);
  if (!response->mutable_skeleton()->ParseFromString(
          (*found)->definition_bytes)) {
    return Finish(call, grpc::Status(grpc::StatusCode::INTERNAL,
                                     "the stored definition does not parse"));
  }
  return Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* IkService::ListSkeletons(
    grpc::CallbackServerContext* context,
    const v1::ListSkeletonsRequest* request,
    v1::ListSkeletonsResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kListSkeletons);
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
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
    summary->set_name(skeleton->name);
    summary->set_joint_count(skeleton->num_joints);
    for (const std::string& chain : skeleton->chain_names) {
      summary->add_chains(chain);
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
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  absl::Status status = registry_->Delete(
      request->skeleton_id(),
      DeletingOwner(*call.caller, options_.peers_delete_any));
  if (!status.ok() && !IsClientError(status)) {
    error_log_.Error(absl::StrCat("DeleteSkeleton: ", status.ToString()));
  }
  metrics_->SetSkeletons(registry_->size());
  return Finish(call, ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* IkService::Solve(grpc::CallbackServerContext* context,
                                           const v1::SolveRequest* request,
                                           v1::SolveResponse* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kSolve, /*watched=*/true);
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> got =
      registry_->Get(request->skeleton_id());
  if (!got.ok()) return Finish(call, ToGrpcStatus(got.status()));
  std::shared_ptr<const LoadedSkeleton> skeleton = *std::move(got);
  // The request is held until the call is done, and the response grows to
  // at most this.
  const int64_t bytes =
      static_cast<int64_t>(request->ByteSizeLong()) +
      ResponseBound(skeleton->skeleton.num_joints(), request->goals_size(),
                    request->return_globals());
  call.watched->share = ShareOf(*context, *call.caller);
  if (!call.watched->charge.TryAdd(call.watched->share.get(), bytes)) {
    return Finish(call, OverBudget(*call.watched->share, bytes));
  }
  SolverPool::Task task = [this, context, request, response, call,
                           skeleton =
                               std::move(skeleton)](SolveScratch& scratch) {
    const std::atomic<bool>& cancelled = call.watched->cancelled;
    if (grpc::Status start = StartStatus(context, call); !start.ok()) {
      Finish(call, start);
      return;
    }
    const absl::Status status = SolveOne(
        *skeleton, *request, /*warm_start=*/nullptr, options_.solve_limits,
        SolveDeadline(context, &cancelled), scratch, response);
    metrics_->Record(scratch.tally);
    if (!status.ok()) {
      response->Clear();
      Finish(call, ToGrpcStatus(status));
    } else if (cancelled.load(std::memory_order_relaxed)) {
      response->Clear();  // Stopped early; nobody is waiting for it.
      Finish(call, Cancelled());
    } else if (DeadlinePassed(context)) {
      response->Clear();  // Stopped at the deadline; too late to answer.
      Finish(call, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                "the deadline passed while solving"));
    } else {
      Finish(call, grpc::Status::OK);
    }
  };
  if (grpc::Status queued = Submit(context, absl::MakeSpan(&task, 1));
      !queued.ok()) {
    return Finish(call, queued);
  }
  return call.reactor;
}

namespace {

// The status of a SolveBatch whose request never arrived whole.
grpc::Status UploadFailed(const grpc::CallbackServerContext* context) {
  // The request could not be read: gRPC gave up on the call while it
  // arrived. The server's deadline is the client's timeout counted from
  // when the call reached it, so it can lag the client's by the upload
  // time: within kUploadDeadlineSlack of it, the deadline is why.
  constexpr auto kUploadDeadlineSlack = std::chrono::milliseconds(250);
  if (context->deadline() <=
      std::chrono::system_clock::now() + kUploadDeadlineSlack) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the deadline passed while the request was arriving");
  }
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the call was cancelled while the request was "
                        "arriving");
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "request: no message arrived");
}

}  // namespace

grpc::ServerUnaryReactor* IkService::SolveBatch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
    grpc::ByteBuffer* response) {
  const UnaryCall call = BeginUnary(context, Rpc::kSolveBatch, /*watched=*/true);
  if (!call.caller.ok()) return Finish(call, ToGrpcStatus(call.caller.status()));
  auto batch = std::make_shared<BatchCall>();
  if (!request->Valid() || !request->DumpToSingleSlice(&batch->request).ok()) {
    return Finish(call, UploadFailed(context));
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
  // The response's size is bounded before anything is solved: globals are
  // every joint of every item that asks for them.
  int64_t response_bound = 0;
  {
    std::shared_ptr<const RegisteredSkeleton> skeleton;
    for (const absl::string_view item : batch->view.items) {
      absl::string_view id;
      bool globals = false;
      int joints = 0;
      if (ScanSolveRequest(item, &id, &globals) && globals) {
        if (id.empty()) id = batch->view.skeleton_id;
        if (skeleton == nullptr || skeleton->id != id) {
          skeleton = registry_->Find(id);
        }
        if (skeleton != nullptr) joints = skeleton->num_joints;
      }
      response_bound += ResponseBound(0, 0, false) +
                        (globals ? ResponseBound(joints, 0, true) -
                                       ResponseBound(joints, 0, false)
                                 : 0);
    }
  }
  if (options_.max_response_bytes > 0 &&
      response_bound > options_.max_response_bytes) {
    return Finish(
        call, grpc::Status(
                  grpc::StatusCode::RESOURCE_EXHAUSTED,
                  absl::StrCat("the response would take at least ",
                               response_bound, " bytes (--max_response_bytes=",
                               options_.max_response_bytes,
                               "); split the batch, or ask return_globals on "
                               "fewer items")));
  }
  const int64_t bytes =
      static_cast<int64_t>(batch->request.size()) + response_bound;
  call.watched->share = ShareOf(*context, *call.caller);
  if (!call.watched->charge.TryAdd(call.watched->share.get(), bytes)) {
    return Finish(call, OverBudget(*call.watched->share, bytes));
  }

  const int chunks = std::min(n, 2 * pool_->threads());
  batch->unary = call;
  batch->reactor = call.watched;
  batch->context = context;
  batch->response = response;
  batch->outputs.resize(chunks);
  batch->remaining = chunks;
  batch->parallel = std::min(chunks, pool_->threads());

  std::vector<SolverPool::Task> tasks;
  tasks.reserve(chunks);
  for (int c = 0; c < chunks; ++c) {
    const int begin = static_cast<int>(static_cast<int64_t>(n) * c / chunks);
    const int end =
        static_cast<int>(static_cast<int64_t>(n) * (c + 1) / chunks);
    tasks.push_back([this, batch, c, begin, end](SolveScratch& scratch) {
      RunBatchChunk(*batch, c, begin, end, scratch);
    });
  }
  if (grpc::Status queued = Submit(context, absl::MakeSpan(tasks));
      !queued.ok()) {
    return Finish(call, queued);
  }
  return call.reactor;
}

void IkService::RunBatchChunk(BatchCall& batch, int chunk, int begin, int end,
                              SolveScratch& scratch) {
  const std::atomic<bool>& cancelled = batch.reactor->cancelled;
  grpc::Status refusal;
  if (batch.refused.load(std::memory_order_acquire)) {
    // Another chunk was refused; the call fails, so do no work.
  } else if (cancelled.load(std::memory_order_relaxed)) {
    refusal = Cancelled();
  } else if (DeadlinePassed(batch.context)) {
    refusal = DeadlineBeforeSolve();
  } else {
    refusal = CheckQueueWait(absl::Now() - batch.unary.start);
  }
  if (!refusal.ok()) {
    absl::MutexLock lock(&batch.refusal_mu);
    if (!batch.refused.exchange(true)) batch.refusal = refusal;
  } else if (!batch.refused.load(std::memory_order_acquire)) {
    Deadline deadline = FromGrpcDeadline(batch.context->deadline());
    deadline.cancelled = &cancelled;
    if (options_.max_solve > absl::ZeroDuration()) {
      // The batch's solving ends max_solve / parallel after its first chunk
      // starts: the chunks that run at once then spend max_solve in all.
      const int64_t now_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(
              Deadline::Clock::now().time_since_epoch())
              .count();
      int64_t until_ns =
          now_ns + absl::ToInt64Nanoseconds(options_.max_solve) / batch.parallel;
      int64_t expected = 0;
      if (!batch.solve_until_ns.compare_exchange_strong(expected, until_ns)) {
        until_ns = expected;
      }
      const Deadline::Clock::time_point until{std::chrono::nanoseconds(until_ns)};
      if (until < deadline.at) deadline.at = until;
    }
    std::string& out = batch.outputs[chunk];
    SolveBatchItems(batch.view, begin, end, *registry_, options_.solve_limits,
                    deadline, metrics_, scratch, &out);
    batch.output_bytes.fetch_add(static_cast<int64_t>(out.size()));
  }
  if (batch.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;

  // The last chunk finishes the call.
  if (batch.refused.load(std::memory_order_acquire)) {
    grpc::Status status;
    {
      absl::MutexLock lock(&batch.refusal_mu);
      status = batch.refusal;
    }
    Finish(batch.unary, status);
    return;
  }
  if (cancelled.load(std::memory_order_relaxed)) {
    Finish(batch.unary, Cancelled());
    return;
  }
  const int64_t produced = batch.output_bytes.load();
  if (options_.max_response_bytes > 0 &&
      produced > options_.max_response_bytes) {
    Finish(batch.unary,
           grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        absl::StrCat("the response took ", produced,
                                     " bytes (--max_response_bytes=",
                                     options_.max_response_bytes,
                                     "); split the batch")));
    return;
  }
  // What the outputs took beyond the bound charged at the door.
  const int64_t extra = produced - batch.reactor->charge.bytes() +
                        static_cast<int64_t>(batch.request.size());
  if (extra > 0 &&
      !batch.reactor->charge.TryAdd(batch.reactor->share.get(), extra)) {
    Finish(batch.unary, OverBudget(*batch.reactor->share, extra));
    return;
  }
  grpc::ByteBuffer joined = JoinOutputs(batch.outputs);
  batch.response->Swap(&joined);
  Finish(batch.unary, grpc::Status::OK);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
IkService::SolveStream(grpc::CallbackServerContext* context) {
  return OpenStream(context, Rpc::kSolveStream, [this, context] {
    return new FrameStream<SolveFrames>(this, context, SolveFrames{});
  });
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
IkService::OpenStream(grpc::CallbackServerContext* context, Rpc rpc,
                      absl::FunctionRef<StreamReactor*()> make) {
  metrics_->RpcStarted(rpc);
  absl::StatusOr<Caller> caller = Authenticate(*context, rpc);
  if (!caller.ok()) {
    return new RejectedStream(*metrics_, rpc, ToGrpcStatus(caller.status()));
  }
  absl::MutexLock lock(&streams_mu_);
  if (shutting_down_) {
    return new RejectedStream(*metrics_, rpc,
                              grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                           "the server is shutting down"));
  }
  if (static_cast<int>(streams_.size()) >= options_.max_streams) {
    return new RejectedStream(
        *metrics_, rpc,
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("too many open streams (", streams_.size(),
                                  "; --max_streams=", options_.max_streams,
                                  ")")));
  }
  StreamReactor* stream = make();
  stream->watched =
      stream_watch_.Add(OwnerOf(*context, *caller), rpc == Rpc::kRetargetStream);
  stream->share = ShareOf(*context, *caller);
  stream->caller = *std::move(caller);
  streams_.insert(stream);
  metrics_->SetActiveStreams(static_cast<int>(streams_.size()));
  stream->Start();
  return stream;
}

void IkService::RevokeStreams() {
  absl::MutexLock lock(&streams_mu_);
  for (StreamReactor* stream : streams_) {
    if (!auth_->Admits(stream->caller)) {
      stream->Revoke(absl::StrCat(
          "token '", stream->caller.name,
          "' is no longer in the server's token file (revoked), or the "
          "file does not load; this stream ends"));
    }
  }
}

void IkService::StreamDone(StreamReactor* stream) {
  stream_watch_.Remove(stream->watched);
  absl::MutexLock lock(&streams_mu_);
  streams_.erase(stream);
  metrics_->SetActiveStreams(static_cast<int>(streams_.size()));
}

void IkService::BeginShutdown() {
  absl::MutexLock lock(&streams_mu_);
  shutting_down_ = true;
  for (StreamReactor* stream : streams_) stream->Drain();
}

int IkService::active_streams() const {
  absl::MutexLock lock(&streams_mu_);
  return static_cast<int>(streams_.size());
}

}  // namespace reach
