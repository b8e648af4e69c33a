// Token authentication with roles (--auth_tokens_file).
//
// The token file has one line per token: its name, the lower-case hex
// SHA-256 of the token (never the token itself) and its roles, separated
// by spaces or tabs; blank lines and lines starting with '#' are skipped:
//
//   # name      sha256(token)                                          roles
//   game-1      9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 solve
//   pipeline    60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752 register
//   ops         fd61a03af4f77d870fc21e05e7e80678095c92d808cfb3b5c279ee04c74aca13 admin
//
// Roles nest: `solve` may Solve, SolveBatch, SolveStream, GetSkeleton and
// ListSkeletons; `register` may also RegisterSkeleton and delete the
// skeletons it registered; `admin` may do everything (any DeleteSkeleton).
// Several roles may be listed with commas; a token gets the widest.
// `metrics` (outside that nesting; `admin` does not have it: a scraper's
// configuration is no place for a token that may delete everything) lets a
// scraper read /metrics with HTTP basic auth: the token's name as user, the
// token as password.
//
// A client sends its token as call metadata `authorization: Bearer TOKEN`.
// The server hashes it and compares the hash with every line's in constant
// time. Without a token file there is no authentication: every caller is
// an admin, named by its peer address (for quotas).
#ifndef REACH_SERVER_AUTH_H_
#define REACH_SERVER_AUTH_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace reach {

enum class Role : int { kSolve = 0, kRegister = 1, kAdmin = 2 };
absl::string_view RoleName(Role role);

using TokenDigest = std::array<unsigned char, 32>;

struct TokenEntry {
  std::string name;
  TokenDigest digest{};
  // The widest gRPC role; none when the token lists only `metrics`.
  std::optional<Role> role;
  bool metrics = false;  // May scrape /metrics.
};

// Parses a token file's text; errors name `path` and the line.
absl::StatusOr<std::vector<TokenEntry>> ParseTokenFile(absl::string_view text,
                                                       absl::string_view path);

// Who is calling: a token's name (or "peer:ADDRESS" without auth) and role.
struct Caller {
  std::string name;
  std::optional<Role> role = Role::kAdmin;  // None: metrics only.
  bool authenticated = false;               // By a token.
  bool metrics = true;
  TokenDigest digest{};  // The token's, when authenticated.
};

// PermissionDenied naming the role `caller` lacks for `method`, else OK.
absl::Status Authorize(const Caller& caller, Role needed,
                       absl::string_view method);

class TokenAuth {
 public:
  // `path` empty: authentication off. Otherwise the file must parse; it is
  // read again when its modification time, size or inode change (checked
  // every `reload_interval`; zero: only on Reload()).
  static absl::StatusOr<std::unique_ptr<TokenAuth>> Open(
      std::string path, absl::Duration reload_interval);
  ~TokenAuth();

  bool enabled() const { return !path_.empty(); }

  // The caller behind `authorization` (the metadata's value): Unauthenticated
  // when the token is missing, malformed or unknown. With authentication
  // off, an admin named "peer:" + the peer's address without its port.
  absl::StatusOr<Caller> Authenticate(absl::string_view authorization,
                                      absl::string_view peer) const;
  // Authenticate, then Authorize, for a call of `method`.
  absl::StatusOr<Caller> Check(const grpc::ServerContextBase& context,
                               Role needed, absl::string_view method) const;

  // Whether HTTP basic auth `user`/`password` may read /metrics: a token
  // named `user` with the `metrics` role. Always true when
  // authentication is off.
  bool AllowsMetrics(absl::string_view user, absl::string_view password) const;

  // Reads the file again, all or nothing: on an error no token is accepted
  // until a later reload succeeds (keeping the previous tokens would keep
  // the one an edit meant to revoke), and the error is returned (logged by
  // the watcher, shown by load_error()). A deleted file is such an error.
  // Then calls the change listener either way.
  absl::Status Reload();
  int64_t reloads() const;  // Successful ones, the first load included.
  int64_t failures() const;  // Reloads that did not load.
  // Why the last reload failed; "" when it loaded.
  std::string load_error() const;
  int tokens() const;

  // Whether `caller` (authenticated earlier) is still let in: its token is
  // in the current file, under the same name, with a gRPC role. Always
  // true without auth. Open streams and watches check it on every change.
  bool Admits(const Caller& caller) const;
  // Called after every Reload (from the watcher thread, or Reload's
  // caller), not concurrently; null: none. Clear it before what it calls
  // goes away (this waits for a call in progress).
  void SetOnChange(std::function<void()> on_change);

 private:
  TokenAuth(std::string path, absl::Duration reload_interval)
      : path_(std::move(path)), reload_interval_(reload_interval) {}
  void Watch();
  // Reads and parses the file into entries_ (its stat into *info).
  absl::Status Load(struct ::stat* info);

  const std::string path_;
  const absl::Duration reload_interval_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const std::vector<TokenEntry>> entries_ ABSL_GUARDED_BY(mu_);
  // What the file looked like when last read.
  struct FileStamp {
    int64_t mtime_ns = -1;
    int64_t size = -1;
    ino_t inode = 0;
    bool operator==(const FileStamp& o) const {
      return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
    }
  };
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);
  int64_t reloads_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string load_error_ ABSL_GUARDED_BY(mu_);
  absl::Mutex listener_mu_;
  std::function<void()> on_change_ ABSL_GUARDED_BY(listener_mu_);
  absl::Notification stop_;
  std::thread watcher_;
};

// "peer:" + the address of a gRPC peer string without its port
// ("ipv4:10.0.0.5:5000" -> "peer:10.0.0.5", "ipv6:[fd00::1]:5000" ->
// "peer:[fd00::1]"); every loopback address (127.0.0.0/8, ::1) is one
// owner, "peer:loopback".
std::string PeerOwner(absl::string_view peer);

}  // namespace reach

#endif  // REACH_SERVER_AUTH_H_
