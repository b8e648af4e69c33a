#include "tests/testing/http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace reach::testing {

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

namespace {

std::string Exchange(int port, const std::string& request,
                     absl::Duration timeout) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  std::string response;
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n = write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  // A server may answer (an error) before reading the whole request.
  if (!ReadUntilClosed(fd, timeout, &response)) response.clear();
  close(fd);
  return response;
}

}  // namespace

HttpResponse HttpRequest(
    int port, const std::string& method, const std::string& path,
    const std::vector<std::pair<std::string, std::string>>& headers,
    const std::string& body, absl::Duration timeout) {
  std::string request = absl::StrCat(method, " ", path, " HTTP/1.0\r\n");
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&request, name, ": ", value, "\r\n");
  }
  if (!body.empty()) {
    absl::StrAppend(&request, "Content-Length: ", body.size(), "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  const std::string raw = Exchange(port, request, timeout);
  HttpResponse response;
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos) return response;
  response.head = raw.substr(0, end);
  response.body = raw.substr(end + 4);
  const size_t space = response.head.find(' ');
  if (space != std::string::npos) {
    response.status = std::atoi(response.head.c_str() + space + 1);
  }
  return response;
}

std::string HttpGet(int port, const std::string& path, absl::Duration timeout) {
  return Exchange(port, absl::StrCat("GET ", path, " HTTP/1.0\r\n\r\n"),
                  timeout);
}

}  // namespace reach::testing
