#include "server/server.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/exposer.h"
#include "server/call_interceptor.h"
#include "server/postgres_store.h"
#include "server/skeleton_store.h"
#include "server/tls_files.h"
#include "wire/convert.h"

namespace reach {
namespace {

// Creates --data_dir if missing and takes its lock (an exclusive flock on
// data_dir/lock, held while the returned descriptor is open): two servers
// on one directory would each load the registry, then race its schema
// changes and stamp the same versions on different skeletons.
absl::StatusOr<int> LockDataDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return absl::UnavailableError(
        absl::StrCat("--data_dir=", dir, ": ", std::strerror(errno)));
  }
  const std::string path = dir + "/lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("--data_dir=", dir, ": ", path, ": ",
                     std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    // The holder wrote who it is into the file (WriteLockHolder).
    char holder[256] = {};
    const ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
    std::string who(holder, n > 0 ? static_cast<size_t>(n) : 0);
    while (!who.empty() && (who.back() == '\n' || who.back() == '\0')) {
      who.pop_back();
    }
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "--data_dir=", dir, " is in use by another reach-server (",
        who.empty() ? std::string("it has not said who it is yet") : who,
        "; ", path, " is locked: ", std::strerror(error),
        "); give each server its own directory, or stop the other"));
  }
  return fd;
}

// Says who holds the lock, in the lock file itself, for a second server's
// refusal to name: "pid N, gRPC on ADDRESS".
void WriteLockHolder(int fd, absl::string_view listen) {
  const std::string who =
      absl::StrCat("pid ", getpid(),
                   listen.empty() ? std::string(" (starting)")
                                  : absl::StrCat(", gRPC on ", listen),
                   "\n");
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, who.data(), who.size(), 0) !=
          static_cast<ssize_t>(who.size())) {
    LogError(absl::StrCat("--data_dir lock: cannot record the holder: ",
                          std::strerror(errno)));
  }
}

// The store of `table` ("skeletons", "retarget_profiles").
absl::StatusOr<std::unique_ptr<SkeletonStore>> OpenStore(
    const ServerOptions& options, PostgresRegistry* postgres,
    absl::string_view table) {
  if (postgres != nullptr) return postgres->NewStore(table);
  if (options.in_memory_store) return NewMemoryStore();
  return OpenSqliteStore(options.data_dir + "/registry.sqlite3", table);
}

// /metrics: civetweb reads each request with a worker thread, waiting up to
// request_timeout_ms for its bytes, so an idle connection holds a worker
// that long. Many workers (--metrics_threads) and a short timeout keep a
// scrape from waiting behind idle or slow connections.
constexpr int kMetricsRequestTimeoutMs = 2000;

// TLS (mTLS with a client CA) from files checked every
// tls_reload_interval (TlsFiles: a bad file is logged and the last good
// pair kept); plaintext only on loopback unless --insecure. With TLS,
// *tls_files is set: it must outlive the gRPC server.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials(
    const ServerOptions& o, std::unique_ptr<TlsFiles>* tls_files) {
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert and --tls_key go together");
  }
  if (o.tls_cert.empty()) {
    if (!o.tls_client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca needs --tls_cert and --tls_key");
    }
    if (!IsLoopbackAddress(o.listen_address)) {
      if (!o.insecure) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--listen=", o.listen_address,
            " is not a loopback address: give --tls_cert and --tls_key, "
            "or --insecure to serve plaintext anyway"));
      }
      LogError(absl::StrCat("WARNING: serving plaintext gRPC on ",
                            o.listen_address,
                            " (--insecure): anyone on the network can read "
                            "and forge calls"));
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.auth_tokens_file.empty() && o.tls_client_ca.empty() &&
      !IsLoopbackAddress(o.listen_address)) {
    // TLS hides the calls but says nothing of who makes them: every
    // caller would be an admin.
    if (!o.insecure) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen=", o.listen_address,
          " is not a loopback address and neither --auth_tokens_file nor "
          "--tls_client_ca says who may call (any TLS client could delete "
          "every skeleton): give one, or --insecure to serve anyway"));
    }
    LogError(absl::StrCat("WARNING: serving TLS on ", o.listen_address,
                          " without tokens or client certificates "
                          "(--insecure): any client may call anything"));
  }
  TlsFilesOptions files;
  files.cert = o.tls_cert;
  files.key = o.tls_key;
  files.client_ca = o.tls_client_ca;
  // As before: at least every second.
  files.reload_interval = std::max(o.tls_reload_interval, absl::Seconds(1));
  // The private copies go in the data directory (writable where the root
  // filesystem is read-only, as in the k8s manifest), else $TMPDIR.
  if (!o.in_memory_store && !IsPostgresUrl(o.registry)) {
    files.private_parent = o.data_dir;
  }
  absl::StatusOr<std::unique_ptr<TlsFiles>> opened =
      TlsFiles::Open(std::move(files));
  if (!opened.ok()) return opened.status();
  *tls_files = *std::move(opened);
  return (*tls_files)->Credentials();
}

// An HTTP endpoint (`flag`, serving `what`) on an address other machines
// can reach needs tokens, or --insecure (then a warning is logged).
absl::Status CheckExposed(const ServerOptions& o, absl::string_view flag,
                          const std::string& address, absl::string_view what,
                          absl::string_view with_tokens) {
  if (address.empty() || IsLoopbackAddress(address) ||
      !o.auth_tokens_file.empty()) {
    return absl::OkStatus();
  }
  if (!o.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", address, " is not a loopback address: give "
        "--auth_tokens_file (", with_tokens, "), or --insecure"));
  }
  LogError(absl::StrCat("WARNING: serving ", what,
                        " without authentication on ", address,
                        " (--insecure)"));
  return absl::OkStatus();
}

// The viewer speaks plain HTTP and asks for no client certificate: on a
// network address its tokens and answers travel in clear, and with mTLS
// (and no tokens) it would let anyone reach the API the gRPC port guards
// with certificates. Either needs --insecure.
absl::Status CheckViewerTransport(const ServerOptions& o) {
  if (o.http_address.empty() || o.insecure) {
    if (!o.http_address.empty() && !IsLoopbackAddress(o.http_address)) {
      LogError(absl::StrCat("WARNING: the viewer on ", o.http_address,
                            " is plain HTTP (--insecure): tokens and answers "
                            "cross the network in clear"));
    }
    return absl::OkStatus();
  }
  if (!IsLoopbackAddress(o.http_address)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_listen=", o.http_address,
        " is not a loopback address, and the viewer is plain HTTP (tokens "
        "and answers would cross the network in clear): listen on "
        "127.0.0.1 and reach it through a TLS proxy or an SSH tunnel, or "
        "give --insecure"));
  }
  if (!o.tls_client_ca.empty() && o.auth_tokens_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_listen=", o.http_address,
        ": the viewer asks for no client certificate, so with "
        "--tls_client_ca and no --auth_tokens_file it would let any local "
        "process call what the gRPC port guards with certificates: give "
        "--auth_tokens_file, --http_listen= (off), or --insecure"));
  }
  return absl::OkStatus();
}

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
  if (o.max_connection_age < absl::ZeroDuration() ||
      o.max_connection_age > absl::Hours(24 * 24)) {
    return absl::InvalidArgumentError(
        "--max_connection_age must be in [0, 576h] (0: never)");
  }
  if (o.max_connection_age_grace < absl::ZeroDuration() ||
      o.max_connection_age_grace > absl::Hours(24 * 24)) {
    return absl::InvalidArgumentError(
        "--max_connection_age_grace must be in [0, 576h]");
  }
  if (o.max_concurrent_streams < 1) {
    return absl::InvalidArgumentError("--max_concurrent_streams must be >= 1");
  }
  if (o.service.max_retarget_frames < 1) {
    return absl::InvalidArgumentError("--max_retarget_frames must be >= 1");
  }
  if (o.max_retarget_profiles < 0) {
    return absl::InvalidArgumentError("--max_retarget_profiles must be >= 0");
  }
  if (o.service.max_queue_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--max_queue_wait must be >= 0");
  }
  // A quota is a share that leaves room for others: at most a quarter of
  // the server-wide bound (0, no quota, stays the operator's choice).
  const auto share = [](auto quota, auto bound, const char* flag,
                        const char* bound_flag) {
    using T = decltype(quota);
    const T most = std::max<T>(1, bound / kCallerShare);
    if (quota <= 0 || bound <= 0 || quota <= most) return quota;
    LogInfo(absl::StrCat(flag, "=", quota, " lowered to ", most,
                         ", a quarter of ", bound_flag, "=", bound,
                         ", so that no one caller can fill the server"));
    return most;
  };
  o.quota_registry_bytes =
      share(o.quota_registry_bytes, o.max_registry_bytes,
            "--quota_registry_bytes", "--max_registry_bytes");
  o.quota_retarget_profiles =
      share(o.quota_retarget_profiles, o.max_retarget_profiles,
            "--quota_retarget_profiles", "--max_retarget_profiles");
  if (o.insecure) o.service.peers_delete_any = true;
  const bool postgres = IsPostgresUrl(o.registry);
  if (o.registry == "memory") o.in_memory_store = true;
  if (!postgres && !o.registry.empty() && o.registry != "sqlite" &&
      o.registry != "memory") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--registry=", ClientString(o.registry),
        ": expected sqlite (at --data_dir), memory, or a postgresql:// URL"));
  }
  if (postgres && o.in_memory_store) {
    return absl::InvalidArgumentError(
        "--in_memory and --registry=postgresql://... exclude each other");
  }
  const bool sqlite = !o.in_memory_store && !postgres;

  if (sqlite) {
    absl::StatusOr<int> lock = LockDataDir(o.data_dir);
    if (!lock.ok()) return lock.status();
    s->data_dir_lock_.fd = *lock;
    WriteLockHolder(*lock, "");
    // Private TLS copies a server killed with -9 left behind: nobody else
    // holds this directory.
    std::error_code ignored;
    for (const auto& entry :
         std::filesystem::directory_iterator(o.data_dir, ignored)) {
      if (absl::StartsWith(entry.path().filename().string(), "reach-tls-")) {
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      Credentials(o, &s->tls_files_);
  if (!credentials.ok()) return credentials.status();
  for (const absl::Status& single :
       {CheckSingleHttpAddress("--metrics_listen", o.metrics_address),
        CheckSingleHttpAddress("--http_listen", o.http_address)}) {
    if (!single.ok()) return single;
  }
  if (o.metrics_threads < 1) {
    return absl::InvalidArgumentError("--metrics_threads must be >= 1");
  }
  for (const absl::Status& exposed :
       {CheckExposed(o, "--metrics_listen", o.metrics_address, "/metrics",
                     "scrapers then need a token with the metrics role"),
        CheckExposed(o, "--http_listen", o.http_address, "the viewer",
                     "the viewer then asks for a token")}) {
    if (!exposed.ok()) return exposed;
  }
  if (absl::Status viewer = CheckViewerTransport(o); !viewer.ok()) {
    return viewer;
  }
  absl::StatusOr<std::unique_ptr<TokenAuth>> auth =
      TokenAuth::Open(o.auth_tokens_file, o.auth_reload_interval);
  if (!auth.ok()) return auth.status();
  s->auth_ = *std::move(auth);

  s->metrics_ = std::make_unique<Metrics>();
  if (postgres) {
    absl::StatusOr<std::unique_ptr<PostgresRegistry>> opened =
        PostgresRegistry::Open(o.registry);
    if (!opened.ok()) return opened.status();
    s->postgres_ = *std::move(opened);
  }
  absl::StatusOr<std::unique_ptr<SkeletonStore>> store =
      OpenStore(o, s->postgres_.get(), "skeletons");
  if (!store.ok()) return store.status();
  RegistryLimits limits;
  limits.skeleton.max_joints = o.max_joints;
  limits.max_name_bytes = o.max_name_bytes;
  limits.max_total_bytes = o.max_registry_bytes;
  limits.cache_bytes = o.skeleton_cache_bytes;
  limits.max_owner_skeletons = o.quota_skeletons;
  limits.max_owner_bytes = o.quota_registry_bytes;
  std::vector<std::string> skipped;
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(*std::move(store), limits, &skipped);
  if (!registry.ok()) return registry.status();
  s->registry_ = *std::move(registry);
  // The exposer is stopped before the registry goes (Shutdown, and the
  // members' order), so a scrape never reads a registry that is gone.
  s->metrics_->SetSkeletonCacheSource(
      [registry = s->registry_.get()] { return registry->cache_stats(); });
  for (const std::string& line : skipped) {
    LogError(absl::StrCat("registry: skipped stored skeleton ", line));
  }
  store = OpenStore(o, s->postgres_.get(), "retarget_profiles");
  if (!store.ok()) return store.status();
  RetargetProfileLimits profile_limits;
  profile_limits.skeleton = limits.skeleton;
  profile_limits.max_profiles = o.max_retarget_profiles;
  profile_limits.max_bytes = o.max_retarget_profile_bytes;
  profile_limits.max_owner_profiles = o.quota_retarget_profiles;
  skipped.clear();
  absl::StatusOr<std::unique_ptr<RetargetProfiles>> profiles =
      RetargetProfiles::Create(*std::move(store), profile_limits, &skipped);
  if (!profiles.ok()) return profiles.status();
  s->profiles_ = *std::move(profiles);
  s->metrics_->SetRegistryCounts(
      [registry = s->registry_.get(), postgres = s->postgres_.get()] {
        RegistryCounts counts;
        counts.read_throughs = registry->read_throughs();
        counts.listener_reconnects =
            postgres != nullptr ? postgres->listener_reconnects() : 0;
        return counts;
      });
  for (const std::string& line : skipped) {
    LogError(absl::StrCat("registry: skipped stored ", line));
  }

  s->pool_ = std::make_unique<SolverPool>(o.solver_threads, o.queue_capacity,
                                          s->metrics_.get());
  s->metrics_->SetQueueCapacity(o.queue_capacity);
  s->service_ = std::make_unique<IkService>(
      s->registry_.get(), s->pool_.get(), s->metrics_.get(), o.service,
      s->auth_.get());
  s->retarget_service_ = std::make_unique<RetargetService>(
      s->service_.get(), s->registry_.get(), s->profiles_.get());
  // A changed token file ends the streams of tokens it no longer holds
  // (the viewer's watches check on their own).
  const auto auth_changed = [auth = s->auth_.get(),
                              metrics = s->metrics_.get(),
                              service = s->service_.get()] {
    service->RevokeStreams();
    metrics->SetAuth(auth->tokens(), auth->load_error().empty(),
                     auth->failures());
  };
  auth_changed();
  s->auth_->SetOnChange(auth_changed);

  if (!o.metrics_address.empty()) {
    try {
      s->exposer_ =
          std::make_unique<prometheus::Exposer>(std::vector<std::string>{
              "listening_ports", o.metrics_address,  //
              "num_threads", std::to_string(o.metrics_threads),
              "request_timeout_ms", std::to_string(kMetricsRequestTimeoutMs),
              // No cross-origin grants (civetweb's default is any origin).
              "access_control_allow_origin", "",
              "access_control_allow_methods", "",
              "access_control_allow_headers", ""});
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(
          "--metrics_listen=", o.metrics_address, ": ", e.what()));
    }
    if (s->auth_->enabled()) {
      s->exposer_->RegisterAuth(
          [auth = s->auth_.get()](const std::string& user,
                                  const std::string& password) {
            return auth->AllowsMetrics(user, password);
          },
          "reach-server metrics");
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
  builder.AddListeningPort(o.listen_address, *credentials, &s->port_);
  builder.SetMaxReceiveMessageSize(o.max_message_bytes);
  // gRPC reads a unary request whole before any handler sees it, for every
  // stream a connection has open: this bounds how many such requests one
  // connection can have in the transport at once (more wait in the
  // client).
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             o.max_concurrent_streams);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would start silently and take half the connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  if (o.max_connection_age > absl::ZeroDuration()) {
    // GOAWAY after the age (gRPC adds +-10 % jitter so clients do not all
    // reconnect at once): round-robin clients re-resolve and spread over
    // replicas started since.
    builder.AddChannelArgument(
        GRPC_ARG_MAX_CONNECTION_AGE_MS,
        static_cast<int>(absl::ToInt64Milliseconds(o.max_connection_age)));
    builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                               static_cast<int>(absl::ToInt64Milliseconds(
                                   o.max_connection_age_grace)));
  }
  if (o.max_transport_bytes > 0) {
    grpc::ResourceQuota quota("reach-transport");
    quota.Resize(static_cast<size_t>(o.max_transport_bytes));
    builder.SetResourceQuota(quota);
  }
  builder.RegisterService(s->service_.get());
  builder.RegisterService(s->retarget_service_.get());
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
  // Which channelz server is ours: the one BuildAndStart adds (servers of
  // this process start one at a time here).
  static absl::Mutex start_mu;
  absl::MutexLock start_lock(&start_mu);
  const std::vector<intptr_t> before = ChannelzServers();
  s->server_ = builder.BuildAndStart();
  for (intptr_t id : ChannelzServers()) {
    if (std::find(before.begin(), before.end(), id) == before.end()) {
      s->metrics_->SetChannelzServer(id);
    }
  }
  if (s->server_ == nullptr || s->port_ == 0) {
    s->pool_->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --listen=", o.listen_address));
  }
  if (s->data_dir_lock_.fd >= 0) {
    const size_t colon = o.listen_address.rfind(':');
    WriteLockHolder(s->data_dir_lock_.fd,
                    absl::StrCat(o.listen_address.substr(0, colon), ":",
                                 s->port_));
  }
  if (!o.http_address.empty()) {
    // The viewer's calls go through this very server, in process.
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    ViewerOptions viewer;
    viewer.listen_address = o.http_address;
    viewer.threads = o.http_threads;
    viewer.max_body_bytes = o.max_message_bytes;
    viewer.max_watchers = o.http_max_watchers;
    viewer.max_streams = o.http_max_streams;
    viewer.allowed_origins = o.http_allowed_origins;
    viewer.request_timeout = o.http_request_timeout;
    absl::StatusOr<std::unique_ptr<Viewer>> started =
        Viewer::Start(viewer, s->server_->InProcessChannel(args),
                      &s->service_->stream_watch(), s->auth_.get());
    if (!started.ok()) {
      s->Shutdown();
      return started.status();
    }
    s->viewer_ = *std::move(started);
  }
  s->health_->SetServing(true);
  if (s->postgres_ != nullptr) {
    // What other servers write reaches this one through the listener.
    const auto sequences = [registry = s->registry_.get(),
                            profiles = s->profiles_.get(),
                            metrics = s->metrics_.get()] {
      metrics->SetRegistrySequence(registry->applied_sequence(),
                                   profiles->applied_sequence());
    };
    sequences();
    s->postgres_->Listen(
        [registry = s->registry_.get(), profiles = s->profiles_.get(),
         metrics = s->metrics_.get(),
         sequences](absl::string_view table) -> absl::Status {
          absl::Status status = table == "skeletons" ? registry->CatchUp()
                                                     : profiles->CatchUp();
          metrics->SetSkeletons(registry->size());
          metrics->SetRetargetProfiles(profiles->size());
          sequences();
          return status;
        },
        [health = s->health_.get(), metrics = s->metrics_.get(),
         name = s->postgres_->description()](bool up, const std::string& why) {
          health->SetRegistryWritable(up);
          metrics->SetRegistryStoreUp(up);
          if (up) {
            LogInfo(absl::StrCat("registry: ", name,
                                 " reachable again; caught up, writes "
                                 "accepted"));
          } else {
            LogError(absl::StrCat(
                "registry: ", why,
                "; writes get UNAVAILABLE until it returns, what this server "
                "holds still serves"));
          }
        });
  }
  return s;
}

ReachServer::~ReachServer() { Shutdown(); }

ReachServer::DataDirLock::~DataDirLock() {
  if (fd >= 0) close(fd);  // Releases the flock.
}

void ReachServer::SetServing(bool serving) { health_->SetServing(serving); }

absl::Status ReachServer::ReloadAuth() {
  if (!auth_->enabled()) return absl::OkStatus();
  return auth_->Reload();
}

void ReachServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // No more changes from other servers (the listener calls into the
  // registry, health and metrics).
  if (postgres_ != nullptr) postgres_->StopListening();
  // The metrics endpoint stops beside the drain: civetweb takes about a
  // second to stop its workers, which would otherwise come on top of the
  // grace (no scrapes are served while the server drains).
  // So does the viewer's: its requests in progress end with the calls
  // they made, which the drain answers.
  // The service goes away with the server: no more calls into it.
  if (auth_ != nullptr) auth_->SetOnChange(nullptr);
  std::thread stop_metrics([exposer = std::move(exposer_),
                            viewer = std::move(viewer_)]() mutable {
    exposer.reset();
    viewer.reset();
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
