// The viewer's HTTP endpoint (--http_listen) over real TCP against a real
// server: its static files, and the JSON gateway to the server's own API
// (answers equal to the gRPC ones, errors that name the field, limits,
// token authentication).
#include <civetweb.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "tests/testing/http.h"
#include "tests/testing/models.h"
#include "tests/testing/pki.h"
#include "tests/testing/service.h"
#include "tests/testing/sweep.h"
#include "wire/convert.h"

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
  // The same written as Python's json.dumps writes a NaN (bare, not JSON):
  // the service's message too, not the JSON parser's (issue 46).
  r = HttpRequest(port_, "POST", "/api/solve", kJson,
                  "{\"skeletonId\": \"" + id_ +
                      "\", \"goals\": [{\"chain\": \"l_arm\", \"target\": "
                      "{\"x\": NaN, \"y\": Infinity, \"z\": 0.5}}]}");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("goals[0].target = (nan, inf, 0.5) is not "
                                "finite"));
  EXPECT_THAT(r.body, Not(HasSubstr("Couldn't parse")));
  // A string holding NaN stays a string (a chain of that name).
  r = HttpRequest(port_, "POST", "/api/solve", kJson,
                  "{\"skeletonId\": \"" + id_ +
                      "\", \"goals\": [{\"chain\": \"NaN\", \"target\": "
                      "{\"x\": NaN}}]}");
  EXPECT_EQ(r.status, 404);
  // An unknown chain: the chains there are (issue 46).
  EXPECT_THAT(r.body, HasSubstr("goals[0].chain: no chain \\\"NaN\\\"; "
                                "chains: l_leg, r_leg, l_arm, r_arm"));
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
  // Retarget profiles likewise.
  EXPECT_EQ(HttpRequest(port, "GET", "/api/retarget-profiles").status, 401);
  r = HttpRequest(port, "GET", "/api/retarget-profiles",
                  {{"Authorization", "Bearer t-metrics"}});
  EXPECT_EQ(r.status, 403);
  r = HttpRequest(port, "GET", "/api/retarget-profiles",
                  {{"Authorization", "Bearer t-solve"}});
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"profiles\""));
}


// A WebSocket client (civetweb's) on /api/watch; collects the text
// messages it receives.
class WatchClient {
 public:
  WatchClient(int port, const std::string& query) {
    char error[256] = "";
    conn_ = mg_connect_websocket_client("127.0.0.1", port, 0, error, sizeof(error),
                                        ("/api/watch?" + query).c_str(), nullptr,
                                        &WatchClient::OnData, &WatchClient::OnClose,
                                        this);
    EXPECT_NE(conn_, nullptr) << error;
  }
  ~WatchClient() {
    if (conn_ != nullptr) mg_close_connection(conn_);
  }

  // Waits until the messages satisfy what Expect() gave, the socket
  // closes or 20 s pass; returns the messages.
  std::vector<std::string> WaitFor() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](WatchClient* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->mu_) {
                               return c->closed_ || c->done_(c->messages_);
                             },
                             this),
                         absl::Seconds(20));
    return messages_;
  }
  std::vector<std::string> Messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  void Expect(std::function<bool(const std::vector<std::string>&)> done) {
    absl::MutexLock lock(&mu_);
    done_ = std::move(done);
  }
  bool closed() {
    absl::MutexLock lock(&mu_);
    return closed_;
  }

 private:
  static int OnData(mg_connection*, int bits, char* data, size_t size, void* self) {
    auto* c = static_cast<WatchClient*>(self);
    absl::MutexLock lock(&c->mu_);
    if ((bits & 0xf) == MG_WEBSOCKET_OPCODE_TEXT) c->messages_.emplace_back(data, size);
    return 1;
  }
  static void OnClose(const mg_connection*, void* self) {
    auto* c = static_cast<WatchClient*>(self);
    absl::MutexLock lock(&c->mu_);
    c->closed_ = true;
  }

  mg_connection* conn_ = nullptr;
  absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::function<bool(const std::vector<std::string>&)> done_
      ABSL_GUARDED_BY(mu_) = [](const std::vector<std::string>&) { return false; };
};

google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct out;
  EXPECT_TRUE(pbutil::JsonStringToMessage(json, &out).ok()) << json;
  return out;
}

using Stream = grpc::ClientReaderWriter<v1::SolveRequest, v1::SolveResponse>;

v1::SolveRequest ArmFrame(const std::string& id, int frame) {
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  request.set_sequence(frame);
  *request.add_goals() =
      MakeGoal("l_arm", Eigen::Vector3d(0.3, 1.1 + 0.01 * frame, 0.25));
  return request;
}

TEST_F(ViewerTest, WatchesALiveStreamFrameByFrame) {
  auto context = Context();
  std::unique_ptr<Stream> stream = server_.stub->SolveStream(context.get());
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Write(ArmFrame(id_, 1)));
  ASSERT_TRUE(stream->Read(&response));

  // Listed with its owner (without auth: the peer's address) and frames.
  const HttpResponse list = HttpRequest(port_, "GET", "/api/streams");
  ASSERT_EQ(list.status, 200) << list.body;
  const google::protobuf::Struct listed = ParseJson(list.body);
  const auto& streams = listed.fields().at("streams").list_value();
  ASSERT_EQ(streams.values_size(), 1) << list.body;
  const auto& s = streams.values(0).struct_value().fields();
  EXPECT_EQ(s.at("owner").string_value(), "peer:loopback");
  EXPECT_EQ(s.at("skeletonId").string_value(), id_);
  EXPECT_EQ(s.at("frames").number_value(), 1);
  const int stream_id = static_cast<int>(s.at("id").number_value());

  WatchClient watcher(port_, absl::StrCat("stream=", stream_id));
  // Watching starts with the next frame solved (once the socket is up).
  std::vector<std::string> messages;
  for (int frame = 2; frame <= 200 && messages.empty(); ++frame) {
    ASSERT_TRUE(stream->Write(ArmFrame(id_, frame)));
    ASSERT_TRUE(stream->Read(&response));
    messages = watcher.Messages();
    if (messages.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(messages.empty());
  // The latest frame, as the stream answered it: every joint's rotation,
  // equal to the response's for the joints it turned; the goal's target.
  ASSERT_TRUE(stream->Write(ArmFrame(id_, 500)));
  ASSERT_TRUE(stream->Read(&response));
  watcher.Expect([](const std::vector<std::string>& m) {
    return m.back().find("\"sequence\":500") != std::string::npos;
  });
  messages = watcher.WaitFor();
  const google::protobuf::Struct frame = ParseJson(messages.back());
  EXPECT_EQ(frame.fields().at("stream").number_value(), stream_id);
  EXPECT_EQ(frame.fields().at("sequence").number_value(), 500);
  EXPECT_EQ(frame.fields().at("skeletonId").string_value(), id_);
  const auto& rotations = frame.fields().at("rotations").list_value();
  ASSERT_EQ(rotations.values_size(), 4 * 31);
  for (int k = 0; k < response.rotated_joints_size(); ++k) {
    const int j = static_cast<int>(response.rotated_joints(k));
    for (int c = 0; c < 4; ++c) {
      EXPECT_EQ(rotations.values(4 * j + c).number_value(),
                response.rotations(4 * k + c))
          << "joint " << j;
    }
  }
  const auto& goal = frame.fields().at("goals").list_value().values(0).struct_value().fields();
  EXPECT_EQ(goal.at("target").list_value().values(1).number_value(), 1.1 + 0.01 * 500);
  EXPECT_EQ(goal.at("effector").number_value(), 20);  // l_wrist.
  EXPECT_EQ(goal.at("pole").kind_case(), google::protobuf::Value::kNullValue);
  EXPECT_EQ(goal.at("reached").bool_value(), response.results(0).reached());

  // The stream ends: so does the watch, saying so.
  stream->WritesDone();
  while (stream->Read(&response)) {}
  EXPECT_TRUE(stream->Finish().ok());
  watcher.Expect([](const std::vector<std::string>& m) {
    return m.back().find("\"ended\":true") != std::string::npos;
  });
  messages = watcher.WaitFor();
  EXPECT_THAT(messages.back(), HasSubstr("\"ended\":true"));
  const HttpResponse after = HttpRequest(port_, "GET", "/api/streams");
  EXPECT_THAT(after.body, HasSubstr("\"streams\":[]"));
}

std::vector<double> Numbers(const google::protobuf::Struct& json,
                            const std::string& field) {
  std::vector<double> out;
  for (const auto& v : json.fields().at(field).list_value().values()) {
    out.push_back(v.number_value());
  }
  return out;
}

// A retarget profile from the CMU walk (centimetres) onto BCN_Epileptic
// (metres), imported from the files' bytes: listed and read through the
// gateway as RetargetService answers; its RetargetStream listed as a
// retarget with its profile and source; watched frames carry the source
// pose as sent and the target pose as answered, and the limb goals the
// target's own forward kinematics (the test's) puts the effectors on.
TEST_F(ViewerTest, WatchesARetargetStreamWithItsSourceBesideIt) {
  const std::string data = REACH_TEST_DATA;
  const v1::ImportSkeletonResponse source = testing::MustImport(
      *server_.stub, data + "/mocap/cmu_02_01_walk.bvh", /*motion=*/true);
  const v1::ImportSkeletonResponse target = testing::MustImport(
      *server_.stub, data + "/rigs/BCN_Epileptic.glb", /*motion=*/false);
  ASSERT_GT(source.motion_size(), 60);
  auto retarget = v1::RetargetService::NewStub(server_.channel);
  v1::CreateRetargetProfileRequest create;
  create.mutable_spec()->mutable_source()->set_skeleton_id(source.skeleton_id());
  create.mutable_spec()->mutable_target()->set_skeleton_id(target.skeleton_id());
  v1::CreateRetargetProfileResponse created;
  ASSERT_TRUE(
      retarget->CreateRetargetProfile(Context().get(), create, &created).ok());
  const std::string profile_id = created.profile().profile_id();

  // The registry's profiles, as the gRPC API answers them.
  const HttpResponse list = HttpRequest(port_, "GET", "/api/retarget-profiles");
  ASSERT_EQ(list.status, 200) << list.body;
  v1::ListRetargetProfilesResponse listed;
  ASSERT_TRUE(pbutil::JsonStringToMessage(list.body, &listed).ok()) << list.body;
  ASSERT_EQ(listed.profiles_size(), 1);
  EXPECT_EQ(listed.profiles(0).profile_id(), profile_id);
  EXPECT_EQ(listed.profiles(0).source_skeleton_id(), source.skeleton_id());
  EXPECT_EQ(listed.profiles(0).target_skeleton_id(), target.skeleton_id());
  const HttpResponse got =
      HttpRequest(port_, "GET", "/api/retarget-profiles/" + profile_id);
  ASSERT_EQ(got.status, 200) << got.body;
  v1::GetRetargetProfileResponse from_http;
  ASSERT_TRUE(pbutil::JsonStringToMessage(got.body, &from_http).ok());
  v1::GetRetargetProfileRequest get;
  get.set_profile_id(profile_id);
  v1::GetRetargetProfileResponse alone;
  ASSERT_TRUE(retarget->GetRetargetProfile(Context().get(), get, &alone).ok());
  EXPECT_FALSE(alone.has_source_skeleton());
  EXPECT_FALSE(alone.has_target_skeleton());
  // The gateway asks for the profile's skeletons: the page draws them.
  get.set_include_skeletons(true);
  v1::GetRetargetProfileResponse from_grpc;
  ASSERT_TRUE(
      retarget->GetRetargetProfile(Context().get(), get, &from_grpc).ok());
  // EQUIVALENT: a -0.0 sent in binary reads as an unset 0 from JSON.
  const auto equivalent = [](const google::protobuf::Message& a,
                             const google::protobuf::Message& b) {
    pbutil::MessageDifferencer differ;
    differ.set_message_field_comparison(
        pbutil::MessageDifferencer::EQUIVALENT);
    std::string differences;
    differ.ReportDifferencesToString(&differences);
    EXPECT_TRUE(differ.Compare(a, b)) << differences;
  };
  equivalent(from_http, from_grpc);
  EXPECT_TRUE(pbutil::MessageDifferencer::Equals(from_grpc.profile(), alone.profile()));
  // Its skeletons are the ones registered when it was made.
  for (const auto& [id, kept] :
       {std::pair(source.skeleton_id(), &from_grpc.source_skeleton()),
        std::pair(target.skeleton_id(), &from_grpc.target_skeleton())}) {
    v1::GetSkeletonRequest request;
    request.set_skeleton_id(id);
    v1::GetSkeletonResponse registered;
    ASSERT_TRUE(server_.stub->GetSkeleton(Context().get(), request, &registered).ok());
    EXPECT_GT(kept->joints_size(), 20);
    EXPECT_TRUE(pbutil::MessageDifferencer::Equals(*kept, registered.skeleton())) << id;
  }
  const HttpResponse unknown =
      HttpRequest(port_, "GET", "/api/retarget-profiles/abc");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_THAT(unknown.body, HasSubstr("profile_id"));
  EXPECT_EQ(
      HttpRequest(port_, "POST", "/api/retarget-profiles", kJson, "{}").status,
      405);

  auto context = Context();
  auto stream = retarget->RetargetStream(context.get());
  auto frame_request = [&](int frame) {
    v1::RetargetRequest request;
    request.set_profile_id(profile_id);
    request.set_sequence(frame);
    request.set_frame_time_s(source.frame_time_s());
    *request.mutable_source() = source.motion(frame);
    return request;
  };
  v1::RetargetResponse response;
  // Listed as a retarget from the start, before any frame succeeds.
  v1::RetargetRequest unknown_profile = frame_request(1);
  unknown_profile.set_profile_id("abc");
  ASSERT_TRUE(stream->Write(unknown_profile));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_THAT(response.error().message(), HasSubstr("profile_id"));
  const HttpResponse failing = HttpRequest(port_, "GET", "/api/streams");
  EXPECT_THAT(failing.body, HasSubstr("\"kind\":\"retarget\"")) << failing.body;
  ASSERT_TRUE(stream->Write(frame_request(1)));
  ASSERT_TRUE(stream->Read(&response));

  const HttpResponse streams = HttpRequest(port_, "GET", "/api/streams");
  ASSERT_EQ(streams.status, 200) << streams.body;
  const google::protobuf::Struct open_streams = ParseJson(streams.body);
  const auto& entry = open_streams.fields()
                          .at("streams")
                          .list_value()
                          .values(0)
                          .struct_value()
                          .fields();
  EXPECT_EQ(entry.at("kind").string_value(), "retarget");
  EXPECT_EQ(entry.at("profileId").string_value(), profile_id);
  EXPECT_EQ(entry.at("sourceSkeletonId").string_value(), source.skeleton_id());
  EXPECT_EQ(entry.at("skeletonId").string_value(), target.skeleton_id());
  const int stream_id = static_cast<int>(entry.at("id").number_value());

  WatchClient watcher(port_, absl::StrCat("stream=", stream_id));
  std::vector<std::string> messages;
  for (int frame = 2; frame < 40 && messages.empty(); ++frame) {
    ASSERT_TRUE(stream->Write(frame_request(frame)));
    ASSERT_TRUE(stream->Read(&response));
    messages = watcher.Messages();
    if (messages.empty()) absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(messages.empty());
  const int last = 50;
  ASSERT_TRUE(stream->Write(frame_request(last)));
  ASSERT_TRUE(stream->Read(&response));
  watcher.Expect([](const std::vector<std::string>& m) {
    return m.back().find("\"sequence\":50,") != std::string::npos;
  });
  messages = watcher.WaitFor();
  const google::protobuf::Struct frame = ParseJson(messages.back());
  EXPECT_EQ(frame.fields().at("kind").string_value(), "retarget");
  EXPECT_EQ(frame.fields().at("sequence").number_value(), last);
  EXPECT_EQ(frame.fields().at("profileId").string_value(), profile_id);
  EXPECT_EQ(frame.fields().at("sourceSkeletonId").string_value(),
            source.skeleton_id());
  EXPECT_EQ(frame.fields().at("skeletonId").string_value(),
            target.skeleton_id());

  // The source pose as sent (its quaternions normalised), root translated.
  const v1::Pose& sent = source.motion(last);
  const std::vector<double> source_rotations = Numbers(frame, "sourceRotations");
  ASSERT_EQ(source_rotations.size(), 4u * sent.rotations_size());
  for (int j = 0; j < sent.rotations_size(); ++j) {
    const v1::Quat& q = sent.rotations(j);
    const double norm = std::sqrt(q.w() * q.w() + q.x() * q.x() +
                                  q.y() * q.y() + q.z() * q.z());
    const double expected[4] = {q.w(), q.x(), q.y(), q.z()};
    for (int c = 0; c < 4; ++c) {
      EXPECT_NEAR(source_rotations[4 * j + c], expected[c] / norm, 1e-12)
          << "source joint " << j;
    }
  }
  const std::vector<double> source_translations =
      Numbers(frame, "sourceTranslations");
  ASSERT_EQ(source_translations.size(), 3u * sent.rotations_size());
  EXPECT_EQ(source_translations[0], sent.root_translation().x());
  EXPECT_EQ(source_translations[1], sent.root_translation().y());
  EXPECT_EQ(source_translations[2], sent.root_translation().z());

  // The target pose as answered, bit for bit.
  const v1::Pose& answered = response.target();
  const std::vector<double> rotations = Numbers(frame, "rotations");
  const std::vector<double> translations = Numbers(frame, "translations");
  ASSERT_EQ(rotations.size(), 4u * answered.rotations_size());
  for (int j = 0; j < answered.rotations_size(); ++j) {
    const v1::Quat& q = answered.rotations(j);
    EXPECT_EQ(rotations[4 * j + 0], q.w()) << "joint " << j;
    EXPECT_EQ(rotations[4 * j + 1], q.x()) << "joint " << j;
    EXPECT_EQ(rotations[4 * j + 2], q.y()) << "joint " << j;
    EXPECT_EQ(rotations[4 * j + 3], q.z()) << "joint " << j;
  }
  EXPECT_EQ(translations[0], answered.root_translation().x());
  EXPECT_EQ(translations[1], answered.root_translation().y());
  EXPECT_EQ(translations[2], answered.root_translation().z());

  // The limb goals: hands and feet of the target, met where the response
  // says they were, by the test's own forward kinematics of the frame.
  SkeletonDef def;
  ASSERT_TRUE(FromProto(target.skeleton(), &def).ok());
  const Skeleton skeleton = *Skeleton::Create(def);
  Pose pose = RestPose(skeleton);
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    pose.local[j].rotation =
        Eigen::Quaterniond(rotations[4 * j], rotations[4 * j + 1],
                           rotations[4 * j + 2], rotations[4 * j + 3]);
    pose.local[j].translation = Eigen::Vector3d(
        translations[3 * j], translations[3 * j + 1], translations[3 * j + 2]);
  }
  const testing::IndependentGlobals globals = testing::IndependentFk(skeleton, pose);
  std::vector<std::string> effectors;
  int reached = 0;
  for (const auto& value : frame.fields().at("goals").list_value().values()) {
    const auto& goal = value.struct_value().fields();
    const int effector = static_cast<int>(goal.at("effector").number_value());
    ASSERT_GE(effector, 0);
    ASSERT_LT(effector, skeleton.num_joints());
    effectors.push_back(skeleton.joint(effector).name);
    const auto& t = goal.at("target").list_value();
    const Eigen::Vector3d at(t.values(0).number_value(),
                             t.values(1).number_value(),
                             t.values(2).number_value());
    const double error = (globals.position[effector] - at).norm();
    EXPECT_NEAR(error, goal.at("positionError").number_value(), 1e-9)
        << effectors.back();
    if (goal.at("reached").bool_value()) {
      ++reached;
      EXPECT_LT(error, 1e-3) << effectors.back();
    }
  }
  // The profile's own report names the target's hands and feet.
  std::vector<std::string> limbs;
  for (const v1::RoleMapping& m : from_grpc.profile().target().roles()) {
    if (m.role() == "left.foot" || m.role() == "right.foot" ||
        m.role() == "left.hand" || m.role() == "right.hand") {
      limbs.push_back(m.joint());
    }
  }
  ASSERT_EQ(limbs.size(), 4u);
  EXPECT_THAT(effectors, ::testing::UnorderedElementsAreArray(limbs));
  EXPECT_EQ(reached, response.left_foot().reached() +
                         response.right_foot().reached() +
                         response.left_hand().reached() +
                         response.right_hand().reached());
  EXPECT_GE(reached, 2);

  stream->WritesDone();
  while (stream->Read(&response)) {}
  EXPECT_TRUE(stream->Finish().ok());
  watcher.Expect([](const std::vector<std::string>& m) {
    return m.back().find("\"ended\":true") != std::string::npos;
  });
  EXPECT_THAT(watcher.WaitFor().back(), HasSubstr("\"ended\":true"));

  // With both skeletons deleted from the registry, the profile still
  // retargets between its copies, and the gateway still serves them.
  for (const std::string& id : {source.skeleton_id(), target.skeleton_id()}) {
    v1::DeleteSkeletonRequest request;
    request.set_skeleton_id(id);
    v1::DeleteSkeletonResponse deleted;
    ASSERT_TRUE(server_.stub->DeleteSkeleton(Context().get(), request, &deleted).ok());
    EXPECT_EQ(HttpRequest(port_, "GET", "/api/skeletons/" + id).status, 404);
  }
  const HttpResponse kept =
      HttpRequest(port_, "GET", "/api/retarget-profiles/" + profile_id);
  ASSERT_EQ(kept.status, 200) << kept.body;
  v1::GetRetargetProfileResponse kept_http;
  ASSERT_TRUE(pbutil::JsonStringToMessage(kept.body, &kept_http).ok());
  equivalent(kept_http, from_grpc);
}

TEST_F(ViewerTest, AWatchOfNoStreamIsRefusedInTheSocket) {
  WatchClient watcher(port_, "stream=12345");
  watcher.Expect([](const std::vector<std::string>& m) { return !m.empty(); });
  const std::vector<std::string> messages = watcher.WaitFor();
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_THAT(messages[0], HasSubstr("no open stream '12345'"));
}

TEST(ViewerLimitsTest, WatchersAreBoundedByHttpMaxWatchers) {
  ServerOptions options = ViewerOptions();
  options.http_max_watchers = 1;
  TestServer server(options);
  const std::string id =
      MustRegister(*server.stub, testing::ToWire(testing::HumanoidDef(), "humanoid"));
  auto context = Context();
  std::unique_ptr<Stream> stream = server.stub->SolveStream(context.get());
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Write(ArmFrame(id, 1)));
  ASSERT_TRUE(stream->Read(&response));
  const int port = server.server->http_port();

  WatchClient first(port, "stream=1");
  absl::SleepFor(absl::Milliseconds(200));  // Accepted and ready.
  WatchClient second(port, "stream=1");
  second.Expect([](const std::vector<std::string>& m) { return !m.empty(); });
  const std::vector<std::string> refused = second.WaitFor();
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_THAT(refused[0], HasSubstr("too many watchers (--http_max_watchers=1)"));
  // The first one still gets frames.
  first.Expect([](const std::vector<std::string>& m) { return !m.empty(); });
  ASSERT_TRUE(stream->Write(ArmFrame(id, 2)));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_FALSE(first.WaitFor().empty());
  stream->WritesDone();
  while (stream->Read(&response)) {}
  EXPECT_TRUE(stream->Finish().ok());

  options.http_max_watchers = options.http_threads;
  const absl::StatusOr<std::unique_ptr<ReachServer>> bad = ReachServer::Start(options);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr(absl::StrCat("--http_max_watchers=", options.http_threads,
                                     " must be less than --http_threads=",
                                     options.http_threads)));
}

TEST(ViewerAuthTest, StreamsAreVisibleToTheirOwnerAndAdmins) {
  const std::filesystem::path dir = testing::TempDir("viewer-streams");
  testing::WriteFile(dir / "tokens", TokenLine("alice", "t-alice", "solve") +
                                         TokenLine("bob", "t-bob", "register") +
                                         TokenLine("ops", "t-admin", "admin"));
  ServerOptions options = ViewerOptions();
  options.auth_tokens_file = (dir / "tokens").string();
  TestServer server(options);
  const int port = server.server->http_port();
  v1::RegisterSkeletonRequest registration;
  *registration.mutable_skeleton() = testing::ToWire(testing::HumanoidDef(), "humanoid");
  v1::RegisterSkeletonResponse registered;
  auto register_context = Context();
  register_context->AddMetadata("authorization", "Bearer t-bob");
  ASSERT_TRUE(server.stub->RegisterSkeleton(register_context.get(), registration,
                                            &registered).ok());

  auto context = Context();
  context->AddMetadata("authorization", "Bearer t-alice");
  std::unique_ptr<Stream> stream = server.stub->SolveStream(context.get());
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Write(ArmFrame(registered.skeleton_id(), 1)));
  ASSERT_TRUE(stream->Read(&response));

  auto list = [&](const std::string& token) {
    return HttpRequest(port, "GET", "/api/streams",
                       {{"Authorization", "Bearer " + token}});
  };
  EXPECT_EQ(HttpRequest(port, "GET", "/api/streams").status, 401);
  EXPECT_EQ(list("nope").status, 401);
  EXPECT_THAT(list("t-alice").body, HasSubstr("\"owner\":\"alice\""));
  EXPECT_THAT(list("t-admin").body, HasSubstr("\"owner\":\"alice\""));
  const HttpResponse bobs = list("t-bob");
  EXPECT_EQ(bobs.status, 200);
  EXPECT_THAT(bobs.body, HasSubstr("\"streams\":[]"));

  // Watching: the token in the query (a browser cannot set the header).
  WatchClient bob(port, "stream=1&access_token=t-bob");
  bob.Expect([](const std::vector<std::string>& m) { return !m.empty(); });
  EXPECT_THAT(bob.WaitFor().at(0), HasSubstr("may watch"));
  {
    // Without a token: refused before the handshake (a socket refused in
    // band would hold a worker until it closed).
    char error[256] = "";
    mg_connection* nobody = mg_connect_websocket_client(
        "127.0.0.1", port, 0, error, sizeof(error), "/api/watch?stream=1",
        nullptr, nullptr, nullptr, nullptr);
    EXPECT_EQ(nobody, nullptr);
    if (nobody != nullptr) mg_close_connection(nobody);
  }
  WatchClient alice(port, "stream=1&access_token=t-alice");
  alice.Expect([](const std::vector<std::string>& m) { return !m.empty(); });
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(stream->Write(ArmFrame(registered.skeleton_id(), 2)));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_THAT(alice.WaitFor().at(0), HasSubstr("\"rotations\""));
  stream->WritesDone();
  while (stream->Read(&response)) {}
  EXPECT_TRUE(stream->Finish().ok());
}

}  // namespace
}  // namespace reach
