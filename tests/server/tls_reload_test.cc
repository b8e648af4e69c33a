// TLS certificate reload through TlsFiles: a real gRPC server on loopback
// serving the credentials TlsFiles builds, real TLS clients, certificates
// made by the openssl tool. While the server runs, the operator's files
// are broken the ways deployments break them (emptied, cut off, a key that
// is not the certificate's) and replaced by good ones; what a new
// connection is served is read from the client's side of the handshake.
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/tls_files.h"
#include "tests/testing/pki.h"

namespace reach {
namespace {

namespace fs = std::filesystem;
using ::reach::testing::Pki;
using ::reach::testing::TempDir;
using ::reach::testing::WriteFile;
using ::testing::HasSubstr;
using ::testing::internal::CaptureStderr;
using ::testing::internal::GetCapturedStderr;

constexpr absl::Duration kInterval = absl::Seconds(1);
// How long any wait may take before the test gives up (generous: the
// machine may be busy); the tests assert on what happened, not on when.
constexpr absl::Duration kDeadline = absl::Seconds(15);

// Writes `text` over `path` in place, as `: > file` or a failing `openssl
// genpkey -out file` does: unlike WriteFile, a reader can see the file at
// any point of the write.
void OverwriteInPlace(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Whether the PEM certificates `a` and `b` are the same certificate.
bool SameCertificate(const std::string& a, const std::string& b) {
  const auto parse = [](const std::string& pem) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return cert;
  };
  X509* x = parse(a);
  X509* y = parse(b);
  const bool same = x != nullptr && y != nullptr && X509_cmp(x, y) == 0;
  X509_free(x);
  X509_free(y);
  return same;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// The one service the test server has: Health.Check answers SERVING.
class Health final : public grpc::health::v1::Health::Service {
  grpc::Status Check(grpc::ServerContext*,
                     const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

class TlsReloadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new Pki{TempDir("tls-reload-pki")};
    pki_->MakeCa("ca1");
    pki_->MakeCa("client-ca");
    pki_->MakeLeaf("server1", "ca1", "serverAuth");
    // The same CA and names, a new key and serial: the trust a client has
    // cannot tell them apart, only the certificate it is served can.
    pki_->MakeLeaf("server1b", "ca1", "serverAuth");
    pki_->MakeLeaf("client", "client-ca", "clientAuth");
    MakeDatedLeaf("expired", "20200101000000Z", "20200102000000Z");
    MakeDatedLeaf("future", "20990101000000Z", "20990102000000Z");
  }
  static void TearDownTestSuite() {
    fs::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  // A leaf signed by ca1 valid from `start` to `end` (YYYYMMDDHHMMSSZ):
  // `openssl x509 -days` cannot make one in the past, `openssl ca` can.
  static void MakeDatedLeaf(const std::string& name, const std::string& start,
                            const std::string& end) {
    {
      std::ofstream cnf(pki_->dir / (name + ".cnf"));
      cnf << "[ca]\ndefault_ca = dated\n"
          << "[dated]\ndatabase = " << name << ".index\n"
          << "new_certs_dir = " << name << ".issued\n"
          << "serial = " << name << ".serial\n"
          << "default_md = sha256\npolicy = any\nunique_subject = no\n"
          << "[any]\ncommonName = supplied\n"
          << "[leaf]\nsubjectAltName = DNS:localhost,IP:127.0.0.1\n"
          << "basicConstraints = CA:FALSE\nextendedKeyUsage = serverAuth\n";
    }
    const std::string command = absl::StrCat(
        "cd ", pki_->dir.string(), " && : > ", name, ".index && echo 1000 > ",
        name, ".serial && mkdir -p ", name, ".issued",
        " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1",
        " -nodes -subj '/CN=", name, "' -keyout ", name, ".key -out ", name,
        ".csr && openssl ca -batch -notext -config ", name, ".cnf",
        " -extensions leaf -cert ca1.pem -keyfile ca1.key -in ", name,
        ".csr -out ", name, ".pem -startdate ", start, " -enddate ", end);
    ASSERT_EQ(std::system(("(" + command + ") >/dev/null 2>&1").c_str()), 0)
        << "openssl could not make " << name << ": " << command;
  }

  void SetUp() override {
    dir_ = TempDir("tls-reload-case");
    cert_ = dir_ / "server.pem";
    key_ = dir_ / "server.key";
    ca_ = dir_ / "client-ca.pem";
    private_parent_ = dir_ / "private";
    fs::create_directory(private_parent_);
    Deploy("server1");
    WriteFile(ca_, pki_->Pem("client-ca"));
  }
  void TearDown() override {
    if (capturing_) TakeLog();
    if (server_ != nullptr) server_->Shutdown();
    server_.reset();
    if (files_ != nullptr) {
      const std::string private_dir = files_->private_dir();
      files_.reset();
      EXPECT_FALSE(fs::exists(private_dir))
          << "the private copies outlived TlsFiles";
    }
    fs::remove_all(dir_);
  }

  // `name`'s certificate and key into the served files, each replaced
  // atomically (key first: between the two a check sees a mismatch).
  void Deploy(const std::string& name) {
    WriteFile(key_, pki_->Key(name));
    WriteFile(cert_, pki_->Pem(name));
  }

  TlsFilesOptions Options(bool client_ca = false) const {
    TlsFilesOptions options;
    options.cert = cert_.string();
    options.key = key_.string();
    if (client_ca) options.client_ca = ca_.string();
    options.reload_interval = kInterval;
    options.private_parent = private_parent_.string();
    return options;
  }

  // TlsFiles over `options` and a gRPC server (Health) on a loopback port
  // with its credentials.
  void Start(const TlsFilesOptions& options) {
    absl::StatusOr<std::unique_ptr<TlsFiles>> files = TlsFiles::Open(options);
    ASSERT_TRUE(files.ok()) << files.status();
    files_ = *std::move(files);
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
        files_->Credentials();
    ASSERT_TRUE(credentials.ok()) << credentials.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port_);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
  }

  // Health.Check over a new TLS connection trusting ca1 (presenting the
  // client certificate `client` when not empty): the certificate the
  // server presented, as the client saw it, or why the call failed.
  absl::StatusOr<std::string> Served(const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_->Pem("ca1");
    if (!client.empty()) {
      ssl.pem_cert_chain = pki_->Pem(client);
      ssl.pem_private_key = pki_->Key(client);
    }
    // A channel of its own (no subchannel shared with earlier channels):
    // a new handshake every time.
    static std::atomic<int> nonce{0};
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("reach.test.nonce", nonce++);
    auto stub = grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::SslCredentials(ssl), args));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, request, &response);
    if (!status.ok()) {
      return absl::UnavailableError(
          absl::StrCat("Health.Check: ", status.error_message()));
    }
    const std::vector<grpc::string_ref> pems =
        context.auth_context()->FindPropertyValues("x509_pem_cert");
    if (pems.empty()) {
      return absl::InternalError("no server certificate in the auth context");
    }
    return std::string(pems[0].data(), pems[0].size());
  }

  // Whether a new connection is served `name`'s certificate.
  ::testing::AssertionResult Serves(const std::string& name,
                                    const std::string& client = "") {
    absl::StatusOr<std::string> served = Served(client);
    if (!served.ok()) {
      return ::testing::AssertionFailure() << served.status().message();
    }
    if (!SameCertificate(*served, pki_->Pem(name))) {
      return ::testing::AssertionFailure()
             << "served another certificate than " << name << ":\n"
             << *served;
    }
    return ::testing::AssertionSuccess();
  }

  // Waits until new connections are served `name`'s certificate.
  ::testing::AssertionResult ComesToServe(const std::string& name,
                                          const std::string& client = "") {
    const absl::Time deadline = absl::Now() + kDeadline;
    ::testing::AssertionResult serves = Serves(name, client);
    while (!serves && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(50));
      serves = Serves(name, client);
    }
    return serves;
  }

  // Waits for two more checks of the files: the second started after
  // anything written before the call. Then lets gRPC re-read the private
  // copies too (it does every second), so a bad file that got through
  // would be in use.
  void WaitForTwoChecks() {
    const int64_t target = files_->checks() + 2;
    const absl::Time deadline = absl::Now() + kDeadline;
    while (files_->checks() < target && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_GE(files_->checks(), target) << "the files were not checked";
    absl::SleepFor(absl::Milliseconds(1100));
  }

  // The process's stderr (the server's log) from now until TakeLog().
  void CaptureLog() {
    CaptureStderr();
    capturing_ = true;
  }
  std::string TakeLog() {
    capturing_ = false;
    return GetCapturedStderr();
  }

  static Pki* pki_;
  bool capturing_ = false;
  fs::path dir_;
  fs::path cert_;
  fs::path key_;
  fs::path ca_;
  fs::path private_parent_;
  std::unique_ptr<TlsFiles> files_;
  Health health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

Pki* TlsReloadTest::pki_ = nullptr;

TEST_F(TlsReloadTest, AnEmptiedCertificateKeepsTheLastGoodPairServed) {
  Start(Options());
  ASSERT_TRUE(Serves("server1"));
  CaptureLog();
  fs::resize_file(cert_, 0);  // `: > server.pem`
  WaitForTwoChecks();
  const std::string log = TakeLog();
  EXPECT_TRUE(Serves("server1"));
  EXPECT_EQ(files_->reloads_rejected(), 1);
  EXPECT_EQ(files_->reloads_accepted(), 0);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("--tls_cert=", cert_.string(),
                                          ": empty file")));
  EXPECT_THAT(files_->Reload().message(), HasSubstr("empty file"));

  // The file back as it was: nothing to publish.
  WriteFile(cert_, pki_->Pem("server1"));
  EXPECT_TRUE(files_->Reload().ok());
  EXPECT_EQ(files_->reloads_accepted(), 0);
  EXPECT_TRUE(Serves("server1"));
}

TEST_F(TlsReloadTest, AnEmptiedKeyKeepsTheLastGoodPairServed) {
  Start(Options());
  ASSERT_TRUE(Serves("server1"));
  CaptureLog();
  fs::resize_file(key_, 0);
  WaitForTwoChecks();
  const std::string log = TakeLog();
  EXPECT_TRUE(Serves("server1"));
  EXPECT_EQ(files_->reloads_rejected(), 1);
  EXPECT_THAT(log, HasSubstr(absl::StrCat("--tls_key=", key_.string(),
                                          ": empty file")));
}

TEST_F(TlsReloadTest, AKeyOfAnotherCertificateIsRejectedOnceAndTheOldPairKept) {
  Start(Options());
  ASSERT_TRUE(Serves("server1"));
  CaptureLog();
  WriteFile(key_, pki_->Key("server1b"));  // Only half of a deployment.
  WaitForTwoChecks();
  EXPECT_TRUE(Serves("server1"));
  EXPECT_EQ(files_->reloads_rejected(), 1);
  // More checks of the same files: not logged or counted again.
  WaitForTwoChecks();
  const std::string log = TakeLog();
  EXPECT_EQ(files_->reloads_rejected(), 1);
  const std::string why =
      absl::StrCat("--tls_key=", key_.string(),
                   " is not the key of --tls_cert=", cert_.string());
  EXPECT_EQ(Count(log, why), 1) << log;
  EXPECT_TRUE(Serves("server1"));

  // The rest of the deployment: the matching certificate.
  WriteFile(cert_, pki_->Pem("server1b"));
  EXPECT_TRUE(ComesToServe("server1b"));
  EXPECT_EQ(files_->reloads_accepted(), 1);
  EXPECT_EQ(files_->reloads_rejected(), 1);
}

TEST_F(TlsReloadTest, ANewPairIsServedToNewConnectionsWithinTwoIntervals) {
  Start(Options());
  ASSERT_TRUE(Serves("server1"));
  CaptureLog();
  Deploy("server1b");
  const absl::Time deployed = absl::Now();
  const bool served = ComesToServe("server1b");
  const absl::Duration took = absl::Now() - deployed;
  const std::string log = TakeLog();
  ASSERT_TRUE(served) << log;
  // One interval until the check, one second until gRPC re-reads the
  // copy; the rest is slack for a busy machine.
  EXPECT_LT(took, 2 * kInterval + absl::Seconds(2));
  EXPECT_EQ(files_->reloads_accepted(), 1);
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("tls: serving the new certificate "
                                     "from --tls_cert=",
                                     cert_.string(), " (subject CN=server1b")));
  EXPECT_FALSE(Serves("server1"));
}

TEST_F(TlsReloadTest, AHalfWrittenFileIsRejectedAndTheOldPairKept) {
  Start(Options());
  ASSERT_TRUE(Serves("server1"));
  const std::string pem = pki_->Pem("server1b");
  const std::string key = pki_->Key("server1b");
  const std::string ca = pki_->Pem("ca1");
  CaptureLog();
  // The certificate cut in the middle, as a reader sees a slow writer.
  OverwriteInPlace(cert_, pem.substr(0, pem.size() / 2));
  WaitForTwoChecks();
  EXPECT_TRUE(Serves("server1"));
  // The key cut (beside the served certificate, so that the key is what
  // is wrong).
  WriteFile(cert_, pki_->Pem("server1"));
  OverwriteInPlace(key_, key.substr(0, key.size() / 2));
  WaitForTwoChecks();
  EXPECT_TRUE(Serves("server1"));
  // A matching pair whose chain is cut off in its second certificate: the
  // leaf alone would parse.
  OverwriteInPlace(cert_, pem + ca.substr(0, ca.size() / 2));
  OverwriteInPlace(key_, key);
  WaitForTwoChecks();
  const std::string log = TakeLog();
  EXPECT_TRUE(Serves("server1"));
  // One per state seen; a check between two writes can add one.
  EXPECT_GE(files_->reloads_rejected(), 3);
  EXPECT_EQ(files_->reloads_accepted(), 0);
  EXPECT_THAT(
      log, HasSubstr(absl::StrCat("--tls_cert=", cert_.string(),
                                  ": a damaged or cut-off PEM certificate")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("--tls_key=", key_.string(),
                                          ": no PEM private key in it")));
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("--tls_cert=", cert_.string(),
                                     ": a damaged or cut-off PEM block after 1 "
                                     "certificate(s)")));

  // Written out at last.
  OverwriteInPlace(cert_, pem + ca);
  EXPECT_TRUE(ComesToServe("server1b"));
  EXPECT_EQ(files_->reloads_accepted(), 1);
}

TEST_F(TlsReloadTest, AnExpiredCertificateAtStartIsServedWithAWarning) {
  Deploy("expired");
  CaptureLog();
  Start(Options());
  const std::string log = TakeLog();
  EXPECT_THAT(log,
              HasSubstr(absl::StrCat("WARNING: --tls_cert=", cert_.string(),
                                     " expired on 2020-01-02 00:00:00 UTC")));
  // Served: a client that checks dates refuses it.
  absl::StatusOr<std::string> served = Served();
  ASSERT_FALSE(served.ok());
  EXPECT_THAT(served.status().message(),
              HasSubstr("certificate verify failed"));
}

TEST_F(TlsReloadTest, ANotYetValidCertificateReloadedIsServedWithAWarning) {
  Start(Options());
  CaptureLog();
  Deploy("future");
  const absl::Time deadline = absl::Now() + kDeadline;
  while (files_->reloads_accepted() < 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  const std::string log = TakeLog();
  ASSERT_EQ(files_->reloads_accepted(), 1) << log;
  EXPECT_THAT(log, HasSubstr(absl::StrCat(
                       "WARNING: --tls_cert=", cert_.string(),
                       " is not valid until 2099-01-01 00:00:00 UTC")));
}

TEST_F(TlsReloadTest, ACutOffOrEmptiedClientCaKeepsTheLastGoodOne) {
  Start(Options(/*client_ca=*/true));
  ASSERT_TRUE(Serves("server1", "client"));
  ASSERT_FALSE(Serves("server1"));  // mTLS: no client certificate.
  const std::string ca = pki_->Pem("client-ca");
  CaptureLog();
  OverwriteInPlace(ca_, ca.substr(0, ca.size() / 2));
  WaitForTwoChecks();
  EXPECT_TRUE(Serves("server1", "client"));
  fs::resize_file(ca_, 0);
  WaitForTwoChecks();
  const std::string log = TakeLog();
  EXPECT_TRUE(Serves("server1", "client"));
  EXPECT_FALSE(Serves("server1"));
  EXPECT_EQ(files_->reloads_rejected(), 2);
  EXPECT_THAT(
      log, HasSubstr(absl::StrCat("--tls_client_ca=", ca_.string(),
                                  ": a damaged or cut-off PEM certificate")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("--tls_client_ca=", ca_.string(),
                                          ": empty file")));
}

TEST_F(TlsReloadTest, StartRefusesBadFilesNamingTheFlag) {
  const auto open_error = [this](const TlsFilesOptions& options) {
    absl::StatusOr<std::unique_ptr<TlsFiles>> files = TlsFiles::Open(options);
    return files.ok() ? std::string("opened") : files.status().ToString();
  };
  TlsFilesOptions options = Options();
  options.cert = (dir_ / "missing.pem").string();
  EXPECT_THAT(open_error(options),
              HasSubstr(absl::StrCat("--tls_cert=", options.cert,
                                     ": No such file or directory")));
  WriteFile(key_, pki_->Key("server1b"));
  EXPECT_THAT(open_error(Options()),
              HasSubstr(absl::StrCat(
                  "--tls_key=", key_.string(),
                  " is not the key of --tls_cert=", cert_.string())));
  Deploy("server1");
  OverwriteInPlace(cert_, "");
  EXPECT_THAT(
      open_error(Options()),
      HasSubstr(absl::StrCat("--tls_cert=", cert_.string(), ": empty file")));
  Deploy("server1");
  OverwriteInPlace(key_, "not a key\n");
  EXPECT_THAT(open_error(Options()),
              HasSubstr(absl::StrCat("--tls_key=", key_.string(),
                                     ": no PEM private key in it")));
  Deploy("server1");
  OverwriteInPlace(ca_, pki_->Key("client"));
  EXPECT_THAT(open_error(Options(/*client_ca=*/true)),
              HasSubstr(absl::StrCat("--tls_client_ca=", ca_.string(),
                                     ": no PEM certificate in it")));
  // Nothing left behind by the failed starts.
  EXPECT_TRUE(fs::is_empty(private_parent_));
}

TEST_F(TlsReloadTest, PrivateCopiesAreTheServedSetAndThePreviousOnly) {
  TlsFilesOptions options = Options(/*client_ca=*/true);
  options.reload_interval = absl::ZeroDuration();  // Only Reload().
  Start(options);
  const fs::path root = files_->private_dir();
  EXPECT_EQ(root.parent_path(), private_parent_);
  EXPECT_EQ(fs::status(root).permissions(), fs::perms::owner_all);
  for (const char* name : {"server1b", "server1", "server1b"}) {
    Deploy(name);
    ASSERT_TRUE(files_->Reload().ok());
  }
  EXPECT_EQ(files_->reloads_accepted(), 3);
  EXPECT_EQ(files_->checks(), 3);
  int versions = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
    if (entry.path().filename() != "current") ++versions;
  }
  EXPECT_EQ(versions, 2);
  const fs::path current = root / "current";
  ASSERT_TRUE(fs::is_symlink(current));
  EXPECT_EQ(testing::ReadFile(current / "cert.pem"), pki_->Pem("server1b"));
  EXPECT_EQ(testing::ReadFile(current / "key.pem"), pki_->Key("server1b"));
  EXPECT_EQ(testing::ReadFile(current / "ca.pem"), pki_->Pem("client-ca"));
  EXPECT_EQ(fs::status(current / "key.pem").permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(ComesToServe("server1b", "client"));
}

}  // namespace
}  // namespace reach
