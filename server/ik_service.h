// reach.v1.IkService on gRPC's callback API. Handlers are thin: look up,
// hand the solve to the SolverPool (never solving on gRPC's own callback
// threads), convert, record metrics. The stream reactor lives in
// solve_stream.{h,cc}.
#ifndef REACH_SERVER_IK_SERVICE_H_
#define REACH_SERVER_IK_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "importers/skeleton_file.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "server/arena_allocator.h"
#include "server/auth.h"
#include "server/log.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/solver_pool.h"
#include "server/stream_watch.h"
#include "solvers/deadline.h"
#include "solvers/solve.h"

namespace reach {

class StreamReactor;
struct BatchCall;
struct SolveScratch;

struct ServiceOptions {
  SolveLimits solve_limits;  // max_goals per request, max_iterations.
  int max_batch = 10000;     // Items per SolveBatch.
  int max_streams = 1000;    // Concurrent streams (SolveStream and
                             // RetargetStream together).
  // Frames per RetargetBatch.
  int max_retarget_frames = 20000;
  int stream_window = 64;    // Frames a stream reads ahead / keeps unsent.
  int max_page_size = 1000;  // ListSkeletons.
  // The longest any one request may solve, whatever its options ask: a
  // Solve, a stream frame, or a SolveBatch's items all together (its
  // workers share the time, so the batch costs at most this much CPU).
  // A solve that runs out stops with its best pose (reached = false).
  // Zero or less: no cap.
  absl::Duration max_solve = absl::Milliseconds(500);
  // Work that would wait longer than this for a solver thread is refused
  // with RESOURCE_EXHAUSTED: at the door when the queue's expected wait is
  // already longer (or longer than the call's deadline), and when it
  // starts if it did wait longer.
  absl::Duration max_queue_wait = absl::Seconds(1);
  // Bytes the service may hold for calls at once (requests queued for a
  // solver, stream frames read ahead and answers not yet sent, solve and
  // batch outputs); beyond it new work gets RESOURCE_EXHAUSTED. <= 0: no
  // budget.
  int64_t max_buffered_bytes = int64_t{256} << 20;
  // What one caller's calls (a token's, or a peer address's without auth)
  // may hold of max_buffered_bytes, so that a few clients that never read
  // their answers cannot hold it all. <= 0: a quarter of it.
  int64_t max_buffered_bytes_per_caller = 0;
  // A stream stops reading while its frames read ahead and answers unsent
  // hold this many bytes (as well as stream_window frames).
  int64_t stream_window_bytes = int64_t{8} << 20;
  // Largest response a call may produce (a SolveBatch asking
  // return_globals on many items); checked before solving.
  int64_t max_response_bytes = int64_t{64} << 20;
  // Without token auth every caller is an admin named by its address; it
  // may delete what another address registered only when this is set
  // (--insecure). Otherwise only what it registered itself.
  bool peers_delete_any = false;
};

// A caller's quotas and shares are at most 1/kCallerShare of the server's
// bound (byte budget, registry bytes, retarget profiles), so that no one
// caller can fill the server.
inline constexpr int kCallerShare = 4;

// Who `caller` is charged as: its token's name, or without auth its peer
// address (PeerOwner).
std::string OwnerOf(const grpc::CallbackServerContext& context,
                    const Caller& caller);

// The owner a Delete of `caller`'s acts as: "" (delete outright) for an
// admin token, or without auth when `peers_delete_any`; else its name
// (only what it registered).
std::string DeletingOwner(const Caller& caller, bool peers_delete_any);

// SolveBatch is a raw method (bytes in, bytes out) so that the solver
// workers parse and serialize its items in parallel; see batch_wire.h.
// SolveStream is raw so that a frame that does not parse gets an answer
// instead of ending the stream; see solve_stream.h.
using IkServiceBase = v1::IkService::WithCallbackMethod_ImportSkeleton<
    v1::IkService::WithCallbackMethod_RegisterSkeleton<
    v1::IkService::WithCallbackMethod_GetSkeleton<
        v1::IkService::WithCallbackMethod_ListSkeletons<
            v1::IkService::WithCallbackMethod_DeleteSkeleton<
                v1::IkService::WithCallbackMethod_Solve<
                    v1::IkService::WithRawCallbackMethod_SolveBatch<
                        v1::IkService::WithRawCallbackMethod_SolveStream<
                            v1::IkService::Service>>>>>>>>;

class IkService final : public IkServiceBase {
 public:
  // Every pointer must outlive the service. `auth` null: no
  // authentication (as TokenAuth without a file).
  IkService(Registry* registry, SolverPool* pool, Metrics* metrics,
            const ServiceOptions& options, const TokenAuth* auth = nullptr);

  // Asks every open stream to finish: frames already read are answered,
  // then the stream closes with UNAVAILABLE ("server shutting down"); new
  // streams are refused the same way.
  void BeginShutdown();
  // Ends the open streams whose tokens TokenAuth no longer admits (after
  // the token file changed).
  void RevokeStreams();
  int active_streams() const;

  grpc::ServerUnaryReactor* RegisterSkeleton(
      grpc::CallbackServerContext* context,
      const v1::RegisterSkeletonRequest* request,
      v1::RegisterSkeletonResponse* response) override;
  // The importers (importers/skeleton_file.h) on the bytes, then Register.
  grpc::ServerUnaryReactor* ImportSkeleton(
      grpc::CallbackServerContext* context,
      const v1::ImportSkeletonRequest* request,
      v1::ImportSkeletonResponse* response) override;
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
  // Frames as bytes, parsed by the reactor (see solve_stream.h).
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* SolveStream(
      grpc::CallbackServerContext* context) override;

  // For the stream reactor.
  Registry& registry() { return *registry_; }
  SolverPool& pool() { return *pool_; }
  Metrics& metrics() { return *metrics_; }
  const ServiceOptions& options() const { return options_; }
  RateLimitedLog& error_log() { return error_log_; }
  void StreamDone(StreamReactor* stream);
  // Opens a stream of `rpc` made by `make` (a FrameStream): authenticates
  // the caller, refuses it during shutdown or beyond --max_streams (all
  // kinds of stream count), registers it with the viewer, starts it.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* OpenStream(
      grpc::CallbackServerContext* context, Rpc rpc,
      absl::FunctionRef<StreamReactor*()> make);
  // Open streams, for the viewer.
  StreamWatch& stream_watch() { return stream_watch_; }

  MemoryBudget& budget() { return budget_; }
  // The share of the budget the caller of `context` draws on (its token's,
  // or its peer address's without auth); the server's budget itself when
  // it is unlimited. Calls hold it while they hold charges on it.
  std::shared_ptr<MemoryBudget> ShareOf(
      const grpc::CallbackServerContext& context, const Caller& caller);

  // A unary call's reactor that its solve watches: OnCancel (the client
  // gave up, its deadline passed, or the server's grace ran out) raises
  // `cancelled`, which the solve's Deadline points at; `charge` holds the
  // call's bytes on the memory budget until gRPC is done with the call.
  // Owned by gRPC: deleted in OnDone, after Finish.
  class WatchedReactor final : public grpc::ServerUnaryReactor {
   public:
    std::atomic<bool> cancelled{false};
    std::shared_ptr<MemoryBudget> share;  // Outlives `charge`.
    BudgetCharge charge;
    void OnCancel() override {
      cancelled.store(true, std::memory_order_relaxed);
    }
    void OnDone() override { delete this; }
  };

  // A unary call being handled: its reactor, method and start time.
  // `watched` is the reactor when it is a WatchedReactor (Solve,
  // SolveBatch), else null.
  struct UnaryCall {
    grpc::ServerUnaryReactor* reactor;
    WatchedReactor* watched;
    Rpc rpc;
    absl::Time start;
    // Who calls, or why the call may not (UNAUTHENTICATED,
    // PERMISSION_DENIED): then the handler finishes with it at once.
    absl::StatusOr<Caller> caller;
  };

  // The caller of a call of `rpc`, if its token allows it (see auth.h).
  absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& context,
                                      Rpc rpc) const;

  // The deadline a solve that starts now gets: the call's deadline or
  // max_solve from now, whichever comes first, and `cancelled`.
  Deadline SolveDeadline(const grpc::CallbackServerContext* context,
                         const std::atomic<bool>* cancelled) const;
  // Why work that waited `waited` for a thread is refused, or OK.
  grpc::Status CheckQueueWait(absl::Duration waited) const;
  // Submits `tasks` with the service's wait bound (max_queue_wait, or what
  // is left of the call's deadline when that is sooner); OK when queued,
  // else the status the call should get.
  grpc::Status Submit(const grpc::CallbackServerContext* context,
                      absl::Span<SolverPool::Task> tasks,
                      SolverPool::Lane lane = SolverPool::Lane::kCall);

  // Counts the call as started and its request as received, and
  // authenticates it. `watched`: the call gets a WatchedReactor instead of
  // the default one. (Public for the RetargetService beside this one.)
  UnaryCall BeginUnary(grpc::CallbackServerContext* context, Rpc rpc,
                       bool watched = false);
  // Why a unary call's work, taken from the solver queue, should not start
  // (cancelled, its deadline passed, it waited too long), or OK.
  grpc::Status StartStatus(const grpc::CallbackServerContext* context,
                           const UnaryCall& call) const;
  // Records the outcome in the metrics, then finishes the call.
  grpc::ServerUnaryReactor* Finish(const UnaryCall& call,
                                   const grpc::Status& status);

 private:
  // One pool task of a SolveBatch: items [begin, end) into outputs[chunk];
  // the last chunk to finish answers the call.
  void RunBatchChunk(BatchCall& batch, int chunk, int begin, int end,
                     SolveScratch& scratch);
  // Registers `skeleton` for the call's caller (RegisterSkeleton,
  // ImportSkeleton): logs what is not the client's fault, updates the
  // skeleton gauge.
  absl::StatusOr<RegisterResult> RegisterFor(const UnaryCall& call,
                                             const v1::Skeleton& skeleton);
  // ImportSkeleton's work, on a solver thread: parses (within the
  // importers' limits), registers and fills `response`.
  grpc::Status Import(const UnaryCall& call,
                      const v1::ImportSkeletonRequest& request,
                      import::SkeletonFormat format,
                      v1::ImportSkeletonResponse* response);

  Registry* const registry_;
  SolverPool* const pool_;
  Metrics* const metrics_;
  const ServiceOptions options_;
  const std::unique_ptr<TokenAuth> no_auth_;  // When given no TokenAuth.
  const TokenAuth* const auth_;
  RateLimitedLog error_log_{10, absl::Seconds(10)};
  MemoryBudget budget_;
  absl::Mutex shares_mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<MemoryBudget>> shares_
      ABSL_GUARDED_BY(shares_mu_);
  ArenaMessageAllocator<v1::SolveRequest, v1::SolveResponse> solve_allocator_;

  mutable absl::Mutex streams_mu_;
  absl::flat_hash_set<StreamReactor*> streams_
      ABSL_GUARDED_BY(streams_mu_);
  bool shutting_down_ ABSL_GUARDED_BY(streams_mu_) = false;
  StreamWatch stream_watch_;
};

}  // namespace reach

#endif  // REACH_SERVER_IK_SERVICE_H_
