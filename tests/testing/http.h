// A minimal HTTP/1.0 client over real TCP to 127.0.0.1, for tests of the
// server's HTTP endpoints (/metrics, the viewer): one request per
// connection, read until the server closes it.
#ifndef REACH_TESTS_TESTING_HTTP_H_
#define REACH_TESTS_TESTING_HTTP_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace reach::testing {

// A TCP connection to 127.0.0.1:port, or -1.
int Connect(int port);

// Reads until the peer closes or `timeout` passes; whether it closed.
bool ReadUntilClosed(int fd, absl::Duration timeout, std::string* out);

struct HttpResponse {
  int status = 0;  // 0: no complete response within the timeout.
  std::string head;  // Status line and headers.
  std::string body;
};

// Sends `method path` with `headers` (and `body` with its Content-Length
// when not empty) and returns the response.
HttpResponse HttpRequest(
    int port, const std::string& method, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& headers = {},
    const std::string& body = "", absl::Duration timeout = absl::Seconds(30));

// GET `path`; the whole response (status line, headers, body), or "" if it
// did not complete within `timeout`.
std::string HttpGet(int port, const std::string& path, absl::Duration timeout);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_HTTP_H_
