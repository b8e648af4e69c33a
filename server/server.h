// The Reach server as a library: everything reach-server's main wires
// together (registry and its store, solver pool, metrics endpoint, the gRPC
// server with health and reflection), so tests and benchmarks run the very
// same server in-process on a loopback port.
#ifndef REACH_SERVER_SERVER_H_
#define REACH_SERVER_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/address.h"
#include "server/health.h"
#include "server/ik_service.h"
#include "server/retarget_profiles.h"
#include "server/retarget_service.h"
#include "server/unknown_method.h"
#include "server/viewer.h"

namespace prometheus {
class Exposer;
}

namespace reach {

class TlsFiles;
class PostgresRegistry;

struct ServerOptions {
  // host:port for gRPC; port 0 picks a free port (see ReachServer::port()).
  std::string listen_address = "127.0.0.1:50051";
  // host:port for /metrics; empty: no metrics endpoint. Port 0 picks one.
  std::string metrics_address = "127.0.0.1:9464";
  // host:port for the browser viewer (viewer.h); empty: none. Port 0
  // picks one (see ReachServer::http_port()).
  std::string http_address;
  int http_threads = 128;  // Viewer requests (and idle sockets) at once.
  int http_max_watchers = 8;  // Viewer WebSockets watching streams.
  int http_max_streams = 8;  // HTTP API WebSockets streaming (/api/v1).
  // Origins the viewer grants cross-origin access (ViewerOptions).
  std::vector<std::string> http_allowed_origins;
  // Idle viewer connections are closed after this (ViewerOptions).
  absl::Duration http_request_timeout = absl::Seconds(5);
  // /metrics requests served at once; an idle connection holds one for up
  // to two seconds.
  int metrics_threads = 128;
  int solver_threads = 0;      // 0: one per hardware thread.
  int queue_capacity = 1024;   // Tasks waiting for a solver thread.
  // The SQLite registry lives at data_dir/registry.sqlite3; data_dir is
  // created if missing. in_memory_store: keep nothing across restarts.
  std::string data_dir = "reach-data";
  bool in_memory_store = false;
  // The registry's store: "" or "sqlite" (data_dir, one server), "memory"
  // (as in_memory_store), or a postgresql:// URL: one registry shared by
  // many servers (postgres_store.h).
  std::string registry;
  int max_joints = 1024;                    // Per skeleton.
  int max_name_bytes = 256;  // Skeleton, joint and chain names.
  // Memory all registered skeletons may take (RegistryLimits).
  int64_t max_registry_bytes = int64_t{128} << 20;
  // Skeletons built for solving, kept by the registry (RegistryLimits).
  int64_t skeleton_cache_bytes = int64_t{64} << 20;
  // Retarget profiles held at once, and their memory (RetargetProfileLimits).
  int max_retarget_profiles = 256;
  int64_t max_retarget_profile_bytes = int64_t{128} << 20;
  int max_message_bytes = 16 * 1024 * 1024;  // Received messages.
  // Calls (streams) one connection may have open at once; more wait in
  // the client. With max_message_bytes it bounds what one connection's
  // requests hold in gRPC's transport before the budget sees them.
  int max_concurrent_streams = 100;
  // Bytes gRPC's transport may hold for all connections together (its
  // resource quota: read buffers, requests no handler has seen yet). The
  // one server-wide bound on that term; past it gRPC refuses new calls and
  // closes connections itself, without naming a flag. <= 0: no quota.
  int64_t max_transport_bytes = int64_t{512} << 20;
  // Connections are closed (GOAWAY) after max_connection_age, so clients
  // reconnect and round-robin spreads them over replicas added since;
  // calls open then get max_connection_age_grace. Zero: never.
  absl::Duration max_connection_age = absl::ZeroDuration();
  absl::Duration max_connection_age_grace = absl::Seconds(30);
  ServiceOptions service;

  // Security (docs/security.md). TLS: PEM files, re-read every
  // tls_reload_interval, so a replaced certificate is served to new
  // connections without a restart. tls_client_ca: clients must present a
  // certificate it signed (mTLS). Without TLS, listen_address must be a
  // loopback address unless `insecure`.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  absl::Duration tls_reload_interval = absl::Seconds(10);
  bool insecure = false;
  // Token authentication (auth.h); empty: off. The file is re-read when
  // it changes (checked every auth_reload_interval) and on ReloadAuth().
  std::string auth_tokens_file;
  absl::Duration auth_reload_interval = absl::Seconds(5);
  // Per token (per peer address without auth): skeletons and registry
  // bytes it may hold registered. 0: no quota.
  // Positive ones are lowered to a quarter of their server-wide bound
  // (max_registry_bytes, max_retarget_profiles) if above, so that no one
  // caller can fill the server.
  int quota_skeletons = 1000;
  int64_t quota_registry_bytes = int64_t{32} << 20;
  int quota_retarget_profiles = 32;

  // How long in-flight work may take to finish on Shutdown().
  absl::Duration shutdown_grace = absl::Seconds(10);
};

class ReachServer {
 public:
  // Opens the store, starts the pool, binds both ports and starts serving.
  static absl::StatusOr<std::unique_ptr<ReachServer>> Start(
      const ServerOptions& options);
  ~ReachServer();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return viewer_ == nullptr ? 0 : viewer_->port(); }
  const ServerOptions& options() const { return options_; }
  IkService& service() { return *service_; }
  RetargetProfiles& retarget_profiles() { return *profiles_; }
  // The shared registry's database; nullptr with SQLite or memory.
  PostgresRegistry* postgres() { return postgres_.get(); }

  // Sets the health status of the server ("" and "reach.v1.IkService":
  // SERVING or NOT_SERVING), e.g. to take a replica out of a load balancer
  // before maintenance.
  void SetServing(bool serving);
  // Reads --auth_tokens_file again now (SIGHUP); on an error the tokens
  // in use stay. OK without a token file.
  absl::Status ReloadAuth();
  const TokenAuth& auth() const { return *auth_; }
  HealthService& health() { return *health_; }

  // Graceful: health turns NOT_SERVING for good and open Health.Watch
  // calls end, streams are asked to finish, new calls are refused,
  // in-flight calls get up to shutdown_grace, then the pool drains and the
  // threads stop. Idempotent.
  void Shutdown();

 private:
  ReachServer() = default;

  // The --data_dir lock's descriptor: the first member, so it is released
  // last, after the stores have closed.
  struct DataDirLock {
    int fd = -1;
    ~DataDirLock();
  };
  DataDirLock data_dir_lock_;
  ServerOptions options_;
  // A shared registry's database (its listener stops in Shutdown); before
  // registry_ and profiles_, whose stores use it.
  std::unique_ptr<PostgresRegistry> postgres_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<TokenAuth> auth_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<SolverPool> pool_;
  std::unique_ptr<RetargetProfiles> profiles_;
  std::unique_ptr<IkService> service_;
  std::unique_ptr<RetargetService> retarget_service_;
  std::unique_ptr<HealthService> health_;
  std::unique_ptr<UnknownMethodService> unknown_method_;
  // Before server_: gRPC reads its private copies until the server is gone.
  std::unique_ptr<TlsFiles> tls_files_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::unique_ptr<Viewer> viewer_;
  int port_ = 0;
  int metrics_port_ = 0;
  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace reach

#endif  // REACH_SERVER_SERVER_H_
