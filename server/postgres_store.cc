#include "server/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/log.h"

namespace reach {
namespace {

// Advisory lock keys: (kLockSpace, 0) the schema, (kLockSpace, n) a
// table's writers.
constexpr int kLockSpace = 0x52454143;  // "REAC"
constexpr char kChannel[] = "reach_changes";

// The schema, one step per version; a database at a newer version than
// this list is refused.
const char* const kMigrations[] = {
    // 1
    "CREATE TABLE reach_skeletons ("
    "  id text PRIMARY KEY,"
    "  version bigint NOT NULL,"
    "  definition bytea NOT NULL,"
    "  owners text NOT NULL DEFAULT '');"
    "CREATE TABLE reach_retarget_profiles ("
    "  id text PRIMARY KEY,"
    "  version bigint NOT NULL,"
    "  definition bytea NOT NULL,"
    "  owners text NOT NULL DEFAULT '');"
    "CREATE TABLE reach_changes ("
    "  seq bigserial PRIMARY KEY,"
    "  kind text NOT NULL,"
    "  id text NOT NULL,"
    "  at timestamptz NOT NULL DEFAULT now());"
    "CREATE INDEX reach_changes_kind_seq ON reach_changes (kind, seq);"
    "CREATE TABLE reach_change_trims ("
    "  kind text PRIMARY KEY,"
    "  upto bigint NOT NULL);"
    "CREATE SEQUENCE reach_versions;",
};
constexpr int kSchemaVersion =
    static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

// Owns a PGresult.
struct Result {
  PGresult* r = nullptr;
  Result() = default;
  explicit Result(PGresult* result) : r(result) {}
  Result(Result&& other) noexcept : r(std::exchange(other.r, nullptr)) {}
  Result& operator=(Result&& other) noexcept {
    if (this != &other) {
      PQclear(r);
      r = std::exchange(other.r, nullptr);
    }
    return *this;
  }
  ~Result() { PQclear(r); }
  int rows() const { return PQntuples(r); }
  bool null(int row, int col) const { return PQgetisnull(r, row, col) != 0; }
  std::string bytes(int row, int col) const {
    return std::string(PQgetvalue(r, row, col), PQgetlength(r, row, col));
  }
  // An int8 column in binary format (network byte order).
  int64_t int64(int row, int col) const {
    const auto* p =
        reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
    if (PQgetlength(r, row, col) != 8) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
    return static_cast<int64_t>(v);
  }
};

// A binary parameter: text (25), bytea (17) or int8 (20).
struct Param {
  unsigned int type;
  std::string bytes;
  static Param Text(absl::string_view s) { return {25, std::string(s)}; }
  static Param Bytes(absl::string_view s) { return {17, std::string(s)}; }
  static Param Int64(int64_t v) {
    std::string b(8, '\0');
    for (int i = 7; i >= 0; --i) {
      b[i] = static_cast<char>(v & 0xff);
      v = static_cast<int64_t>(static_cast<uint64_t>(v) >> 8);
    }
    return {20, std::move(b)};
  }
};

std::string Trimmed(const char* message) {
  std::string out = message == nullptr ? "" : message;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) {
    out.pop_back();
  }
  absl::StrReplaceAll({{"\n\t", "; "}, {"\n", "; "}, {"\t", " "}}, &out);
  return out;
}

std::vector<std::string> SplitOwners(const std::string& text) {
  if (text.empty()) return {};
  return absl::StrSplit(text, '\n');
}

// One connection, reconnected on the next use after it broke. Not
// thread-safe: its owner serialises use.
class Connection {
 public:
  // `retry`: run a statement again on a new connection when the old one
  // turns out broken (not for the listener, whose LISTEN would be lost).
  Connection(PostgresRegistry* db, std::string role, bool retry = true)
      : db_(db), role_(std::move(role)), retry_(retry) {}
  ~Connection() { Close(); }

  void Close() {
    if (conn_ != nullptr) PQfinish(conn_);
    conn_ = nullptr;
  }

  absl::Status Ensure() {
    if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) {
      return absl::OkStatus();
    }
    Close();
    absl::StatusOr<PGconn*> conn = db_->Connect(role_);
    if (!conn.ok()) {
      db_->SetUp(false, std::string(conn.status().message()));
      return conn.status();
    }
    conn_ = *conn;
    return absl::OkStatus();
  }

  // Runs `sql` (one statement with parameters, or several without),
  // results in binary. Errors: Unavailable when the connection is gone
  // (the database down, the backend killed), else Internal with the
  // server's message.
  absl::StatusOr<Result> Exec(const std::string& sql,
                              const std::vector<Param>& params = {}) {
    if (absl::Status status = Ensure(); !status.ok()) return status;
    // Outside a transaction, a connection that broke since its last use
    // (the database restarted) is only found out now: connect again and
    // run it once more. Inside one, the transaction is lost with it.
    const bool idle = PQtransactionStatus(conn_) == PQTRANS_IDLE;
    absl::StatusOr<Result> result = ExecOnce(sql, params);
    if (!result.ok() && retry_ && idle && conn_ == nullptr) {
      result = ExecOnce(sql, params);
    }
    return result;
  }

  PGconn* raw() const { return conn_; }

 private:
  absl::StatusOr<Result> ExecOnce(const std::string& sql,
                                  const std::vector<Param>& params) {
    if (absl::Status status = Ensure(); !status.ok()) return status;
    Result result;
    if (params.empty() && absl::StrContains(sql, ';')) {
      // Several statements: the simple protocol (text results).
      result = Result(PQexec(conn_, sql.c_str()));
    } else {
      std::vector<unsigned int> types;
      std::vector<const char*> values;
      std::vector<int> lengths, formats;
      for (const Param& p : params) {
        types.push_back(p.type);
        values.push_back(p.bytes.data());
        lengths.push_back(static_cast<int>(p.bytes.size()));
        formats.push_back(1);
      }
      result = Result(PQexecParams(conn_, sql.c_str(),
                                   static_cast<int>(params.size()),
                                   types.empty() ? nullptr : types.data(),
                                   values.empty() ? nullptr : values.data(),
                                   lengths.empty() ? nullptr : lengths.data(),
                                   formats.empty() ? nullptr : formats.data(),
                                   1));
    }
    const ExecStatusType status =
        result.r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result.r);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
      return result;
    }
    const std::string message = Trimmed(
        result.r != nullptr ? PQresultErrorMessage(result.r)
                            : PQerrorMessage(conn_));
    const char* state =
        result.r != nullptr ? PQresultErrorField(result.r, PG_DIAG_SQLSTATE)
                            : nullptr;
    // The connection failed rather than the statement: libpq says so
    // (CONNECTION_BAD), or the error is libpq's own, which carries no
    // SQLSTATE (every error the server sends has one; "server closed the
    // connection unexpectedly" while a write was sent left the status OK
    // and answered INTERNAL in scripts/replica-kill-trials' PostgreSQL
    // restarts), or a connection_exception (class 08).
    if (PQstatus(conn_) != CONNECTION_OK || state == nullptr ||
        absl::StartsWith(state, "08")) {
      // (A failed reconnect reports the database down; see Ensure.)
      Close();
      return absl::UnavailableError(absl::StrCat(
          "the registry database ", db_->description(),
          " is unreachable: ", message));
    }
    // lock_not_available (the table's write lock held past lock_timeout),
    // query_canceled (statement_timeout), admin shutdown.
    if (state != nullptr &&
        (std::strcmp(state, "55P03") == 0 || std::strcmp(state, "57014") == 0 ||
         absl::StartsWith(state, "57P"))) {
      return absl::UnavailableError(absl::StrCat(
          "the registry database ", db_->description(), " is busy: ",
          message));
    }
    return absl::InternalError(
        absl::StrCat("registry database ", db_->description(), ": ", message));
  }

  PostgresRegistry* const db_;
  const std::string role_;
  const bool retry_;
  PGconn* conn_ = nullptr;
};

class PostgresStore : public SkeletonStore {
 public:
  PostgresStore(PostgresRegistry* db, absl::string_view table, int lock_key)
      : kind_(table),
        table_(absl::StrCat("reach_", table)),
        lock_key_(lock_key),
        writer_(db, "write"),
        reader_(db, "read") {}

  bool shared() const override { return true; }

  absl::StatusOr<StoreSnapshot> LoadAll() override {
    // The sequence first: a change committed between the two statements is
    // then in the records and applied again later (harmless), never lost.
    StoreSnapshot out;
    absl::StatusOr<int64_t> sequence = LastSequence(writer_);
    if (!sequence.ok()) return sequence.status();
    out.sequence = *sequence;
    absl::StatusOr<Result> rows = writer_.Exec(absl::StrCat(
        "SELECT id, version, definition, owners FROM ", table_,
        " ORDER BY version"));
    if (!rows.ok()) return rows.status();
    for (int i = 0; i < rows->rows(); ++i) out.records.push_back(Record(*rows, i, 0));
    return out;
  }

  absl::Status BeginWrite() override {
    last_change_ = 0;
    writes_ += 1;
    absl::StatusOr<Result> begun = writer_.Exec(
        "BEGIN; SET LOCAL lock_timeout = '10s'; "
        "SET LOCAL statement_timeout = '30s'");
    if (!begun.ok()) return begun.status();
    in_write_ = true;
    absl::StatusOr<Result> locked =
        writer_.Exec("SELECT pg_advisory_xact_lock($1::int8::int4, $2::int8::int4)",
                     {Param::Int64(kLockSpace), Param::Int64(lock_key_)});
    if (!locked.ok()) return locked.status();
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> CommitWrite() override {
    in_write_ = false;
    if (last_change_ > 0 && writes_ % 100 == 0) {
      // Trims the log now and then (within the write lock, so the trim
      // mark and the rows agree).
      absl::StatusOr<Result> trimmed = writer_.Exec(
          "WITH d AS (DELETE FROM reach_changes WHERE kind = $1 AND seq <= $2) "
          "INSERT INTO reach_change_trims (kind, upto) VALUES ($1, $2) "
          "ON CONFLICT (kind) DO UPDATE SET upto = "
          "greatest(reach_change_trims.upto, excluded.upto)",
          {Param::Text(kind_), Param::Int64(last_change_ - kChangeLogKeep)});
      if (!trimmed.ok()) {
        AbortWrite();
        return trimmed.status();
      }
    }
    absl::StatusOr<Result> committed = writer_.Exec("COMMIT");
    if (!committed.ok()) return committed.status();
    return last_change_;
  }

  void AbortWrite() override {
    in_write_ = false;
    if (writer_.raw() != nullptr && PQstatus(writer_.raw()) == CONNECTION_OK) {
      (void)writer_.Exec("ROLLBACK");
    }
  }

  absl::StatusOr<int64_t> Put(const StoredSkeleton& record) override {
    absl::StatusOr<Result> inserted = writer_.Exec(
        absl::StrCat("INSERT INTO ", table_,
                     " (id, version, definition, owners) VALUES "
                     "($1, nextval('reach_versions'), $2, $3) "
                     "RETURNING version"),
        {Param::Text(record.id), Param::Bytes(record.definition),
         Param::Text(absl::StrJoin(record.owners, "\n"))});
    if (!inserted.ok()) return inserted.status();
    const int64_t version = inserted->int64(0, 0);
    if (absl::Status status = LogChange(record.id); !status.ok()) return status;
    return version;
  }

  absl::StatusOr<int64_t> Replace(const StoredSkeleton& record,
                                  int64_t replaces_version) override {
    // The row's own check: only the version the caller read is replaced.
    absl::StatusOr<Result> updated = writer_.Exec(
        absl::StrCat("UPDATE ", table_,
                     " SET version = nextval('reach_versions'), "
                     "definition = $2, owners = $3 "
                     "WHERE id = $1 AND version = $4 RETURNING version"),
        {Param::Text(record.id), Param::Bytes(record.definition),
         Param::Text(absl::StrJoin(record.owners, "\n")),
         Param::Int64(replaces_version)});
    if (!updated.ok()) return updated.status();
    if (updated->rows() == 0) {
      return absl::AbortedError(absl::StrCat(record.id, " changed"));
    }
    const int64_t version = updated->int64(0, 0);
    if (absl::Status status = LogChange(record.id); !status.ok()) return status;
    return version;
  }

  absl::Status SetOwners(absl::string_view id,
                         const std::vector<std::string>& owners) override {
    absl::StatusOr<Result> updated = writer_.Exec(
        absl::StrCat("UPDATE ", table_, " SET owners = $2 WHERE id = $1"),
        {Param::Text(id), Param::Text(absl::StrJoin(owners, "\n"))});
    if (!updated.ok()) return updated.status();
    return LogChange(id);
  }

  absl::Status Delete(absl::string_view id) override {
    absl::StatusOr<Result> deleted = writer_.Exec(
        absl::StrCat("DELETE FROM ", table_, " WHERE id = $1"),
        {Param::Text(id)});
    if (!deleted.ok()) return deleted.status();
    return LogChange(id);
  }

  absl::StatusOr<StoreChanges> ChangesSince(int64_t after) override {
    StoreChanges out;
    absl::StatusOr<Result> trim = writer_.Exec(
        "SELECT upto FROM reach_change_trims WHERE kind = $1",
        {Param::Text(kind_)});
    if (!trim.ok()) return trim.status();
    if (trim->rows() > 0 && trim->int64(0, 0) > after) {
      // The log no longer reaches back that far: the whole table.
      absl::StatusOr<StoreSnapshot> all = LoadAll();
      if (!all.ok()) return all.status();
      out.complete = true;
      out.sequence = all->sequence;
      for (StoredSkeleton& record : all->records) {
        std::string id = record.id;
        out.changes.push_back({std::move(id), std::move(record)});
      }
      return out;
    }
    absl::StatusOr<Result> rows = writer_.Exec(
        absl::StrCat(
            "SELECT c.seq, c.id, t.version, t.definition, t.owners FROM "
            "(SELECT id, max(seq) AS seq FROM reach_changes "
            " WHERE kind = $1 AND seq > $2 GROUP BY id) c "
            "LEFT JOIN ",
            table_, " t ON t.id = c.id ORDER BY c.seq"),
        {Param::Text(kind_), Param::Int64(after)});
    if (!rows.ok()) return rows.status();
    out.sequence = after;
    for (int i = 0; i < rows->rows(); ++i) {
      out.sequence = std::max(out.sequence, rows->int64(i, 0));
      StoreChange& change = out.changes.emplace_back();
      change.id = rows->bytes(i, 1);
      if (!rows->null(i, 2)) change.record = Record(*rows, i, 1);
    }
    return out;
  }

  absl::StatusOr<StoreRead> Read(absl::string_view id) override {
    absl::MutexLock lock(&read_mu_);
    absl::StatusOr<Result> rows = reader_.Exec(
        absl::StrCat(
            "SELECT (SELECT coalesce(max(seq), 0) FROM reach_changes "
            "        WHERE kind = $1), t.id, t.version, t.definition, "
            "t.owners FROM (SELECT 1) one LEFT JOIN ",
            table_, " t ON t.id = $2"),
        {Param::Text(kind_), Param::Text(id)});
    if (!rows.ok()) return rows.status();
    StoreRead out;
    if (rows->rows() == 0) return out;
    out.sequence = rows->int64(0, 0);
    if (!rows->null(0, 1)) out.record = Record(*rows, 0, 1);
    return out;
  }

 private:
  // Columns id, version, definition, owners from `first`.
  static StoredSkeleton Record(const Result& rows, int row, int first) {
    StoredSkeleton record;
    record.id = rows.bytes(row, first);
    record.version = rows.int64(row, first + 1);
    record.definition = rows.bytes(row, first + 2);
    record.owners = SplitOwners(rows.bytes(row, first + 3));
    return record;
  }

  absl::StatusOr<int64_t> LastSequence(Connection& conn) {
    absl::StatusOr<Result> rows = conn.Exec(
        "SELECT coalesce(max(seq), 0) FROM reach_changes WHERE kind = $1",
        {Param::Text(kind_)});
    if (!rows.ok()) return rows.status();
    return rows->int64(0, 0);
  }

  // The change-log row and the NOTIFY, in the write's transaction (the
  // notification goes out at commit).
  absl::Status LogChange(absl::string_view id) {
    absl::StatusOr<Result> logged = writer_.Exec(
        absl::StrCat("WITH c AS (INSERT INTO reach_changes (kind, id) "
                     "VALUES ($1, $2) RETURNING seq) "
                     "SELECT seq, pg_notify('",
                     kChannel, "', $1) FROM c"),
        {Param::Text(kind_), Param::Text(id)});
    if (!logged.ok()) return logged.status();
    last_change_ = logged->int64(0, 0);
    return absl::OkStatus();
  }

  const std::string kind_;
  const std::string table_;
  const int lock_key_;
  // The writer's connection: used under the registry's write lock (and at
  // start).
  Connection writer_;
  bool in_write_ = false;
  int64_t last_change_ = 0;
  int64_t writes_ = 0;
  absl::Mutex read_mu_;
  Connection reader_ ABSL_GUARDED_BY(read_mu_);
};

}  // namespace

bool IsPostgresUrl(absl::string_view registry) {
  return absl::StartsWith(registry, "postgresql://") ||
         absl::StartsWith(registry, "postgres://");
}

absl::StatusOr<std::unique_ptr<PostgresRegistry>> PostgresRegistry::Open(
    const std::string& url) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(url.c_str(), &error);
  if (options == nullptr) {
    const std::string message =
        error != nullptr ? Trimmed(error) : "out of memory";
    PQfreemem(error);
    return absl::InvalidArgumentError(
        absl::StrCat("--registry: not a PostgreSQL URL libpq accepts: ",
                     message));
  }
  std::string user, host, port, dbname;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const absl::string_view key = o->keyword;
    if (key == "user") user = o->val;
    if (key == "host" || (key == "hostaddr" && host.empty())) host = o->val;
    if (key == "port") port = o->val;
    if (key == "dbname") dbname = o->val;
  }
  PQconninfoFree(options);
  std::unique_ptr<PostgresRegistry> db(new PostgresRegistry());
  db->url_ = url;
  db->description_ = absl::StrCat(
      "postgresql://", user.empty() ? "" : absl::StrCat(user, "@"),
      host.empty() ? "localhost" : host, port.empty() ? "" : ":", port, "/",
      dbname);

  // The schema, one replica at a time: a session advisory lock, released
  // when this connection closes whatever happens.
  Connection conn(db.get(), "schema");
  absl::StatusOr<Result> step = conn.Exec(
      "SELECT pg_advisory_lock($1::int8::int4, 0)",
      {Param::Int64(kLockSpace)});
  if (!step.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "--registry=", db->description_, ": ", step.status().message()));
  }
  step = conn.Exec(
      "CREATE TABLE IF NOT EXISTS reach_schema (version integer NOT NULL)");
  if (step.ok()) step = conn.Exec("SELECT version::int8 FROM reach_schema");
  if (!step.ok()) return step.status();
  const int found = step->rows() == 0 ? 0 : static_cast<int>(step->int64(0, 0));
  if (found > kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--registry=", db->description_, ": the schema is at version ", found,
        ", newer than this reach-server's (", kSchemaVersion,
        "): run a newer reach-server"));
  }
  for (int v = found; v < kSchemaVersion; ++v) {
    step = conn.Exec(absl::StrCat(
        "BEGIN;", kMigrations[v], "DELETE FROM reach_schema;",
        "INSERT INTO reach_schema VALUES (", v + 1, ");", "COMMIT"));
    if (!step.ok()) {
      (void)conn.Exec("ROLLBACK");
      return absl::Status(step.status().code(),
                          absl::StrCat("migrating the schema to version ",
                                       v + 1, ": ", step.status().message()));
    }
    LogInfo(absl::StrCat("registry: ", db->description_,
                         ": schema migrated to version ", v + 1));
  }
  (void)conn.Exec("SELECT pg_advisory_unlock($1::int8::int4, 0)",
                  {Param::Int64(kLockSpace)});
  return db;
}

PostgresRegistry::~PostgresRegistry() { StopListening(); }

std::unique_ptr<SkeletonStore> PostgresRegistry::NewStore(
    absl::string_view table) {
  return std::make_unique<PostgresStore>(
      this, table, table == "skeletons" ? 1 : 2);
}

absl::StatusOr<PGconn*> PostgresRegistry::Connect(absl::string_view role) const {
  // Defaults the URL may override come before it; the application name
  // (which pg_stat_activity shows: reach-<role>-<pid>) after it.
  const std::string application = absl::StrCat("reach-", role, "-", getpid());
  const char* keywords[] = {"connect_timeout", "keepalives_idle",
                            "keepalives_interval", "keepalives_count",
                            "dbname", "application_name", nullptr};
  const char* values[] = {"3", "10", "5", "3", url_.c_str(),
                          application.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
    const std::string message =
        conn == nullptr ? "out of memory" : Trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat(
        "the registry database ", description_, " is unreachable: ", message));
  }
  // The server's notices (e.g. "already exists, skipping") are not ours
  // to print.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return conn;
}

void PostgresRegistry::SetUp(bool up, const std::string& why) {
  if (up_.exchange(up) == up) return;
  absl::MutexLock lock(&state_mu_);
  if (on_state_) on_state_(up, why);
}

void PostgresRegistry::Listen(
    std::function<absl::Status(absl::string_view table)> on_change,
    std::function<void(bool up, const std::string& why)> on_state,
    absl::Duration poll_interval) {
  {
    absl::MutexLock lock(&state_mu_);
    on_state_ = std::move(on_state);
  }
  on_change_ = std::move(on_change);
  listener_ = std::thread([this, poll_interval] { Run(poll_interval); });
}

void PostgresRegistry::StopListening() {
  {
    absl::MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  if (listener_.joinable()) listener_.join();
  absl::MutexLock lock(&state_mu_);
  on_state_ = nullptr;
}

void PostgresRegistry::Run(absl::Duration poll_interval) {
  const auto stopping = [this] {
    absl::MutexLock lock(&stop_mu_);
    return stopping_;
  };
  // Waits up to `d`, or until stopped; true when stopped.
  const auto wait = [this](absl::Duration d) {
    absl::MutexLock lock(&stop_mu_);
    stop_mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
    return stopping_;
  };
  const auto catch_up = [this] {
    bool ok = true;
    for (const char* table : {"skeletons", "retarget_profiles"}) {
      absl::Status status = on_change_(table);
      if (!status.ok()) {
        ok = false;
        LogError(absl::StrCat("registry: catching up on ", table, ": ",
                              status.message()));
      }
    }
    return ok;
  };
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stopping()) {
    Connection conn(this, "listen", /*retry=*/false);
    absl::StatusOr<Result> listening =
        conn.Exec(absl::StrCat("LISTEN ", kChannel));
    if (!listening.ok()) {
      SetUp(false, std::string(listening.status().message()));
      if (wait(backoff)) break;
      backoff = std::min(backoff * 2, absl::Seconds(1));
      continue;
    }
    backoff = absl::Milliseconds(100);
    // Listening before reading the log: a change committed from here on is
    // notified, and every one before is in the log.
    if (catch_up()) {
      SetUp(true, "");
    }
    absl::Time last_look = absl::Now();
    bool broken = false;
    while (!broken && !stopping()) {
      pollfd fd{PQsocket(conn.raw()), POLLIN, 0};
      const int ready = poll(&fd, 1, 250);
      bool changed = false;
      if (ready > 0) {
        if (PQconsumeInput(conn.raw()) == 0) broken = true;
        while (PGnotify* notify = PQnotifies(conn.raw())) {
          changed = true;
          PQfreemem(notify);
        }
      }
      if (!broken && PQstatus(conn.raw()) != CONNECTION_OK) broken = true;
      if (broken) break;
      if (!changed && absl::Now() - last_look >= poll_interval) {
        // Now and then: is the connection alive (a half-open TCP
        // connection says nothing), and anything missed.
        absl::StatusOr<Result> alive = conn.Exec("SELECT 1");
        if (!alive.ok()) {
          broken = true;
          break;
        }
        changed = true;
      }
      if (changed) {
        last_look = absl::Now();
        if (catch_up()) SetUp(true, "");
      }
    }
    // A broken connection (the backend killed, the database stopping):
    // reconnect at once; only a failed connect says the database is down.
    if (broken) {
      listener_reconnects_.fetch_add(1);
      LogInfo(absl::StrCat("registry: the listener's connection to ",
                           description_, " broke (",
                           Trimmed(PQerrorMessage(conn.raw())),
                           "); reconnecting"));
    }
  }
}

}  // namespace reach
