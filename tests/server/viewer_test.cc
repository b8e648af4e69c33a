// The viewer's HTTP endpoint (--http_listen) over real TCP against a real
// server: its static files, and the JSON gateway to the server's own API
// (answers equal to the gRPC ones, errors that name the field, limits,
// token authentication).
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "tests/testing/http.h"
#include "tests/testing/models.h"
#include "tests/testing/pki.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::HttpRequest;
using ::reach::testing::HttpResponse;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::reach::testing::TokenLine;
using ::testing::HasSubstr;
using ::testing::Not;

namespace pbutil = google::protobuf::util;

ServerOptions ViewerOptions() {
  ServerOptions options = TestServerOptions();
  options.http_address = "127.0.0.1:0";
  return options;
}

const std::vector<std::pair<std::string, std::string>> kJson = {
    {"Content-Type", "application/json"}};

class ViewerTest : public ::testing::Test {
 protected:
  ViewerTest()
      : server_(ViewerOptions()),
        port_(server_.server->http_port()),
        id_(MustRegister(*server_.stub,
                         testing::ToWire(testing::HumanoidDef(), "humanoid"))) {}

  TestServer server_;
  int port_;
  std::string id_;
};

TEST_F(ViewerTest, ServesThePageAndThreeJsFromTheBinary) {
  ASSERT_GT(port_, 0);
  const HttpResponse page = HttpRequest(port_, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.head, HasSubstr("Content-Type: text/html"));
  // The browser may load nothing from anywhere else.
  EXPECT_THAT(page.head, HasSubstr("Content-Security-Policy: default-src 'self'"));
  EXPECT_THAT(page.body, HasSubstr("./viewer.js"));
  EXPECT_THAT(page.body, HasSubstr("./vendor/three/three.module.js"));

  for (const char* path :
       {"/viewer.js", "/viewer.css", "/vendor/three/three.module.js",
        "/vendor/three/three.core.js",
        "/vendor/three/addons/controls/OrbitControls.js",
        "/vendor/three/addons/controls/TransformControls.js",
        "/vendor/three/LICENSE.txt"}) {
    const HttpResponse file = HttpRequest(port_, "GET", path);
    EXPECT_EQ(file.status, 200) << path;
    EXPECT_GT(file.body.size(), 100u) << path;
  }
  const HttpResponse core = HttpRequest(port_, "GET", "/vendor/three/three.core.js");
  EXPECT_THAT(core.head, HasSubstr("Content-Type: text/javascript"));
  EXPECT_THAT(core.body, HasSubstr("const REVISION = '187'"));

  const HttpResponse missing = HttpRequest(port_, "GET", "/nothing-here.js");
  EXPECT_EQ(missing.status, 404);
  EXPECT_THAT(missing.body, HasSubstr("\"code\":\"NOT_FOUND\""));
  EXPECT_EQ(HttpRequest(port_, "POST", "/", kJson, "{}").status, 405);
}

TEST_F(ViewerTest, ListsAndGetsSkeletonsAsTheApiDoes) {
  const HttpResponse list = HttpRequest(port_, "GET", "/api/skeletons");
  ASSERT_EQ(list.status, 200) << list.body;
  EXPECT_THAT(list.head, HasSubstr("Content-Type: application/json"));
  v1::ListSkeletonsResponse listed;
  ASSERT_TRUE(pbutil::JsonStringToMessage(list.body, &listed).ok()) << list.body;
  ASSERT_EQ(listed.skeletons_size(), 1);
  EXPECT_EQ(listed.skeletons(0).skeleton_id(), id_);
  EXPECT_EQ(listed.skeletons(0).name(), "humanoid");
  EXPECT_EQ(listed.skeletons(0).joint_count(), 31);

  const HttpResponse get = HttpRequest(port_, "GET", "/api/skeletons/" + id_);
  ASSERT_EQ(get.status, 200) << get.body;
  v1::GetSkeletonResponse from_http;
  ASSERT_TRUE(pbutil::JsonStringToMessage(get.body, &from_http).ok());
  v1::GetSkeletonRequest request;
  request.set_skeleton_id(id_);
  v1::GetSkeletonResponse from_grpc;
  ASSERT_TRUE(server_.stub->GetSkeleton(Context().get(), request, &from_grpc).ok());
  EXPECT_TRUE(pbutil::MessageDifferencer::Equals(from_http, from_grpc));
  // Fields at their default are printed too (a root's parent, -1, and a
  // first child's 0), so the page need not know the defaults.
  EXPECT_THAT(get.body, HasSubstr("\"parent\":0"));

  const HttpResponse unknown = HttpRequest(port_, "GET", "/api/skeletons/abc");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("\"code\":\"NOT_FOUND\""));
  EXPECT_THAT(unknown.body, HasSubstr("skeleton_id"));
  EXPECT_EQ(HttpRequest(port_, "POST", "/api/skeletons", kJson, "{}").status, 405);
  EXPECT_EQ(HttpRequest(port_, "GET", "/api/nothing").status, 404);
}

TEST_F(ViewerTest, SolvesThroughTheServersOwnSolve) {
  v1::SolveRequest request;
  request.set_skeleton_id(id_);
  *request.add_goals() = MakeGoal("l_arm", Eigen::Vector3d(0.3, 1.2, 0.25));
  *request.add_goals() =
      MakeGoal("r_leg", Eigen::Vector3d(-0.1, 0.2, 0.2), v1::SOLVER_FABRIK);
  std::string json;
  ASSERT_TRUE(pbutil::MessageToJsonString(request, &json).ok());

  const HttpResponse solved = HttpRequest(port_, "POST", "/api/solve", kJson, json);
  ASSERT_EQ(solved.status, 200) << solved.body;
  v1::SolveResponse from_http;
  ASSERT_TRUE(pbutil::JsonStringToMessage(solved.body, &from_http).ok());
  v1::SolveResponse from_grpc;
  ASSERT_TRUE(server_.stub->Solve(Context().get(), request, &from_grpc).ok());
  // The same solve, deterministic: the same answer to the last bit.
  EXPECT_TRUE(pbutil::MessageDifferencer::Equals(from_http, from_grpc))
      << from_http.DebugString() << "\n" << from_grpc.DebugString();
  ASSERT_EQ(from_http.results_size(), 2);
  EXPECT_TRUE(from_http.results(0).reached());
  EXPECT_GT(from_http.rotated_joints_size(), 0);
}

TEST_F(ViewerTest, BadRequestsGetErrorsThatNameTheProblem) {
  // A misspelt field.
  HttpResponse r = HttpRequest(port_, "POST", "/api/solve", kJson,
                               "{\"skeletonId\": \"" + id_ + "\", \"goalz\": []}");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("\"code\":\"INVALID_ARGUMENT\""));
  EXPECT_THAT(r.body, HasSubstr("goalz"));
  // Not JSON at all.
  r = HttpRequest(port_, "POST", "/api/solve", kJson, "not json");
  EXPECT_EQ(r.status, 400);
  // Valid JSON the service rejects: its own message, naming the field.
  r = HttpRequest(port_, "POST", "/api/solve", kJson,
                  "{\"skeletonId\": \"" + id_ +
                      "\", \"goals\": [{\"chain\": \"l_arm\", \"target\": "
                      "{\"x\": \"NaN\"}}]}");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("goals[0].target"));
  // JSON only (a cross-site form cannot send it without a preflight).
  r = HttpRequest(port_, "POST", "/api/solve", {{"Content-Type", "text/plain"}},
                  "{}");
  EXPECT_EQ(r.status, 415);
  EXPECT_THAT(r.body, HasSubstr("Content-Type"));
  EXPECT_EQ(HttpRequest(port_, "GET", "/api/solve").status, 405);
}

TEST(ViewerLimitsTest, ABodyOverMaxMessageBytesIsRefusedUnread) {
  ServerOptions options = ViewerOptions();
  options.max_message_bytes = 1000;
  TestServer server(options);
  const std::string big = "{\"skeletonId\": \"" + std::string(2000, 'a') + "\"}";
  const HttpResponse r =
      HttpRequest(server.server->http_port(), "POST", "/api/solve", kJson, big);
  EXPECT_EQ(r.status, 413);
  EXPECT_THAT(r.body, HasSubstr("--max_message_bytes=1000"));
}

TEST(ViewerLimitsTest, ThreadsMustBePositive) {
  ServerOptions options = ViewerOptions();
  options.http_threads = 0;
  const absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("--http_threads"));
}

TEST(ViewerLimitsTest, NotLoopbackNeedsTokensOrInsecure) {
  ServerOptions options = ViewerOptions();
  options.http_address = "0.0.0.0:0";
  const absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("--http_listen=0.0.0.0:0"));
}

TEST(ViewerLimitsTest, AnAddressInUseIsAClearError) {
  TestServer first(ViewerOptions());
  ServerOptions options = ViewerOptions();
  options.http_address = absl::StrCat("127.0.0.1:", first.server->http_port());
  const absl::StatusOr<std::unique_ptr<ReachServer>> second =
      ReachServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("--http_listen"));
}

TEST(ViewerAuthTest, TheGatewayNeedsTheSameTokensAsTheApi) {
  const std::filesystem::path dir = testing::TempDir("viewer-auth");
  testing::WriteFile(dir / "tokens", TokenLine("viewer", "t-solve", "solve") +
                                         TokenLine("scraper", "t-metrics", "metrics"));
  ServerOptions options = ViewerOptions();
  options.auth_tokens_file = (dir / "tokens").string();
  TestServer server(options);
  const int port = server.server->http_port();

  // The page itself holds no data: no token needed.
  EXPECT_EQ(HttpRequest(port, "GET", "/").status, 200);

  HttpResponse r = HttpRequest(port, "GET", "/api/skeletons");
  EXPECT_EQ(r.status, 401);
  EXPECT_THAT(r.body, HasSubstr("\"code\":\"UNAUTHENTICATED\""));
  r = HttpRequest(port, "GET", "/api/skeletons", {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(r.status, 401);
  // A token without a gRPC role.
  r = HttpRequest(port, "GET", "/api/skeletons", {{"Authorization", "Bearer t-metrics"}});
  EXPECT_EQ(r.status, 403);
  EXPECT_THAT(r.body, Not(HasSubstr("skeletonId")));
  r = HttpRequest(port, "GET", "/api/skeletons", {{"Authorization", "Bearer t-solve"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"skeletons\""));
}

}  // namespace
}  // namespace reach
