// What no handler sees, against the real server on a loopback port:
// requests that do not parse, methods the server does not serve, and the calls
// of the health and reflection services, each answered with a useful status and
// counted once.
#include "server/call_interceptor.h"

#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "tests/server/raw_call.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::AwaitCounter;
using ::reach::testing::Context;
using ::reach::testing::CounterValue;
using ::reach::testing::RawUnaryCall;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

using Labels = std::map<std::string, std::string>;

Labels IkLabels(const std::string& method, const std::string& code = "") {
  Labels labels = {{"grpc_service", "reach.v1.IkService"},
                   {"grpc_method", method}};
  if (!code.empty()) labels["grpc_code"] = code;
  return labels;
}

// Varint bytes that never end: no message parses from them.
const std::string kGarbage("\xff\xff\xff\xff", 4);

TEST(CallInterceptorTest,
     UnparseableUnaryRequestsAreInvalidArgumentNamingTheType) {
  TestServer server;
  const std::pair<const char*, const char*> kMethods[] = {
      {"RegisterSkeleton", "reach.v1.RegisterSkeletonRequest"},
      {"GetSkeleton", "reach.v1.GetSkeletonRequest"},
      {"ListSkeletons", "reach.v1.ListSkeletonsRequest"},
      {"DeleteSkeleton", "reach.v1.DeleteSkeletonRequest"},
      {"Solve", "reach.v1.SolveRequest"},
  };
  for (const auto& [method, type] : kMethods) {
    const grpc::Status status = RawUnaryCall(
        server.channel, absl::StrCat("/reach.v1.IkService/", method), kGarbage);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << method << ": " << status.error_message();
    EXPECT_EQ(status.error_message(),
              absl::StrCat("request: not a valid ", type))
        << method;
  }
  // A proto3 string that is not UTF-8 does not parse either: skeleton_id
  // (field 1) = C3 28.
  const grpc::Status utf8 =
      RawUnaryCall(server.channel, "/reach.v1.IkService/Solve",
                   std::string("\x0a\x02\xc3\x28", 4));
  EXPECT_EQ(utf8.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(utf8.error_message(), "request: not a valid reach.v1.SolveRequest");
  // SolveBatch parses its own bytes and says where they went wrong.
  const grpc::Status batch =
      RawUnaryCall(server.channel, "/reach.v1.IkService/SolveBatch", kGarbage);
  EXPECT_EQ(batch.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(CallInterceptorTest, CallsRefusedBeforeTheHandlerAreCountedOnce) {
  ServerOptions options = TestServerOptions();
  options.max_message_bytes = 1024;
  TestServer server(options);
  Metrics& metrics = server.server->service().metrics();

  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(
        RawUnaryCall(server.channel, "/reach.v1.IkService/Solve", kGarbage)
            .error_code(),
        grpc::StatusCode::INVALID_ARGUMENT);
  }
  EXPECT_EQ(AwaitCounter(metrics, "grpc_server_handled_total",
                         IkLabels("Solve", "InvalidArgument"), 3),
            3);

  // Over --max_message_bytes: gRPC's core answers RESOURCE_EXHAUSTED before
  // any interceptor or handler sees the call (gRPC 1.51), so nothing counts
  // it; the point here is that nothing miscounts it either.
  v1::GetSkeletonRequest big;
  big.set_skeleton_id(std::string(2000, 'a'));
  v1::GetSkeletonResponse response;
  EXPECT_EQ(
      server.stub->GetSkeleton(Context().get(), big, &response).error_code(),
      grpc::StatusCode::RESOURCE_EXHAUSTED);

  // A call the handler answers is counted by the handler alone.
  v1::GetSkeletonRequest unknown;
  unknown.set_skeleton_id("0123");
  EXPECT_EQ(server.stub->GetSkeleton(Context().get(), unknown, &response)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);

  // One more refused call, then let every count land.
  EXPECT_EQ(RawUnaryCall(server.channel, "/reach.v1.IkService/Solve", kGarbage)
                .error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  AwaitCounter(metrics, "grpc_server_handled_total",
               IkLabels("Solve", "InvalidArgument"), 4);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(
      CounterValue(metrics, "grpc_server_started_total", IkLabels("Solve")), 4);
  EXPECT_EQ(
      CounterValue(metrics, "grpc_server_handled_total", IkLabels("Solve")), 4);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_started_total",
                         IkLabels("GetSkeleton")),
            1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_handled_total",
                         IkLabels("GetSkeleton", "NotFound")),
            1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_handled_total",
                         IkLabels("GetSkeleton")),
            1);
  // A request that never parsed was not received as a message.
  EXPECT_EQ(CounterValue(metrics, "grpc_server_msg_received_total",
                         IkLabels("Solve")),
            0);
}

TEST(CallInterceptorTest, UnknownMethodsAreUnimplementedNamingTheMethod) {
  TestServer server;
  Metrics& metrics = server.server->service().metrics();
  const grpc::Status status =
      RawUnaryCall(server.channel, "/reach.v1.IkService/Nope", "");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(status.error_message(), "unknown method /reach.v1.IkService/Nope");

  // A long name is cut, and never becomes a label.
  const std::string long_method = "/x.Y/" + std::string(3000, 'z');
  const grpc::Status cut = RawUnaryCall(server.channel, long_method, "");
  EXPECT_EQ(cut.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_THAT(cut.error_message(), HasSubstr("(3005 bytes)"));
  EXPECT_LT(cut.error_message().size(), 300u);

  const Labels unknown = {{"grpc_service", "unknown"},
                          {"grpc_method", "unknown"},
                          {"grpc_code", "Unimplemented"}};
  EXPECT_EQ(AwaitCounter(metrics, "grpc_server_handled_total", unknown, 2), 2);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_started_total",
                         {{"grpc_method", "unknown"}}),
            2);
}

TEST(CallInterceptorTest, HealthCallsAreCounted) {
  TestServer server;
  Metrics& metrics = server.server->service().metrics();
  auto health = grpc::health::v1::Health::NewStub(server.channel);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(Context().get(), request, &response).ok());
  request.set_service("nope");
  EXPECT_EQ(health->Check(Context().get(), request, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);

  const Labels check = {{"grpc_service", "grpc.health.v1.Health"},
                        {"grpc_method", "Check"},
                        {"grpc_type", "unary"}};
  Labels ok = check, not_found = check;
  ok["grpc_code"] = "OK";
  not_found["grpc_code"] = "NotFound";
  EXPECT_EQ(AwaitCounter(metrics, "grpc_server_handled_total", ok, 1), 1);
  EXPECT_EQ(AwaitCounter(metrics, "grpc_server_handled_total", not_found, 1),
            1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_started_total", check), 2);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_msg_received_total", check), 2);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_msg_sent_total", check), 1);
}

// One request, then the responses until the server finishes.
class RawBidiCall
    : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawBidiCall(const std::shared_ptr<grpc::Channel>& channel,
              const std::string& method, const std::string& bytes)
      : stub_(channel), context_(Context()) {
    grpc::Slice slice(bytes);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub_.PrepareBidiStreamingCall(context_.get(), method, grpc::StubOptions(),
                                   this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }

  // The status; the responses' bytes, concatenated, in *responses.
  grpc::Status Await(std::string* responses) {
    done_.WaitForNotification();
    *responses = responses_;
    return status_;
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    grpc::Slice slice;
    if (response_.DumpToSingleSlice(&slice).ok()) {
      responses_.append(reinterpret_cast<const char*>(slice.begin()),
                        slice.size());
    }
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    status_ = status;
    done_.Notify();
  }

 private:
  grpc::GenericStub stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  grpc::ByteBuffer request_, response_;
  std::string responses_;
  grpc::Status status_;
  absl::Notification done_;
};

TEST(CallInterceptorTest, ReflectionCallsAreCounted) {
  TestServer server;
  Metrics& metrics = server.server->service().metrics();
  // ServerReflectionRequest{list_services: ""} (field 7).
  RawBidiCall call(server.channel,
                   "/grpc.reflection.v1alpha.ServerReflection/"
                   "ServerReflectionInfo",
                   std::string("\x3a\x00", 2));
  std::string responses;
  const grpc::Status status = call.Await(&responses);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(responses, HasSubstr("reach.v1.IkService"));

  const Labels reflection = {
      {"grpc_service", "grpc.reflection.v1alpha.ServerReflection"},
      {"grpc_method", "ServerReflectionInfo"},
      {"grpc_type", "bidi_stream"}};
  Labels ok = reflection;
  ok["grpc_code"] = "OK";
  EXPECT_EQ(AwaitCounter(metrics, "grpc_server_handled_total", ok, 1), 1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_started_total", reflection), 1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_msg_received_total", reflection),
            1);
  EXPECT_EQ(CounterValue(metrics, "grpc_server_msg_sent_total", reflection), 1);
}

TEST(CallInterceptorTest, LongStatusMessagesAreCut) {
  TestServer server;
  // registry.cc echoes the id; whatever echoes it, the client gets a short
  // NOT_FOUND rather than RESOURCE_EXHAUSTED for trailers over its limit.
  v1::GetSkeletonRequest request;
  request.set_skeleton_id(std::string(1 << 20, 'a'));
  v1::GetSkeletonResponse response;
  const grpc::Status status =
      server.stub->GetSkeleton(Context().get(), request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LE(status.error_message().size(), kMaxStatusMessageBytes + 32);
  EXPECT_THAT(status.error_message(), HasSubstr("skeleton_id"));
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

double TransportCalls(Metrics& metrics) {
  for (const prometheus::MetricFamily& f : metrics.process_collector()->Collect()) {
    if (f.name == "reach_transport_calls_total") return f.metric[0].counter.value;
  }
  return -1;
}

TEST(CallInterceptorTest, CallsGrpcRefusesAsOversizeAreCountedByTheTransport) {
  ServerOptions options = TestServerOptions();
  options.max_message_bytes = 1 << 20;
  TestServer server(options);
  Metrics& metrics = server.server->service().metrics();
  v1::SolveResponse response;
  // A normal call: seen by the handler and the transport alike.
  v1::SolveRequest small;
  small.set_skeleton_id("nope");
  ASSERT_EQ(server.stub->Solve(Context().get(), small, &response).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const double handled_before =
      AwaitCounter(metrics, "grpc_server_started_total", {}, 1);
  const double transport_before = TransportCalls(metrics);
  ASSERT_GE(transport_before, handled_before);
  // Three over --max_message_bytes: gRPC's core answers them; no handler
  // or interceptor sees them.
  v1::SolveRequest big;
  big.set_skeleton_id(std::string(2 << 20, 'x'));
  for (int i = 0; i < 3; ++i) {
    const grpc::Status status =
        server.stub->Solve(Context().get(), big, &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_THAT(status.error_message(), HasSubstr("larger than max"));
  }
  EXPECT_EQ(CounterValue(metrics, "grpc_server_started_total", {}),
            handled_before);
  EXPECT_EQ(TransportCalls(metrics), transport_before + 3);
}

}  // namespace
}  // namespace reach
