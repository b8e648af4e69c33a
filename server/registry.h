// The skeleton registry: thread-safe and read-mostly. A registered skeleton
// is immutable; readers hold a shared pointer, so a delete never pulls a
// skeleton from under a running solve.
#ifndef REACH_SERVER_REGISTRY_H_
#define REACH_SERVER_REGISTRY_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "reach/v1/skeleton.pb.h"
#include "server/skeleton_store.h"
#include "solvers/skeleton.h"

namespace reach {

// What the registry keeps of a skeleton: the definition as it was stored
// (serialized: GetSkeleton parses it, far smaller than the message), its
// name, and the validated Skeleton the solvers use.
struct RegisteredSkeleton {
  std::string id;
  int64_t version = 0;
  std::string definition_bytes;  // A serialized v1::Skeleton.
  std::string name;
  Skeleton skeleton;
  // What this entry holds in memory, about (the registry's byte limit
  // counts these).
  int64_t memory_bytes = 0;
};

// The registry's bounds on what it holds, beyond the solver's
// SkeletonLimits (joints, chains).
struct RegistryLimits {
  SkeletonLimits skeleton;
  // Longest skeleton, joint or chain name (and chain root and tip), in
  // bytes: names are the only part of a skeleton without a count limit.
  int max_name_bytes = 256;
  // Memory all registered skeletons may take together (their
  // memory_bytes); a registration beyond it is RESOURCE_EXHAUSTED, and a
  // stored skeleton beyond it is skipped at start. <= 0: no limit.
  int64_t max_total_bytes = int64_t{128} << 20;
};

struct RegisterResult {
  std::string id;
  int64_t version = 0;
  bool created = false;
};

struct SkeletonPage {
  std::vector<std::shared_ptr<const RegisteredSkeleton>> skeletons;
  std::string next_page_token;  // Empty on the last page.
};

// The error for an id the registry does not know: "skeleton_id: no skeleton
// 'x'" (NotFound), or "skeleton_id: required" (InvalidArgument) when empty.
absl::Status UnknownSkeleton(absl::string_view id);

// Lower-case hex SHA-256 of the definition's deterministic serialisation.
std::string SkeletonId(const v1::Skeleton& definition);

class Registry {
 public:
  // Loads every stored skeleton. A stored definition that no longer
  // validates (e.g. --max_joints was lowered) is skipped and reported in
  // `skipped`, but left in the store.
  static absl::StatusOr<std::unique_ptr<Registry>> Create(
      std::unique_ptr<SkeletonStore> store, const RegistryLimits& limits,
      std::vector<std::string>* skipped = nullptr);
  static absl::StatusOr<std::unique_ptr<Registry>> Create(
      std::unique_ptr<SkeletonStore> store, const SkeletonLimits& limits,
      std::vector<std::string>* skipped = nullptr) {
    RegistryLimits registry_limits;
    registry_limits.skeleton = limits;
    return Create(std::move(store), registry_limits, skipped);
  }

  // Validates, stores durably, then publishes. Idempotent.
  absl::StatusOr<RegisterResult> Register(const v1::Skeleton& definition);
  // nullptr when unknown.
  std::shared_ptr<const RegisteredSkeleton> Find(absl::string_view id) const;
  // UnknownSkeleton(id) when unknown.
  absl::Status Delete(absl::string_view id);
  // In version order; page_size >= 1. An unparsable token is
  // InvalidArgument naming page_token.
  absl::StatusOr<SkeletonPage> List(int page_size,
                                    absl::string_view page_token) const;
  int size() const;
  // The sum of the registered skeletons' memory_bytes.
  int64_t total_bytes() const;

 private:
  Registry(std::unique_ptr<SkeletonStore> store, const RegistryLimits& limits)
      : store_(std::move(store)), limits_(limits) {}
  // `bytes`: the definition serialized (kept as the stored form).
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> Build(
      const v1::Skeleton& definition, std::string bytes, std::string id,
      int64_t version) const;
  // ResourceExhausted when `skeleton` would take the registry past its
  // byte limit.
  absl::Status CheckRoom(const RegisteredSkeleton& skeleton) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Publish(std::shared_ptr<const RegisteredSkeleton> skeleton)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Serialises writers (and the store) so that a slow durable write never
  // blocks readers: mu_ is held only to swap pointers.
  absl::Mutex write_mu_;
  std::unique_ptr<SkeletonStore> store_ ABSL_GUARDED_BY(write_mu_);
  int64_t next_version_ ABSL_GUARDED_BY(write_mu_) = 1;
  const RegistryLimits limits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const RegisteredSkeleton>>
      by_id_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<const RegisteredSkeleton>> by_version_
      ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reach

#endif  // REACH_SERVER_REGISTRY_H_
