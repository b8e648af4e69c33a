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

struct RegisteredSkeleton {
  std::string id;
  int64_t version = 0;
  v1::Skeleton definition;
  Skeleton skeleton;
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
      std::unique_ptr<SkeletonStore> store, const SkeletonLimits& limits,
      std::vector<std::string>* skipped = nullptr);

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

 private:
  Registry(std::unique_ptr<SkeletonStore> store, const SkeletonLimits& limits)
      : store_(std::move(store)), limits_(limits) {}
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> Build(
      const v1::Skeleton& definition, std::string id, int64_t version) const;
  void Publish(std::shared_ptr<const RegisteredSkeleton> skeleton)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Serialises writers (and the store) so that a slow durable write never
  // blocks readers: mu_ is held only to swap pointers.
  absl::Mutex write_mu_;
  std::unique_ptr<SkeletonStore> store_ ABSL_GUARDED_BY(write_mu_);
  int64_t next_version_ ABSL_GUARDED_BY(write_mu_) = 1;
  const SkeletonLimits limits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const RegisteredSkeleton>>
      by_id_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<const RegisteredSkeleton>> by_version_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace reach

#endif  // REACH_SERVER_REGISTRY_H_
