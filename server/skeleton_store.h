// Where registrations persist: an embedded SQLite file (the default),
// memory (tests, and by flag), or PostgreSQL shared by many servers
// (postgres_store.h). A store is used by one writer at a time in a process
// (the registry serialises calls); Put returns only once the record is
// durable.
#ifndef REACH_SERVER_SKELETON_STORE_H_
#define REACH_SERVER_SKELETON_STORE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
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

// What a store holds, and the change-log sequence it reflects (0 for the
// local stores, which have no change log).
struct StoreSnapshot {
  std::vector<StoredSkeleton> records;  // In version order.
  int64_t sequence = 0;
};

// A record as a shared store holds it after changes other servers made:
// `record` unset when it was deleted.
struct StoreChange {
  std::string id;
  std::optional<StoredSkeleton> record;
};

struct StoreChanges {
  std::vector<StoreChange> changes;  // Each id once.
  int64_t sequence = 0;  // The change log's sequence they bring one to.
  // The log no longer reaches back to the sequence asked for: `changes`
  // is then every record the store holds, and what is not among them is
  // gone.
  bool complete = false;
};

// A record read straight from a shared store, and the change-log sequence
// that read saw.
struct StoreRead {
  std::optional<StoredSkeleton> record;
  int64_t sequence = 0;
};

class SkeletonStore {
 public:
  virtual ~SkeletonStore() = default;
  // Every record, in version order.
  virtual absl::StatusOr<StoreSnapshot> LoadAll() = 0;
  // Inserts a record the store does not hold; durable when it returns OK
  // (SQLite: committed with synchronous=FULL). Returns the version stored:
  // the record's, or one a shared store assigns.
  virtual absl::StatusOr<int64_t> Put(const StoredSkeleton& record) = 0;
  // Replaces the record of `record.id` only while its version is
  // `replaces_version` (Aborted otherwise, NotFound when gone). Returns
  // the version stored, as Put.
  virtual absl::StatusOr<int64_t> Replace(const StoredSkeleton& record,
                                          int64_t replaces_version) = 0;
  // Replaces the owners of a stored record (durable like Put).
  virtual absl::Status SetOwners(absl::string_view id,
                                 const std::vector<std::string>& owners) = 0;
  virtual absl::Status Delete(absl::string_view id) = 0;

  // Shared stores (several servers on one database, postgres_store.h)
  // bracket every write: BeginWrite takes the table's write lock across
  // all servers, then the writer applies ChangesSince (so it checks its
  // limits against what every server wrote), writes, and CommitWrite
  // commits the lot with its change-log rows, returning the sequence of
  // the last. The local stores have one writer and do nothing here.
  virtual bool shared() const { return false; }
  virtual absl::Status BeginWrite() { return absl::OkStatus(); }
  virtual absl::StatusOr<int64_t> CommitWrite() { return int64_t{0}; }
  virtual void AbortWrite() {}
  virtual absl::StatusOr<StoreChanges> ChangesSince(int64_t /*sequence*/) {
    return StoreChanges{};
  }
  // One record, read without waiting for writers (thread-safe, unlike the
  // rest): the registry's skeleton cache reads a definition on a miss, and
  // a shared store's read-through fills in what another server wrote.
  virtual absl::StatusOr<StoreRead> Read(absl::string_view /*id*/) {
    return StoreRead{};
  }
};

// One write on a store: Begin, then Commit; a write that is not committed
// is aborted when the scope ends.
class StoreWrite {
 public:
  explicit StoreWrite(SkeletonStore* store) : store_(store) {}
  StoreWrite(const StoreWrite&) = delete;
  StoreWrite& operator=(const StoreWrite&) = delete;
  ~StoreWrite() {
    if (open_) store_->AbortWrite();
  }
  absl::Status Begin() {
    absl::Status status = store_->BeginWrite();
    open_ = status.ok();
    return status;
  }
  absl::StatusOr<int64_t> Commit() {
    open_ = false;
    return store_->CommitWrite();
  }

 private:
  SkeletonStore* const store_;
  bool open_ = false;
};

// For what follows a shared store (the registry, the retarget profiles):
// `apply` gets the changes after sequence `applied` (a local store has
// none).
template <typename Apply>
absl::Status FollowStore(SkeletonStore& store, int64_t applied, Apply apply) {
  if (!store.shared()) return absl::OkStatus();
  absl::StatusOr<StoreChanges> changes = store.ChangesSince(applied);
  if (!changes.ok()) return changes.status();
  apply(*changes);
  return absl::OkStatus();
}

// Commits `write` and moves `*applied` to its sequence.
inline absl::Status CommitAndFollow(StoreWrite& write, int64_t* applied) {
  absl::StatusOr<int64_t> sequence = write.Commit();
  if (!sequence.ok()) return sequence.status();
  *applied = std::max(*applied, *sequence);
  return absl::OkStatus();
}

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
