#include "server/skeleton_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace reach {
namespace {

class MemoryStore : public SkeletonStore {
 public:
  absl::StatusOr<StoreSnapshot> LoadAll() override {
    absl::MutexLock lock(&mu_);
    StoreSnapshot out;
    for (const auto& [id, record] : records_) out.records.push_back(record);
    std::sort(out.records.begin(), out.records.end(),
              [](const StoredSkeleton& a, const StoredSkeleton& b) {
                return a.version < b.version;
              });
    return out;
  }
  absl::StatusOr<int64_t> Put(const StoredSkeleton& record) override {
    absl::MutexLock lock(&mu_);
    records_[record.id] = record;
    return record.version;
  }
  absl::StatusOr<int64_t> Replace(const StoredSkeleton& record,
                                  int64_t replaces_version) override {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(record.id);
    if (it == records_.end()) return absl::NotFoundError(record.id);
    if (it->second.version != replaces_version) {
      return absl::AbortedError(absl::StrCat(record.id, " changed"));
    }
    it->second = record;
    return record.version;
  }
  absl::Status SetOwners(absl::string_view id,
                         const std::vector<std::string>& owners) override {
    absl::MutexLock lock(&mu_);
    auto it = records_.find(std::string(id));
    if (it != records_.end()) it->second.owners = owners;
    return absl::OkStatus();
  }
  absl::Status Delete(absl::string_view id) override {
    absl::MutexLock lock(&mu_);
    records_.erase(std::string(id));
    return absl::OkStatus();
  }
  absl::StatusOr<StoreRead> Read(absl::string_view id) override {
    absl::MutexLock lock(&mu_);
    StoreRead out;
    if (auto it = records_.find(std::string(id)); it != records_.end()) {
      out.record = it->second;
    }
    return out;
  }

 private:
  // Read comes from any thread, the rest from the registry's one writer.
  absl::Mutex mu_;
  std::map<std::string, StoredSkeleton> records_ ABSL_GUARDED_BY(mu_);
};

std::vector<std::string> SplitOwners(const unsigned char* text) {
  if (text == nullptr || *text == '\0') return {};
  return absl::StrSplit(reinterpret_cast<const char*>(text), '\n');
}

// Finalizes a prepared statement on every path out.
struct Statement {
  sqlite3_stmt* stmt = nullptr;
  ~Statement() { sqlite3_finalize(stmt); }
};

class SqliteStore : public SkeletonStore {
 public:
  // `reader`: a second connection to the file, for Read (WAL: it does not
  // wait for the writer, and sees only what was committed).
  SqliteStore(sqlite3* db, sqlite3* reader, absl::string_view table)
      : db_(db), reader_(reader), table_(table) {}
  ~SqliteStore() override {
    sqlite3_finalize(read_stmt_);
    sqlite3_close(reader_);
    sqlite3_close(db_);
  }

  absl::Status Init() {
    // WAL with synchronous=FULL: a committed registration survives a crash
    // of the process (kill -9) and of the machine.
    absl::Status status = Exec(absl::StrCat(
        "PRAGMA journal_mode=WAL;"
        "PRAGMA synchronous=FULL;"
        "CREATE TABLE IF NOT EXISTS ", table_, " ("
        "  id TEXT PRIMARY KEY,"
        "  version INTEGER NOT NULL,"
        "  definition BLOB NOT NULL);"));
    if (!status.ok()) return status;
    // Registries made before owners were kept gain the column (empty).
    Statement s;
    status = Prepare(absl::StrCat("SELECT owners FROM ", table_, " LIMIT 0"),
                     &s);
    if (status.ok()) return status;
    return Exec(absl::StrCat("ALTER TABLE ", table_,
                             " ADD COLUMN owners TEXT NOT NULL DEFAULT '';"));
  }

  absl::StatusOr<StoreSnapshot> LoadAll() override {
    Statement s;
    absl::Status status = Prepare(
        absl::StrCat("SELECT id, version, definition, owners FROM ", table_,
                     " ORDER BY version"),
        &s);
    if (!status.ok()) return status;
    StoreSnapshot out;
    int rc;
    while ((rc = sqlite3_step(s.stmt)) == SQLITE_ROW) {
      StoredSkeleton& record = out.records.emplace_back();
      record.id = reinterpret_cast<const char*>(sqlite3_column_text(s.stmt, 0));
      record.version = sqlite3_column_int64(s.stmt, 1);
      const void* blob = sqlite3_column_blob(s.stmt, 2);
      const int size = sqlite3_column_bytes(s.stmt, 2);
      if (blob != nullptr) {
        record.definition.assign(static_cast<const char*>(blob), size);
      }
      record.owners = SplitOwners(sqlite3_column_text(s.stmt, 3));
    }
    if (rc != SQLITE_DONE) return Error(absl::StrCat("reading ", table_));
    return out;
  }

  absl::StatusOr<int64_t> Put(const StoredSkeleton& record) override {
    return Write(record, absl::StrCat("INSERT OR REPLACE INTO ", table_,
                                      " (id, version, definition, owners) "
                                      "VALUES (?, ?, ?, ?)"),
                 -1);
  }

  absl::StatusOr<int64_t> Replace(const StoredSkeleton& record,
                                  int64_t replaces_version) override {
    return Write(record,
                 absl::StrCat("UPDATE ", table_,
                              " SET id = ?1, version = ?2, definition = ?3, "
                              "owners = ?4 WHERE id = ?1 AND version = ?5"),
                 replaces_version);
  }

  absl::Status SetOwners(absl::string_view id,
                         const std::vector<std::string>& owners) override {
    Statement s;
    absl::Status status =
        Prepare(absl::StrCat("UPDATE ", table_, " SET owners = ? WHERE id = ?"),
                &s);
    if (!status.ok()) return status;
    const std::string joined = absl::StrJoin(owners, "\n");
    sqlite3_bind_text(s.stmt, 1, joined.data(),
                      static_cast<int>(joined.size()), SQLITE_STATIC);
    sqlite3_bind_text(s.stmt, 2, id.data(), static_cast<int>(id.size()),
                      SQLITE_STATIC);
    if (sqlite3_step(s.stmt) != SQLITE_DONE) {
      return Error(absl::StrCat("storing owners into ", table_));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<StoreRead> Read(absl::string_view id) override {
    absl::MutexLock lock(&read_mu_);
    if (read_stmt_ == nullptr) {
      const std::string sql =
          absl::StrCat("SELECT id, version, definition, owners FROM ", table_,
                       " WHERE id = ?");
      if (sqlite3_prepare_v2(reader_, sql.c_str(), -1, &read_stmt_,
                             nullptr) != SQLITE_OK) {
        return absl::InternalError(
            absl::StrCat("sqlite: ", sql, ": ", sqlite3_errmsg(reader_)));
      }
    }
    sqlite3_stmt* s = read_stmt_;
    sqlite3_reset(s);
    sqlite3_bind_text(s, 1, id.data(), static_cast<int>(id.size()),
                      SQLITE_TRANSIENT);
    StoreRead out;
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      StoredSkeleton& record = out.record.emplace();
      record.id = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      record.version = sqlite3_column_int64(s, 1);
      const void* blob = sqlite3_column_blob(s, 2);
      const int size = sqlite3_column_bytes(s, 2);
      if (blob != nullptr) {
        record.definition.assign(static_cast<const char*>(blob), size);
      }
      record.owners = SplitOwners(sqlite3_column_text(s, 3));
    } else if (rc != SQLITE_DONE) {
      absl::Status status = absl::InternalError(absl::StrCat(
          "sqlite: reading ", table_, ": ", sqlite3_errmsg(reader_)));
      sqlite3_reset(s);
      return status;
    }
    // Ends the read transaction: the next Read sees newer commits.
    sqlite3_reset(s);
    return out;
  }

  absl::Status Delete(absl::string_view id) override {
    Statement s;
    absl::Status status =
        Prepare(absl::StrCat("DELETE FROM ", table_, " WHERE id = ?"), &s);
    if (!status.ok()) return status;
    sqlite3_bind_text(s.stmt, 1, id.data(), static_cast<int>(id.size()),
                      SQLITE_STATIC);
    if (sqlite3_step(s.stmt) != SQLITE_DONE) {
      return Error(absl::StrCat("deleting from ", table_));
    }
    return absl::OkStatus();
  }

 private:
  // Put (replaces_version < 0) or Replace.
  absl::StatusOr<int64_t> Write(const StoredSkeleton& record,
                                const std::string& sql,
                                int64_t replaces_version) {
    Statement s;
    absl::Status status = Prepare(sql, &s);
    if (!status.ok()) return status;
    sqlite3_bind_text(s.stmt, 1, record.id.data(),
                      static_cast<int>(record.id.size()), SQLITE_STATIC);
    sqlite3_bind_int64(s.stmt, 2, record.version);
    sqlite3_bind_blob(s.stmt, 3, record.definition.data(),
                      static_cast<int>(record.definition.size()),
                      SQLITE_STATIC);
    const std::string owners = absl::StrJoin(record.owners, "\n");
    sqlite3_bind_text(s.stmt, 4, owners.data(),
                      static_cast<int>(owners.size()), SQLITE_STATIC);
    if (replaces_version >= 0) sqlite3_bind_int64(s.stmt, 5, replaces_version);
    if (sqlite3_step(s.stmt) != SQLITE_DONE) {
      return Error(absl::StrCat("storing into ", table_));
    }
    if (replaces_version >= 0 && sqlite3_changes(db_) == 0) {
      return absl::AbortedError(absl::StrCat(record.id, " changed"));
    }
    return record.version;
  }

  absl::Status Error(absl::string_view what) const {
    return absl::InternalError(
        absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_)));
  }
  absl::Status Exec(const std::string& sql) {
    char* message = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
      absl::Status status =
          absl::InternalError(absl::StrCat("sqlite: ", message));
      sqlite3_free(message);
      return status;
    }
    return absl::OkStatus();
  }
  absl::Status Prepare(const std::string& sql, Statement* s) {
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s->stmt, nullptr) !=
        SQLITE_OK) {
      return Error(sql);
    }
    return absl::OkStatus();
  }

  sqlite3* db_;
  absl::Mutex read_mu_;
  sqlite3* const reader_;
  sqlite3_stmt* read_stmt_ ABSL_GUARDED_BY(read_mu_) = nullptr;
  const std::string table_;
};

}  // namespace

std::unique_ptr<SkeletonStore> NewMemoryStore() {
  return std::make_unique<MemoryStore>();
}

absl::StatusOr<std::unique_ptr<SkeletonStore>> OpenSqliteStore(
    const std::string& path, absl::string_view table) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = absl::UnavailableError(
        absl::StrCat("cannot open ", path, ": ",
                     db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return status;
  }
  sqlite3_busy_timeout(db, 5000);
  sqlite3* reader = nullptr;
  const int read_rc = sqlite3_open_v2(
      path.c_str(), &reader, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
      nullptr);
  if (read_rc != SQLITE_OK) {
    absl::Status status = absl::UnavailableError(absl::StrCat(
        "cannot open ", path, ": ",
        reader != nullptr ? sqlite3_errmsg(reader) : sqlite3_errstr(read_rc)));
    sqlite3_close(reader);
    sqlite3_close(db);
    return status;
  }
  sqlite3_busy_timeout(reader, 5000);
  auto store = std::make_unique<SqliteStore>(db, reader, table);
  absl::Status status = store->Init();
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot use ", path, ": ", status.message()));
  }
  return store;
}

}  // namespace reach
