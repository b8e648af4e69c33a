// Retarget profiles (reach.v1.RetargetService): a source and a target
// skeleton characterised, the target's retarget pose chosen and a
// retarget::Retargeter built, once, when a profile is created or loaded at
// start; calls then share the built profile read-only. Thread-safe and
// read-mostly like the skeleton registry: readers hold a shared pointer, so
// a delete never pulls a profile from under a running call.
//
// A profile keeps its own copy of both skeletons (stored with its spec), so
// it outlives the skeletons it was made from and rebuilds the same after a
// restart.
#ifndef REACH_SERVER_RETARGET_PROFILES_H_
#define REACH_SERVER_RETARGET_PROFILES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "reach/v1/retarget.pb.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "solvers/skeleton.h"

namespace reach {

struct RetargetProfileLimits {
  // Stored skeletons are rebuilt under these (as the registry's).
  SkeletonLimits skeleton;
  // Profiles held at once, and the memory they may take together (their
  // memory_bytes); beyond either CreateRetargetProfile is
  // RESOURCE_EXHAUSTED. Every stored profile is loaded at start whatever
  // these say (it was acknowledged). <= 0: no limit.
  int max_profiles = 256;
  int64_t max_bytes = int64_t{128} << 20;
  // Profiles one owner (a token, or a peer without auth) may create; <= 0:
  // no limit. Becoming an owner of a profile someone made is free.
  int max_owner_profiles = 0;
};

// The most role overrides a side may have, and the most bytes a spec may
// take (reference poses of the largest skeletons fit): INVALID_ARGUMENT
// beyond.
inline constexpr int kMaxRoleOverrides = 64;
inline constexpr int64_t kMaxSpecBytes = int64_t{256} << 10;

// A profile ready to retarget with. Not copyable or movable: the
// retargeter points at the skeletons and characterisations beside it.
struct BuiltRetargetProfile {
  BuiltRetargetProfile() = default;
  BuiltRetargetProfile(const BuiltRetargetProfile&) = delete;
  BuiltRetargetProfile& operator=(const BuiltRetargetProfile&) = delete;

  std::string id;
  int64_t version = 0;
  std::string stored_bytes;  // A serialized v1::StoredRetargetProfile.
  // What GetRetargetProfile returns (id, version, spec, reports).
  v1::RetargetProfile description;
  Skeleton source_skeleton;
  Skeleton target_skeleton;
  retarget::Characterization source_roles;
  retarget::Characterization target_roles;
  std::optional<retarget::Retargeter> retargeter;
  int64_t memory_bytes = 0;  // About.
};

// Builds a profile from its stored form (id and version left unset).
// Errors name the spec's field ("spec.contact_speed",
// "spec.target.overrides[0].joint", "spec.source.reference.rotations[2]")
// or the side ("spec.target: no two mirrored legs").
absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> BuildRetargetProfile(
    const v1::StoredRetargetProfile& stored, const SkeletonLimits& limits);

// The error for an unknown profile id: "profile_id: no retarget profile
// 'x'" (NotFound), or "profile_id: required" (InvalidArgument).
absl::Status UnknownProfile(absl::string_view id);

struct RetargetProfilePage {
  std::vector<std::shared_ptr<const BuiltRetargetProfile>> profiles;
  std::string next_page_token;  // Empty on the last page.
};

class RetargetProfiles {
 public:
  // Loads and builds every stored profile; one that no longer builds (its
  // skeleton beyond lowered --max_joints) is skipped and reported in
  // `skipped`, but left in the store.
  static absl::StatusOr<std::unique_ptr<RetargetProfiles>> Create(
      std::unique_ptr<SkeletonStore> store, const RetargetProfileLimits& limits,
      std::vector<std::string>* skipped = nullptr);

  struct AddResult {
    std::shared_ptr<const BuiltRetargetProfile> profile;
    bool created = false;
  };
  // Builds the profile `spec` describes from the registry's skeletons,
  // stores it durably, then publishes it. Idempotent: the id is the hash
  // of the spec without unknown fields and with -0.0 as 0.0. `owner` as
  // Registry::Register's.
  absl::StatusOr<AddResult> Add(const v1::RetargetProfileSpec& spec,
                                const Registry& skeletons,
                                absl::string_view owner = "");
  // Replaces profile `id`'s spec, keeping its id, if its version is still
  // `version` (optimistic concurrency): Aborted when another update (on
  // any server sharing the store) came first, NotFound when unknown,
  // PermissionDenied when `owner` (non-empty) is not one of its owners.
  // The profile gets a new version.
  absl::StatusOr<std::shared_ptr<const BuiltRetargetProfile>> Update(
      absl::string_view id, int64_t version,
      const v1::RetargetProfileSpec& spec, const Registry& skeletons,
      absl::string_view owner = "");
  // nullptr when unknown. With a shared store, an id this server has not
  // heard of yet is read from the store (one round trip) and built.
  std::shared_ptr<const BuiltRetargetProfile> Find(absl::string_view id) const;
  // As Registry::CatchUp.
  absl::Status CatchUp();
  int64_t applied_sequence() const;
  // As Registry::Delete: an empty `owner` deletes whoever made it;
  // otherwise `owner` gives it up (PermissionDenied when not an owner).
  absl::Status Delete(absl::string_view id, absl::string_view owner = "");
  // In version order; page_size >= 1.
  absl::StatusOr<RetargetProfilePage> List(int page_size,
                                           absl::string_view page_token) const;
  int size() const;
  // The sum of the profiles' memory_bytes.
  int64_t total_bytes() const;

 private:
  RetargetProfiles(std::unique_ptr<SkeletonStore> store,
                   const RetargetProfileLimits& limits)
      : reader_(store.get()), store_(std::move(store)), limits_(limits) {}
  // The spec bounded, without unknown fields and -0.0, and the stored
  // profile it makes with the registry's skeletons, built.
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> Make(
      const v1::RetargetProfileSpec& spec, const Registry& skeletons) const;
  // A stored record built (id and version set); errors say why not.
  absl::StatusOr<std::shared_ptr<BuiltRetargetProfile>> BuildRecord(
      const StoredSkeleton& record) const;
  absl::Status BeginLocked(StoreWrite& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  absl::Status CommitLocked(StoreWrite& write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void ApplyLocked(const StoreChanges& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void ApplyRecordLocked(const std::string& id,
                         const std::optional<StoredSkeleton>& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  void RemoveLocked(const std::string& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  std::shared_ptr<const BuiltRetargetProfile> FindLocal(
      absl::string_view id) const;
  void Publish(std::shared_ptr<const BuiltRetargetProfile> profile,
               std::vector<std::string> owners)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy of the owners of profile `id` (none when unknown).
  std::vector<std::string> OwnersOf(const std::string& id) const;

  // The store, for its thread-safe Read only.
  SkeletonStore* const reader_;
  // Serialises writers and the store; mu_ is held only to swap pointers.
  mutable absl::Mutex write_mu_;
  std::unique_ptr<SkeletonStore> store_ ABSL_GUARDED_BY(write_mu_);
  int64_t next_version_ ABSL_GUARDED_BY(write_mu_) = 1;
  int64_t applied_ ABSL_GUARDED_BY(write_mu_) = 0;
  const RetargetProfileLimits limits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const BuiltRetargetProfile>>
      by_id_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<const BuiltRetargetProfile>> by_version_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::vector<std::string>> owners_
      ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reach

#endif  // REACH_SERVER_RETARGET_PROFILES_H_
