// The skeleton registry: thread-safe and read-mostly. A registered skeleton
// is immutable; readers hold a shared pointer, so a delete never pulls a
// skeleton from under a running solve.
#ifndef REACH_SERVER_REGISTRY_H_
#define REACH_SERVER_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "reach/v1/skeleton.pb.h"
#include "server/skeleton_store.h"
#include "solvers/skeleton.h"

namespace reach {

// What the registry keeps of every registered skeleton: what ListSkeletons
// shows, and its size for the limits and quotas. The definition and the
// solvers' Skeleton are not kept here: they are read from the store and
// built when a call needs them (Registry::Get) into a cache bounded by
// RegistryLimits::cache_bytes, so a replica's memory does not grow with
// everything every replica registered.
struct RegisteredSkeleton {
  std::string id;
  int64_t version = 0;
  int64_t definition_size = 0;  // Bytes of the serialized v1::Skeleton.
  std::string name;
  int num_joints = 0;
  std::vector<std::string> chain_names;
  // What the registry's byte limit and the owner quotas count for it:
  // this entry with its definition, about (unchanged from when the
  // definition was held here, so the limits mean what they meant).
  int64_t memory_bytes = 0;
};

// A registered skeleton ready to solve with: the validated Skeleton, and
// the stored definition (GetSkeleton answers with it).
struct LoadedSkeleton {
  std::string id;
  int64_t version = 0;
  Skeleton skeleton;
  std::string definition_bytes;  // A serialized v1::Skeleton.
  int64_t memory_bytes = 0;  // About; what the cache counts.
};

// The skeleton cache's counters (reach_skeleton_cache_* metrics).
struct SkeletonCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;     // Each read the store (one round trip) and built.
  int64_t evictions = 0;  // Dropped to stay within the bound.
  int64_t bytes = 0;      // Held now (memory_bytes); never above limit_bytes.
  int64_t entries = 0;
  int64_t limit_bytes = 0;
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
  // What one owner (see Register) may hold: skeletons, and their
  // memory_bytes (a skeleton with several owners counts for each). Beyond
  // either, RegisterSkeleton is RESOURCE_EXHAUSTED. <= 0: no limit.
  int max_owner_skeletons = 0;
  int64_t max_owner_bytes = 0;
  // Loaded skeletons kept for solving (their memory_bytes), least recently
  // used dropped first; one larger than this is not kept (it is read and
  // built for each call). <= 0: every call reads and builds its skeleton.
  int64_t cache_bytes = int64_t{64} << 20;
};

// What one owner holds registered.
struct OwnerUsage {
  int skeletons = 0;
  int64_t bytes = 0;
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

// Rewrites every -0.0 double in `message` (recursively) as +0.0: equal
// values that serialise differently (and JSON drops the sign of zero).
void CanonicalizeZeros(google::protobuf::Message* message);
// Lower-case hex SHA-256 of the message's deterministic serialisation.
std::string MessageId(const google::protobuf::MessageLite& message);
// MessageId of the definition, every -0.0 written as +0.0.
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

  // Validates, stores durably, then publishes. Idempotent. `owner` (a
  // token's name, or the peer without auth; empty: none) is recorded with
  // the skeleton and charged for it against the owner quotas; registering
  // a skeleton someone else registered adds `owner` to its owners.
  absl::StatusOr<RegisterResult> Register(const v1::Skeleton& definition,
                                          absl::string_view owner = "");
  // nullptr when unknown. With a shared store, an id this server has not
  // heard of yet is read from the store (one round trip) and kept.
  std::shared_ptr<const RegisteredSkeleton> Find(absl::string_view id) const;
  // Shared stores: applies what other servers wrote since the last change
  // this registry applied (their listener calls it on every NOTIFY and
  // reconnect). OK and nothing for the local stores.
  absl::Status CatchUp();
  // The change-log sequence this registry reflects (0: local store).
  int64_t applied_sequence() const;
  // The skeleton to solve with: from the cache, or read from the store
  // (one read) and built (and cached). UnknownSkeleton(id) when unknown;
  // when the store cannot be read (a shared registry's database down) and
  // the skeleton is not cached, the store's error (UNAVAILABLE), naming
  // the skeleton. A caller keeps what it got however long it needs it,
  // whatever the cache evicts meanwhile.
  absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> Get(
      absl::string_view id) const;
  // Get, nullptr for any error.
  std::shared_ptr<const LoadedSkeleton> Load(absl::string_view id) const {
    absl::StatusOr<std::shared_ptr<const LoadedSkeleton>> got = Get(id);
    return got.ok() ? *std::move(got) : nullptr;
  }
  // The cache's memory_bytes and entries.
  int64_t cached_bytes() const;
  int cached_skeletons() const;
  SkeletonCacheStats cache_stats() const;
  // Find()s of an id not held that went to a shared store (for metrics).
  int64_t read_throughs() const { return read_throughs_.load(); }
  // UnknownSkeleton(id) when unknown. With an empty `owner` the skeleton
  // goes whoever registered it (an admin). Otherwise `owner` gives it up,
  // and it goes once it has no owner left; PermissionDenied when `owner`
  // is not one of its owners.
  absl::Status Delete(absl::string_view id, absl::string_view owner = "");
  // Who registered the skeleton (empty when unknown or stored before
  // owners were kept).
  std::vector<std::string> Owners(absl::string_view id) const;
  OwnerUsage Usage(absl::string_view owner) const;
  // In version order; page_size >= 1. An unparsable token is
  // InvalidArgument naming page_token.
  absl::StatusOr<SkeletonPage> List(int page_size,
                                    absl::string_view page_token) const;
  int size() const;
  // The sum of the registered skeletons' memory_bytes.
  int64_t total_bytes() const;

 private:
  Registry(std::unique_ptr<SkeletonStore> store, const RegistryLimits& limits)
      : reader_(store.get()), store_(std::move(store)), limits_(limits) {}
  // `definition_size`: the definition's stored (serialized) bytes.
  absl::StatusOr<std::shared_ptr<const RegisteredSkeleton>> Build(
      const v1::Skeleton& definition, int64_t definition_size, std::string id,
      int64_t version) const;
  // The validated Skeleton of `definition`.
  absl::StatusOr<Skeleton> Validate(const v1::Skeleton& definition) const;
  // ResourceExhausted when `skeleton` would take the registry past its
  // byte limit.
  absl::Status CheckRoom(const RegisteredSkeleton& skeleton) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // ResourceExhausted when `owner` may not take `bytes` more.
  absl::Status CheckQuota(absl::string_view owner, int64_t bytes) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Publish(std::shared_ptr<const RegisteredSkeleton> skeleton,
               std::vector<std::string> owners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Charge(absl::string_view owner, int sign, int64_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds `owner` to a registered skeleton's owners, durably, within the
  // write `write` has begun.
  absl::StatusOr<RegisterResult> AddOwner(const RegisteredSkeleton& known,
                                          absl::string_view owner,
                                          StoreWrite& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Begins a write on the store and applies what other servers wrote.
  absl::Status BeginLocked(StoreWrite& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status CommitLocked(StoreWrite& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void ApplyLocked(const StoreChanges& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Makes this registry's entry of `id` the store's `record` (unset: gone).
  void ApplyRecordLocked(const std::string& id,
                         const std::optional<StoredSkeleton>& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Drops a registered skeleton from memory (not from the store).
  void RemoveLocked(const RegisteredSkeleton& known)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void SetOwnersLocked(const RegisteredSkeleton& known,
                       std::vector<std::string> owners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Without the store's read-through.
  std::shared_ptr<const RegisteredSkeleton> FindLocal(
      absl::string_view id) const;
  std::shared_ptr<const RegisteredSkeleton> ReadThrough(
      absl::string_view id) const;
  // Applies what a read-through read (when newer than what this registry
  // applied); the entry of `id` after it.
  std::shared_ptr<const RegisteredSkeleton> Adopt(absl::string_view id,
                                                  const StoreRead& read) const;

  // The store, for its thread-safe Read only.
  SkeletonStore* const reader_;
  // Serialises writers (and the store) so that a slow durable write never
  // blocks readers: mu_ is held only to swap pointers. (Mutable: a
  // read-through publishes what it read.)
  mutable absl::Mutex write_mu_;
  std::unique_ptr<SkeletonStore> store_ ABSL_GUARDED_BY(write_mu_);
  int64_t next_version_ ABSL_GUARDED_BY(write_mu_) = 1;
  int64_t applied_ ABSL_GUARDED_BY(write_mu_) = 0;
  const RegistryLimits limits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const RegisteredSkeleton>>
      by_id_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<const RegisteredSkeleton>> by_version_
      ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::vector<std::string>> owners_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, OwnerUsage> usage_ ABSL_GUARDED_BY(mu_);

  // Loaded skeletons, most recently used first.
  mutable absl::Mutex cache_mu_;
  mutable std::list<std::shared_ptr<const LoadedSkeleton>> lru_
      ABSL_GUARDED_BY(cache_mu_);
  mutable absl::flat_hash_map<
      std::string, std::list<std::shared_ptr<const LoadedSkeleton>>::iterator>
      cached_ ABSL_GUARDED_BY(cache_mu_);
  mutable int64_t cached_bytes_ ABSL_GUARDED_BY(cache_mu_) = 0;
  mutable int64_t hits_ ABSL_GUARDED_BY(cache_mu_) = 0;
  mutable int64_t misses_ ABSL_GUARDED_BY(cache_mu_) = 0;
  mutable int64_t evictions_ ABSL_GUARDED_BY(cache_mu_) = 0;
  mutable std::atomic<int64_t> read_throughs_{0};
  void Uncache(absl::string_view id) const;
};

}  // namespace reach

#endif  // REACH_SERVER_REGISTRY_H_
