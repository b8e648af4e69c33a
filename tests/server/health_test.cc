// grpc.health.v1.Health on the real server: the names it knows, Watch
// following the serving state, and an open Watch not holding shutdown.
#include "server/health.h"

#include <memory>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::reach::testing::Context;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

grpc::Status Check(grpc::health::v1::Health::Stub& health,
                   const std::string& service, HealthCheckResponse* response) {
  HealthCheckRequest request;
  request.set_service(service);
  return health.Check(Context().get(), request, response);
}

TEST(HealthTest, CheckKnowsTheServerAndIkService) {
  TestServer server;
  auto health = grpc::health::v1::Health::NewStub(server.channel);
  HealthCheckResponse response;
  for (const char* service : {"", "reach.v1.IkService", "reach.v1.RetargetService"}) {
    ASSERT_TRUE(Check(*health, service, &response).ok()) << service;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }
  server.server->SetServing(false);
  for (const char* service : {"", "reach.v1.IkService", "reach.v1.RetargetService"}) {
    ASSERT_TRUE(Check(*health, service, &response).ok()) << service;
    EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING) << service;
  }
  server.server->SetServing(true);
  ASSERT_TRUE(Check(*health, "reach.v1.IkService", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  const grpc::Status unknown = Check(*health, "reach.v1.Nope", &response);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("'reach.v1.Nope'"));
}

TEST(HealthTest, WatchFollowsTheServingState) {
  TestServer server;
  auto health = grpc::health::v1::Health::NewStub(server.channel);
  auto context = Context();
  HealthCheckRequest request;
  request.set_service("reach.v1.IkService");
  auto watch = health->Watch(context.get(), request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  server.server->SetServing(false);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  server.server->SetServing(true);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  // An unknown name is SERVICE_UNKNOWN, and the call stays open.
  auto other_context = Context();
  request.set_service("reach.v1.Nope");
  auto other = health->Watch(other_context.get(), request);
  ASSERT_TRUE(other->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);

  context->TryCancel();
  other_context->TryCancel();
  while (watch->Read(&response)) {
  }
  while (other->Read(&response)) {
  }
  EXPECT_EQ(watch->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(other->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST(HealthTest, AnOpenWatchDoesNotHoldShutdown) {
  ServerOptions options = TestServerOptions();
  options.shutdown_grace = absl::Seconds(20);
  TestServer server(options);
  auto health = grpc::health::v1::Health::NewStub(server.channel);
  auto context = Context(60);
  HealthCheckRequest request;  // The whole server.
  auto watch = health->Watch(context.get(), request);
  HealthCheckResponse response;
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_EQ(server.server->health().watches(), 1);

  const absl::Time start = absl::Now();
  std::thread shutdown([&server] { server.server->Shutdown(); });
  // The watcher learns the server is going, then the call ends.
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&response));
  const grpc::Status status = watch->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  shutdown.join();
  // Well inside the 20 s grace a held shutdown would take.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

}  // namespace
}  // namespace reach
