// A throwaway PostgreSQL for tests and benchmarks: initdb into a temporary
// directory and a postmaster on a unix socket there (no TCP), run as the
// `postgres` user when this process is root (initdb refuses root). Found
// under /usr/lib/postgresql/*/bin (Debian's postgresql-15, which
// scripts/setup installs).
#ifndef REACH_TESTS_TESTING_POSTGRES_H_
#define REACH_TESTS_TESTING_POSTGRES_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace reach::testing {

// The directory of initdb and pg_ctl, or "" when PostgreSQL is absent.
std::string PostgresBinDir();

class ScratchPostgres {
 public:
  // initdb and start; an error when something fails (the binaries absent
  // included: check PostgresBinDir() first to skip).
  static absl::StatusOr<std::unique_ptr<ScratchPostgres>> Create();
  ~ScratchPostgres();  // Stops it and removes its directory.

  // postgresql:///postgres?host=DIR&port=N&user=postgres
  const std::string& url() const { return url_; }
  absl::Status Stop();   // pg_ctl stop -m fast (backends terminated).
  absl::Status Start();  // Again, same directory and port.
  // Runs `sql` on a fresh connection; the first column of the first row
  // (text), or "" when there is none.
  absl::StatusOr<std::string> Query(const std::string& sql) const;

 private:
  ScratchPostgres() = default;
  absl::Status PgCtl(const std::string& args);

  std::string bin_;
  std::string dir_;
  std::string url_;
  int port_ = 0;
};

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_POSTGRES_H_
