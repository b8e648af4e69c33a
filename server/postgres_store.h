// The registry in PostgreSQL, shared by many reach-server replicas
// (--registry=postgresql://...). Each replica keeps the whole registry in
// memory, as with SQLite, and the database is the truth between them:
//
// - every write takes its table's advisory transaction lock (one writer
//   per table across all replicas), applies the change log up to now, so
//   quotas, limits and versions are checked against what every replica
//   wrote, then writes its row and a change-log row and NOTIFYs, all in one
//   transaction. Versions come from one sequence (reach_versions).
// - each replica LISTENs on its own connection; on every NOTIFY, every
//   (re)connect and every few seconds it reads the change log from the last
//   sequence it applied, so nothing is missed. Within a table, change-log
//   sequences are taken under the table's lock, so they commit in order.
// - a replica that has not heard of an id yet reads it straight from the
//   table (one round trip) on a miss.
// - the schema is created and migrated under a session advisory lock: one
//   replica at a time.
// - the database unreachable: what this replica holds still serves; writes
//   get UNAVAILABLE; the listener reconnects (100 ms doubling to 1 s) and
//   catches up.
#ifndef REACH_SERVER_POSTGRES_STORE_H_
#define REACH_SERVER_POSTGRES_STORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/skeleton_store.h"

typedef struct pg_conn PGconn;  // libpq's, as libpq-fe.h declares it.

namespace reach {

// Whether a --registry value names PostgreSQL (postgresql:// or
// postgres://).
bool IsPostgresUrl(absl::string_view registry);

// The change log keeps at least this many changes a table; older ones are
// trimmed, and a replica that was away for longer reloads the table whole.
inline constexpr int64_t kChangeLogKeep = 10000;

class PostgresRegistry {
 public:
  // Checks the URL (InvalidArgument naming --registry), connects and
  // creates or migrates the schema (Unavailable when unreachable).
  static absl::StatusOr<std::unique_ptr<PostgresRegistry>> Open(
      const std::string& url);
  ~PostgresRegistry();

  // The store of `table` ("skeletons" or "retarget_profiles", kept in
  // reach_skeletons and reach_retarget_profiles), on connections of its
  // own. The stores must go before this object.
  std::unique_ptr<SkeletonStore> NewStore(absl::string_view table);

  // Starts the listener thread. `on_change(table)` runs on it after every
  // (re)connect, every NOTIFY and every `poll_interval`; `on_state(up,
  // why)` whenever the database becomes reachable or not (writers that
  // fail to reach it report it too).
  void Listen(std::function<absl::Status(absl::string_view table)> on_change,
              std::function<void(bool up, const std::string& why)> on_state,
              absl::Duration poll_interval = absl::Seconds(5));
  // Stops the listener (idempotent); on_change is not called after.
  void StopListening();

  bool up() const { return up_.load(); }
  // Times the listener's connection broke and it reconnected.
  int64_t listener_reconnects() const { return listener_reconnects_.load(); }
  // The URL without its password: postgresql://user@host:port/dbname.
  const std::string& description() const { return description_; }

  // For the stores: the connection parameters (application_name set).
  absl::StatusOr<PGconn*> Connect(absl::string_view role) const;
  void SetUp(bool up, const std::string& why);

 private:
  PostgresRegistry() = default;
  void Run(absl::Duration poll_interval);

  std::string url_;
  std::string description_;
  std::atomic<bool> up_{true};
  std::atomic<int64_t> listener_reconnects_{0};
  absl::Mutex state_mu_;
  std::function<void(bool, const std::string&)> on_state_
      ABSL_GUARDED_BY(state_mu_);
  std::function<absl::Status(absl::string_view)> on_change_;
  absl::Mutex stop_mu_;
  bool stopping_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread listener_;
};

}  // namespace reach

#endif  // REACH_SERVER_POSTGRES_STORE_H_
