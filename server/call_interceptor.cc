#include "server/call_interceptor.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "wire/convert.h"

namespace reach {
namespace {

using grpc::experimental::InterceptionHookPoints;

bool IsIkService(Rpc rpc) { return static_cast<int>(rpc) < kNumIkServiceRpcs; }

class CallInterceptor final : public grpc::experimental::Interceptor {
 public:
  CallInterceptor(Rpc rpc, grpc::experimental::ServerRpcInfo* info,
                  Metrics* metrics)
      : rpc_(rpc),
        ik_service_(IsIkService(rpc)),
        info_(info),
        metrics_(metrics),
        start_(absl::Now()) {
    if (!ik_service_) {
      counting_ = true;
      metrics_->RpcStarted(rpc_);
    }
  }

  // The call is over: count it if no handler did.
  ~CallInterceptor() override {
    if (!counting_) return;
    grpc::StatusCode code = grpc::StatusCode::CANCELLED;
    if (status_sent_.load(std::memory_order_acquire)) code = code_;
    // Cancelled (by the client, or its deadline) before our status went
    // out: the client never saw it.
    if (cancelled_.load(std::memory_order_acquire)) {
      code = grpc::StatusCode::CANCELLED;
    }
    metrics_->RpcHandled(rpc_, code,
                         status_sent_.load(std::memory_order_acquire)
                             ? elapsed_
                             : absl::Now() - start_);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_MESSAGE)) {
      if (methods->GetRecvMessage() == nullptr) {
        // The request did not deserialize: no handler runs. (For a stream
        // this is the end of its input.)
        if (ik_service_ && !counting_) {
          refused_ = true;
          counting_ = true;
          metrics_->RpcStarted(rpc_);
        }
      } else if (counting_) {
        metrics_->MessageReceived(rpc_);
      }
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_MESSAGE) &&
        counting_) {
      metrics_->MessageSent(rpc_);
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      if (refused_) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            absl::StrCat("request: not a valid ", RequestTypeName(rpc_))));
      }
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_message().size() > kMaxStatusMessageBytes) {
        methods->ModifySendStatus(grpc::Status(
            status.error_code(),
            ClientString(status.error_message(), kMaxStatusMessageBytes),
            status.error_details()));
      }
      if (counting_) {
        code_ = status.error_code();
        elapsed_ = absl::Now() - start_;
        status_sent_.store(true, std::memory_order_release);
      }
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_CLOSE) &&
        refused_) {
      // Only callback calls here (IkService's unary methods), for which
      // IsCancelled() is valid at any time.
      cancelled_.store(info_->server_context()->IsCancelled(),
                       std::memory_order_release);
    }
    methods->Proceed();
  }

 private:
  const Rpc rpc_;
  const bool ik_service_;
  grpc::experimental::ServerRpcInfo* const info_;
  Metrics* const metrics_;
  const absl::Time start_;
  // Whether this interceptor counts the call: not an IkService call, or
  // one whose request never reached the handler (then refused_).
  bool counting_ = false;
  bool refused_ = false;
  grpc::StatusCode code_ = grpc::StatusCode::UNKNOWN;
  absl::Duration elapsed_;
  std::atomic<bool> status_sent_{false};
  std::atomic<bool> cancelled_{false};
};

}  // namespace

grpc::experimental::Interceptor*
CallInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  const Rpc rpc = RpcForPath(info->method());
  if (rpc == Rpc::kSolveStream || rpc == Rpc::kRetargetStream) return nullptr;
  return new CallInterceptor(rpc, info, metrics_);
}

}  // namespace reach
