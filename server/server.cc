#include "server/server.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/exposer.h"
#include "server/call_interceptor.h"
#include "server/skeleton_store.h"

namespace reach {
namespace {

absl::StatusOr<std::unique_ptr<SkeletonStore>> OpenStore(
    const ServerOptions& options) {
  if (options.in_memory_store) return NewMemoryStore();
  if (mkdir(options.data_dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat(
        "--data_dir=", options.data_dir, ": ", std::strerror(errno)));
  }
  return OpenSqliteStore(options.data_dir + "/registry.sqlite3");
}

// /metrics: civetweb reads each request with a worker thread, waiting up to
// request_timeout_ms for its bytes, so an idle connection holds a worker
// that long. Several workers and a short timeout keep a scrape from
// waiting behind idle or slow connections.
constexpr int kMetricsThreads = 4;
constexpr int kMetricsRequestTimeoutMs = 2000;

}  // namespace

absl::StatusOr<std::unique_ptr<ReachServer>> ReachServer::Start(
    const ServerOptions& options) {
  std::unique_ptr<ReachServer> s(new ReachServer());
  s->options_ = options;
  ServerOptions& o = s->options_;
  if (o.solver_threads <= 0) {
    o.solver_threads =
        std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  if (o.queue_capacity < 1) {
    return absl::InvalidArgumentError("--queue_capacity must be >= 1");
  }
  if (o.service.stream_window < 1) {
    return absl::InvalidArgumentError("--stream_window must be >= 1");
  }
  if (o.service.stream_window_bytes < 1) {
    return absl::InvalidArgumentError("--stream_window_bytes must be >= 1");
  }
  if (o.service.max_queue_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_queue_wait must be >= 0");
  }

  s->metrics_ = std::make_unique<Metrics>();
  absl::StatusOr<std::unique_ptr<SkeletonStore>> store = OpenStore(o);
  if (!store.ok()) return store.status();
  RegistryLimits limits;
  limits.skeleton.max_joints = o.max_joints;
  limits.max_name_bytes = o.max_name_bytes;
  limits.max_total_bytes = o.max_registry_bytes;
  std::vector<std::string> skipped;
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(*std::move(store), limits, &skipped);
  if (!registry.ok()) return registry.status();
  s->registry_ = *std::move(registry);
  for (const std::string& line : skipped) {
    LogError(absl::StrCat("registry: skipped stored skeleton ", line));
  }

  s->pool_ = std::make_unique<SolverPool>(o.solver_threads, o.queue_capacity,
                                          s->metrics_.get());
  s->metrics_->SetQueueCapacity(o.queue_capacity);
  s->service_ = std::make_unique<IkService>(
      s->registry_.get(), s->pool_.get(), s->metrics_.get(), o.service);

  if (!o.metrics_address.empty()) {
    try {
      s->exposer_ =
          std::make_unique<prometheus::Exposer>(std::vector<std::string>{
              "listening_ports", o.metrics_address,  //
              "num_threads", std::to_string(kMetricsThreads),
              "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs)});
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "--metrics_address=", o.metrics_address, ": ", e.what()));
    }
    s->exposer_->RegisterCollectable(s->metrics_->registry());
    s->exposer_->RegisterCollectable(s->metrics_->process_collector());
    const std::vector<int> ports = s->exposer_->GetListeningPorts();
    s->metrics_port_ = ports.empty() ? 0 : ports[0];
  }

  s->health_ = std::make_unique<HealthService>();
  s->unknown_method_ = std::make_unique<UnknownMethodService>();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(o.listen_address, grpc::InsecureServerCredentials(),
                           &s->port_);
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  builder.RegisterService(s->service_.get());
  // Our own health service instead of gRPC's default (see health.h),
  // whatever grpc::EnableDefaultHealthCheckService says.
  builder.SetOption(
      std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.RegisterService(s->health_.get());
  builder.RegisterCallbackGenericService(s->unknown_method_.get());
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(
      std::make_unique<CallInterceptorFactory>(s->metrics_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    s->pool_->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --listen=", o.listen_address));
  }
  s->health_->SetServing(true);
  return s;
}

ReachServer::~ReachServer() { Shutdown(); }

void ReachServer::SetServing(bool serving) { health_->SetServing(serving); }

void ReachServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // The metrics endpoint stops beside the drain: civetweb takes about a
  // second to stop its workers, which would otherwise come on top of the
  // grace (no scrapes are served while the server drains).
  std::thread stop_metrics([exposer = std::move(exposer_)]() mutable {
    exposer.reset();
  });
  if (server_ != nullptr) {
    // First, so open Health.Watch calls end rather than hold the shutdown
    // below for its whole grace.
    health_->Shutdown();
    service_->BeginShutdown();
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoNanoseconds(options_.shutdown_grace));
  }
  if (pool_ != nullptr) pool_->Shutdown();
  stop_metrics.join();
}

}  // namespace reach
