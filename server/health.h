// grpc.health.v1.Health for reach-server, in place of gRPC's default
// health service (which knows only the empty service name and whose open
// Watch calls hold a server's shutdown for its whole grace).
//
// Known service names: "" (the whole server), "reach.v1.IkService" and
// "reach.v1.RetargetService"; all follow SetServing. "reach.registry" is
// SERVING while the server serves and its registry takes writes
// (SetRegistryWritable: false while a shared PostgreSQL registry is
// unreachable; solves go on, so "" stays SERVING). Check of another name is NOT_FOUND; Watch of one
// answers SERVICE_UNKNOWN and stays open, as the protocol says. Shutdown()
// turns every name NOT_SERVING for good, sends that to every open Watch and
// then ends it with UNAVAILABLE, so a Watch never delays the server's exit.
#ifndef REACH_SERVER_HEALTH_H_
#define REACH_SERVER_HEALTH_H_

#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace reach {

inline constexpr char kRegistryHealthName[] = "reach.registry";

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // Starts NOT_SERVING.
  HealthService() = default;
  ~HealthService() override;

  // SERVING or NOT_SERVING for every known name; ignored after Shutdown().
  void SetServing(bool serving);
  // Whether the registry takes writes ("reach.registry"; true at start).
  void SetRegistryWritable(bool writable);
  // NOT_SERVING for good; every open Watch gets it, then ends (UNAVAILABLE,
  // "server shutting down"). Idempotent.
  void Shutdown();
  // Open Watch calls (for tests).
  int watches() const;

  grpc::ServerUnaryReactor* Check(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request,
      grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class WatchReactor;
  using Status = grpc::health::v1::HealthCheckResponse::ServingStatus;

  Status StatusOfLocked(const std::string& service) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WatchDone(WatchReactor* watch);

  mutable absl::Mutex mu_;
  bool serving_ ABSL_GUARDED_BY(mu_) = false;
  bool registry_writable_ ABSL_GUARDED_BY(mu_) = true;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_set<WatchReactor*> watches_ ABSL_GUARDED_BY(mu_);
  absl::CondVar no_watches_;
};

}  // namespace reach

#endif  // REACH_SERVER_HEALTH_H_
