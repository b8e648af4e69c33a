// A small client for reach.v1.IkService and reach.v1.RetargetService over a
// channel the caller owns.
//
// Every call carries a deadline (ClientOptions::timeout, or the stream's own
// deadline), and every failure comes back as an absl::Status whose code is
// the gRPC code and whose message names the RPC.
#ifndef REACH_CLIENT_REACH_CLIENT_H_
#define REACH_CLIENT_REACH_CLIENT_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/connect.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "importers/skeleton_file.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "reach/v1/retarget.grpc.pb.h"

namespace reach::client {

struct ClientOptions {
  absl::Duration timeout = absl::Seconds(10);  // Deadline of each unary call.
  // Sent with every call as `authorization: Bearer <token>` (a server with
  // --auth_tokens_file needs one); empty: none. See client/connect.h.
  std::string token;
  // Streams (OpenStream, OpenRetargetStream) that break with UNAVAILABLE
  // (their replica killed, drained or scaled down), or with a CANCELLED
  // this client did not ask for or UNKNOWN (a proxy such as haproxy cuts
  // the stream when its replica goes away), reopen on another
  // replica and send the frames not yet answered again, for up to
  // `resume_within` after the break. A SolveStream goes on warm: its first
  // frame again starts from the last answered pose (as if it had not
  // broken). A RetargetStream's planting starts afresh. Off: a break ends
  // the stream (Finish says why).
  bool resume_streams = false;
  absl::Duration resume_within = absl::Seconds(5);
};

// Whether and for how long a broken stream is reopened (ClientOptions'
// resume_streams and resume_within, or one stream's own).
struct ResumeOptions {
  bool enabled = false;
  absl::Duration within = absl::Seconds(5);
};

// grpc::Status -> absl::Status, code for code, the message prefixed by
// `rpc` ("Solve: goals[0].chain: ...").
absl::Status FromGrpc(const grpc::Status& status, absl::string_view rpc);

template <typename Request, typename Response>
class FrameStreamClient;
using SolveStream = FrameStreamClient<v1::SolveRequest, v1::SolveResponse>;
using RetargetStream =
    FrameStreamClient<v1::RetargetRequest, v1::RetargetResponse>;
template <typename Response>
struct StreamAnswer;
using StreamResult = StreamAnswer<v1::SolveResponse>;

// How a FrameStreamClient reopens a broken stream (ClientOptions).
template <typename Request, typename Response>
struct StreamResume {
  bool enabled = false;
  absl::Duration within = absl::Seconds(5);
  // Each answered frame with its request, in order (the reader's thread).
  std::function<void(const Request&, const Response&)> answered;
  // Before the unanswered frames go out again on a new call: may give the
  // first its warm start. An error ends the stream with it.
  std::function<absl::Status(std::deque<Request>* unanswered)> reseed;
  // Between attempts: waits until the channel is connected or `until`
  // (absent: a plain sleep). With the synchronous API nothing else drives
  // the channel's reconnection while the stream waits (a call on a channel
  // in TRANSIENT_FAILURE fails at once without polling it), so a restarted
  // server was found only by gRPC's 5 s backup poller.
  std::function<void(absl::Time until)> wait_connected;
};

// The `p` quantile (0..1, nearest rank) of `sorted` (ascending); zero when
// empty.
absl::Duration Percentile(const std::vector<absl::Duration>& sorted, double p);

class ReachClient {
 public:
  explicit ReachClient(std::shared_ptr<grpc::ChannelInterface> channel,
                       ClientOptions options = {});

  absl::StatusOr<v1::RegisterSkeletonResponse> Register(
      const v1::Skeleton& skeleton);
  // Imports a skeleton file (import::LoadSkeletonFile) and registers it.
  absl::StatusOr<v1::RegisterSkeletonResponse> RegisterFile(
      const std::string& path, const import::SkeletonFileOptions& options = {});
  // The server imports the file's bytes (ImportSkeleton): any language's
  // client can register BVH, URDF, glTF/GLB or skeleton JSON this way.
  absl::StatusOr<v1::ImportSkeletonResponse> ImportSkeleton(
      const v1::ImportSkeletonRequest& request);
  // Reads `path` and sends it to ImportSkeleton (its name names the
  // format); `return_motion`: a BVH clip's frames come back as poses.
  absl::StatusOr<v1::ImportSkeletonResponse> ImportFile(
      const std::string& path, bool return_motion = false);
  absl::StatusOr<v1::GetSkeletonResponse> GetSkeleton(const std::string& id);
  // One page; `page_token` from the previous page's next_page_token.
  absl::StatusOr<v1::ListSkeletonsResponse> ListSkeletons(
      int page_size = 0, const std::string& page_token = "");
  absl::Status DeleteSkeleton(const std::string& id);

  absl::StatusOr<v1::SolveResponse> Solve(const v1::SolveRequest& request);
  absl::StatusOr<v1::SolveBatchResponse> SolveBatch(
      const v1::SolveBatchRequest& request);

  // grpc.health.v1.Health/Check of `service` ("" = the whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "");

  // Opens a SolveStream that ends at `deadline` from now at the latest, with
  // at most `max_in_flight` (>= 1) frames sent and not yet answered.
  std::unique_ptr<SolveStream> OpenStream(absl::Duration deadline,
                                          int max_in_flight = 8);
  // As above, resuming as `resume` says instead of as ClientOptions say (a
  // long-lived caller such as `reach vmc` waits longer for a restarted
  // server than a one-off call should).
  std::unique_ptr<SolveStream> OpenStream(absl::Duration deadline,
                                          int max_in_flight,
                                          const ResumeOptions& resume);

  // reach.v1.RetargetService.
  absl::StatusOr<v1::CreateRetargetProfileResponse> CreateRetargetProfile(
      const v1::RetargetProfileSpec& spec);
  // `include_skeletons`: both skeletons the profile keeps, too.
  absl::StatusOr<v1::GetRetargetProfileResponse> GetRetargetProfile(
      const std::string& id, bool include_skeletons = false);
  // One page; `page_token` from the previous page's next_page_token.
  absl::StatusOr<v1::ListRetargetProfilesResponse> ListRetargetProfiles(
      int page_size = 0, const std::string& page_token = "");
  absl::Status DeleteRetargetProfile(const std::string& id);
  absl::StatusOr<v1::RetargetResponse> Retarget(
      const v1::RetargetRequest& request);
  absl::StatusOr<v1::RetargetBatchResponse> RetargetBatch(
      const v1::RetargetBatchRequest& request);
  // As OpenStream, for RetargetStream.
  std::unique_ptr<RetargetStream> OpenRetargetStream(absl::Duration deadline,
                                                     int max_in_flight = 8);
  std::unique_ptr<RetargetStream> OpenRetargetStream(
      absl::Duration deadline, int max_in_flight, const ResumeOptions& resume);

  v1::IkService::Stub& stub() { return *stub_; }
  const ClientOptions& options() const { return options_; }

 private:
  std::unique_ptr<grpc::ClientContext> NewContext() const;
  // The last answered pose of a SolveStream, for a resume's warm start.
  class WarmPose;
  // One unary call on `stub` with the deadline; errors name `rpc`.
  template <typename Stub, typename Request, typename Response>
  absl::StatusOr<Response> Call(
      Stub& stub,
      grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                   Response*),
      const Request& request, absl::string_view rpc);
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (v1::IkService::Stub::*method)(grpc::ClientContext*,
                                                  const Request&, Response*),
      const Request& request, absl::string_view rpc) {
    return Call(*stub_, method, request, rpc);
  }

  std::shared_ptr<grpc::ChannelInterface> channel_;
  ClientOptions options_;
  std::unique_ptr<v1::IkService::Stub> stub_;
  std::unique_ptr<v1::RetargetService::Stub> retarget_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// One answered frame and its round trip (from Send to the arrival of its
// response), and when the reader thread read it (before Receive handed it
// out: the hand-over's wait is the time since).
template <typename Response>
struct StreamAnswer {
  Response response;
  absl::Duration latency;
  absl::Time read_at;
};

// A bidirectional stream of frames (SolveStream, RetargetStream) with
// back-pressure: Send blocks while max_in_flight frames are unanswered. A
// reader thread takes responses as they arrive (so latencies are not
// inflated by a busy sender); Receive hands them out in order. One thread
// may Send while another Receives.
template <typename Request, typename Response>
class FrameStreamClient {
 public:
  using Call = grpc::ClientReaderWriter<Request, Response>;
  using Result = StreamAnswer<Response>;
  // `open` starts the call on the context; `rpc` names it in errors;
  // `token`: as ClientOptions::token.
  // `resume`: whether and how a stream broken by UNAVAILABLE is reopened.
  FrameStreamClient(
      std::function<std::unique_ptr<Call>(grpc::ClientContext*)> open,
      absl::string_view rpc, absl::Duration deadline, int max_in_flight,
      absl::string_view token = "",
      StreamResume<Request, Response> resume = {});
  ~FrameStreamClient();  // Cancels the call if Finish was not called.

  // Sends one frame; blocks while the window is full. False when the stream
  // is broken (Finish says why).
  bool Send(const Request& frame);
  // The next response in order; blocks until one arrives. False when no
  // frame is outstanding (every frame sent so far has been received) or the
  // stream is broken.
  bool Receive(Result* result);
  // The next response if one has arrived; never blocks.
  bool TryReceive(Result* result);
  // Half-closes, waits for the outstanding responses (kept for Receive) and
  // returns the call's status.
  absl::Status Finish();

  int in_flight() const;
  // How many times the stream was reopened after a break.
  int resumes() const;
  // Ends the stream now: the call is cancelled and a resume under way gives
  // up (at its next attempt), so Send and Receive return false soon. Any
  // thread; Finish still reaps it.
  void Cancel();

 private:
  void ReadLoop();
  // After a break: reopens the call and sends the unanswered frames again.
  // False when the stream ends instead (status_ says why).
  bool Resume(const grpc::Status& broken)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void Open() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  bool PopLocked(Result* result) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<std::unique_ptr<Call>(grpc::ClientContext*)> open_;
  const std::string rpc_;
  const std::string token_;
  const absl::Time deadline_;
  const int max_in_flight_;
  const StreamResume<Request, Response> resume_;

  // Writes, and the call and its context, which a resume replaces. Lock
  // order: write_mu_, then context_mu_ or mu_.
  absl::Mutex write_mu_;
  std::unique_ptr<Call> call_ ABSL_GUARDED_BY(write_mu_);
  bool writes_done_ ABSL_GUARDED_BY(write_mu_) = false;
  // A resume found no frame outstanding: Send seeds the next one.
  bool seed_next_ ABSL_GUARDED_BY(write_mu_) = false;
  // The context may be cancelled from another thread while a write waits.
  absl::Mutex context_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::unique_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(context_mu_);
  bool cancelled_ ABSL_GUARDED_BY(context_mu_) = false;
  std::thread reader_;

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  std::deque<absl::Time> sent_at_ ABSL_GUARDED_BY(mu_);  // Unanswered frames.
  // Their requests, kept to send again after a break (resume only).
  std::deque<Request> unanswered_ ABSL_GUARDED_BY(mu_);
  std::deque<Result> received_ ABSL_GUARDED_BY(mu_);
  bool read_done_ ABSL_GUARDED_BY(mu_) = false;
  int resumes_ ABSL_GUARDED_BY(mu_) = 0;
  // The reader's: since when the stream has been reopened with no answer
  // read (a server that is down fails each new call at once, and with no
  // frame outstanding every reopening "succeeds"), and how many times.
  absl::Time broken_since_ = absl::InfiniteFuture();
  int reopened_unanswered_ = 0;
  bool write_failed_ = false;
  bool finished_ = false;
  absl::Status status_;  // Set by the reader when the call ends.
};

extern template class FrameStreamClient<v1::SolveRequest, v1::SolveResponse>;
extern template class FrameStreamClient<v1::RetargetRequest,
                                        v1::RetargetResponse>;

}  // namespace reach::client

#endif  // REACH_CLIENT_REACH_CLIENT_H_
