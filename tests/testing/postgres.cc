#include "tests/testing/postgres.h"

#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"

namespace reach::testing {
namespace {

// A TCP port nobody listens on now (the postmaster uses it only to name its
// socket file, .s.PGSQL.PORT).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// `command` as the postgres user when root.
std::string AsOwner(const std::string& command) {
  if (geteuid() != 0) return command;
  return absl::StrCat("runuser -u postgres -- ", command);
}

}  // namespace

std::string PostgresBinDir() {
  std::vector<std::string> found;
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(
           "/usr/lib/postgresql", ignored)) {
    const std::string bin = entry.path().string() + "/bin";
    if (std::filesystem::exists(bin + "/initdb") &&
        std::filesystem::exists(bin + "/pg_ctl")) {
      found.push_back(bin);
    }
  }
  if (found.empty()) return "";
  std::sort(found.begin(), found.end());
  return found.back();
}

absl::StatusOr<std::unique_ptr<ScratchPostgres>> ScratchPostgres::Create() {
  std::unique_ptr<ScratchPostgres> pg(new ScratchPostgres());
  pg->bin_ = PostgresBinDir();
  if (pg->bin_.empty()) {
    return absl::NotFoundError("no PostgreSQL under /usr/lib/postgresql");
  }
  if (geteuid() == 0 && getpwnam("postgres") == nullptr) {
    return absl::NotFoundError("running as root and no `postgres` user");
  }
  char pattern[] = "/tmp/reach_pg_XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("mkdtemp");
  pg->dir_ = pattern;
  if (geteuid() == 0) {
    const passwd* owner = getpwnam("postgres");
    if (chown(pg->dir_.c_str(), owner->pw_uid, owner->pw_gid) != 0) {
      return absl::InternalError("chown");
    }
  }
  const std::string initdb = AsOwner(absl::StrCat(
      pg->bin_, "/initdb -D ", pg->dir_, "/data --auth=trust -U postgres ",
      "-E UTF8 --no-sync >", pg->dir_, "/initdb.log 2>&1"));
  if (std::system(initdb.c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("initdb failed; see ", pg->dir_, "/initdb.log"));
  }
  pg->port_ = FreePort();
  pg->url_ = absl::StrCat("postgresql:///postgres?host=", pg->dir_,
                          "&port=", pg->port_, "&user=postgres");
  if (absl::Status started = pg->Start(); !started.ok()) return started;
  return pg;
}

absl::Status ScratchPostgres::PgCtl(const std::string& args) {
  const std::string command = AsOwner(absl::StrCat(
      bin_, "/pg_ctl -D ", dir_, "/data -l ", dir_, "/postgres.log -w ", args,
      " >>", dir_, "/pg_ctl.log 2>&1"));
  if (std::system(command.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("pg_ctl ", args, " failed; see ",
                                            dir_, "/postgres.log"));
  }
  return absl::OkStatus();
}

absl::Status ScratchPostgres::Start() {
  // Unix socket only; fsync off (a test's data need not survive a crash).
  return PgCtl(absl::StrCat("-o \"-k ", dir_, " -c listen_addresses='' -p ",
                            port_, " -c fsync=off\" start"));
}

absl::Status ScratchPostgres::Stop() { return PgCtl("-m fast stop"); }

absl::StatusOr<std::string> ScratchPostgres::Query(
    const std::string& sql) const {
  PGconn* conn = PQconnectdb(url_.c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    absl::Status status = absl::UnavailableError(PQerrorMessage(conn));
    PQfinish(conn);
    return status;
  }
  PGresult* result = PQexec(conn, sql.c_str());
  absl::StatusOr<std::string> out;
  const ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    out = absl::InternalError(PQresultErrorMessage(result));
  } else if (PQntuples(result) > 0 && PQnfields(result) > 0) {
    out = std::string(PQgetvalue(result, 0, 0));
  } else {
    out = std::string();
  }
  PQclear(result);
  PQfinish(conn);
  return out;
}

ScratchPostgres::~ScratchPostgres() {
  if (dir_.empty()) return;
  (void)PgCtl("-m immediate stop");
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace reach::testing
