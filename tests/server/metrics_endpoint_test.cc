// /metrics over real TCP: a connection that sends nothing must not keep a
// scrape waiting (civetweb gives each connection a worker thread until its
// request arrives or request_timeout_ms passes).
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/http.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Connect;
using ::reach::testing::HttpGet;
using ::reach::testing::ReadUntilClosed;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

TEST(MetricsEndpointTest, AnIdleConnectionDoesNotHoldAScrape) {
  ServerOptions options = TestServerOptions();
  options.metrics_address = "127.0.0.1:0";
  TestServer server(options);
  const int port = server.server->metrics_port();
  ASSERT_GT(port, 0);

  // Connected, sends nothing. Before: it held the only worker ~30 s.
  const int idle = Connect(port);
  ASSERT_GE(idle, 0);
  absl::SleepFor(absl::Milliseconds(100));  // Let a worker pick it up.
  // Hang guard only: the scrape answers at once.
  const std::string response = HttpGet(port, "/metrics", absl::Seconds(10));
  EXPECT_THAT(response, HasSubstr("200 OK"));
  EXPECT_THAT(response, HasSubstr("grpc_server_started_total"));

  // And the idle connection is dropped after a short request timeout, not
  // held for half a minute.
  EXPECT_TRUE(ReadUntilClosed(idle, absl::Seconds(15), nullptr));
  close(idle);
}

}  // namespace
}  // namespace reach
