#include "server/tls_files.h"

#include <fcntl.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "server/log.h"

namespace reach {
namespace {

// A certificate chain, key or CA bundle is a few kilobytes; a file far
// larger is the wrong file, and not worth reading every interval.
constexpr int64_t kMaxPemFileBytes = 1 << 20;

// gRPC re-reads the private copies this often: three small local files,
// so a set published by a reload is served within a second of it
// whatever the operator's reload interval.
constexpr unsigned int kGrpcRefreshSeconds = 1;

constexpr char kCertFile[] = "cert.pem";
constexpr char kKeyFile[] = "key.pem";
constexpr char kCaFile[] = "ca.pem";

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct BnFree {
  void operator()(BIGNUM* bn) const { BN_free(bn); }
};
struct OpensslFree {
  void operator()(char* text) const { OPENSSL_free(text); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// OpenSSL's default asks for an encrypted key's passphrase on the
// terminal, which would hang the watcher; gRPC could not use such a key
// anyway.
int NoPassphrase(char*, int, int, void*) { return 0; }

TlsFiles::FileRead ReadPemFile(const std::string& path) {
  TlsFiles::FileRead read;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    read.error = std::strerror(errno);
    return read;
  }
  struct stat info;
  if (fstat(fd, &info) != 0) {
    read.error = std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    // A FIFO or device would block or never end.
    read.error = "not a regular file";
  } else if (info.st_size > kMaxPemFileBytes) {
    read.error = absl::StrCat(info.st_size, " bytes; a PEM file holds at most ",
                              kMaxPemFileBytes);
  } else {
    char buffer[16384];
    while (true) {
      const ssize_t n = ::read(fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        read.error = std::strerror(errno);
        read.text.clear();
        break;
      }
      if (n == 0) break;
      read.text.append(buffer, static_cast<size_t>(n));
      if (static_cast<int64_t>(read.text.size()) > kMaxPemFileBytes) {
        read.error = absl::StrCat("more than ", kMaxPemFileBytes,
                                  " bytes; a PEM file holds at most that");
        read.text.clear();
        break;
      }
    }
  }
  close(fd);
  return read;
}

BioPtr MemoryBio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Every certificate in a PEM text (other PEM blocks are skipped, as
// OpenSSL does when gRPC loads the file). A block cut off or damaged
// anywhere is an error: it is how a file still being written looks.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(
    const std::string& text) {
  BioPtr bio = MemoryBio(text);
  if (bio == nullptr) return absl::ResourceExhaustedError("out of memory");
  ERR_clear_error();
  std::vector<X509Ptr> certs;
  while (X509* cert =
             PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    certs.emplace_back(cert);
  }
  // The loop ends at the end of the text with "no start line"; anything
  // else is a block that did not parse.
  const unsigned long error = ERR_peek_last_error();
  ERR_clear_error();
  const bool clean_end = ERR_GET_LIB(error) == ERR_LIB_PEM &&
                         ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
  if (!clean_end) {
    return absl::InvalidArgumentError(
        certs.empty()
            ? std::string("a damaged or cut-off PEM certificate (is it still "
                          "being written?)")
            : absl::StrCat("a damaged or cut-off PEM block after ",
                           certs.size(),
                           " certificate(s) (is it still being written?)"));
  }
  if (certs.empty()) {
    return absl::InvalidArgumentError("no PEM certificate in it");
  }
  return certs;
}

absl::StatusOr<PkeyPtr> ParsePrivateKey(const std::string& text) {
  BioPtr bio = MemoryBio(text);
  if (bio == nullptr) return absl::ResourceExhaustedError("out of memory");
  PkeyPtr key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  ERR_clear_error();
  if (key != nullptr) return key;
  if (absl::StrContains(text, "ENCRYPTED")) {
    return absl::InvalidArgumentError(
        "an encrypted private key; gRPC needs it without a passphrase");
  }
  if (absl::StrContains(text, "-----BEGIN")) {
    return absl::InvalidArgumentError(
        "no PEM private key in it (a damaged or cut-off one: is it still "
        "being written?)");
  }
  return absl::InvalidArgumentError("no PEM private key in it");
}

absl::Time Asn1Time(const ASN1_TIME* time) {
  struct tm tm;
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) {
    return absl::InfiniteFuture();  // Never warned about.
  }
  return absl::FromTM(tm, absl::UTCTimeZone());
}

std::string UtcDate(absl::Time time) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", time, absl::UTCTimeZone());
}

TlsFiles::Leaf DescribeLeaf(X509* cert) {
  TlsFiles::Leaf leaf;
  if (BioPtr bio(BIO_new(BIO_s_mem())); bio != nullptr) {
    X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0,
                       XN_FLAG_RFC2253);
    char* data = nullptr;
    const long size = BIO_get_mem_data(bio.get(), &data);
    if (size > 0) leaf.subject.assign(data, static_cast<size_t>(size));
  }
  std::unique_ptr<BIGNUM, BnFree> serial(
      ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), nullptr));
  if (serial != nullptr) {
    std::unique_ptr<char, OpensslFree> hex(BN_bn2hex(serial.get()));
    if (hex != nullptr) leaf.serial = hex.get();
  }
  leaf.not_before = Asn1Time(X509_get0_notBefore(cert));
  leaf.not_after = Asn1Time(X509_get0_notAfter(cert));
  return leaf;
}

// The certificate and key as --tls_cert and --tls_key: errors name the
// flag and the file.
absl::StatusOr<TlsFiles::Leaf> CheckIdentity(const TlsFiles::FileRead& cert,
                                             const TlsFiles::FileRead& key,
                                             const TlsFilesOptions& o) {
  const auto error = [](const std::string& flag, const std::string& path,
                        absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "=", path, ": ", why));
  };
  if (!cert.error.empty()) return error("--tls_cert", o.cert, cert.error);
  if (cert.text.empty()) return error("--tls_cert", o.cert, "empty file");
  absl::StatusOr<std::vector<X509Ptr>> certs = ParseCertificates(cert.text);
  if (!certs.ok()) return error("--tls_cert", o.cert, certs.status().message());
  if (!key.error.empty()) return error("--tls_key", o.key, key.error);
  if (key.text.empty()) return error("--tls_key", o.key, "empty file");
  absl::StatusOr<PkeyPtr> pkey = ParsePrivateKey(key.text);
  if (!pkey.ok()) return error("--tls_key", o.key, pkey.status().message());
  X509* leaf = certs->front().get();
  const bool match = X509_check_private_key(leaf, pkey->get()) == 1;
  ERR_clear_error();
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key=", o.key, " is not the key of --tls_cert=", o.cert));
  }
  return DescribeLeaf(leaf);
}

absl::Status CheckClientCa(const TlsFiles::FileRead& ca,
                           const TlsFilesOptions& o) {
  const auto error = [&o](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_client_ca=", o.client_ca, ": ", why));
  };
  if (!ca.error.empty()) return error(ca.error);
  if (ca.text.empty()) return error("empty file");
  absl::StatusOr<std::vector<X509Ptr>> certs = ParseCertificates(ca.text);
  if (!certs.ok()) return error(certs.status().message());
  return absl::OkStatus();
}

std::string DescribeForLog(const TlsFiles::Leaf& leaf) {
  return absl::StrCat("subject ", leaf.subject, ", serial ", leaf.serial,
                      ", valid until ", UtcDate(leaf.not_after));
}

// Logs a warning when `leaf` is expired or not yet valid at `now`; true
// when it is expired.
bool WarnValidity(const TlsFiles::Leaf& leaf, const std::string& path,
                  absl::Time now) {
  if (now >= leaf.not_after) {
    LogError(absl::StrCat("WARNING: --tls_cert=", path, " expired on ",
                          UtcDate(leaf.not_after),
                          ": clients that verify it refuse to connect"));
    return true;
  }
  if (now < leaf.not_before) {
    LogError(absl::StrCat("WARNING: --tls_cert=", path, " is not valid until ",
                          UtcDate(leaf.not_before),
                          ": clients that verify it refuse to connect"));
  }
  return false;
}

// Creates `path` (mode 0600, not following or replacing anything) holding
// `text`, modified at `stamp` (seconds since the epoch).
absl::Status WriteCopy(const std::string& path, const std::string& text,
                       int64_t stamp) {
  const int fd = open(
      path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      close(fd);
      return absl::InternalError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(saved)));
    }
    done += static_cast<size_t>(n);
  }
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(stamp);
  times[0].tv_nsec = times[1].tv_nsec = 0;
  const bool stamped = futimens(fd, times) == 0;
  const int saved = errno;
  if (close(fd) != 0 || !stamped) {
    return absl::InternalError(absl::StrCat(
        "cannot finish ", path, ": ", std::strerror(stamped ? errno : saved)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TlsFiles>> TlsFiles::Open(
    TlsFilesOptions options) {
  if (options.cert.empty() || options.key.empty()) {
    return absl::InvalidArgumentError("--tls_cert and --tls_key go together");
  }
  std::string parent = options.private_parent;
  if (parent.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    parent = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  }
  // mkdtemp makes it mode 0700, with a name nobody could have taken first.
  std::string root = parent + "/reach-tls-XXXXXX";
  if (mkdtemp(root.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a private directory for the TLS files under ",
                     parent, ": ", std::strerror(errno)));
  }
  std::unique_ptr<TlsFiles> files(new TlsFiles(std::move(options), root));
  const TlsFilesOptions& o = files->options_;
  {
    absl::MutexLock lock(&files->mu_);
    files->seen_cert_ = ReadPemFile(o.cert);
    files->seen_key_ = ReadPemFile(o.key);
    absl::StatusOr<Leaf> leaf =
        CheckIdentity(files->seen_cert_, files->seen_key_, o);
    if (!leaf.ok()) return leaf.status();
    if (!o.client_ca.empty()) {
      files->seen_ca_ = ReadPemFile(o.client_ca);
      if (absl::Status ca = CheckClientCa(files->seen_ca_, o); !ca.ok()) {
        return ca;
      }
    }
    if (absl::Status published =
            files->Publish(files->seen_cert_.text, files->seen_key_.text,
                           files->seen_ca_.text);
        !published.ok()) {
      return published;
    }
    files->served_cert_ = files->seen_cert_.text;
    files->served_key_ = files->seen_key_.text;
    files->served_ca_ = files->seen_ca_.text;
    files->served_leaf_ = *leaf;
    files->expiry_warned_ = WarnValidity(*leaf, o.cert, absl::Now());
  }
  if (o.reload_interval > absl::ZeroDuration()) {
    files->watcher_ = std::thread([raw = files.get()] { raw->Watch(); });
  }
  return files;
}

TlsFiles::~TlsFiles() {
  stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
  std::error_code ignored;
  std::filesystem::remove_all(root_, ignored);
}

std::string TlsFiles::CurrentPath(const char* file) const {
  return absl::StrCat(root_, "/current/", file);
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsFiles::Credentials()
    const {
  auto provider = options_.client_ca.empty()
                      ? std::make_shared<
                            grpc::experimental::FileWatcherCertificateProvider>(
                            CurrentPath(kKeyFile), CurrentPath(kCertFile),
                            kGrpcRefreshSeconds)
                      : std::make_shared<
                            grpc::experimental::FileWatcherCertificateProvider>(
                            CurrentPath(kKeyFile), CurrentPath(kCertFile),
                            CurrentPath(kCaFile), kGrpcRefreshSeconds);
  grpc::experimental::TlsServerCredentialsOptions tls(provider);
  tls.watch_identity_key_cert_pairs();
  if (!options_.client_ca.empty()) {
    tls.watch_root_certs();
    tls.set_cert_request_type(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::experimental::TlsServerCredentials(tls);
  if (credentials == nullptr) {
    return absl::InternalError("gRPC refused the TLS credentials options");
  }
  return credentials;
}

absl::Status TlsFiles::Reload() {
  absl::MutexLock lock(&mu_);
  return Check();
}

void TlsFiles::Watch() {
  while (!stop_.WaitForNotificationWithTimeout(options_.reload_interval)) {
    absl::MutexLock lock(&mu_);
    Check().IgnoreError();  // Logged by Check.
  }
}

absl::Status TlsFiles::Check() {
  const TlsFilesOptions& o = options_;
  FileRead cert = ReadPemFile(o.cert);
  FileRead key = ReadPemFile(o.key);
  FileRead ca;
  if (!o.client_ca.empty()) ca = ReadPemFile(o.client_ca);

  std::string next_cert = served_cert_;
  std::string next_key = served_key_;
  std::string next_ca = served_ca_;
  std::optional<Leaf> next_leaf;
  if (cert != seen_cert_ || key != seen_key_) {
    seen_cert_ = std::move(cert);
    seen_key_ = std::move(key);
    absl::StatusOr<Leaf> leaf = CheckIdentity(seen_cert_, seen_key_, o);
    if (leaf.ok()) {
      if (!identity_status_.ok() && seen_cert_.text == served_cert_ &&
          seen_key_.text == served_key_) {
        LogInfo(absl::StrCat("tls: --tls_cert=", o.cert, " and --tls_key=",
                             o.key, " hold the served pair again"));
      }
      next_cert = seen_cert_.text;
      next_key = seen_key_.text;
      next_leaf = *std::move(leaf);
    } else {
      ++rejected_;
      LogError(
          absl::StrCat("tls: still serving the previous certificate and key: ",
                       leaf.status().message()));
    }
    identity_status_ = leaf.status();
  }
  if (!o.client_ca.empty() && ca != seen_ca_) {
    seen_ca_ = std::move(ca);
    absl::Status checked = CheckClientCa(seen_ca_, o);
    if (checked.ok()) {
      if (!ca_status_.ok() && seen_ca_.text == served_ca_) {
        LogInfo(absl::StrCat("tls: --tls_client_ca=", o.client_ca,
                             " holds the served CA again"));
      }
      next_ca = seen_ca_.text;
    } else {
      ++rejected_;
      LogError(absl::StrCat("tls: still using the previous client CA: ",
                            checked.message()));
    }
    ca_status_ = checked;
  }

  const bool new_pair = next_cert != served_cert_ || next_key != served_key_;
  if (new_pair || next_ca != served_ca_) {
    absl::Status published = Publish(next_cert, next_key, next_ca);
    if (published.ok()) {
      ++accepted_;
      if (next_ca != served_ca_) {
        LogInfo(absl::StrCat(
            "tls: using the new client CA from --tls_client_ca=", o.client_ca));
      }
      if (new_pair && next_leaf.has_value()) {
        LogInfo(absl::StrCat(
            "tls: serving the new certificate from --tls_cert=", o.cert, " (",
            DescribeForLog(*next_leaf), ")"));
        served_leaf_ = *next_leaf;
        expiry_warned_ = WarnValidity(served_leaf_, o.cert, absl::Now());
      }
      served_cert_ = std::move(next_cert);
      served_key_ = std::move(next_key);
      served_ca_ = std::move(next_ca);
    } else {
      if (published.message() != publish_status_.message()) {
        LogError(absl::StrCat("tls: still serving the previous files: ",
                              published.message()));
      }
      // Check the files again next time even if they stay the same.
      seen_cert_ = seen_key_ = seen_ca_ = FileRead{"", "not published"};
    }
    publish_status_ = published;
  } else {
    publish_status_ = absl::OkStatus();  // Nothing (left) to publish.
  }

  // A certificate can expire while it is served.
  if (!expiry_warned_ && absl::Now() >= served_leaf_.not_after) {
    expiry_warned_ = WarnValidity(served_leaf_, o.cert, absl::Now());
  }
  ++checks_;
  for (const absl::Status& status :
       {identity_status_, ca_status_, publish_status_}) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::Status TlsFiles::Publish(const std::string& cert, const std::string& key,
                               const std::string& ca) {
  const std::string name = absl::StrCat("v", ++version_);
  const std::string dir = absl::StrCat(root_, "/", name);
  if (mkdir(dir.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot make ", dir, ": ", std::strerror(errno)));
  }
  // gRPC notices a swap between its reads of the key and the certificate
  // only by a modification time (in seconds) that changed.
  const int64_t stamp = std::max<int64_t>(
      static_cast<int64_t>(std::time(nullptr)), stamp_seconds_ + 1);
  absl::Status written =
      WriteCopy(absl::StrCat(dir, "/", kKeyFile), key, stamp);
  if (written.ok()) {
    written = WriteCopy(absl::StrCat(dir, "/", kCertFile), cert, stamp);
  }
  if (written.ok() && !options_.client_ca.empty()) {
    written = WriteCopy(absl::StrCat(dir, "/", kCaFile), ca, stamp);
  }
  const std::string link = absl::StrCat(root_, "/current.new");
  const std::string current = absl::StrCat(root_, "/current");
  if (written.ok()) {
    unlink(link.c_str());
    if (symlink(name.c_str(), link.c_str()) != 0 ||
        rename(link.c_str(), current.c_str()) != 0) {
      written = absl::InternalError(absl::StrCat(
          "cannot point ", current, " at ", name, ": ", std::strerror(errno)));
      unlink(link.c_str());
    }
  }
  std::error_code ignored;
  if (!written.ok()) {
    std::filesystem::remove_all(dir, ignored);
    return written;
  }
  stamp_seconds_ = stamp;
  versions_.push_back(name);
  // The previous version stays: gRPC may have resolved `current` to it
  // just before the swap and not yet opened the files.
  while (versions_.size() > 2) {
    std::filesystem::remove_all(absl::StrCat(root_, "/", versions_.front()),
                                ignored);
    versions_.pop_front();
  }
  return absl::OkStatus();
}

}  // namespace reach
