#include "client/reach_client.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
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

// A SolveStream's last answered pose, followed from the answers: each lists
// the joints that differ from its start (the previous answer, the frame's
// start_pose, or the rest pose on a stream's first frame or a new
// skeleton). A resumed stream's first frame starts from it, as the broken
// stream's next frame would have (warm). Only the reader's thread uses it.
class ReachClient::WarmPose {
 public:
  explicit WarmPose(ReachClient* client) : client_(client) {}

  void Answered(const v1::SolveRequest& request,
                const v1::SolveResponse& response) {
    // A refused or skipped frame leaves the server's warm start as it was.
    if (response.has_error() || response.skipped()) return;
    if (request.skeleton_id() != skeleton_id_ || request.has_start_pose()) {
      skeleton_id_ = request.skeleton_id();
      has_base_ = request.has_start_pose();
      base_ = request.start_pose();
      rotations_.clear();
      root_.reset();
    }
    for (int i = 0; i < response.rotated_joints_size() &&
                    4 * i + 3 < response.rotations_size();
         ++i) {
      rotations_[response.rotated_joints(i)] = {
          response.rotations(4 * i), response.rotations(4 * i + 1),
          response.rotations(4 * i + 2), response.rotations(4 * i + 3)};
    }
    for (int i = 0; i < response.translated_joints_size() &&
                    3 * i + 2 < response.translations_size();
         ++i) {
      // A pose carries the root's translation only (a stretched limb's
      // lengths start again from rest).
      if (response.translated_joints(i) != 0) continue;
      root_ = std::array<double, 3>{response.translations(3 * i),
                                    response.translations(3 * i + 1),
                                    response.translations(3 * i + 2)};
    }
    answered_ = true;
  }

  absl::Status Reseed(std::deque<v1::SolveRequest>* frames) {
    if (frames->empty() || !answered_) return absl::OkStatus();
    v1::SolveRequest& first = frames->front();
    if (first.has_start_pose() || first.skeleton_id() != skeleton_id_) {
      return absl::OkStatus();  // It does not start from the last answer.
    }
    v1::Pose pose;
    if (has_base_) {
      pose = base_;
    } else {
      // The rest pose, as the registry (shared by every replica) has it.
      absl::StatusOr<v1::GetSkeletonResponse> skeleton =
          client_->GetSkeleton(skeleton_id_);
      if (!skeleton.ok()) return skeleton.status();
      for (const v1::Joint& joint : skeleton->skeleton().joints()) {
        v1::Quat* q = pose.add_rotations();
        if (joint.rest().has_rotation()) {
          *q = joint.rest().rotation();
        } else {
          q->set_w(1);
        }
      }
    }
    for (const auto& [joint, q] : rotations_) {
      if (static_cast<int>(joint) >= pose.rotations_size()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "joint ", joint, " of the last answer is not in skeleton ",
            skeleton_id_));
      }
      v1::Quat* out = pose.mutable_rotations(static_cast<int>(joint));
      out->set_w(q[0]);
      out->set_x(q[1]);
      out->set_y(q[2]);
      out->set_z(q[3]);
    }
    if (root_.has_value()) {
      pose.mutable_root_translation()->set_x((*root_)[0]);
      pose.mutable_root_translation()->set_y((*root_)[1]);
      pose.mutable_root_translation()->set_z((*root_)[2]);
    }
    *first.mutable_start_pose() = std::move(pose);
    return absl::OkStatus();
  }

 private:
  ReachClient* const client_;
  std::string skeleton_id_;
  bool answered_ = false;
  bool has_base_ = false;  // base_ is the frame's start_pose, else rest.
  v1::Pose base_;
  std::map<uint32_t, std::array<double, 4>> rotations_;
  std::optional<std::array<double, 3>> root_;
};

std::unique_ptr<SolveStream> ReachClient::OpenStream(absl::Duration deadline,
                                                     int max_in_flight) {
  return OpenStream(
      deadline, max_in_flight,
      ResumeOptions{options_.resume_streams, options_.resume_within});
}

std::unique_ptr<SolveStream> ReachClient::OpenStream(
    absl::Duration deadline, int max_in_flight,
    const ResumeOptions& resume_options) {
  StreamResume<v1::SolveRequest, v1::SolveResponse> resume;
  resume.enabled = resume_options.enabled;
  resume.within = resume_options.within;
  if (resume.enabled) {
    resume.wait_connected = [channel = channel_](absl::Time until) {
      channel->WaitForConnected(absl::ToChronoTime(until));
    };
    auto warm = std::make_shared<WarmPose>(this);
    resume.answered = [warm](const v1::SolveRequest& request,
                             const v1::SolveResponse& response) {
      warm->Answered(request, response);
    };
    resume.reseed = [warm](std::deque<v1::SolveRequest>* frames) {
      return warm->Reseed(frames);
    };
  }
  return std::make_unique<SolveStream>(
      [this](grpc::ClientContext* context) {
        return stub_->SolveStream(context);
      },
      "SolveStream", deadline, max_in_flight, options_.token,
      std::move(resume));
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
  return OpenRetargetStream(
      deadline, max_in_flight,
      ResumeOptions{options_.resume_streams, options_.resume_within});
}

std::unique_ptr<RetargetStream> ReachClient::OpenRetargetStream(
    absl::Duration deadline, int max_in_flight, const ResumeOptions& resume) {
  return std::make_unique<RetargetStream>(
      [this](grpc::ClientContext* context) {
        return retarget_->RetargetStream(context);
      },
      "RetargetStream", deadline, max_in_flight, options_.token,
      StreamResume<v1::RetargetRequest, v1::RetargetResponse>{
          resume.enabled, resume.within, nullptr, nullptr,
          [channel = channel_](absl::Time until) {
            channel->WaitForConnected(absl::ToChronoTime(until));
          }});
}

template <typename Request, typename Response>
FrameStreamClient<Request, Response>::FrameStreamClient(
    std::function<std::unique_ptr<Call>(grpc::ClientContext*)> open,
    absl::string_view rpc, absl::Duration deadline, int max_in_flight,
    absl::string_view token, StreamResume<Request, Response> resume)
    : open_(std::move(open)),
      rpc_(rpc),
      token_(token),
      deadline_(absl::Now() + deadline),
      max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight),
      resume_(std::move(resume)) {
  {
    absl::MutexLock lock(&write_mu_);
    Open();
  }
  reader_ = std::thread([this] { ReadLoop(); });
}

template <typename Request, typename Response>
void FrameStreamClient<Request, Response>::Open() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(deadline_));
  AddToken(token_, context.get());
  grpc::ClientContext* raw = context.get();
  {
    absl::MutexLock lock(&context_mu_);
    if (cancelled_) raw->TryCancel();
    // The old context outlives its call: call_ is replaced below.
    std::swap(context_, context);
  }
  std::unique_ptr<Call> old = std::move(call_);
  call_ = open_(raw);
  old.reset();
  context.reset();
}

template <typename Request, typename Response>
FrameStreamClient<Request, Response>::~FrameStreamClient() {
  if (!finished_) {
    {
      absl::MutexLock lock(&context_mu_);
      cancelled_ = true;
      context_->TryCancel();
    }
    reader_.join();
  }
}

template <typename Request, typename Response>
void FrameStreamClient<Request, Response>::ReadLoop() {
  while (true) {
    Call* call;
    {
      absl::MutexLock lock(&write_mu_);
      call = call_.get();
    }
    Result result;
    bool more_than_sent = false;
    while (call->Read(&result.response)) {
      const absl::Time now = absl::Now();
      broken_since_ = absl::InfiniteFuture();
      reopened_unanswered_ = 0;
      absl::MutexLock lock(&mu_);
      if (sent_at_.empty()) {  // More responses than requests: broken.
        more_than_sent = true;
        break;
      }
      result.latency = now - sent_at_.front();
      result.read_at = now;
      sent_at_.pop_front();
      if (resume_.enabled) {
        if (resume_.answered) {
          resume_.answered(unanswered_.front(), result.response);
        }
        unanswered_.pop_front();
      }
      received_.push_back(std::move(result));
    }
    if (more_than_sent) {
      absl::MutexLock lock(&context_mu_);
      context_->TryCancel();
    }
    // The call is over: a write waiting on it returns, so the lock comes.
    absl::MutexLock lock(&write_mu_);
    const grpc::Status status = call_->Finish();
    if (more_than_sent || !Resume(status)) break;
  }
  absl::MutexLock lock(&mu_);
  read_done_ = true;
}

template <typename Request, typename Response>
bool FrameStreamClient<Request, Response>::Resume(const grpc::Status& broken) {
  status_ = FromGrpc(broken, rpc_);
  // Also CANCELLED (that this client did not ask for: checked below) and
  // UNKNOWN: what gRPC reports when a proxy between cuts the stream after
  // the answers began (haproxy, its replica gone: RST_STREAM CANCEL, or
  // the response ended without a status). reach-server itself ends a
  // stream with neither.
  if (!resume_.enabled ||
      (broken.error_code() != grpc::StatusCode::UNAVAILABLE &&
       broken.error_code() != grpc::StatusCode::CANCELLED &&
       broken.error_code() != grpc::StatusCode::UNKNOWN)) {
    return false;
  }
  {
    absl::MutexLock lock(&context_mu_);
    if (cancelled_) return false;
  }
  std::deque<Request> frames;
  {
    absl::MutexLock lock(&mu_);
    if (writes_done_ && unanswered_.empty()) {
      // Every frame was answered and no more will come: nothing to resume.
      status_ = absl::OkStatus();
      return false;
    }
    frames = unanswered_;
  }
  // Another replica may not be ready yet (or the balancer may still pick
  // the one that went away): try again, briefly apart, within the budget,
  // which runs from the first break since the last answer (a call reopened
  // with nothing to send breaks again at once while the server is down:
  // that is no progress, and must not spin).
  if (broken_since_ == absl::InfiniteFuture()) broken_since_ = absl::Now();
  const absl::Time give_up =
      std::min(broken_since_ + resume_.within, deadline_);
  grpc::Status attempt = broken;
  for (int round = reopened_unanswered_ > 0 ? std::min(reopened_unanswered_, 10)
                                            : 0;
       ; ++round) {
    if (round > 0) {
      if (absl::Now() >= give_up) {
        status_ = absl::UnavailableError(absl::StrCat(
            rpc_, ": broken (", broken.error_message(),
            ") and not reopened within ", absl::FormatDuration(resume_.within),
            ": ", attempt.error_message()));
        return false;
      }
      const absl::Time until =
          absl::Now() + absl::Milliseconds(std::min(10 * round, 100));
      if (resume_.wait_connected) {
        resume_.wait_connected(until);
      } else {
        absl::SleepFor(until - absl::Now());
      }
      absl::MutexLock lock(&context_mu_);
      if (cancelled_) {
        status_ = absl::CancelledError(
            absl::StrCat(rpc_, ": cancelled while reopening after a break (",
                         broken.error_message(), ")"));
        return false;
      }
    }
    if (resume_.reseed) {
      const absl::Status seeded = resume_.reseed(&frames);
      if (!seeded.ok()) {
        // A replica draining (SIGTERM) cancels the calls it still holds,
        // this one's reseed among them: like a broken stream's CANCELLED,
        // the server going away, not this client (whose own cancel each
        // round checks), so the next round asks again.
        if (seeded.code() == absl::StatusCode::kUnavailable ||
            seeded.code() == absl::StatusCode::kCancelled) {
          attempt = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 std::string(seeded.message()));
          continue;
        }
        status_ =
            absl::Status(seeded.code(),
                         absl::StrCat(rpc_, ": resuming: ", seeded.message()));
        return false;
      }
    }
    Open();
    bool written = true;
    for (const Request& frame : frames) {
      if (!call_->Write(frame)) {
        written = false;
        break;
      }
    }
    if (written && writes_done_) written = call_->WritesDone();
    if (written) break;
    attempt = call_->Finish();
    if (attempt.error_code() != grpc::StatusCode::UNAVAILABLE) {
      status_ = FromGrpc(attempt, rpc_);
      return false;
    }
  }
  ++reopened_unanswered_;
  // Nothing was outstanding: the next frame sent starts from the last
  // answer instead.
  seed_next_ = frames.empty();
  absl::MutexLock lock(&mu_);
  // The first frame may carry its warm start now: keep what was sent.
  if (!frames.empty()) unanswered_.front() = frames.front();
  ++resumes_;
  status_ = absl::OkStatus();
  return true;
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
  }
  // Queued and written under one lock, so a resume sends it again exactly
  // when it went out on the call that broke.
  absl::MutexLock write_lock(&write_mu_);
  const Request* out = &frame;
  std::deque<Request> seeded;
  {
    absl::MutexLock lock(&mu_);
    if (read_done_) return false;
    if (seed_next_ && resume_.reseed) {
      // The first frame after a resume with nothing outstanding.
      seed_next_ = false;
      seeded.push_back(frame);
      if (resume_.reseed(&seeded).ok()) out = &seeded.front();
    }
    sent_at_.push_back(absl::Now());
    if (resume_.enabled) unanswered_.push_back(*out);
  }
  if (!call_->Write(*out)) {
    // With resume, the reader sends it again on the next call.
    if (resume_.enabled) return true;
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
  {
    absl::MutexLock lock(&write_mu_);
    writes_done_ = true;
    if (!write_failed_) call_->WritesDone();
  }
  reader_.join();
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

template <typename Request, typename Response>
void FrameStreamClient<Request, Response>::Cancel() {
  absl::MutexLock lock(&context_mu_);
  cancelled_ = true;
  context_->TryCancel();
}

template <typename Request, typename Response>
int FrameStreamClient<Request, Response>::resumes() const {
  absl::MutexLock lock(&mu_);
  return resumes_;
}

template class FrameStreamClient<v1::SolveRequest, v1::SolveResponse>;
template class FrameStreamClient<v1::RetargetRequest, v1::RetargetResponse>;

}  // namespace reach::client
