#include "client/reach_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "importers/import_error.h"

namespace reach::client {

absl::Status FromGrpc(const grpc::Status& status, absl::string_view rpc) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(rpc, ": ", status.error_message()));
}

absl::Duration Percentile(const std::vector<absl::Duration>& sorted,
                          double p) {
  if (sorted.empty()) return absl::ZeroDuration();
  const size_t index = std::min(
      sorted.size() - 1, static_cast<size_t>(p * (sorted.size() - 1) + 0.5));
  return sorted[index];
}

ReachClient::ReachClient(std::shared_ptr<grpc::ChannelInterface> channel,
                         ClientOptions options)
    : channel_(std::move(channel)),
      options_(options),
      stub_(v1::IkService::NewStub(channel_)),
      retarget_(v1::RetargetService::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> ReachClient::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  AddToken(options_.token, context.get());
  return context;
}

template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> ReachClient::Call(
    Stub& stub,
    grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                 Response*),
    const Request& request, absl::string_view rpc) {
  Response response;
  auto context = NewContext();
  const grpc::Status status = (stub.*method)(context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status, rpc);
  return response;
}

absl::StatusOr<v1::RegisterSkeletonResponse> ReachClient::Register(
    const v1::Skeleton& skeleton) {
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = skeleton;
  return Call(&v1::IkService::Stub::RegisterSkeleton, request,
              "RegisterSkeleton");
}

absl::StatusOr<v1::RegisterSkeletonResponse> ReachClient::RegisterFile(
    const std::string& path, const import::SkeletonFileOptions& options) {
  absl::StatusOr<v1::Skeleton> skeleton =
      import::LoadSkeletonFile(path, options);
  if (!skeleton.ok()) return skeleton.status();
  return Register(*skeleton);
}

absl::StatusOr<v1::ImportSkeletonResponse> ReachClient::ImportSkeleton(
    const v1::ImportSkeletonRequest& request) {
  return Call(&v1::IkService::Stub::ImportSkeleton, request, "ImportSkeleton");
}

absl::StatusOr<v1::ImportSkeletonResponse> ReachClient::ImportFile(
    const std::string& path, bool return_motion) {
  v1::ImportSkeletonRequest request;
  if (absl::Status s = import::ReadFile(path, request.mutable_data()); !s.ok()) {
    return s;
  }
  const size_t slash = path.rfind('/');
  request.set_file_name(slash == std::string::npos ? path
                                                   : path.substr(slash + 1));
  request.set_return_motion(return_motion);
  return ImportSkeleton(request);
}

absl::StatusOr<v1::GetSkeletonResponse> ReachClient::GetSkeleton(
    const std::string& id) {
  v1::GetSkeletonRequest request;
  request.set_skeleton_id(id);
  return Call(&v1::IkService::Stub::GetSkeleton, request, "GetSkeleton");
}

absl::StatusOr<v1::ListSkeletonsResponse> ReachClient::ListSkeletons(
    int page_size, const std::string& page_token) {
  v1::ListSkeletonsRequest request;
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return Call(&v1::IkService::Stub::ListSkeletons, request, "ListSkeletons");
}

absl::Status ReachClient::DeleteSkeleton(const std::string& id) {
  v1::DeleteSkeletonRequest request;
  request.set_skeleton_id(id);
  return Call(&v1::IkService::Stub::DeleteSkeleton, request, "DeleteSkeleton")
      .status();
}

absl::StatusOr<v1::SolveResponse> ReachClient::Solve(
    const v1::SolveRequest& request) {
  return Call(&v1::IkService::Stub::Solve, request, "Solve");
}

absl::StatusOr<v1::SolveBatchResponse> ReachClient::SolveBatch(
    const v1::SolveBatchRequest& request) {
  return Call(&v1::IkService::Stub::SolveBatch, request, "SolveBatch");
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus>
ReachClient::Health(const std::string& service) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  auto context = NewContext();
  const grpc::Status status = health_->Check(context.get(), request, &response);
  if (!status.ok()) return FromGrpc(status, "Health.Check");
  return response.status();
}

std::unique_ptr<SolveStream> ReachClient::OpenStream(absl::Duration deadline,
                                                     int max_in_flight) {
  return std::make_unique<SolveStream>(
      [this](grpc::ClientContext* context) {
        return stub_->SolveStream(context);
      },
      "SolveStream", deadline, max_in_flight, options_.token);
}

absl::StatusOr<v1::CreateRetargetProfileResponse>
ReachClient::CreateRetargetProfile(const v1::RetargetProfileSpec& spec) {
  v1::CreateRetargetProfileRequest request;
  *request.mutable_spec() = spec;
  return Call(*retarget_, &v1::RetargetService::Stub::CreateRetargetProfile,
              request, "CreateRetargetProfile");
}

absl::StatusOr<v1::GetRetargetProfileResponse> ReachClient::GetRetargetProfile(
    const std::string& id, bool include_skeletons) {
  v1::GetRetargetProfileRequest request;
  request.set_profile_id(id);
  request.set_include_skeletons(include_skeletons);
  return Call(*retarget_, &v1::RetargetService::Stub::GetRetargetProfile,
              request, "GetRetargetProfile");
}

absl::StatusOr<v1::ListRetargetProfilesResponse>
ReachClient::ListRetargetProfiles(int page_size,
                                  const std::string& page_token) {
  v1::ListRetargetProfilesRequest request;
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return Call(*retarget_, &v1::RetargetService::Stub::ListRetargetProfiles,
              request, "ListRetargetProfiles");
}

absl::Status ReachClient::DeleteRetargetProfile(const std::string& id) {
  v1::DeleteRetargetProfileRequest request;
  request.set_profile_id(id);
  return Call(*retarget_, &v1::RetargetService::Stub::DeleteRetargetProfile,
              request, "DeleteRetargetProfile")
      .status();
}

absl::StatusOr<v1::RetargetResponse> ReachClient::Retarget(
    const v1::RetargetRequest& request) {
  return Call(*retarget_, &v1::RetargetService::Stub::Retarget, request,
              "Retarget");
}

absl::StatusOr<v1::RetargetBatchResponse> ReachClient::RetargetBatch(
    const v1::RetargetBatchRequest& request) {
  return Call(*retarget_, &v1::RetargetService::Stub::RetargetBatch, request,
              "RetargetBatch");
}

std::unique_ptr<RetargetStream> ReachClient::OpenRetargetStream(
    absl::Duration deadline, int max_in_flight) {
  return std::make_unique<RetargetStream>(
      [this](grpc::ClientContext* context) {
        return retarget_->RetargetStream(context);
      },
      "RetargetStream", deadline, max_in_flight, options_.token);
}

template <typename Request, typename Response>
FrameStreamClient<Request, Response>::FrameStreamClient(
    const std::function<std::unique_ptr<Call>(grpc::ClientContext*)>& open,
    absl::string_view rpc, absl::Duration deadline, int max_in_flight,
    absl::string_view token)
    : rpc_(rpc), max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight) {
  context_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  AddToken(token, &context_);
  call_ = open(&context_);
  reader_ = std::thread([this] { ReadLoop(); });
}

template <typename Request, typename Response>
FrameStreamClient<Request, Response>::~FrameStreamClient() {
  if (!finished_) {
    context_.TryCancel();
    reader_.join();
    call_->Finish().IgnoreError();
  }
}

template <typename Request, typename Response>
void FrameStreamClient<Request, Response>::ReadLoop() {
  Result result;
  while (call_->Read(&result.response)) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    if (sent_at_.empty()) break;  // More responses than requests: broken.
    result.latency = now - sent_at_.front();
    sent_at_.pop_front();
    received_.push_back(std::move(result));
  }
  absl::MutexLock lock(&mu_);
  read_done_ = true;
}

template <typename Request, typename Response>
bool FrameStreamClient<Request, Response>::Send(const Request& frame) {
  if (write_failed_ || finished_) return false;
  {
    absl::MutexLock lock(&mu_);
    const auto room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return read_done_ || static_cast<int>(sent_at_.size()) < max_in_flight_;
    };
    mu_.Await(absl::Condition(&room));
    if (read_done_) return false;
    sent_at_.push_back(absl::Now());
  }
  if (!call_->Write(frame)) {
    // The frame never left: it will not be answered.
    write_failed_ = true;
    absl::MutexLock lock(&mu_);
    sent_at_.pop_back();
    return false;
  }
  return true;
}

template <typename Request, typename Response>
bool FrameStreamClient<Request, Response>::Receive(Result* result) {
  absl::MutexLock lock(&mu_);
  const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !received_.empty() || read_done_ || sent_at_.empty();
  };
  mu_.Await(absl::Condition(&ready));
  return PopLocked(result);
}

template <typename Request, typename Response>
bool FrameStreamClient<Request, Response>::TryReceive(Result* result) {
  absl::MutexLock lock(&mu_);
  return PopLocked(result);
}

template <typename Request, typename Response>
bool FrameStreamClient<Request, Response>::PopLocked(Result* result) {
  if (received_.empty()) return false;
  *result = std::move(received_.front());
  received_.pop_front();
  return true;
}

template <typename Request, typename Response>
absl::Status FrameStreamClient<Request, Response>::Finish() {
  if (finished_) return status_;
  finished_ = true;
  if (!write_failed_) call_->WritesDone();
  reader_.join();
  status_ = FromGrpc(call_->Finish(), rpc_);
  if (status_.ok()) {
    absl::MutexLock lock(&mu_);
    if (!sent_at_.empty()) {
      status_ = absl::DataLossError(absl::StrCat(
          rpc_, ": the server closed the stream with ", sent_at_.size(),
          " frames unanswered"));
    }
  }
  return status_;
}

template <typename Request, typename Response>
int FrameStreamClient<Request, Response>::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(sent_at_.size());
}

template class FrameStreamClient<v1::SolveRequest, v1::SolveResponse>;
template class FrameStreamClient<v1::RetargetRequest, v1::RetargetResponse>;

}  // namespace reach::client
