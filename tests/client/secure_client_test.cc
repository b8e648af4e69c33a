// The client side of security against a real server on loopback, with
// certificates made by openssl here: ReachClient over TLS and mTLS with a
// token (unary calls and a stream), clear errors for bad TLS files and
// tokens, and the `reach` tool and the service demo over TLS with a token.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/connect.h"
#include "client/reach_client.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/testing/models.h"
#include "tests/testing/pki.h"
#include "tests/testing/service.h"
#include "wire/convert.h"

namespace reach {
namespace {

namespace fs = std::filesystem;
using ::reach::client::ClientOptions;
using ::reach::client::Connect;
using ::reach::client::ConnectOptions;
using ::reach::client::ReachClient;
using ::reach::testing::MakeGoal;
using ::reach::testing::Pki;
using ::reach::testing::TempDir;
using ::reach::testing::TokenLine;
using ::reach::testing::WriteFile;
using ::testing::HasSubstr;

constexpr char kToolToken[] = "tool-token-0123456789";
constexpr char kGameToken[] = "game-token-9876543210";

struct ShellRun {
  int exit_code;
  std::string out;
  std::string err;
};

// Runs `command` (a shell command line), capturing stdout and stderr.
ShellRun Shell(const std::string& command, const fs::path& dir) {
  const fs::path out = dir / "out", err = dir / "err";
  const int status = std::system(
      absl::StrCat(command, " >", out.string(), " 2>", err.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
          testing::ReadFile(out), testing::ReadFile(err)};
}

class SecureClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pki_ = new Pki{TempDir("client-pki")};
    pki_->MakeCa("ca");
    pki_->MakeCa("other-ca");
    pki_->MakeLeaf("server", "ca", "serverAuth");
    pki_->MakeLeaf("client", "ca", "clientAuth");
  }
  static void TearDownTestSuite() {
    fs::remove_all(pki_->dir);
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override { dir_ = TempDir("client-case"); }
  void TearDown() override {
    server_.reset();
    fs::remove_all(dir_);
  }

  // TLS (mTLS when `mutual`) with tokens: "tool" may register, "game"
  // may only solve.
  void Start(bool mutual = false) {
    WriteFile(dir_ / "tokens", TokenLine("tool", kToolToken, "register") +
                                   TokenLine("game", kGameToken, "solve"));
    ServerOptions options = testing::TestServerOptions();
    options.tls_cert = pki_->PemPath("server");
    options.tls_key = pki_->KeyPath("server");
    if (mutual) options.tls_client_ca = pki_->PemPath("ca");
    options.auth_tokens_file = (dir_ / "tokens").string();
    absl::StatusOr<std::unique_ptr<ReachServer>> started =
        ReachServer::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
  }
  std::string Address() const {
    return absl::StrCat("127.0.0.1:", server_->port());
  }
  ConnectOptions Tls() const {
    ConnectOptions options;
    options.address = Address();
    options.tls_ca = pki_->PemPath("ca");
    return options;
  }
  std::unique_ptr<ReachClient> Client(const ConnectOptions& connect,
                                      const std::string& token) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> channel = Connect(connect);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (!channel.ok()) return nullptr;
    ClientOptions options;
    options.token = token;
    return std::make_unique<ReachClient>(*std::move(channel), options);
  }

  static Pki* pki_;
  fs::path dir_;
  std::unique_ptr<ReachServer> server_;
};

Pki* SecureClientTest::pki_ = nullptr;

// Registers the two-bone leg with `tool`, solves it with `game` once and
// over a stream of 20 frames; every answer checked by the test's own
// forward kinematics.
void RegisterSolveAndStream(ReachClient& tool, ReachClient& game) {
  const SkeletonDef def = testing::TwoBoneLegDef();
  auto registered = tool.Register(testing::ToWire(def, "leg"));
  ASSERT_TRUE(registered.ok()) << registered.status();
  const Skeleton skeleton = *Skeleton::Create(def);
  const int tip = skeleton.chain(skeleton.FindChain("leg")).joints.back();

  v1::SolveRequest request;
  request.set_skeleton_id(registered->skeleton_id());
  const Eigen::Vector3d target(0.1, 0.3, 0.2);
  *request.add_goals() = MakeGoal("leg", target);
  auto solved = game.Solve(request);
  ASSERT_TRUE(solved.ok()) << solved.status();
  const Pose pose = testing::ApplyResponse(RestPose(skeleton), *solved);
  EXPECT_LT((testing::PositionOf(skeleton, pose, tip) - target).norm(), 1e-4);

  auto stream = game.OpenStream(absl::Seconds(30));
  for (int i = 0; i < 20; ++i) {
    request.set_sequence(i + 1);
    ToProto(Eigen::Vector3d(0.1, 0.3 + 0.005 * i, 0.2),
            request.mutable_goals(0)->mutable_target());
    ASSERT_TRUE(stream->Send(request));
  }
  ASSERT_TRUE(stream->Finish().ok()) << stream->Finish();
  client::StreamResult result;
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(stream->Receive(&result)) << "frame " << i;
    EXPECT_EQ(result.response.sequence(), i + 1);
    ASSERT_FALSE(result.response.has_error()) << result.response.error().message();
    const Pose frame = testing::ApplyResponse(RestPose(skeleton), result.response);
    EXPECT_LT((testing::PositionOf(skeleton, frame, tip) -
               Eigen::Vector3d(0.1, 0.3 + 0.005 * i, 0.2))
                  .norm(),
              1e-4);
  }
}

TEST_F(SecureClientTest, TlsWithTokensRegistersSolvesAndStreams) {
  Start();
  auto tool = Client(Tls(), kToolToken);
  auto game = Client(Tls(), kGameToken);
  ASSERT_NE(tool, nullptr);
  ASSERT_NE(game, nullptr);
  RegisterSolveAndStream(*tool, *game);

  // The solve role may not register; no token and a wrong one are refused,
  // on unary calls and on the stream.
  auto denied = game->Register(testing::ToWire(testing::TwoBoneLegDef(), "x"));
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(denied.status().message()), HasSubstr("register"));
  auto anonymous = Client(Tls(), "");
  EXPECT_EQ(anonymous->ListSkeletons().status().code(),
            absl::StatusCode::kUnauthenticated);
  auto wrong = Client(Tls(), "not-a-token");
  EXPECT_EQ(wrong->ListSkeletons().status().code(),
            absl::StatusCode::kUnauthenticated);
  auto stream = wrong->OpenStream(absl::Seconds(10));
  v1::SolveRequest frame;
  frame.set_skeleton_id("x");
  stream->Send(frame);
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kUnauthenticated);
  // Health needs no token.
  EXPECT_TRUE(anonymous->Health().ok());
}

TEST_F(SecureClientTest, TheServerNameIsCheckedAndCanBeSet) {
  Start();
  // The certificate names localhost and 127.0.0.1. (Addresses stay IP
  // literals: resolving "localhost" goes through c-ares, whose resolver
  // leaks 10 bytes at exit under LeakSanitizer.)
  ConnectOptions connect = Tls();
  EXPECT_TRUE(Client(connect, "")->Health().ok());
  connect.tls_server_name = "localhost";
  EXPECT_TRUE(Client(connect, "")->Health().ok());
  connect.tls_server_name = "reach.example.com";
  EXPECT_EQ(Client(connect, "")->Health().status().code(),
            absl::StatusCode::kUnavailable);
  // A CA that did not sign the server's certificate.
  connect = Tls();
  connect.tls_ca = pki_->PemPath("other-ca");
  EXPECT_EQ(Client(connect, "")->Health().status().code(),
            absl::StatusCode::kUnavailable);
  // Plaintext to a TLS server.
  connect = ConnectOptions{};
  connect.address = Address();
  EXPECT_EQ(Client(connect, "")->Health().status().code(),
            absl::StatusCode::kUnavailable);
}

// An address list goes round-robin over TLS with tokens: the certificate is
// checked against the first address (gRPC's own authority for an ipv4:
// target would be the whole list), or the name given.
TEST_F(SecureClientTest, AnAddressListKeepsTlsAndTokens) {
  Start();
  ConnectOptions connect = Tls();
  connect.address = absl::StrCat(Address(), ",", Address());
  auto tool = Client(connect, kToolToken);
  auto game = Client(connect, kGameToken);
  ASSERT_NE(tool, nullptr);
  RegisterSolveAndStream(*tool, *game);
  EXPECT_EQ(Client(connect, "not-a-token")->ListSkeletons().status().code(),
            absl::StatusCode::kUnauthenticated);
  connect.tls_server_name = "reach.example.com";
  EXPECT_EQ(Client(connect, "")->Health().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ConnectTest, AddressesParseIntoTargets) {
  absl::StatusOr<client::ChannelTarget> t =
      client::ParseAddress("127.0.0.1:5001");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->target, "127.0.0.1:5001");
  EXPECT_FALSE(t->round_robin);
  t = client::ParseAddress("127.0.0.1:5001,10.0.0.2:5002");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->target, "ipv4:127.0.0.1:5001,10.0.0.2:5002");
  EXPECT_TRUE(t->round_robin);
  EXPECT_EQ(t->authority, "127.0.0.1:5001");
  t = client::ParseAddress("[::1]:5001,[fe80::1]:5002");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->target, "ipv6:[::1]:5001,[fe80::1]:5002");
  t = client::ParseAddress("dns:///reach-server-headless:50051");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->target, "dns:///reach-server-headless:50051");
  EXPECT_TRUE(t->round_robin);
  EXPECT_TRUE(t->authority.empty());
  for (const auto& [address, message] :
       std::vector<std::pair<std::string, std::string>>{
           {"", "address: empty"},
           {"127.0.0.1:1,host:2", "part 2 'host:2'"},
           {"127.0.0.1:1,", "part 2 ''"},
           {"127.0.0.1:1,127.0.0.1", "part 2 '127.0.0.1'"},
           {"127.0.0.1:1,127.0.0.1:70000", "part 2 '127.0.0.1:70000'"},
           {"127.0.0.1:1,256.0.0.1:2", "part 2 '256.0.0.1:2'"},
           {"127.0.0.1:1,[::1]:2", "part 2 '[::1]:2'"},
           {"[::1]:1,127.0.0.1:2", "is not [IPv6]:port"}}) {
    absl::Status status = client::ParseAddress(address).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << address;
    EXPECT_THAT(std::string(status.message()), HasSubstr(message)) << address;
    ConnectOptions options;
    options.address = address;
    EXPECT_EQ(Connect(options).status(), status) << address;
  }
}

TEST_F(SecureClientTest, MutualTlsWithAClientCertificate) {
  Start(/*mutual=*/true);
  ConnectOptions connect = Tls();
  connect.tls_cert = pki_->PemPath("client");
  connect.tls_key = pki_->KeyPath("client");
  auto tool = Client(connect, kToolToken);
  auto game = Client(connect, kGameToken);
  RegisterSolveAndStream(*tool, *game);
  // Without the certificate the handshake fails.
  EXPECT_EQ(Client(Tls(), kToolToken)->Health().status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ConnectTest, BadTlsFilesAndTokensAreNamed) {
  const fs::path dir = TempDir("connect");
  WriteFile(dir / "garbage.pem", "not a certificate\n");
  WriteFile(dir / "cert.pem",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
  ConnectOptions options;
  options.tls_ca = (dir / "missing.pem").string();
  absl::Status status = Connect(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tls_ca: cannot read '" + options.tls_ca + "'"));

  options.tls_ca = (dir / "garbage.pem").string();
  status = Connect(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tls_ca: '" + options.tls_ca +
                        "' does not hold a PEM certificate"));

  options.tls_ca = (dir / "cert.pem").string();
  options.tls_cert = (dir / "cert.pem").string();
  status = Connect(options).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tls_cert and tls_key go together"));

  options.tls_key = (dir / "cert.pem").string();  // A certificate, no key.
  status = Connect(options).status();
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tls_key: '" + options.tls_key +
                        "' does not hold a PEM private key"));

  EXPECT_TRUE(client::ValidateToken("abc-DEF_123.~").ok());
  EXPECT_THAT(std::string(client::ValidateToken("").message()),
              HasSubstr("token: expected 1 to 4096 characters"));
  EXPECT_THAT(std::string(client::ValidateToken("a b").message()),
              HasSubstr("token: character 2 is not visible ASCII"));
  EXPECT_THAT(std::string(client::ValidateToken("ab\n").message()),
              HasSubstr("token: character 3"));
  fs::remove_all(dir);
}

TEST_F(SecureClientTest, TheReachToolOverTlsWithAToken) {
  Start();
  const std::string tls =
      absl::StrCat(REACH_CLI_BINARY, " --timeout 20 --addr ", Address(),
                   " --tls-ca ", pki_->PemPath("ca"));
  const std::string leg = (dir_ / "leg.skeleton.json").string();
  {
    // A skeleton file for `reach register`.
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(
        testing::ToWire(testing::TwoBoneLegDef(), "leg"), &json);
    WriteFile(leg, json);
  }
  ShellRun registered = Shell(absl::StrCat(tls, " --token ", kToolToken,
                                      " register --json ", leg),
                         dir_);
  ASSERT_EQ(registered.exit_code, 0) << registered.err;
  const size_t at = registered.out.find("\"skeletonId\":\"");
  ASSERT_NE(at, std::string::npos) << registered.out;
  const std::string id = registered.out.substr(at + 14, 64);

  // The token from the environment.
  ShellRun solved = Shell(absl::StrCat("REACH_TOKEN=", kGameToken, " ", tls,
                                  " solve --skeleton ", id,
                                  " --chain leg --target 0.1,0.3,0.2"),
                     dir_);
  EXPECT_EQ(solved.exit_code, 0) << solved.err;
  EXPECT_THAT(solved.out, HasSubstr("chain leg: reached"));

  // reach bench over TLS: a stream and unary calls, all answered OK.
  ShellRun bench = Shell(absl::StrCat(tls, " --token ", kToolToken,
                                 " bench --rpc stream --requests 200 "
                                 "--format json"),
                    dir_);
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_THAT(bench.out, HasSubstr("\"statusCodes\":{\"OK\":200}"));
  bench = Shell(absl::StrCat(tls, " --token ", kToolToken,
                             " bench --rpc solve --requests 100 "
                             "--format json"),
                dir_);
  EXPECT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_THAT(bench.out, HasSubstr("\"statusCodes\":{\"OK\":100}"));

  // Refusals: no token (exit 1, the server's code), a role too small, a
  // missing CA file (exit 3, naming the flag), a token with a space
  // (exit 2), plaintext to the TLS server (exit 1).
  ShellRun refused = Shell(absl::StrCat(tls, " list"), dir_);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("UNAUTHENTICATED"));
  refused = Shell(absl::StrCat(tls, " --token ", kGameToken, " register ", leg),
                  dir_);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("PERMISSION_DENIED"));
  refused = Shell(absl::StrCat(REACH_CLI_BINARY, " --addr ", Address(),
                               " --tls-ca ", (dir_ / "none.pem").string(),
                               " health"),
                  dir_);
  EXPECT_EQ(refused.exit_code, 3);
  EXPECT_THAT(refused.err, HasSubstr("--tls-ca: cannot read"));
  refused = Shell(absl::StrCat(tls, " --token 'a b' list"), dir_);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_THAT(refused.err, HasSubstr("--token: character 2"));
  refused = Shell(absl::StrCat(REACH_CLI_BINARY, " --timeout 5 --addr ",
                               Address(), " health"),
                  dir_);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, HasSubstr("UNAVAILABLE"));
}

TEST_F(SecureClientTest, TheServiceDemoOverTlsWithAToken) {
  Start();
  ShellRun demo = Shell(absl::StrCat(
                       "REACH_TOKEN=", kToolToken, " ", REACH_DEMO_BINARY,
                       " --addr=", Address(), " --tls_ca=", pki_->PemPath("ca"),
                       " --skeleton=", REACH_EXAMPLES_DIR,
                       "/humanoid.skeleton.json"),
                   dir_);
  EXPECT_EQ(demo.exit_code, 0) << demo.out << demo.err;
  EXPECT_THAT(demo.out, HasSubstr("(TLS, with a token)"));
  EXPECT_THAT(demo.out, HasSubstr("SolveStream: 240 frames"));
  // Without the token the demo's first call is refused.
  demo = Shell(absl::StrCat(REACH_DEMO_BINARY, " --addr=", Address(),
                            " --tls_ca=", pki_->PemPath("ca"), " --skeleton=",
                            REACH_EXAMPLES_DIR, "/humanoid.skeleton.json"),
               dir_);
  EXPECT_NE(demo.exit_code, 0);
  EXPECT_THAT(demo.err, HasSubstr("RegisterSkeleton"));
}

}  // namespace
}  // namespace reach
