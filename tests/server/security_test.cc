// TLS, mTLS, certificate reload, token roles, token reload, quotas and the
// metrics endpoint's basic auth, against a real server on loopback, with
// certificates made by the openssl tool here.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "prometheus/registry.h"
#include "server/auth.h"
#include "server/ik_service.h"
#include "server/server.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/testing/models.h"
#include "tests/testing/full_body.h"
#include "tests/testing/pki.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

namespace fs = std::filesystem;
using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::TestServerOptions;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;
using ::testing::Not;

using ::reach::testing::Pki;
using ::reach::testing::ReadFile;
using ::reach::testing::Sha256Hex;
using ::reach::testing::TempDir;
using ::reach::testing::TokenLine;
using ::reach::testing::WriteFile;

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new Pki{TempDir("pki")};
    pki_->MakeCa("ca1");
    pki_->MakeCa("ca2");
    pki_->MakeCa("client-ca");
    pki_->MakeCa("other-ca");
    pki_->MakeLeaf("server1", "ca1", "serverAuth");
    pki_->MakeLeaf("server2", "ca2", "serverAuth");
    pki_->MakeLeaf("client", "client-ca", "clientAuth");
    pki_->MakeLeaf("stranger", "other-ca", "clientAuth");
  }
  static void TearDownTestSuite() {
    fs::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override { dir_ = TempDir("case"); }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // Serving files under dir_: the server's certificate and key from
  // `server` ("server1": signed by ca1).
  ServerOptions TlsOptions(const std::string& server = "server1") {
    WriteFile(dir_ / "server.pem", pki_->Pem(server));
    WriteFile(dir_ / "server.key", pki_->Key(server));
    ServerOptions options = TestServerOptions();
    options.tls_cert = (dir_ / "server.pem").string();
    options.tls_key = (dir_ / "server.key").string();
    options.tls_reload_interval = absl::Seconds(1);
    return options;
  }

  void Start(const ServerOptions& options) {
    absl::StatusOr<std::unique_ptr<ReachServer>> started =
        ReachServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }

  // A fresh channel (its own connection: no subchannel shared with
  // earlier channels) trusting `ca`, with the client certificate `client`
  // when not empty.
  std::shared_ptr<grpc::Channel> TlsChannel(const std::string& ca,
                                            const std::string& client = "") {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pki_->Pem(ca);
    if (!client.empty()) {
      ssl.pem_cert_chain = pki_->Pem(client);
      ssl.pem_private_key = pki_->Key(client);
    }
    return grpc::CreateCustomChannel(Address(), grpc::SslCredentials(ssl),
                                     FreshArgs());
  }
  std::shared_ptr<grpc::Channel> PlainChannel() {
    return grpc::CreateCustomChannel(
        Address(), grpc::InsecureChannelCredentials(), FreshArgs());
  }
  std::string Address() const {
    return absl::StrCat("127.0.0.1:", server_->port());
  }
  static grpc::ChannelArguments FreshArgs() {
    static std::atomic<int> nonce{0};
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("reach.test.nonce", nonce++);
    return args;
  }

  // Health.Check over `channel`: the gRPC status.
  static grpc::Status Health(const std::shared_ptr<grpc::Channel>& channel) {
    auto stub = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    return stub->Check(Context(5).get(), request, &response);
  }

  static Pki* pki_;
  fs::path dir_;
  std::unique_ptr<ReachServer> server_;
};

Pki* SecurityTest::pki_ = nullptr;

TEST_F(SecurityTest, TlsServesATrustingClientAndRefusesPlaintext) {
  Start(TlsOptions());
  EXPECT_TRUE(Health(TlsChannel("ca1")).ok());
  // A solve over TLS, end to end.
  auto stub = v1::IkService::NewStub(TlsChannel("ca1"));
  v1::RegisterSkeletonRequest reg;
  *reg.mutable_skeleton() = ToWire(testing::TwoBoneLegDef(), "leg");
  v1::RegisterSkeletonResponse registered;
  ASSERT_TRUE(
      stub->RegisterSkeleton(Context().get(), reg, &registered).ok());
  v1::SolveRequest solve;
  solve.set_skeleton_id(registered.skeleton_id());
  *solve.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, 0.3, 0.2));
  v1::SolveResponse solved;
  EXPECT_TRUE(stub->Solve(Context().get(), solve, &solved).ok());

  // A plaintext client, and one that does not trust the certificate.
  const grpc::Status plain = Health(PlainChannel());
  EXPECT_EQ(plain.error_code(), grpc::StatusCode::UNAVAILABLE)
      << plain.error_message();
  EXPECT_FALSE(Health(TlsChannel("ca2")).ok());
}

TEST_F(SecurityTest, MutualTlsNeedsAClientCertificateFromTheClientCa) {
  ServerOptions options = TlsOptions();
  WriteFile(dir_ / "client-ca.pem", pki_->Pem("client-ca"));
  options.tls_client_ca = (dir_ / "client-ca.pem").string();
  Start(options);
  EXPECT_TRUE(Health(TlsChannel("ca1", "client")).ok());
  EXPECT_FALSE(Health(TlsChannel("ca1")).ok());              // No cert.
  EXPECT_FALSE(Health(TlsChannel("ca1", "stranger")).ok());  // Wrong CA.
  EXPECT_FALSE(Health(PlainChannel()).ok());
}

TEST_F(SecurityTest, ACertificateReplacedOnDiskIsServedWithoutARestart) {
  Start(TlsOptions("server1"));
  ASSERT_TRUE(Health(TlsChannel("ca1")).ok());
  ASSERT_FALSE(Health(TlsChannel("ca2")).ok());
  const int port = server_->port();

  WriteFile(dir_ / "server.key", pki_->Key("server2"));
  WriteFile(dir_ / "server.pem", pki_->Pem("server2"));
  const absl::Time swapped = absl::Now();
  bool served = false;
  while (!served && absl::Now() - swapped < absl::Seconds(10)) {
    served = Health(TlsChannel("ca2")).ok();
    if (!served) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(served) << "a new connection still gets the old certificate";
  // The reload interval is 1 s: the new certificate is served within it
  // (and the next check of the files).
  EXPECT_LT(absl::Now() - swapped, absl::Seconds(3));
  EXPECT_FALSE(Health(TlsChannel("ca1")).ok());
  EXPECT_EQ(server_->port(), port);
}

TEST_F(SecurityTest, StartRefusesBadTlsFilesAndPlaintextOffLoopback) {
  ServerOptions options = TlsOptions();
  options.tls_key = (pki_->dir / "server2.key").string();  // Not its key.
  absl::StatusOr<std::unique_ptr<ReachServer>> started =
      ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("is not the key of --tls_cert"));

  options = TlsOptions();
  options.tls_cert = (dir_ / "missing.pem").string();
  started = ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("--tls_cert="));

  options = TestServerOptions();
  options.tls_client_ca = (pki_->dir / "client-ca.pem").string();
  started = ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("--tls_client_ca needs --tls_cert"));

  options = TestServerOptions();
  options.listen_address = "0.0.0.0:0";
  started = ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()), HasSubstr("--insecure"));
  options.insecure = true;
  started = ReachServer::Start(options);
  EXPECT_TRUE(started.ok()) << started.status();
  started->reset();

  options = TestServerOptions();
  options.metrics_address = "0.0.0.0:0";
  started = ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("--metrics_listen"));
}

TEST(LoopbackAddressTest, KnowsLoopbackFromTheRest) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1:50051"));
  EXPECT_TRUE(IsLoopbackAddress("127.1.2.3:0"));
  EXPECT_TRUE(IsLoopbackAddress("localhost:50051"));
  EXPECT_TRUE(IsLoopbackAddress("[::1]:50051"));
  EXPECT_TRUE(IsLoopbackAddress("unix:/tmp/reach.sock"));
  EXPECT_FALSE(IsLoopbackAddress("0.0.0.0:50051"));
  EXPECT_FALSE(IsLoopbackAddress("[::]:50051"));
  EXPECT_FALSE(IsLoopbackAddress(":50051"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.5:50051"));
  EXPECT_FALSE(IsLoopbackAddress("reach.example.com:443"));
  // A name is not an address: 127.attacker.example resolves anywhere.
  EXPECT_FALSE(IsLoopbackAddress("127.attacker.example:9465"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1.nip.io:9465"));
  EXPECT_FALSE(IsLoopbackAddress("127.0.0.1:1,0.0.0.0:2"));
  EXPECT_FALSE(IsLoopbackAddress("::1:50051"));  // Unbracketed: ambiguous.
  EXPECT_TRUE(IsLoopbackAddress("127.255.0.9:1"));
}

// --- Tokens ---------------------------------------------------------------

// A stub call's context carrying `token` (none when empty).
std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
  std::unique_ptr<grpc::ClientContext> context = Context(10);
  if (!token.empty()) {
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  }
  return context;
}

class TokenTest : public SecurityTest {
 protected:
  void SetUp() override {
    SecurityTest::SetUp();
    WriteFile(dir_ / "tokens",
              "# name sha256 roles\n" +
                  TokenLine("game", "t-solve", "solve") +
                  TokenLine("tool-a", "t-register-a", "register") +
                  TokenLine("tool-b", "t-register-b", "solve,register") +
                  TokenLine("ops", "t-admin", "admin") +
                  TokenLine("scraper", "t-metrics", "metrics"));
  }
  ServerOptions AuthOptions() {
    ServerOptions options = TestServerOptions();
    options.auth_tokens_file = (dir_ / "tokens").string();
    options.auth_reload_interval = absl::Milliseconds(200);
    return options;
  }

  grpc::Status Register(const std::string& token, const std::string& name,
                        std::string* id = nullptr) {
    v1::RegisterSkeletonRequest request;
    *request.mutable_skeleton() = ToWire(testing::TwoBoneLegDef(), name);
    v1::RegisterSkeletonResponse response;
    grpc::Status status =
        stub_->RegisterSkeleton(As(token).get(), request, &response);
    if (id != nullptr) *id = response.skeleton_id();
    return status;
  }
  // ImportSkeleton of the leg as skeleton JSON bytes named `name`.
  grpc::Status Import(const std::string& token, const std::string& name) {
    v1::ImportSkeletonRequest request;
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(
        ToWire(testing::TwoBoneLegDef(), name), &json);
    request.set_data(json);
    request.set_format(v1::SKELETON_FORMAT_JSON);
    v1::ImportSkeletonResponse response;
    return stub_->ImportSkeleton(As(token).get(), request, &response);
  }
  grpc::Status Delete(const std::string& token, const std::string& id) {
    v1::DeleteSkeletonRequest request;
    request.set_skeleton_id(id);
    v1::DeleteSkeletonResponse response;
    return stub_->DeleteSkeleton(As(token).get(), request, &response);
  }
  grpc::Status Get(const std::string& token, const std::string& id) {
    v1::GetSkeletonRequest request;
    request.set_skeleton_id(id);
    v1::GetSkeletonResponse response;
    return stub_->GetSkeleton(As(token).get(), request, &response);
  }
  grpc::Status List(const std::string& token) {
    v1::ListSkeletonsRequest request;
    v1::ListSkeletonsResponse response;
    return stub_->ListSkeletons(As(token).get(), request, &response);
  }
  v1::SolveRequest SolveRequest(const std::string& id) {
    v1::SolveRequest request;
    request.set_skeleton_id(id);
    *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, 0.3, 0.2));
    return request;
  }
  grpc::Status Solve(const std::string& token, const std::string& id) {
    v1::SolveResponse response;
    return stub_->Solve(As(token).get(), SolveRequest(id), &response);
  }
  grpc::Status SolveBatch(const std::string& token, const std::string& id) {
    v1::SolveBatchRequest request;
    request.set_skeleton_id(id);
    *request.add_items() = SolveRequest("");
    v1::SolveBatchResponse response;
    return stub_->SolveBatch(As(token).get(), request, &response);
  }
  // One frame through a SolveStream: the stream's final status (or the
  // in-band status of the answer when the stream is OK).
  grpc::Status Stream(const std::string& token, const std::string& id) {
    std::unique_ptr<grpc::ClientContext> context = As(token);
    auto stream = stub_->SolveStream(context.get());
    stream->Write(SolveRequest(id));
    stream->WritesDone();
    v1::SolveResponse response;
    int answers = 0;
    while (stream->Read(&response)) ++answers;
    grpc::Status status = stream->Finish();
    if (status.ok() && answers != 1) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat(answers, " answers"));
    }
    return status;
  }

  void StartWithStub(const ServerOptions& options) {
    Start(options);
    stub_ = v1::IkService::NewStub(PlainChannel());
  }

  std::unique_ptr<v1::IkService::Stub> stub_;
};

TEST_F(TokenTest, EachRoleMayCallExactlyItsMethods) {
  StartWithStub(AuthOptions());
  std::string id;
  ASSERT_TRUE(Register("t-register-a", "leg", &id).ok());

  // No token, a malformed one, an unknown one: UNAUTHENTICATED everywhere.
  for (const std::string& token : {std::string(), std::string("nope")}) {
    EXPECT_EQ(Solve(token, id).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(SolveBatch(token, id).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Stream(token, id).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Get(token, id).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(List(token).error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Register(token, "x").error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Import(token, "x").error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(Delete(token, id).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    std::unique_ptr<grpc::ClientContext> context = Context(10);
    context->AddMetadata("authorization", "Basic dXNlcjpwYXNz");
    v1::ListSkeletonsResponse response;
    const grpc::Status status =
        stub_->ListSkeletons(context.get(), {}, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_THAT(status.error_message(), HasSubstr("Bearer"));
  }

  // solve: the solving and reading methods, nothing that writes.
  EXPECT_TRUE(Solve("t-solve", id).ok());
  EXPECT_TRUE(SolveBatch("t-solve", id).ok());
  EXPECT_TRUE(Stream("t-solve", id).ok());
  EXPECT_TRUE(Get("t-solve", id).ok());
  EXPECT_TRUE(List("t-solve").ok());
  grpc::Status denied = Register("t-solve", "mine");
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("'register' role"));
  denied = Delete("t-solve", id);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("'register' role"));
  denied = Import("t-solve", "imported");
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("'register' role"));

  // metrics only: no gRPC method at all.
  denied = Solve("t-metrics", id);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("'solve' role"));
  EXPECT_EQ(Stream("t-metrics", id).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // register: solves and imports too; deletes only what it registered.
  EXPECT_TRUE(Solve("t-register-b", id).ok());
  EXPECT_TRUE(Import("t-register-b", "imported").ok());
  std::string b_id;
  ASSERT_TRUE(Register("t-register-b", "leg b", &b_id).ok());
  denied = Delete("t-register-a", b_id);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("admin role"));
  EXPECT_TRUE(Get("t-solve", b_id).ok());
  EXPECT_TRUE(Delete("t-register-b", b_id).ok());
  EXPECT_EQ(Get("t-solve", b_id).error_code(), grpc::StatusCode::NOT_FOUND);

  // admin: deletes anyone's.
  EXPECT_TRUE(Delete("t-admin", id).ok());
  EXPECT_EQ(Get("t-solve", id).error_code(), grpc::StatusCode::NOT_FOUND);

  // Health stays open.
  EXPECT_TRUE(Health(PlainChannel()).ok());
}

// Retarget profiles follow the skeletons' rules: making and deleting need
// `register` (each owner lets go of its own; admin deletes anyone's),
// retargeting and reading need `solve`.
TEST_F(TokenTest, RetargetProfilesFollowTheRoles) {
  StartWithStub(AuthOptions());
  auto retarget = v1::RetargetService::NewStub(PlainChannel());
  absl::StatusOr<SkeletonDef> humanoid =
      testing::LoadSkeletonJson(testing::ExamplePath("humanoid.skeleton.json"));
  ASSERT_TRUE(humanoid.ok()) << humanoid.status();
  v1::RegisterSkeletonRequest register_request;
  *register_request.mutable_skeleton() = ToWire(*humanoid, "humanoid");
  v1::RegisterSkeletonResponse registered;
  ASSERT_TRUE(stub_
                  ->RegisterSkeleton(As("t-register-a").get(),
                                     register_request, &registered)
                  .ok());
  v1::CreateRetargetProfileRequest create;
  create.mutable_spec()->mutable_source()->set_skeleton_id(
      registered.skeleton_id());
  create.mutable_spec()->mutable_target()->set_skeleton_id(
      registered.skeleton_id());
  const auto make = [&](const std::string& token, std::string* id) {
    v1::CreateRetargetProfileResponse response;
    grpc::Status status =
        retarget->CreateRetargetProfile(As(token).get(), create, &response);
    if (id != nullptr) *id = response.profile().profile_id();
    return status;
  };
  const auto remove = [&](const std::string& token, const std::string& id) {
    v1::DeleteRetargetProfileRequest request;
    request.set_profile_id(id);
    v1::DeleteRetargetProfileResponse response;
    return retarget->DeleteRetargetProfile(As(token).get(), request,
                                           &response);
  };
  const auto get = [&](const std::string& token, const std::string& id) {
    v1::GetRetargetProfileRequest request;
    request.set_profile_id(id);
    v1::GetRetargetProfileResponse response;
    return retarget->GetRetargetProfile(As(token).get(), request, &response);
  };
  const auto frame = [&](const std::string& token, const std::string& id) {
    v1::RetargetRequest request;
    request.set_profile_id(id);
    for (size_t j = 0; j < humanoid->joints.size(); ++j) {
      request.mutable_source()->add_rotations()->set_w(1);
    }
    v1::RetargetResponse response;
    return retarget->Retarget(As(token).get(), request, &response);
  };
  const auto stream = [&](const std::string& token) {
    std::unique_ptr<grpc::ClientContext> context = As(token);
    auto call = retarget->RetargetStream(context.get());
    call->WritesDone();
    v1::RetargetResponse response;
    while (call->Read(&response)) {
    }
    return call->Finish();
  };

  std::string id;
  grpc::Status denied = make("t-solve", nullptr);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("'register' role"));
  EXPECT_EQ(make("", nullptr).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  ASSERT_TRUE(make("t-register-a", &id).ok());

  EXPECT_TRUE(frame("t-solve", id).ok());
  EXPECT_TRUE(get("t-solve", id).ok());
  EXPECT_TRUE(stream("t-solve").ok());
  EXPECT_EQ(frame("", id).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stream("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(frame("t-metrics", id).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(stream("t-metrics").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  denied = remove("t-solve", id);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Two makers: the profile stays until both let go.
  ASSERT_TRUE(make("t-register-b", nullptr).ok());
  EXPECT_TRUE(remove("t-register-a", id).ok());
  EXPECT_TRUE(get("t-solve", id).ok());
  denied = remove("t-register-a", id);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(denied.error_message(), HasSubstr("admin role"));
  EXPECT_TRUE(remove("t-register-b", id).ok());
  EXPECT_EQ(get("t-solve", id).error_code(), grpc::StatusCode::NOT_FOUND);

  // admin: deletes anyone's.
  ASSERT_TRUE(make("t-register-a", &id).ok());
  EXPECT_TRUE(remove("t-admin", id).ok());
  EXPECT_EQ(get("t-solve", id).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(TokenTest, ASkeletonTwoClientsRegisteredStaysUntilBothLetGo) {
  StartWithStub(AuthOptions());
  std::string id, again;
  ASSERT_TRUE(Register("t-register-a", "shared", &id).ok());
  ASSERT_TRUE(Register("t-register-b", "shared", &again).ok());
  ASSERT_EQ(id, again);  // Content-addressed: the same skeleton.
  EXPECT_THAT(server_->service().registry().Owners(id),
              ::testing::UnorderedElementsAre("tool-a", "tool-b"));
  EXPECT_TRUE(Delete("t-register-a", id).ok());
  EXPECT_TRUE(Get("t-solve", id).ok());  // tool-b still holds it.
  EXPECT_EQ(Delete("t-register-a", id).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(Delete("t-register-b", id).ok());
  EXPECT_EQ(Get("t-solve", id).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(TokenTest, TheTokenFileIsReadAgainWhenItChangesAndOnReload) {
  StartWithStub(AuthOptions());
  std::string id;
  ASSERT_TRUE(Register("t-admin", "leg", &id).ok());
  ASSERT_TRUE(Solve("t-solve", id).ok());
  ASSERT_EQ(Solve("t-new", id).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);

  // Replaced on disk: the watcher (every 200 ms here) picks it up.
  WriteFile(dir_ / "tokens", TokenLine("ops", "t-admin", "admin") +
                                 TokenLine("game-2", "t-new", "solve"));
  const absl::Time changed = absl::Now();
  while (!Solve("t-new", id).ok() &&
         absl::Now() - changed < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(Solve("t-new", id).ok());
  EXPECT_EQ(Solve("t-solve", id).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);  // Revoked.

  // A broken file admits no one (issue 39: keeping the tokens in use kept
  // the very token an edit meant to revoke), and says why.
  WriteFile(dir_ / "tokens", "ops not-a-digest admin\n");
  EXPECT_FALSE(server_->ReloadAuth().ok());
  const grpc::Status closed = Solve("t-new", id);
  EXPECT_EQ(closed.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(closed.error_message(), HasSubstr("token file does not load"));
  EXPECT_THAT(server_->auth().load_error(), HasSubstr("tokens:1"));

  // ReloadAuth (what SIGHUP calls) reads it at once.
  WriteFile(dir_ / "tokens", TokenLine("ops", "t-admin", "admin") +
                                 TokenLine("game-3", "t-newer", "solve"));
  ASSERT_TRUE(server_->ReloadAuth().ok());
  EXPECT_TRUE(Solve("t-newer", id).ok());
  EXPECT_EQ(Solve("t-new", id).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// A gauge or counter of the server's metrics registry; -1 when missing.
double MetricValue(ReachServer& server, const std::string& name) {
  for (const prometheus::MetricFamily& family :
       server.service().metrics().registry()->Collect()) {
    if (family.name == name && !family.metric.empty()) {
      return family.type == prometheus::MetricType::Counter
                 ? family.metric[0].counter.value
                 : family.metric[0].gauge.value;
    }
  }
  return -1;
}

// Issue 39, 8: a malformed line anywhere, a file without token lines, or
// the file deleted kept every previous token, the revoked one included.
TEST_F(TokenTest, ATokenFileThatDoesNotLoadAdmitsNoOneUntilFixed) {
  StartWithStub(AuthOptions());
  std::string id;
  ASSERT_TRUE(Register("t-admin", "leg", &id).ok());
  const std::string good = ReadFile(dir_ / "tokens");
  const auto await_code = [&](grpc::StatusCode code) {
    const absl::Time start = absl::Now();
    while (Solve("t-solve", id).error_code() != code &&
           absl::Now() - start < absl::Seconds(10)) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    return Solve("t-solve", id).error_code() == code;
  };
  int64_t failures = server_->auth().failures();
  for (const std::string& broken :
       {good + "oops\n", std::string("# only comments\n\n"),
        std::string("")}) {
    if (broken.empty()) {
      std::filesystem::remove(dir_ / "tokens");
    } else {
      WriteFile(dir_ / "tokens", broken);
    }
    EXPECT_TRUE(await_code(grpc::StatusCode::UNAUTHENTICATED))
        << "still admitted with " << (broken.empty() ? "no file" : broken);
    EXPECT_EQ(Solve("t-admin", id).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_FALSE(server_->auth().load_error().empty());
    EXPECT_GT(server_->auth().failures(), failures);
    failures = server_->auth().failures();
    // Visible to the operator: the metrics say so.
    EXPECT_EQ(MetricValue(*server_, "reach_auth_file_loaded"), 0);
    EXPECT_EQ(MetricValue(*server_, "reach_auth_tokens"), 0);
    EXPECT_EQ(MetricValue(*server_, "reach_auth_reload_failures_total"),
              static_cast<double>(failures));
    WriteFile(dir_ / "tokens", good);
    EXPECT_TRUE(await_code(grpc::StatusCode::OK));
    EXPECT_EQ(server_->auth().load_error(), "");
    EXPECT_EQ(MetricValue(*server_, "reach_auth_file_loaded"), 1);
    EXPECT_EQ(MetricValue(*server_, "reach_auth_tokens"), 5);
  }
}

// Issue 39, 8: open streams survived revocation indefinitely.
TEST_F(TokenTest, RevocationEndsThatTokensOpenStreams) {
  StartWithStub(AuthOptions());
  std::string id;
  ASSERT_TRUE(Register("t-admin", "leg", &id).ok());
  std::unique_ptr<grpc::ClientContext> revoked_context = As("t-solve");
  std::unique_ptr<grpc::ClientContext> kept_context = As("t-register-b");
  auto revoked = stub_->SolveStream(revoked_context.get());
  auto kept = stub_->SolveStream(kept_context.get());
  v1::SolveResponse response;
  for (auto* stream : {revoked.get(), kept.get()}) {
    ASSERT_TRUE(stream->Write(SolveRequest(id)));
    ASSERT_TRUE(stream->Read(&response));
  }
  // game's line goes; the stream ends at the next reload, without another
  // frame.
  WriteFile(dir_ / "tokens", TokenLine("tool-b", "t-register-b", "solve,register") +
                                 TokenLine("ops", "t-admin", "admin"));
  // (Before, it stayed open until its 10 s deadline: DEADLINE_EXCEEDED.)
  EXPECT_FALSE(revoked->Read(&response));
  const grpc::Status ended = revoked->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(ended.error_message(), HasSubstr("token 'game'"));
  // Another token's stream carries on.
  ASSERT_TRUE(kept->Write(SolveRequest(id)));
  ASSERT_TRUE(kept->Read(&response));
  kept->WritesDone();
  EXPECT_TRUE(kept->Finish().ok());
}

// Issue 39, 9: retarget profiles had no per-token quota (one register
// token made all 256 in under a second).
TEST_F(TokenTest, RetargetProfilesHaveAPerTokenQuota) {
  ServerOptions options = AuthOptions();
  options.quota_retarget_profiles = 2;
  StartWithStub(options);
  auto retarget = v1::RetargetService::NewStub(PlainChannel());
  absl::StatusOr<SkeletonDef> humanoid =
      testing::LoadSkeletonJson(testing::ExamplePath("humanoid.skeleton.json"));
  ASSERT_TRUE(humanoid.ok()) << humanoid.status();
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    v1::RegisterSkeletonRequest request;
    *request.mutable_skeleton() =
        ToWire(*humanoid, absl::StrCat("humanoid ", i));
    v1::RegisterSkeletonResponse response;
    ASSERT_TRUE(
        stub_->RegisterSkeleton(As("t-admin").get(), request, &response).ok());
    ids.push_back(response.skeleton_id());
  }
  const auto make = [&](const std::string& token, int target) {
    v1::CreateRetargetProfileRequest create;
    create.mutable_spec()->mutable_source()->set_skeleton_id(ids[0]);
    create.mutable_spec()->mutable_target()->set_skeleton_id(ids[target]);
    v1::CreateRetargetProfileResponse response;
    return retarget->CreateRetargetProfile(As(token).get(), create, &response);
  };
  ASSERT_TRUE(make("t-register-a", 1).ok());
  ASSERT_TRUE(make("t-register-a", 2).ok());
  const grpc::Status over = make("t-register-a", 3);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(over.error_message(), HasSubstr("--quota_retarget_profiles"));
  EXPECT_THAT(over.error_message(), HasSubstr("'tool-a'"));
  // Others have room; owning one another made is free.
  EXPECT_TRUE(make("t-register-b", 3).ok());
  EXPECT_TRUE(make("t-register-a", 1).ok());
}

TEST_F(TokenTest, QuotasAreAShareThatLeavesRoomForOthers) {
  ServerOptions options = AuthOptions();
  options.max_registry_bytes = 64 << 20;  // The shipped k8s flags.
  options.quota_registry_bytes = 64 << 20;
  options.max_retarget_profiles = 256;
  options.quota_retarget_profiles = 256;
  StartWithStub(options);
  EXPECT_EQ(server_->options().quota_registry_bytes, 16 << 20);
  EXPECT_EQ(server_->options().quota_retarget_profiles, 64);
  // The defaults leave room for three others.
  EXPECT_LE(ServerOptions().quota_registry_bytes * 4,
            ServerOptions().max_registry_bytes);
}

// Issue 39, 9: without auth any peer deleted any other's skeletons.
TEST(DeletingOwnerTest, WithoutAuthAPeerDeletesOnlyWhatItRegistered) {
  Caller peer{"peer:127.0.0.2", Role::kAdmin, false, true, {}};
  EXPECT_EQ(DeletingOwner(peer, false), "peer:127.0.0.2");
  EXPECT_EQ(DeletingOwner(peer, true), "");  // --insecure.
  Caller admin{"ops", Role::kAdmin, true, false, {}};
  EXPECT_EQ(DeletingOwner(admin, false), "");
  Caller tool{"tool", Role::kRegister, true, false, {}};
  EXPECT_EQ(DeletingOwner(tool, true), "tool");
}

TEST_F(TokenTest, QuotasBoundWhatEachTokenRegisters) {
  ServerOptions options = AuthOptions();
  options.quota_skeletons = 2;
  StartWithStub(options);
  ASSERT_TRUE(Register("t-register-a", "a1").ok());
  ASSERT_TRUE(Register("t-register-a", "a2").ok());
  grpc::Status over = Register("t-register-a", "a3");
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(over.error_message(), HasSubstr("--quota_skeletons"));
  EXPECT_THAT(over.error_message(), HasSubstr("'tool-a'"));
  // Another token has its own quota; re-registering one's own is free.
  EXPECT_TRUE(Register("t-register-b", "b1").ok());
  EXPECT_TRUE(Register("t-register-a", "a1").ok());
  // Taking another's skeleton as one's own counts too.
  EXPECT_EQ(Register("t-register-a", "b1").error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Deleting makes room.
  std::string a2;
  ASSERT_TRUE(Register("t-register-a", "a2", &a2).ok());
  ASSERT_TRUE(Delete("t-register-a", a2).ok());
  EXPECT_TRUE(Register("t-register-a", "a3").ok());
  EXPECT_EQ(server_->service().registry().Usage("tool-a").skeletons, 2);
}

TEST_F(TokenTest, ByteQuotaAndPerPeerQuotaWithoutAuth) {
  ServerOptions options = TestServerOptions();  // No tokens.
  options.quota_skeletons = 0;
  StartWithStub(options);
  std::string id;
  ASSERT_TRUE(Register("", "leg", &id).ok());
  const std::vector<std::string> owners =
      server_->service().registry().Owners(id);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0], "peer:loopback");
  const int64_t one = server_->service().registry().Usage(owners[0]).bytes;
  ASSERT_GT(one, 0);
  server_.reset();

  options.quota_registry_bytes = one + one / 2;  // Room for one leg.
  StartWithStub(options);
  ASSERT_TRUE(Register("", "leg 1").ok());
  const grpc::Status over = Register("", "leg 2");
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(over.error_message(), HasSubstr("--quota_registry_bytes"));
  EXPECT_THAT(over.error_message(), HasSubstr("peer:loopback"));
}

TEST_F(TokenTest, StartRefusesABadTokenFile) {
  ServerOptions options = AuthOptions();
  WriteFile(dir_ / "tokens", "ops " + Sha256Hex("x") + " root\n");
  absl::StatusOr<std::unique_ptr<ReachServer>> started =
      ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("tokens:1: unknown role 'root'"));
  options.auth_tokens_file = (dir_ / "missing").string();
  started = ReachServer::Start(options);
  ASSERT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.status().message()),
              HasSubstr("--auth_tokens_file="));
}

// curl's HTTP status for /metrics with basic auth `user:password` (none
// when empty).
int MetricsStatus(int port, const std::string& user_password) {
  const std::string command = absl::StrCat(
      "curl -s -o /dev/null -w '%{http_code}' --max-time 10 ",
      user_password.empty() ? "" : absl::StrCat("-u '", user_password, "' "),
      "http://127.0.0.1:", port, "/metrics");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buffer[16] = {};
  const size_t n = fread(buffer, 1, sizeof(buffer) - 1, pipe);
  pclose(pipe);
  return std::atoi(std::string(buffer, n).c_str());
}

TEST_F(TokenTest, MetricsNeedATokenWithTheMetricsRole) {
  ServerOptions options = AuthOptions();
  options.metrics_address = "127.0.0.1:0";
  StartWithStub(options);
  const int port = server_->metrics_port();
  ASSERT_GT(port, 0);
  EXPECT_EQ(MetricsStatus(port, ""), 401);
  EXPECT_EQ(MetricsStatus(port, "scraper:t-wrong"), 401);
  EXPECT_EQ(MetricsStatus(port, "game:t-solve"), 401);   // No metrics role.
  EXPECT_EQ(MetricsStatus(port, "ops:t-metrics"), 401);  // Not its name.
  EXPECT_EQ(MetricsStatus(port, "scraper:t-metrics"), 200);
  // An admin token may delete everything: it has no place in a scraper's
  // configuration, so it does not open /metrics.
  EXPECT_EQ(MetricsStatus(port, "ops:t-admin"), 401);
}

TEST(TokenFileTest, ParsesNamesDigestsAndRolesAndNamesTheBadLine) {
  const std::string digest = Sha256Hex("secret");
  absl::StatusOr<std::vector<TokenEntry>> entries = ParseTokenFile(
      absl::StrCat("# comment\n\n  a ", digest, " solve,metrics\n",
                   "b\t", Sha256Hex("other"), "\tregister,solve\n"),
      "f");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].name, "a");
  EXPECT_EQ((*entries)[0].role, Role::kSolve);
  EXPECT_TRUE((*entries)[0].metrics);
  EXPECT_EQ((*entries)[1].role, Role::kRegister);
  EXPECT_FALSE((*entries)[1].metrics);

  const auto error = [](const std::string& text) {
    return std::string(ParseTokenFile(text, "f").status().message());
  };
  // A token pasted in place of its hash is not echoed into the log.
  EXPECT_THAT(error("a secret solve\n"),
              HasSubstr("f:1: the second field (6 characters) is not a SHA-256"));
  EXPECT_THAT(error("a secret solve\n"), Not(HasSubstr("secret")));
  EXPECT_THAT(error("\na " + digest + "\n"), HasSubstr("f:2: expected 3 fields"));
  EXPECT_THAT(error("a " + digest + " solve\na " + Sha256Hex("x") + " solve\n"),
              HasSubstr("f:2: name 'a' is used twice"));
  EXPECT_THAT(error("a " + digest + " solve\nb " + digest + " solve\n"),
              HasSubstr("f:2: the same token as 'a'"));
}

TEST(PeerOwnerTest, DropsThePort) {
  EXPECT_EQ(PeerOwner("ipv4:10.0.0.5:5000"), "peer:10.0.0.5");
  EXPECT_EQ(PeerOwner("ipv6:[fd00::1]:5000"), "peer:[fd00::1]");
  EXPECT_EQ(PeerOwner("unix:/tmp/s"), "peer:/tmp/s");
}

// Issue 39, 9: without auth, 127.0.0.2, 127.0.0.3, ... each got a fresh
// quota (and a share of the byte budget of its own).
TEST(PeerOwnerTest, EveryLoopbackAddressIsOneOwner) {
  EXPECT_EQ(PeerOwner("ipv4:127.0.0.1:5000"), "peer:loopback");
  EXPECT_EQ(PeerOwner("ipv4:127.0.0.2:5001"), "peer:loopback");
  EXPECT_EQ(PeerOwner("ipv4:127.255.3.4:1"), "peer:loopback");
  EXPECT_EQ(PeerOwner("ipv6:[::1]:5000"), "peer:loopback");
  EXPECT_EQ(PeerOwner("ipv4:128.0.0.1:1"), "peer:128.0.0.1");
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

// Issue 39, 7: two servers on one --data_dir crashed ("duplicate column
// name: owners") or stamped the same version on different skeletons.
TEST(DataDirTest, OneServerPerDataDirectory) {
  const std::filesystem::path dir = TempDir("data-dir-lock");
  ServerOptions options = TestServerOptions();
  options.in_memory_store = false;
  options.data_dir = (dir / "data").string();
  absl::StatusOr<std::unique_ptr<ReachServer>> first =
      ReachServer::Start(options);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<ReachServer>> second =
      ReachServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("is in use by another reach-server"));
  // It names the first: its pid and its gRPC address.
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("pid ", getpid(), ", gRPC on 127.0.0.1:",
                                     (*first)->port())));
  first->reset();  // Its lock goes with it.
  second = ReachServer::Start(options);
  EXPECT_TRUE(second.ok()) << second.status();
}

// The private copies of the TLS files live in the data directory (the k8s
// manifest's root filesystem is read-only), and copies a server killed
// with -9 left there are removed by the next one.
TEST(DataDirTest, TlsCopiesLiveInTheDataDirectoryAndStaleOnesGo) {
  const std::filesystem::path dir = TempDir("data-dir-tls");
  Pki pki{dir};
  pki.MakeCa("ca");
  pki.MakeLeaf("server", "ca", "serverAuth");
  const std::filesystem::path data = dir / "data";
  std::filesystem::create_directories(data / "reach-tls-stale");
  WriteFile(data / "reach-tls-stale" / "key.pem", "old key");
  ServerOptions options = TestServerOptions();
  options.in_memory_store = false;
  options.data_dir = data.string();
  options.tls_cert = pki.PemPath("server");
  options.tls_key = pki.KeyPath("server");
  const auto copies = [&] {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(data)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("reach-tls-", 0) == 0) names.push_back(name);
    }
    return names;
  };
  {
    absl::StatusOr<std::unique_ptr<ReachServer>> server =
        ReachServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status();
    const std::vector<std::string> live = copies();
    ASSERT_EQ(live.size(), 1u);
    EXPECT_NE(live[0], "reach-tls-stale");
  }
  EXPECT_TRUE(copies().empty());
}

// Issue 39, 7: gRPC's SO_REUSEPORT let a second server start silently on
// the same port and take half the connections.
TEST(ListenTest, ASecondServerOnTheSamePortIsRefused) {
  absl::StatusOr<std::unique_ptr<ReachServer>> first =
      ReachServer::Start(TestServerOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  ServerOptions options = TestServerOptions();
  options.listen_address = absl::StrCat("127.0.0.1:", (*first)->port());
  absl::StatusOr<std::unique_ptr<ReachServer>> second =
      ReachServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("--listen"));
}

// Issue 39, 10: TLS without tokens or a client CA on 0.0.0.0 let any TLS
// client delete everything.
TEST(ListenTest, TlsOnANetworkAddressNeedsTokensOrClientCertificates) {
  const std::filesystem::path dir = TempDir("tls-no-auth");
  Pki pki{dir};
  pki.MakeCa("ca");
  pki.MakeLeaf("server", "ca", "serverAuth");
  ServerOptions options = TestServerOptions();
  options.listen_address = "0.0.0.0:0";
  options.tls_cert = pki.PemPath("server");
  options.tls_key = pki.KeyPath("server");
  absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("neither --auth_tokens_file nor --tls_client_ca"));
  options.tls_client_ca = pki.PemPath("ca");
  server = ReachServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
}

}  // namespace
}  // namespace reach
