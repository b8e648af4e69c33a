// Where registrations persist: an embedded SQLite file (the default) or
// memory (tests, and by flag). A store is used by one writer at a time (the
// registry serialises calls); Put returns only once the record is durable.
#ifndef REACH_SERVER_SKELETON_STORE_H_
#define REACH_SERVER_SKELETON_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace reach {

// A stored record: a skeleton, or a retarget profile (whose definition is a
// serialized reach.v1.StoredRetargetProfile).
struct StoredSkeleton {
  std::string id;
  int64_t version = 0;
  std::string definition;  // Serialised reach.v1.Skeleton.
  // Who registered it (token names, or "peer:ADDRESS" without auth); none
  // for records stored before owners were kept. Names hold no newline.
  std::vector<std::string> owners;
};

class SkeletonStore {
 public:
  virtual ~SkeletonStore() = default;
  // Every record, in version order.
  virtual absl::StatusOr<std::vector<StoredSkeleton>> LoadAll() = 0;
  // Durable when it returns OK (SQLite: committed with synchronous=FULL).
  virtual absl::Status Put(const StoredSkeleton& record) = 0;
  // Replaces the owners of a stored record (durable like Put).
  virtual absl::Status SetOwners(absl::string_view id,
                                 const std::vector<std::string>& owners) = 0;
  virtual absl::Status Delete(absl::string_view id) = 0;
};

// Keeps nothing across restarts.
std::unique_ptr<SkeletonStore> NewMemoryStore();

// Opens (creating if needed) the SQLite database `path`; its directory must
// exist. The records live in `table` (created if needed): skeletons in
// "skeletons", retarget profiles in "retarget_profiles" (the same record
// shape: id, version, a serialized message, owners), each store on its own
// connection to the one file.
absl::StatusOr<std::unique_ptr<SkeletonStore>> OpenSqliteStore(
    const std::string& path, absl::string_view table = "skeletons");

}  // namespace reach

#endif  // REACH_SERVER_SKELETON_STORE_H_
