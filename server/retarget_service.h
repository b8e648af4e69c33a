// reach.v1.RetargetService on gRPC's callback API, beside IkService and
// sharing its machinery (authentication, metrics, the solver pool, the
// memory budget, streams and shutdown). Handlers are thin: look up the
// profile (retarget_profiles.h), run frames on the pool
// (retarget_call.h), convert.
#ifndef REACH_SERVER_RETARGET_SERVICE_H_
#define REACH_SERVER_RETARGET_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "retarget/retargeter.h"
#include "server/frame_stream.h"
#include "server/ik_service.h"
#include "server/retarget_profiles.h"

namespace reach {

// RetargetStream's frames (see frame_stream.h): each a RetargetRequest,
// retargeted with one RetargetState per stream (a new one when the stream
// switches profiles).
struct RetargetFrames {
  using Request = v1::RetargetRequest;
  using Response = v1::RetargetResponse;
  static constexpr Rpc kRpc = Rpc::kRetargetStream;
  static constexpr const char* kRequestType = "reach.v1.RetargetRequest";

  explicit RetargetFrames(const RetargetProfiles* profiles)
      : profiles(profiles) {}
  absl::Status Answer(IkService& service, const Deadline& deadline,
                      WatchedStream* watched, const Request& request,
                      SolveScratch& scratch, Response* out);
  // The skipped frame's time is added to the next answered frame's.
  void Skipped(const Request& request);

  const RetargetProfiles* profiles;
  std::string profile_id;  // The state's profile.
  retarget::RetargetState state;
  double skipped_seconds = 0.0;
};

extern template class FrameStream<RetargetFrames>;

// RetargetStream is raw (bytes in and out, parsed by FrameStream) so that a
// frame that does not parse gets an answer instead of ending the stream.
using RetargetServiceBase =
    v1::RetargetService::WithCallbackMethod_CreateRetargetProfile<
        v1::RetargetService::WithCallbackMethod_GetRetargetProfile<
            v1::RetargetService::WithCallbackMethod_ListRetargetProfiles<
                v1::RetargetService::WithCallbackMethod_DeleteRetargetProfile<
                    v1::RetargetService::WithCallbackMethod_UpdateRetargetProfile<
                    v1::RetargetService::WithCallbackMethod_Retarget<
                        v1::RetargetService::WithCallbackMethod_RetargetBatch<
                            v1::RetargetService::
                                WithRawCallbackMethod_RetargetStream<
                                    v1::RetargetService::Service>>>>>>>>;

class RetargetService final : public RetargetServiceBase {
 public:
  // Every pointer must outlive the service.
  RetargetService(IkService* service, Registry* registry,
                  RetargetProfiles* profiles);

  grpc::ServerUnaryReactor* CreateRetargetProfile(
      grpc::CallbackServerContext* context,
      const v1::CreateRetargetProfileRequest* request,
      v1::CreateRetargetProfileResponse* response) override;
  grpc::ServerUnaryReactor* GetRetargetProfile(
      grpc::CallbackServerContext* context,
      const v1::GetRetargetProfileRequest* request,
      v1::GetRetargetProfileResponse* response) override;
  grpc::ServerUnaryReactor* ListRetargetProfiles(
      grpc::CallbackServerContext* context,
      const v1::ListRetargetProfilesRequest* request,
      v1::ListRetargetProfilesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteRetargetProfile(
      grpc::CallbackServerContext* context,
      const v1::DeleteRetargetProfileRequest* request,
      v1::DeleteRetargetProfileResponse* response) override;
  grpc::ServerUnaryReactor* UpdateRetargetProfile(
      grpc::CallbackServerContext* context,
      const v1::UpdateRetargetProfileRequest* request,
      v1::UpdateRetargetProfileResponse* response) override;
  grpc::ServerUnaryReactor* Retarget(grpc::CallbackServerContext* context,
                                     const v1::RetargetRequest* request,
                                     v1::RetargetResponse* response) override;
  grpc::ServerUnaryReactor* RetargetBatch(
      grpc::CallbackServerContext* context,
      const v1::RetargetBatchRequest* request,
      v1::RetargetBatchResponse* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* RetargetStream(
      grpc::CallbackServerContext* context) override;

 private:
  // A unary call's frames on the solver pool: `bytes` charged on the
  // memory budget until the call is done; `work` runs with the call's
  // solve deadline (--max_solve_ms) and cancellation; the call finishes
  // with its status (or CANCELLED / DEADLINE_EXCEEDED when the answer is
  // no longer wanted, `response` then cleared).
  using Work = absl::AnyInvocable<absl::Status(
      SolveScratch&, const Deadline&, const std::atomic<bool>& cancelled)>;
  grpc::ServerUnaryReactor* RunOnPool(grpc::CallbackServerContext* context,
                                      const IkService::UnaryCall& call,
                                      int64_t bytes,
                                      google::protobuf::Message* response,
                                      Work work);

  IkService* const service_;
  Registry* const registry_;
  RetargetProfiles* const profiles_;
};

}  // namespace reach

#endif  // REACH_SERVER_RETARGET_SERVICE_H_
