#include "server/retarget_service.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/call_status.h"
#include "server/frame_stream_impl.h"
#include "server/retarget_call.h"
#include "server/solve_call.h"
#include "server/stream_watch.h"
#include "wire/convert.h"

namespace reach {
namespace {

// The call's status once its frames are retargeted: `status`, or why the
// answer is no longer wanted (cancelled, past its deadline).
grpc::Status Outcome(const absl::Status& status,
                     const std::atomic<bool>& cancelled,
                     const grpc::CallbackServerContext* context) {
  if (!status.ok()) return ToGrpcStatus(status);
  if (cancelled.load(std::memory_order_relaxed)) return Cancelled();
  if (DeadlinePassed(context)) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "the deadline passed while retargeting");
  }
  return grpc::Status::OK;
}

// A request's profile and seconds per frame: UnknownProfile, or
// InvalidArgument naming frame_time_s.
absl::Status ProfileAndFrameTime(
    const RetargetProfiles& profiles, const std::string& profile_id,
    double frame_time_s,
    std::shared_ptr<const BuiltRetargetProfile>* profile, double* dt) {
  *profile = profiles.Find(profile_id);
  if (*profile == nullptr) return UnknownProfile(profile_id);
  return FrameTime(frame_time_s, "frame_time_s", dt);
}

}  // namespace

absl::Status RetargetFrames::Answer(IkService& service,
                                    const Deadline& deadline,
                                    WatchedStream* watched,
                                    const Request& request,
                                    SolveScratch& scratch, Response* out) {
  out->Clear();
  std::shared_ptr<const BuiltRetargetProfile> profile;
  double dt = 0.0;
  absl::Status status = ProfileAndFrameTime(
      *profiles, request.profile_id(), request.frame_time_s(), &profile, &dt);
  if (!status.ok()) return status;
  if (profile->id != profile_id) {
    state = retarget::RetargetState{};  // A new profile starts afresh.
    profile_id = profile->id;
    skipped_seconds = 0.0;
    if (watched != nullptr) {
      const v1::RetargetProfileSpec& spec = profile->description.spec();
      watched->SetRetarget(profile->id, spec.source().skeleton_id(),
                           spec.target().skeleton_id());
    }
  }
  status = RetargetFrame(*profile, request.source(), "source",
                         dt + skipped_seconds, request.return_globals(), state,
                         scratch.retarget, deadline, &service.metrics(), out);
  if (!status.ok()) return status;
  skipped_seconds = 0.0;
  out->set_sequence(request.sequence());
  if (watched != nullptr) {
    const RetargetFrameScratch& frame = scratch.retarget;
    watched->PublishedRetarget(profile->target_skeleton, request.sequence(),
                               frame.source, frame.target, frame.work.goals,
                               frame.work.results);
  }
  return absl::OkStatus();
}

void RetargetFrames::Skipped(const Request& request) {
  double dt = 0.0;
  if (request.profile_id() == profile_id &&
      FrameTime(request.frame_time_s(), "frame_time_s", &dt).ok()) {
    skipped_seconds = std::min(skipped_seconds + dt, 10.0);
  }
}

template class FrameStream<RetargetFrames>;

RetargetService::RetargetService(IkService* service, Registry* registry,
                                 RetargetProfiles* profiles)
    : service_(service), registry_(registry), profiles_(profiles) {
  service_->metrics().SetRetargetProfiles(profiles_->size());
}

grpc::ServerUnaryReactor* RetargetService::CreateRetargetProfile(
    grpc::CallbackServerContext* context,
    const v1::CreateRetargetProfileRequest* request,
    v1::CreateRetargetProfileResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kCreateRetargetProfile);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  absl::StatusOr<RetargetProfiles::AddResult> added =
      profiles_->Add(request->spec(), *registry_, call.caller->name);
  if (!added.ok()) {
    if (!IsClientError(added.status())) {
      service_->error_log().Error(absl::StrCat(
          "CreateRetargetProfile: ", added.status().ToString()));
    }
    return service_->Finish(call, ToGrpcStatus(added.status()));
  }
  service_->metrics().SetRetargetProfiles(profiles_->size());
  *response->mutable_profile() = added->profile->description;
  response->set_created(added->created);
  return service_->Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* RetargetService::GetRetargetProfile(
    grpc::CallbackServerContext* context,
    const v1::GetRetargetProfileRequest* request,
    v1::GetRetargetProfileResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kGetRetargetProfile);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  std::shared_ptr<const BuiltRetargetProfile> profile =
      profiles_->Find(request->profile_id());
  if (profile == nullptr) {
    return service_->Finish(
        call, ToGrpcStatus(UnknownProfile(request->profile_id())));
  }
  *response->mutable_profile() = profile->description;
  if (request->include_skeletons()) {
    v1::StoredRetargetProfile stored;
    if (!stored.ParseFromString(profile->stored_bytes)) {
      return service_->Finish(
          call, grpc::Status(grpc::StatusCode::INTERNAL,
                             absl::StrCat("profile ", profile->id,
                                          ": its stored skeletons do not parse")));
    }
    *response->mutable_source_skeleton() =
        std::move(*stored.mutable_source_skeleton());
    *response->mutable_target_skeleton() =
        std::move(*stored.mutable_target_skeleton());
  }
  return service_->Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* RetargetService::ListRetargetProfiles(
    grpc::CallbackServerContext* context,
    const v1::ListRetargetProfilesRequest* request,
    v1::ListRetargetProfilesResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kListRetargetProfiles);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  const int max_page = service_->options().max_page_size;
  int page_size = request->page_size();
  if (page_size < 0 || page_size > max_page) {
    return service_->Finish(
        call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           absl::StrCat("page_size: ", page_size,
                                        " is not in [0, ", max_page, "]")));
  }
  if (page_size == 0) page_size = std::min(100, max_page);
  absl::StatusOr<RetargetProfilePage> page =
      profiles_->List(page_size, request->page_token());
  if (!page.ok()) return service_->Finish(call, ToGrpcStatus(page.status()));
  for (const auto& profile : page->profiles) {
    const v1::RetargetProfile& d = profile->description;
    v1::RetargetProfileSummary* summary = response->add_profiles();
    summary->set_profile_id(profile->id);
    summary->set_version(profile->version);
    summary->set_source_skeleton_id(d.source().skeleton_id());
    summary->set_source_name(d.source().skeleton_name());
    summary->set_target_skeleton_id(d.target().skeleton_id());
    summary->set_target_name(d.target().skeleton_name());
  }
  response->set_next_page_token(page->next_page_token);
  return service_->Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* RetargetService::DeleteRetargetProfile(
    grpc::CallbackServerContext* context,
    const v1::DeleteRetargetProfileRequest* request,
    v1::DeleteRetargetProfileResponse* /*response*/) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kDeleteRetargetProfile);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  const absl::Status status = profiles_->Delete(
      request->profile_id(),
      DeletingOwner(*call.caller, service_->options().peers_delete_any));
  if (!status.ok() && !IsClientError(status)) {
    service_->error_log().Error(
        absl::StrCat("DeleteRetargetProfile: ", status.ToString()));
  }
  service_->metrics().SetRetargetProfiles(profiles_->size());
  return service_->Finish(call, ToGrpcStatus(status));
}

grpc::ServerUnaryReactor* RetargetService::UpdateRetargetProfile(
    grpc::CallbackServerContext* context,
    const v1::UpdateRetargetProfileRequest* request,
    v1::UpdateRetargetProfileResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kUpdateRetargetProfile);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  absl::StatusOr<std::shared_ptr<const BuiltRetargetProfile>> updated =
      profiles_->Update(
          request->profile_id(), request->version(), request->spec(),
          *registry_,
          DeletingOwner(*call.caller, service_->options().peers_delete_any));
  if (!updated.ok()) {
    if (!IsClientError(updated.status())) {
      service_->error_log().Error(absl::StrCat(
          "UpdateRetargetProfile: ", updated.status().ToString()));
    }
    return service_->Finish(call, ToGrpcStatus(updated.status()));
  }
  service_->metrics().SetRetargetProfiles(profiles_->size());
  *response->mutable_profile() = (*updated)->description;
  return service_->Finish(call, grpc::Status::OK);
}

grpc::ServerUnaryReactor* RetargetService::Retarget(
    grpc::CallbackServerContext* context, const v1::RetargetRequest* request,
    v1::RetargetResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kRetarget, /*watched=*/true);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  std::shared_ptr<const BuiltRetargetProfile> profile;
  double dt = 0.0;
  if (absl::Status status =
          ProfileAndFrameTime(*profiles_, request->profile_id(),
                              request->frame_time_s(), &profile, &dt);
      !status.ok()) {
    return service_->Finish(call, ToGrpcStatus(status));
  }
  const int64_t bytes = static_cast<int64_t>(request->ByteSizeLong()) +
                        RetargetResponseBound(
                            profile->target_skeleton.num_joints(),
                            request->return_globals());
  return RunOnPool(
      context, call, bytes, response,
      [this, request, response, dt, profile = std::move(profile)](
          SolveScratch& scratch, const Deadline& deadline,
          const std::atomic<bool>& /*cancelled*/) {
        retarget::RetargetState state;  // One frame on its own.
        const absl::Status status = RetargetFrame(
            *profile, request->source(), "source", dt,
            request->return_globals(), state, scratch.retarget, deadline,
            &service_->metrics(), response);
        response->set_sequence(request->sequence());
        return status;
      });
}

grpc::ServerUnaryReactor* RetargetService::RetargetBatch(
    grpc::CallbackServerContext* context,
    const v1::RetargetBatchRequest* request,
    v1::RetargetBatchResponse* response) {
  const IkService::UnaryCall call =
      service_->BeginUnary(context, Rpc::kRetargetBatch, /*watched=*/true);
  if (!call.caller.ok()) {
    return service_->Finish(call, ToGrpcStatus(call.caller.status()));
  }
  const ServiceOptions& options = service_->options();
  const int frames = request->frames_size();
  if (frames < 1 || frames > options.max_retarget_frames) {
    return service_->Finish(
        call, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                           absl::StrCat("frames: has ", frames,
                                        "; must be in [1, ",
                                        options.max_retarget_frames,
                                        "] (--max_retarget_frames)")));
  }
  std::shared_ptr<const BuiltRetargetProfile> profile;
  double dt = 0.0;
  if (absl::Status status =
          ProfileAndFrameTime(*profiles_, request->profile_id(),
                              request->frame_time_s(), &profile, &dt);
      !status.ok()) {
    return service_->Finish(call, ToGrpcStatus(status));
  }
  const int64_t response_bytes =
      frames * RetargetResponseBound(profile->target_skeleton.num_joints(),
                                     request->return_globals());
  if (response_bytes > options.max_response_bytes) {
    return service_->Finish(
        call,
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     absl::StrCat("the response would take up to ",
                                  response_bytes, " bytes, more than the "
                                  "server's --max_response_bytes (",
                                  options.max_response_bytes,
                                  "); send fewer frames per call")));
  }
  const int64_t bytes =
      static_cast<int64_t>(request->ByteSizeLong()) + response_bytes;
  // The frames share the call's solve time (--max_solve_ms).
  return RunOnPool(
      context, call, bytes, response,
      [this, request, response, dt, profile = std::move(profile)](
          SolveScratch& scratch, const Deadline& deadline,
          const std::atomic<bool>& cancelled) {
        retarget::RetargetState state;  // The clip's, frame after frame.
        std::optional<retarget::QualityMeter> meter;
        if (request->report()) meter.emplace(*profile->retargeter);
        absl::Status status;
        const int n = request->frames_size();
        response->mutable_frames()->Reserve(n);
        for (int i = 0; i < n && status.ok(); ++i) {
          if (cancelled.load(std::memory_order_relaxed)) break;
          v1::RetargetResponse* frame = response->add_frames();
          status = RetargetFrame(*profile, request->frames(i),
                                 absl::StrCat("frames[", i, "]"), dt,
                                 request->return_globals(), state,
                                 scratch.retarget, deadline,
                                 &service_->metrics(), frame);
          frame->set_sequence(static_cast<uint64_t>(i));
          if (status.ok() && meter) {
            meter->Add(scratch.retarget.source, scratch.retarget.target,
                       scratch.retarget.result, state);
          }
        }
        if (status.ok() && meter) {
          ToProto(profile->target_skeleton, meter->Result(),
                  response->mutable_quality());
        }
        return status;
      });
}

grpc::ServerUnaryReactor* RetargetService::RunOnPool(
    grpc::CallbackServerContext* context, const IkService::UnaryCall& call,
    int64_t bytes, google::protobuf::Message* response, Work work) {
  call.watched->share = service_->ShareOf(*context, *call.caller);
  if (!call.watched->charge.TryAdd(call.watched->share.get(), bytes)) {
    return service_->Finish(call, OverBudget(*call.watched->share, bytes));
  }
  SolverPool::Task task = [this, context, call, response,
                           work = std::move(work)](
                              SolveScratch& scratch) mutable {
    if (grpc::Status start = service_->StartStatus(context, call);
        !start.ok()) {
      service_->Finish(call, start);
      return;
    }
    const std::atomic<bool>& cancelled = call.watched->cancelled;
    const absl::Status status =
        work(scratch, service_->SolveDeadline(context, &cancelled), cancelled);
    const grpc::Status outcome = Outcome(status, cancelled, context);
    if (!outcome.ok()) response->Clear();
    service_->Finish(call, outcome);
  };
  if (grpc::Status queued = service_->Submit(context, absl::MakeSpan(&task, 1));
      !queued.ok()) {
    return service_->Finish(call, queued);
  }
  return call.reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
RetargetService::RetargetStream(grpc::CallbackServerContext* context) {
  return service_->OpenStream(context, Rpc::kRetargetStream, [this, context] {
    return new FrameStream<RetargetFrames>(service_, context,
                                           RetargetFrames(profiles_));
  });
}

}  // namespace reach
