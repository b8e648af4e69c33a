// The TLS files the server serves (--tls_cert, --tls_key, --tls_client_ca),
// checked before gRPC sees them.
//
// gRPC's FileWatcherCertificateProvider re-reads the files it is given
// every interval and takes whatever is there: an empty certificate or key
// trips an assertion in gRPC core (the process aborts), and a half-written
// file or a key that does not match the certificate makes every new
// handshake fail. TlsFiles stands in between: it reads the operator's
// files every reload interval and copies a set that checks out into a
// private directory, which is all gRPC watches. A set that does not check
// out is logged once per change (naming the flag, the file and why) and
// the last good one stays served.
//
// A set checks out when the certificate file holds at least one PEM
// certificate and nothing cut off after it, the key file a PEM private key
// (not encrypted) that is the key of the first certificate, and the client
// CA file (when given) at least one PEM certificate and nothing cut off.
//
// Publishing is atomic for gRPC's reader: the copies go into a fresh
// version directory and a symlink `current` is renamed over the old one, so
// gRPC, which reads current/key.pem and then current/cert.pem, gets the old
// pair or the new one. A read that straddles a swap is caught by gRPC
// itself: it compares both files' modification times (in seconds) before
// and after reading and retries when one changed, and every version is
// stamped a later second than the one before.
//
// A certificate that is expired or not yet valid is served (refusing to
// start, or dropping the pair, would not help clients that check), with a
// warning: at start, on every reload that brings one, and once when the
// served one expires.
#ifndef REACH_SERVER_TLS_FILES_H_
#define REACH_SERVER_TLS_FILES_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/security/server_credentials.h"

namespace reach {

struct TlsFilesOptions {
  std::string cert;       // --tls_cert: PEM certificate chain, leaf first.
  std::string key;        // --tls_key: PEM private key of the leaf.
  std::string client_ca;  // --tls_client_ca; empty: no client certificates.
  // How often the files are read and checked; zero or less: only on
  // Reload().
  absl::Duration reload_interval = absl::Seconds(10);
  // Where the private directory (mode 0700) is made; empty: $TMPDIR, else
  // /tmp. It holds a copy of the private key (mode 0600), so a directory
  // only the server's user can read is the place.
  std::string private_parent;
};

class TlsFiles {
 public:
  // Checks the files now: an error names the flag and the file, as the
  // server's start-up errors do ("--tls_cert=PATH: no PEM certificate in
  // it", "--tls_key=K is not the key of --tls_cert=C"). Then copies them
  // into the private directory and starts watching them.
  static absl::StatusOr<std::unique_ptr<TlsFiles>> Open(
      TlsFilesOptions options);
  // Stops watching and removes the private directory. gRPC reads the
  // copies there until the server using Credentials() is shut down, so
  // destroy this after it (before, gRPC only logs that the files are gone
  // and keeps serving the pair it has).
  ~TlsFiles();

  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;

  // Server credentials serving the checked copies: TLS with the
  // certificate and key; with a client CA, clients must present a
  // certificate it signed (mTLS). gRPC re-reads the copies every second,
  // so a set published by a reload reaches new connections within a
  // second of the reload.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> Credentials() const;

  // Reads and checks the files now (the watcher does this every
  // reload_interval; SIGHUP can too). OK when what the files hold is being
  // served (unchanged, or published now); otherwise why not, and the last
  // good set stays served. Logged once per change of the files, whoever
  // calls.
  absl::Status Reload();

  // Sets published after start (metrics: reloads accepted).
  int64_t reloads_accepted() const { return accepted_.load(); }
  // Changes of the files that did not check out (metrics: reloads
  // rejected). The pair and the client CA count apart: a change that
  // breaks both counts twice.
  int64_t reloads_rejected() const { return rejected_.load(); }
  // Completed reads of the files (start excluded), so tests can wait for
  // the next check instead of sleeping.
  int64_t checks() const { return checks_.load(); }
  // The private directory gRPC reads (current/cert.pem, current/key.pem,
  // current/ca.pem).
  const std::string& private_dir() const { return root_; }

  // What a read of one file gave: its bytes, or why it could not be read.
  struct FileRead {
    std::string text;
    std::string error;
    bool operator==(const FileRead& o) const {
      return text == o.text && error == o.error;
    }
    bool operator!=(const FileRead& o) const { return !(*this == o); }
  };
  // The leaf certificate's facts that the log states.
  struct Leaf {
    std::string subject;
    std::string serial;
    absl::Time not_before = absl::InfinitePast();
    absl::Time not_after = absl::InfiniteFuture();
  };

 private:
  TlsFiles(TlsFilesOptions options, std::string root)
      : options_(std::move(options)), root_(std::move(root)) {}
  void Watch();
  absl::Status Check() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the set into a new version directory and points `current` at
  // it; removes all but the previous version.
  absl::Status Publish(const std::string& cert, const std::string& key,
                       const std::string& ca)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string CurrentPath(const char* file) const;

  const TlsFilesOptions options_;
  const std::string root_;

  absl::Mutex mu_;
  // What the last check read: a file is checked (and a bad one logged)
  // only when this changes.
  FileRead seen_cert_ ABSL_GUARDED_BY(mu_);
  FileRead seen_key_ ABSL_GUARDED_BY(mu_);
  FileRead seen_ca_ ABSL_GUARDED_BY(mu_);
  absl::Status identity_status_ ABSL_GUARDED_BY(mu_);
  absl::Status ca_status_ ABSL_GUARDED_BY(mu_);
  absl::Status publish_status_ ABSL_GUARDED_BY(mu_);
  // What gRPC is given.
  std::string served_cert_ ABSL_GUARDED_BY(mu_);
  std::string served_key_ ABSL_GUARDED_BY(mu_);
  std::string served_ca_ ABSL_GUARDED_BY(mu_);
  Leaf served_leaf_ ABSL_GUARDED_BY(mu_);
  bool expiry_warned_ ABSL_GUARDED_BY(mu_) = false;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<std::string> versions_ ABSL_GUARDED_BY(mu_);
  int64_t stamp_seconds_ ABSL_GUARDED_BY(mu_) = 0;

  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> checks_{0};
  absl::Notification stop_;
  std::thread watcher_;
};

}  // namespace reach

#endif  // REACH_SERVER_TLS_FILES_H_
