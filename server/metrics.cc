#include "server/metrics.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/grpc.h"
#include "grpc/support/alloc.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace reach {
namespace {

struct RpcInfo {
  const char* service;
  const char* method;
  const char* type;  // grpc_type as go-grpc-prometheus names it.
  const char* path;  // What a request's :path says; "" for kUnknownMethod.
  const char* request_type;  // IkService only.
};
constexpr std::array<RpcInfo, kNumRpcs> kRpcInfo = {{
    {"reach.v1.IkService", "RegisterSkeleton", "unary",
     "/reach.v1.IkService/RegisterSkeleton",
     "reach.v1.RegisterSkeletonRequest"},
    {"reach.v1.IkService", "GetSkeleton", "unary",
     "/reach.v1.IkService/GetSkeleton", "reach.v1.GetSkeletonRequest"},
    {"reach.v1.IkService", "ListSkeletons", "unary",
     "/reach.v1.IkService/ListSkeletons", "reach.v1.ListSkeletonsRequest"},
    {"reach.v1.IkService", "DeleteSkeleton", "unary",
     "/reach.v1.IkService/DeleteSkeleton", "reach.v1.DeleteSkeletonRequest"},
    {"reach.v1.IkService", "Solve", "unary", "/reach.v1.IkService/Solve",
     "reach.v1.SolveRequest"},
    {"reach.v1.IkService", "SolveBatch", "unary",
     "/reach.v1.IkService/SolveBatch", "reach.v1.SolveBatchRequest"},
    {"reach.v1.IkService", "SolveStream", "bidi_stream",
     "/reach.v1.IkService/SolveStream", "reach.v1.SolveRequest"},
    {"reach.v1.IkService", "ImportSkeleton", "unary",
     "/reach.v1.IkService/ImportSkeleton", "reach.v1.ImportSkeletonRequest"},
    {"reach.v1.RetargetService", "CreateRetargetProfile", "unary",
     "/reach.v1.RetargetService/CreateRetargetProfile", "reach.v1.CreateRetargetProfileRequest"},
    {"reach.v1.RetargetService", "GetRetargetProfile", "unary",
     "/reach.v1.RetargetService/GetRetargetProfile", "reach.v1.GetRetargetProfileRequest"},
    {"reach.v1.RetargetService", "ListRetargetProfiles", "unary",
     "/reach.v1.RetargetService/ListRetargetProfiles", "reach.v1.ListRetargetProfilesRequest"},
    {"reach.v1.RetargetService", "DeleteRetargetProfile", "unary",
     "/reach.v1.RetargetService/DeleteRetargetProfile", "reach.v1.DeleteRetargetProfileRequest"},
    {"reach.v1.RetargetService", "UpdateRetargetProfile", "unary",
     "/reach.v1.RetargetService/UpdateRetargetProfile", "reach.v1.UpdateRetargetProfileRequest"},
    {"reach.v1.RetargetService", "Retarget", "unary",
     "/reach.v1.RetargetService/Retarget", "reach.v1.RetargetRequest"},
    {"reach.v1.RetargetService", "RetargetBatch", "unary",
     "/reach.v1.RetargetService/RetargetBatch", "reach.v1.RetargetBatchRequest"},
    {"reach.v1.RetargetService", "RetargetStream", "bidi_stream",
     "/reach.v1.RetargetService/RetargetStream", "reach.v1.RetargetRequest"},
    {"grpc.health.v1.Health", "Check", "unary", "/grpc.health.v1.Health/Check",
     ""},
    {"grpc.health.v1.Health", "Watch", "server_stream",
     "/grpc.health.v1.Health/Watch", ""},
    {"grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo",
     "bidi_stream",
     "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", ""},
    {"unknown", "unknown", "unknown", "", ""},
}};

constexpr std::array<const char*, kNumGrpcCodes> kCodeNames = {
    "OK",           "Canceled",          "Unknown",
    "InvalidArgument", "DeadlineExceeded", "NotFound",
    "AlreadyExists", "PermissionDenied", "ResourceExhausted",
    "FailedPrecondition", "Aborted",      "OutOfRange",
    "Unimplemented", "Internal",          "Unavailable",
    "DataLoss",     "Unauthenticated"};

// process_cpu_seconds_total and process_resident_memory_bytes, read from
// /proc/self at scrape time (prometheus-cpp 1.0 has no process collector).
class ProcessCollector : public prometheus::Collectable {
 public:
  void SetChannelzServer(intptr_t id) {
    channelz_server_.store(id, std::memory_order_relaxed);
  }
  void SetSkeletonCacheSource(std::function<SkeletonCacheStats()> source) {
    absl::MutexLock lock(&mu_);
    cache_source_ = std::move(source);
  }
  void SetRegistryCounts(std::function<RegistryCounts()> counts) {
    absl::MutexLock lock(&counts_mu_);
    counts_ = std::move(counts);
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    if (const intptr_t id = channelz_server_.load(std::memory_order_relaxed);
        id != 0) {
      char* json = grpc_channelz_get_server(id);
      int64_t started = 0;
      if (json != nullptr && ChannelzCount(json, "callsStarted", &started)) {
        prometheus::MetricFamily calls;
        calls.name = "reach_transport_calls_total";
        calls.help =
            "Calls gRPC's transport accepted (channelz callsStarted), "
            "including those no handler or interceptor ever saw: requests "
            "over --max_message_bytes, and calls that ended while their "
            "request arrived. Minus sum(grpc_server_started_total), that is "
            "the calls refused before any handler.";
        calls.type = prometheus::MetricType::Counter;
        calls.metric.emplace_back().counter.value =
            static_cast<double>(started);
        out.push_back(std::move(calls));
      }
      gpr_free(json);
    }
    CollectSkeletonCache(&out);
    {
      absl::MutexLock lock(&counts_mu_);
      if (counts_) AddRegistryCounts(counts_(), out);
    }
    double cpu_seconds = 0.0;
    double resident_bytes = 0.0;
    if (!Read(&cpu_seconds, &resident_bytes)) return out;
    prometheus::MetricFamily cpu;
    cpu.name = "process_cpu_seconds_total";
    cpu.help = "Total user and system CPU time spent in seconds.";
    cpu.type = prometheus::MetricType::Counter;
    cpu.metric.emplace_back().counter.value = cpu_seconds;
    out.push_back(std::move(cpu));
    prometheus::MetricFamily rss;
    rss.name = "process_resident_memory_bytes";
    rss.help = "Resident memory size in bytes.";
    rss.type = prometheus::MetricType::Gauge;
    rss.metric.emplace_back().gauge.value = resident_bytes;
    out.push_back(std::move(rss));
    return out;
  }

 private:
  static void AddRegistryCounts(const RegistryCounts& counts,
                                std::vector<prometheus::MetricFamily>& out) {
    const auto counter = [&out](const char* name, const char* help,
                                int64_t value) {
      prometheus::MetricFamily family;
      family.name = name;
      family.help = help;
      family.type = prometheus::MetricType::Counter;
      family.metric.emplace_back().counter.value = static_cast<double>(value);
      out.push_back(std::move(family));
    };
    counter("reach_registry_read_throughs_total",
            "Lookups of a skeleton this server did not hold, read from the "
            "shared (PostgreSQL) registry: one round trip each.",
            counts.read_throughs);
    counter("reach_registry_listener_reconnects_total",
            "Times the shared registry's change listener lost its database "
            "connection and reconnected (it then reads the change log from "
            "where it left off).",
            counts.listener_reconnects);
  }

  static bool Read(double* cpu_seconds, double* resident_bytes) {
    std::ifstream stat("/proc/self/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    // Fields after the parenthesised command name (which may hold spaces):
    // state is field 3, utime 14, stime 15.
    const size_t close = line.rfind(')');
    if (close == std::string::npos) return false;
    unsigned long long utime = 0, stime = 0;
    if (std::sscanf(line.c_str() + close + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                    &utime, &stime) != 2) {
      return false;
    }
    const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
    *cpu_seconds = static_cast<double>(utime + stime) / ticks;
    std::ifstream statm("/proc/self/statm");
    unsigned long long size = 0, resident = 0;
    if (!(statm >> size >> resident)) return false;
    *resident_bytes = static_cast<double>(resident) *
                      static_cast<double>(sysconf(_SC_PAGESIZE));
    return true;
  }

  void CollectSkeletonCache(std::vector<prometheus::MetricFamily>* out) const {
    SkeletonCacheStats stats;
    {
      absl::MutexLock lock(&mu_);
      if (!cache_source_) return;
      stats = cache_source_();
    }
    const auto add = [out](const char* name, const char* help,
                           prometheus::MetricType type, int64_t value) {
      prometheus::MetricFamily& family = out->emplace_back();
      family.name = name;
      family.help = help;
      family.type = type;
      prometheus::ClientMetric& metric = family.metric.emplace_back();
      if (type == prometheus::MetricType::Counter) {
        metric.counter.value = static_cast<double>(value);
      } else {
        metric.gauge.value = static_cast<double>(value);
      }
    };
    using prometheus::MetricType;
    add("reach_skeleton_cache_hits_total",
        "Skeleton loads (solves, stream frames, GetSkeleton) answered from "
        "the skeleton cache.",
        MetricType::Counter, stats.hits);
    add("reach_skeleton_cache_misses_total",
        "Skeleton loads that read the definition from the registry's store "
        "(one round trip to a shared registry's database) and built it.",
        MetricType::Counter, stats.misses);
    add("reach_skeleton_cache_evictions_total",
        "Skeletons dropped from the cache, least recently used first, to "
        "stay within --skeleton_cache_bytes.",
        MetricType::Counter, stats.evictions);
    add("reach_skeleton_cache_bytes",
        "Bytes the skeleton cache holds (built skeletons and their "
        "definitions, about); never above reach_skeleton_cache_limit_bytes.",
        MetricType::Gauge, stats.bytes);
    add("reach_skeleton_cache_entries", "Skeletons the cache holds.",
        MetricType::Gauge, stats.entries);
    add("reach_skeleton_cache_limit_bytes",
        "The skeleton cache's bound (--skeleton_cache_bytes).",
        MetricType::Gauge, stats.limit_bytes);
  }

  std::atomic<intptr_t> channelz_server_{0};
  mutable absl::Mutex mu_;
  std::function<SkeletonCacheStats()> cache_source_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex counts_mu_;
  std::function<RegistryCounts()> counts_ ABSL_GUARDED_BY(counts_mu_);
};

}  // namespace

bool ChannelzCount(const char* json, absl::string_view field, int64_t* out) {
  // Channelz renders int64 fields as JSON strings: "field":"123". A count
  // still zero is left out.
  const std::string key = absl::StrCat("\"", field, "\":\"");
  const char* at = std::strstr(json, key.c_str());
  if (at == nullptr) {
    *out = 0;
    return true;
  }
  at += key.size();
  const char* end = std::strchr(at, '"');
  return end != nullptr &&
         absl::SimpleAtoi(absl::string_view(at, end - at), out);
}

std::vector<intptr_t> ChannelzServers() {
  std::vector<intptr_t> ids;
  intptr_t start = 0;
  for (;;) {
    char* json = grpc_channelz_get_servers(start);
    if (json == nullptr) break;
    const absl::string_view text(json);
    static constexpr absl::string_view kKey = "\"serverId\":\"";
    for (size_t at = text.find(kKey); at != absl::string_view::npos;
         at = text.find(kKey, at + 1)) {
      const size_t begin = at + kKey.size();
      const size_t end = text.find('"', begin);
      int64_t id = 0;
      if (end != absl::string_view::npos &&
          absl::SimpleAtoi(text.substr(begin, end - begin), &id)) {
        ids.push_back(static_cast<intptr_t>(id));
      }
    }
    const bool last = text.find("\"end\":true") != absl::string_view::npos;
    gpr_free(json);
    if (last || ids.empty() || ids.back() < start) break;
    start = ids.back() + 1;
  }
  return ids;
}

void Metrics::SetChannelzServer(intptr_t id) {
  std::static_pointer_cast<ProcessCollector>(process_)->SetChannelzServer(id);
}

void Metrics::SetSkeletonCacheSource(
    std::function<SkeletonCacheStats()> source) {
  std::static_pointer_cast<ProcessCollector>(process_)->SetSkeletonCacheSource(
      std::move(source));
}

void Metrics::SetRegistryCounts(std::function<RegistryCounts()> counts) {
  std::static_pointer_cast<ProcessCollector>(process_)->SetRegistryCounts(
      std::move(counts));
}

Rpc RpcForPath(absl::string_view path) {
  for (int r = 0; r < kNumRpcs; ++r) {
    if (r != static_cast<int>(Rpc::kUnknownMethod) &&
        path == kRpcInfo[r].path) {
      return static_cast<Rpc>(r);
    }
  }
  return Rpc::kUnknownMethod;
}

absl::string_view RequestTypeName(Rpc rpc) {
  return kRpcInfo[static_cast<int>(rpc)].request_type;
}

absl::string_view RpcMethodName(Rpc rpc) {
  return kRpcInfo[static_cast<int>(rpc)].method;
}

Metrics::Metrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_shared<ProcessCollector>()) {
  auto& started = prometheus::BuildCounter()
                      .Name("grpc_server_started_total")
                      .Help("Total number of RPCs started on the server.")
                      .Register(*registry_);
  auto& handled = prometheus::BuildCounter()
                      .Name("grpc_server_handled_total")
                      .Help("Total number of RPCs completed on the server, "
                            "regardless of success or failure.")
                      .Register(*registry_);
  auto& handling = prometheus::BuildHistogram()
                       .Name("grpc_server_handling_seconds")
                       .Help("Histogram of response latency (seconds) of "
                             "gRPC that had been application-level handled "
                             "by the server.")
                       .Register(*registry_);
  auto& received = prometheus::BuildCounter()
                       .Name("grpc_server_msg_received_total")
                       .Help("Total number of RPC stream messages received "
                             "on the server.")
                       .Register(*registry_);
  auto& sent = prometheus::BuildCounter()
                   .Name("grpc_server_msg_sent_total")
                   .Help("Total number of gRPC stream messages sent by the "
                         "server.")
                   .Register(*registry_);
  // 50 us .. ~6.5 s.
  const auto latency_buckets = ExponentialBuckets(50e-6, 2.0, 18);
  for (int r = 0; r < kNumRpcs; ++r) {
    const prometheus::Labels labels = {{"grpc_service", kRpcInfo[r].service},
                                       {"grpc_method", kRpcInfo[r].method},
                                       {"grpc_type", kRpcInfo[r].type}};
    RpcChildren& c = rpcs_[r];
    c.started = &started.Add(labels);
    for (int code = 0; code < kNumGrpcCodes; ++code) {
      prometheus::Labels with_code = labels;
      with_code["grpc_code"] = kCodeNames[code];
      c.handled[code] = &handled.Add(with_code);
    }
    c.handling_seconds = &handling.Add(labels, latency_buckets);
    c.received = &received.Add(labels);
    c.sent = &sent.Add(labels);
  }

  auto& duration = prometheus::BuildHistogram()
                       .Name("reach_solve_duration_seconds")
                       .Help("Time of one solve (every goal of a request) "
                             "on a solver thread, by solver; 'mixed' when "
                             "the goals ran on different solvers.")
                       .Register(*registry_);
  auto& iterations = prometheus::BuildHistogram()
                         .Name("reach_solve_iterations")
                         .Help("Iterations per goal, by solver.")
                         .Register(*registry_);
  auto& goals = prometheus::BuildCounter()
                    .Name("reach_goals_total")
                    .Help("Goals solved, by solver and outcome (reached or "
                          "unreached).")
                    .Register(*registry_);
  const auto& solve_buckets = SolveDurationBuckets();
  const auto& iteration_buckets = IterationBuckets();
  for (int s = 0; s < kNumSolverLabels; ++s) {
    const std::string name =
        s == kMixedSolverLabel
            ? std::string("mixed")
            : std::string(SolverName(static_cast<SolverKind>(s)));
    SolverChildren& c = solvers_[s];
    c.duration = &duration.Add({{"solver", name}}, solve_buckets);
    c.iterations = &iterations.Add({{"solver", name}}, iteration_buckets);
    c.reached = &goals.Add({{"solver", name}, {"outcome", "reached"}});
    c.unreached = &goals.Add({{"solver", name}, {"outcome", "unreached"}});
  }
  position_error_ =
      &prometheus::BuildHistogram()
           .Name("reach_solve_position_error")
           .Help("Distance from each goal's tip to its target after the "
                 "solve, in model units.")
           .Register(*registry_)
           .Add({}, PositionErrorBuckets());
  queue_wait_ = &prometheus::BuildHistogram()
                     .Name("reach_queue_wait_seconds")
                     .Help("Time a task waited in the solver queue.")
                     .Register(*registry_)
                     .Add({}, ExponentialBuckets(1e-6, 2.0, 22));
  queue_depth_ = &prometheus::BuildGauge()
                      .Name("reach_queue_depth")
                      .Help("Tasks waiting in the solver queue.")
                      .Register(*registry_)
                      .Add({});
  queue_capacity_ = &prometheus::BuildGauge()
                         .Name("reach_queue_capacity")
                         .Help("Tasks the solver queue holds at most "
                               "(--queue_capacity); a full queue answers "
                               "RESOURCE_EXHAUSTED.")
                         .Register(*registry_)
                         .Add({});
  active_streams_ = &prometheus::BuildGauge()
                         .Name("reach_active_streams")
                         .Help("Open SolveStream calls.")
                         .Register(*registry_)
                         .Add({});
  skeletons_ = &prometheus::BuildGauge()
                    .Name("reach_skeletons")
                    .Help("Registered skeletons.")
                    .Register(*registry_)
                    .Add({});
  frames_skipped_ = &prometheus::BuildCounter()
                         .Name("reach_stream_frames_skipped_total")
                         .Help("latest_wins stream frames answered as "
                               "skipped because a newer frame was queued.")
                         .Register(*registry_)
                         .Add({});
  auto& retarget_frames =
      prometheus::BuildCounter()
          .Name("reach_retarget_frames_total")
          .Help("Frames retargeted (Retarget, RetargetBatch, RetargetStream), "
                "by whether every hand and foot goal was reached.")
          .Register(*registry_);
  retarget_reached_ = &retarget_frames.Add({{"outcome", "reached"}});
  retarget_unreached_ = &retarget_frames.Add({{"outcome", "unreached"}});
  retarget_seconds_ =
      &prometheus::BuildHistogram()
           .Name("reach_retarget_frame_seconds")
           .Help("Time to retarget one frame: transfer, goals, planting and "
                 "the full-body solve.")
           .Register(*registry_)
           .Add({}, ExponentialBuckets(5e-6, 2.0, 16));
  profiles_ = &prometheus::BuildGauge()
                   .Name("reach_retarget_profiles")
                   .Help("Retarget profiles held.")
                   .Register(*registry_)
                   .Add({});
  store_up_ = &prometheus::BuildGauge()
                   .Name("reach_registry_store_up")
                   .Help("1 while the registry's store is reachable; 0 while "
                         "a shared (PostgreSQL) registry is not: writes are "
                         "refused, what this server holds still serves")
                   .Register(*registry_)
                   .Add({});
  store_up_->Set(1);
  auto& sequence = prometheus::BuildGauge()
                       .Name("reach_registry_change_sequence")
                       .Help("The shared registry's change-log sequence "
                             "this server has applied, by table (0: a "
                             "local store)")
                       .Register(*registry_);
  skeleton_sequence_ = &sequence.Add({{"table", "skeletons"}});
  profile_sequence_ = &sequence.Add({{"table", "retarget_profiles"}});
  auth_tokens_ = &prometheus::BuildGauge()
                      .Name("reach_auth_tokens")
                      .Help("Tokens --auth_tokens_file admits (0 while it "
                            "does not load).")
                      .Register(*registry_)
                      .Add({});
  auth_file_loaded_ = &prometheus::BuildGauge()
                           .Name("reach_auth_file_loaded")
                           .Help("1 when --auth_tokens_file's last load "
                                 "succeeded (or auth is off), 0 while no "
                                 "token is admitted because it failed.")
                           .Register(*registry_)
                           .Add({});
  auth_file_loaded_->Set(1);
  auth_reload_failures_ =
      &prometheus::BuildCounter()
           .Name("reach_auth_reload_failures_total")
           .Help("Loads of --auth_tokens_file that failed (a bad line, no "
                 "tokens, the file gone).")
           .Register(*registry_)
           .Add({});
}

void Metrics::SetAuth(int tokens, bool loaded, int64_t failures) {
  auth_tokens_->Set(tokens);
  auth_file_loaded_->Set(loaded ? 1 : 0);
  const double more =
      static_cast<double>(failures) - auth_reload_failures_->Value();
  if (more > 0) auth_reload_failures_->Increment(more);
}

void Metrics::RetargetFrame(absl::Duration took, bool reached) {
  (reached ? retarget_reached_ : retarget_unreached_)->Increment();
  retarget_seconds_->Observe(absl::ToDoubleSeconds(took));
}

void Metrics::SetRetargetProfiles(int n) { profiles_->Set(n); }
void Metrics::SetRegistryStoreUp(bool up) { store_up_->Set(up ? 1 : 0); }
void Metrics::SetRegistrySequence(int64_t skeletons, int64_t profiles) {
  skeleton_sequence_->Set(static_cast<double>(skeletons));
  profile_sequence_->Set(static_cast<double>(profiles));
}

void Metrics::RpcStarted(Rpc rpc) {
  rpcs_[static_cast<int>(rpc)].started->Increment();
}

void Metrics::RpcHandled(Rpc rpc, grpc::StatusCode code,
                         absl::Duration elapsed) {
  RpcChildren& c = rpcs_[static_cast<int>(rpc)];
  const int index = static_cast<int>(code);
  c.handled[index >= 0 && index < kNumGrpcCodes ? index : 2]->Increment();
  c.handling_seconds->Observe(absl::ToDoubleSeconds(elapsed));
}

void Metrics::MessageReceived(Rpc rpc) {
  rpcs_[static_cast<int>(rpc)].received->Increment();
}

void Metrics::MessageSent(Rpc rpc) {
  rpcs_[static_cast<int>(rpc)].sent->Increment();
}

void Metrics::RecordInto(prometheus::Histogram* histogram,
                         const SolveTally::Histogram& tally) {
  if (tally.observations == 1) {
    histogram->Observe(tally.single);
  } else if (tally.observations > 1) {
    histogram->ObserveMultiple(tally.counts, tally.sum);
  }
}

void Metrics::Record(SolveTally& tally) {
  for (int label = 0; label < kNumSolverLabels; ++label) {
    SolveTally::PerSolver& s = tally.solvers_[label];
    if (!s.touched) continue;
    SolverChildren& c = solvers_[label];
    RecordInto(c.duration, s.duration);
    RecordInto(c.iterations, s.iterations);
    if (s.reached > 0) c.reached->Increment(s.reached);
    if (s.unreached > 0) c.unreached->Increment(s.unreached);
    s.duration.Clear();
    s.iterations.Clear();
    s.reached = s.unreached = 0.0;
    s.touched = false;
  }
  RecordInto(position_error_, tally.position_error_);
  tally.position_error_.Clear();
}

void Metrics::FramesSkipped(int n) { frames_skipped_->Increment(n); }
void Metrics::SetActiveStreams(int n) { active_streams_->Set(n); }
void Metrics::SetQueueCapacity(int n) { queue_capacity_->Set(n); }

void Metrics::SetSkeletons(int n) { skeletons_->Set(n); }

void Metrics::TaskQueued(int queue_depth) { queue_depth_->Set(queue_depth); }

void Metrics::TaskStarted(absl::Duration waited, int queue_depth) {
  queue_wait_->Observe(absl::ToDoubleSeconds(waited));
  queue_depth_->Set(queue_depth);
}

}  // namespace reach
