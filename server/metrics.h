// The server's Prometheus metrics. Every family and every label child is
// created once, here, at start (Family::Add takes a mutex and allocates);
// the hot path only touches pre-bound counters, gauges and histograms.
// Labels are method, code, solver and outcome; never a request or
// skeleton id.
#ifndef REACH_SERVER_METRICS_H_
#define REACH_SERVER_METRICS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "server/registry.h"
#include "server/solve_tally.h"
#include "server/solver_pool.h"
#include "solvers/goal.h"

namespace reach {

// The RPCs the grpc_server_* families count. IkService's handlers count
// their own calls; the server's CallInterceptor counts the IkService calls
// refused before a handler ran (unparseable, oversize) and every call of
// the other services: health, reflection, and methods the server does not
// know (all under grpc_method="unknown", never the client's string).
enum class Rpc {
  // reach.v1.IkService.
  kRegisterSkeleton,
  kGetSkeleton,
  kListSkeletons,
  kDeleteSkeleton,
  kSolve,
  kSolveBatch,
  kSolveStream,
  kImportSkeleton,
  // reach.v1.RetargetService.
  kCreateRetargetProfile,
  kGetRetargetProfile,
  kListRetargetProfiles,
  kDeleteRetargetProfile,
  kUpdateRetargetProfile,
  kRetarget,
  kRetargetBatch,
  kRetargetStream,
  // Other services.
  kHealthCheck,           // grpc.health.v1.Health/Check
  kHealthWatch,           // grpc.health.v1.Health/Watch
  kServerReflectionInfo,  // grpc.reflection.v1alpha.ServerReflection
  kUnknownMethod,         // Anything else.
};
inline constexpr int kNumRpcs = 20;
// Our own services' rpcs (kRegisterSkeleton..kRetargetStream): their
// handlers count them.
inline constexpr int kNumIkServiceRpcs = 16;

// The method a request path ("/package.Service/Method") names, or
// kUnknownMethod.
Rpc RpcForPath(absl::string_view path);
// The full name of the request message of an IkService rpc
// ("reach.v1.SolveRequest"); "" for the others.
absl::string_view RequestTypeName(Rpc rpc);
// The method's name ("Solve").
absl::string_view RpcMethodName(Rpc rpc);
inline constexpr int kNumGrpcCodes = 17;  // OK .. UNAUTHENTICATED.

// The ids of the gRPC servers in this process (channelz).
std::vector<intptr_t> ChannelzServers();
// `field` of a channelz JSON object ("callsStarted"); 0 when absent (it
// leaves out zero counts). False when it does not parse.
bool ChannelzCount(const char* json, absl::string_view field, int64_t* out);

// The registry's running counts, read at scrape time.
struct RegistryCounts {
  // Lookups of an id this server did not hold, answered by the shared
  // store (one database round trip each; 0 for the local stores).
  int64_t read_throughs = 0;
  // Times the shared registry's listener lost its connection and
  // reconnected (0 for the local stores).
  int64_t listener_reconnects = 0;
};

class Metrics : public SolverPool::Observer {
 public:
  Metrics();

  // What /metrics serves: this registry plus the process collector.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }
  std::shared_ptr<prometheus::Collectable> process_collector() const {
    return process_;
  }
  // The server's channelz id: the process collector then also serves
  // reach_transport_calls_total, every call gRPC's transport accepted.
  void SetChannelzServer(intptr_t id);
  // Where the reach_skeleton_cache_* families are read at scrape time
  // (the registry's counters; they count on the registry's own lock, not
  // on the hot path's counters). Set once, before /metrics serves.
  void SetSkeletonCacheSource(std::function<SkeletonCacheStats()> source);
  // Where the registry's other counts come from
  // (reach_registry_read_throughs_total,
  // reach_registry_listener_reconnects_total); called on every scrape.
  void SetRegistryCounts(std::function<RegistryCounts()> counts);

  void RpcStarted(Rpc rpc);
  void RpcHandled(Rpc rpc, grpc::StatusCode code, absl::Duration elapsed);
  void MessageReceived(Rpc rpc);
  void MessageSent(Rpc rpc);

  // Records everything `tally` added up (solve durations, iterations,
  // outcomes and position errors), then clears it.
  void Record(SolveTally& tally);
  void FramesSkipped(int n);
  // One retargeted frame: how long it took, and whether every hand and
  // foot goal was reached.
  void RetargetFrame(absl::Duration took, bool reached);
  void SetRetargetProfiles(int n);
  // The registry's store reachable (1) or not (0; a shared PostgreSQL
  // registry down: writes refused), and the change-log sequence this
  // server's registry and profiles reflect (0 for the local stores).
  void SetRegistryStoreUp(bool up);
  void SetRegistrySequence(int64_t skeletons, int64_t profiles);
  void SetActiveStreams(int n);
  void SetSkeletons(int n);
  // The token file's state (TokenAuth): tokens admitted, whether the last
  // load succeeded, and the failed loads so far.
  void SetAuth(int tokens, bool loaded, int64_t failures);
  // The solver queue's bound (--queue_capacity), for saturation alerts.
  void SetQueueCapacity(int n);

  // SolverPool::Observer.
  void TaskQueued(int queue_depth) override;
  void TaskStarted(absl::Duration waited, int queue_depth) override;

 private:
  struct RpcChildren {
    prometheus::Counter* started;
    std::array<prometheus::Counter*, kNumGrpcCodes> handled;
    prometheus::Histogram* handling_seconds;
    prometheus::Counter* received;
    prometheus::Counter* sent;
  };
  struct SolverChildren {
    prometheus::Histogram* duration;
    prometheus::Histogram* iterations;
    prometheus::Counter* reached;
    prometheus::Counter* unreached;
  };

  static void RecordInto(prometheus::Histogram* histogram,
                         const SolveTally::Histogram& tally);

  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Collectable> process_;
  std::array<RpcChildren, kNumRpcs> rpcs_;
  std::array<SolverChildren, kNumSolverLabels> solvers_;
  prometheus::Histogram* position_error_;
  prometheus::Histogram* queue_wait_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* queue_capacity_;
  prometheus::Gauge* active_streams_;
  prometheus::Gauge* skeletons_;
  prometheus::Gauge* auth_tokens_;
  prometheus::Gauge* auth_file_loaded_;
  prometheus::Counter* auth_reload_failures_;
  prometheus::Counter* frames_skipped_;
  prometheus::Counter* retarget_reached_;
  prometheus::Counter* retarget_unreached_;
  prometheus::Histogram* retarget_seconds_;
  prometheus::Gauge* profiles_;
  prometheus::Gauge* store_up_;
  prometheus::Gauge* skeleton_sequence_;
  prometheus::Gauge* profile_sequence_;
};

}  // namespace reach

#endif  // REACH_SERVER_METRICS_H_
