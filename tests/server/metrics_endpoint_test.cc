// /metrics over real TCP: a connection that sends nothing must not keep a
// scrape waiting (civetweb gives each connection a worker thread until its
// request arrives or request_timeout_ms passes).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::testing::HasSubstr;

// A TCP connection to 127.0.0.1:port, or -1.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) !=
      0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes or `timeout` passes; whether it closed.
bool ReadUntilClosed(int fd, absl::Duration timeout, std::string* out) {
  const absl::Time give_up = absl::Now() + timeout;
  char buffer[65536];
  while (true) {
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <=
        0) {
      return false;
    }
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) return true;
    if (out != nullptr) out->append(buffer, static_cast<size_t>(n));
  }
}

// GET `path` with HTTP/1.0 (the server closes after the response); the
// whole response, or "" if it did not complete within `timeout`.
std::string HttpGet(int port, const std::string& path, absl::Duration timeout) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n");
  std::string response;
  if (write(fd, request.data(), request.size()) !=
          static_cast<ssize_t>(request.size()) ||
      !ReadUntilClosed(fd, timeout, &response)) {
    response.clear();
  }
  close(fd);
  return response;
}

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
