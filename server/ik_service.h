// reach.v1.IkService on gRPC's callback API. Handlers are thin: look up,
// hand the solve to the SolverPool (never solving on gRPC's own callback
// threads), convert, record metrics. The stream reactor lives in
// solve_stream.{h,cc}.
#ifndef REACH_SERVER_IK_SERVICE_H_
#define REACH_SERVER_IK_SERVICE_H_

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/solver_pool.h"
#include "solvers/solve.h"

namespace reach {

class SolveStreamReactor;

struct ServiceOptions {
  SolveLimits solve_limits;  // max_goals per request, max_iterations.
  int max_batch = 10000;     // Items per SolveBatch.
  int max_streams = 1000;    // Concurrent SolveStream calls.
  int stream_window = 64;    // Frames a stream reads ahead / keeps unsent.
  int max_page_size = 1000;  // ListSkeletons.
};

// SolveBatch is a raw method (bytes in, bytes out) so that the solver
// workers parse and serialize its items in parallel; see batch_wire.h.
class IkService final
    : public v1::IkService::WithRawCallbackMethod_SolveBatch<
          v1::IkService::CallbackService> {
 public:
  // Every pointer must outlive the service.
  IkService(Registry* registry, SolverPool* pool, Metrics* metrics,
            const ServiceOptions& options);

  // Asks every open stream to finish: frames already read are answered,
  // then the stream closes with UNAVAILABLE ("server shutting down"); new
  // streams are refused the same way.
  void BeginShutdown();
  int active_streams() const;

  grpc::ServerUnaryReactor* RegisterSkeleton(
      grpc::CallbackServerContext* context,
      const v1::RegisterSkeletonRequest* request,
      v1::RegisterSkeletonResponse* response) override;
  grpc::ServerUnaryReactor* GetSkeleton(
      grpc::CallbackServerContext* context,
      const v1::GetSkeletonRequest* request,
      v1::GetSkeletonResponse* response) override;
  grpc::ServerUnaryReactor* ListSkeletons(
      grpc::CallbackServerContext* context,
      const v1::ListSkeletonsRequest* request,
      v1::ListSkeletonsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSkeleton(
      grpc::CallbackServerContext* context,
      const v1::DeleteSkeletonRequest* request,
      v1::DeleteSkeletonResponse* response) override;
  grpc::ServerUnaryReactor* Solve(grpc::CallbackServerContext* context,
                                  const v1::SolveRequest* request,
                                  v1::SolveResponse* response) override;
  // A serialized SolveBatchRequest in, a serialized SolveBatchResponse out.
  grpc::ServerUnaryReactor* SolveBatch(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<v1::SolveRequest, v1::SolveResponse>* SolveStream(
      grpc::CallbackServerContext* context) override;

  // For the stream reactor.
  Registry& registry() { return *registry_; }
  SolverPool& pool() { return *pool_; }
  Metrics& metrics() { return *metrics_; }
  const ServiceOptions& options() const { return options_; }
  RateLimitedLog& error_log() { return error_log_; }
  void StreamDone(SolveStreamReactor* stream);

  // A unary call being handled: its reactor, method and start time.
  struct UnaryCall {
    grpc::ServerUnaryReactor* reactor;
    Rpc rpc;
    absl::Time start;
  };

 private:
  // Counts the call as started and its request as received.
  UnaryCall BeginUnary(grpc::CallbackServerContext* context, Rpc rpc);
  // Records the outcome in the metrics, then finishes the call.
  grpc::ServerUnaryReactor* Finish(const UnaryCall& call,
                                   const grpc::Status& status);

  Registry* const registry_;
  SolverPool* const pool_;
  Metrics* const metrics_;
  const ServiceOptions options_;
  RateLimitedLog error_log_{10, absl::Seconds(10)};
  ArenaMessageAllocator<v1::SolveRequest, v1::SolveResponse> solve_allocator_;

  mutable absl::Mutex streams_mu_;
  absl::flat_hash_set<SolveStreamReactor*> streams_
      ABSL_GUARDED_BY(streams_mu_);
  bool shutting_down_ ABSL_GUARDED_BY(streams_mu_) = false;
};

}  // namespace reach

#endif  // REACH_SERVER_IK_SERVICE_H_
