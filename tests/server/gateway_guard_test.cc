// The viewer's HTTP gateway against requests from outside, over real TCP
// against a real server (issue 39): header bytes gRPC would abort on,
// cross-origin pages, DNS rebinding, tokens checked before bodies, idle
// sockets that would hold every worker, and listen addresses that slip past
// the loopback checks.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/http.h"
#include "tests/testing/models.h"
#include "tests/testing/pki.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Connect;
using ::reach::testing::Context;
using ::reach::testing::HttpRequest;
using ::reach::testing::HttpResponse;
using ::reach::testing::MustRegister;
using ::reach::testing::ReadUntilClosed;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::reach::testing::TokenLine;
using ::testing::HasSubstr;
using ::testing::Not;

using Headers = std::vector<std::pair<std::string, std::string>>;

ServerOptions GatewayOptions() {
  ServerOptions options = TestServerOptions();
  options.http_address = "127.0.0.1:0";
  return options;
}

// The server still answers gRPC: the process is alive and its port open.
void ExpectAlive(TestServer& server, const std::string& authorization) {
  v1::ListSkeletonsRequest request;
  v1::ListSkeletonsResponse response;
  std::unique_ptr<grpc::ClientContext> context = Context();
  if (!authorization.empty()) context->AddMetadata("authorization", authorization);
  const grpc::Status status =
      server.stub->ListSkeletons(context.get(), request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
}

bool WriteAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + sent, bytes.size() - sent);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// A WebSocket handshake for /api/watch?QUERY, by hand; the raw answer
// (status line and, when accepted, the first frames) read until the server
// closes or `timeout` passes. `closed`: whether it closed.
std::string WatchHandshake(int port, const std::string& query,
                           const Headers& headers, absl::Duration timeout,
                           bool* closed) {
  const int fd = Connect(port);
  EXPECT_GE(fd, 0);
  std::string request = absl::StrCat(
      "GET /api/watch?", query,
      " HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n");
  for (const auto& [name, value] : headers) {
    absl::StrAppend(&request, name, ": ", value, "\r\n");
  }
  absl::StrAppend(&request, "\r\n");
  EXPECT_TRUE(WriteAll(fd, request));
  std::string answer;
  *closed = ReadUntilClosed(fd, timeout, &answer);
  close(fd);
  return answer;
}

// Issue 39, 1: a byte >= 0x80 in Authorization was copied into gRPC
// metadata, and gRPC's assertion aborted the process. Every gRPC-backed
// route, with auth off and on.
TEST(GatewayGuardTest, ANonAsciiTokenIsA400NamingTheHeaderOnEveryRoute) {
  for (const bool with_auth : {false, true}) {
    SCOPED_TRACE(with_auth ? "auth on" : "auth off");
    ServerOptions options = GatewayOptions();
    const std::filesystem::path dir = testing::TempDir("gateway-ascii");
    if (with_auth) {
      testing::WriteFile(dir / "tokens",
                         TokenLine("viewer", "t-solve", "solve"));
      options.auth_tokens_file = (dir / "tokens").string();
    }
    TestServer server(options);
    const int port = server.server->http_port();
    for (const std::string& value :
         {std::string("Bearer \xc3\xa9"), std::string("Bearer t-solve\x80"),
          std::string("Bearer t-solve\xe2\x80\x8b"), std::string("\xff")}) {
      for (const auto& [method, path] :
           std::vector<std::pair<std::string, std::string>>{
               {"GET", "/api/skeletons"},
               {"GET", "/api/skeletons/abc"},
               {"GET", "/api/retarget-profiles"},
               {"GET", "/api/retarget-profiles/abc"},
               {"GET", "/api/streams"},
               {"POST", "/api/solve"}}) {
        const HttpResponse r = HttpRequest(
            port, method, path,
            {{"Authorization", value}, {"Content-Type", "application/json"}},
            method == "POST" ? "{}" : "");
        EXPECT_EQ(r.status, 400) << method << " " << path;
        EXPECT_THAT(r.body, HasSubstr("Authorization: byte 0x")) << path;
        EXPECT_THAT(r.body, HasSubstr("INVALID_ARGUMENT")) << path;
      }
    }
    // civetweb refuses control bytes in a header itself.
    for (const char* control : {"Bearer \x7f", "Bearer a\tb", "Bearer \x01"}) {
      EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons",
                            {{"Authorization", control}})
                    .status,
                400);
    }
    // The same bytes in the query's access_token (a WebSocket's token).
    const HttpResponse q =
        HttpRequest(port, "GET", "/api/streams?access_token=%C3%A9");
    EXPECT_EQ(q.status, 400);
    EXPECT_THAT(q.body, HasSubstr("access_token: byte 0xc3"));
    ExpectAlive(server, with_auth ? "Bearer t-solve" : "");
    // A good request after all of them.
    const HttpResponse ok = HttpRequest(port, "GET", "/api/skeletons",
                                        {{"Authorization", "Bearer t-solve"}});
    EXPECT_EQ(ok.status, 200) << ok.body;
  }
}

// civetweb's defaults granted every origin: Access-Control-Allow-Origin *
// on every answer, and preflights echoing whatever they asked.
TEST(GatewayGuardTest, NoCrossOriginGrantsUnlessConfigured) {
  TestServer server(GatewayOptions());
  const int port = server.server->http_port();
  const HttpResponse preflight = HttpRequest(
      port, "OPTIONS", "/api/solve",
      {{"Origin", "http://evil.example"},
       {"Access-Control-Request-Method", "POST"},
       {"Access-Control-Request-Headers", "authorization,content-type"}});
  EXPECT_NE(preflight.status, 200);
  EXPECT_NE(preflight.status, 204);
  EXPECT_THAT(preflight.head, Not(HasSubstr("Access-Control-Allow")));

  // A page elsewhere is refused outright (a simple GET or form POST needs
  // no preflight, so the grant's absence alone would not stop it).
  for (const auto& [method, path] :
       std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/skeletons"}, {"POST", "/api/solve"}, {"GET", "/"}}) {
    const HttpResponse r =
        HttpRequest(port, method, path,
                    {{"Origin", "http://evil.example"},
                     {"Content-Type", "application/json"}},
                    method == "POST" ? "{}" : "");
    EXPECT_EQ(r.status, 403) << path;
    EXPECT_THAT(r.body, HasSubstr("Origin: 'http://evil.example'")) << path;
    EXPECT_THAT(r.head, Not(HasSubstr("Access-Control-Allow"))) << path;
  }
  EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons",
                        {{"Origin", "null"}}).status,
            403);

  // The viewer's own page: same origin as the Host it was loaded from.
  const std::string self = absl::StrCat("127.0.0.1:", port);
  const HttpResponse own =
      HttpRequest(port, "GET", "/api/skeletons",
                  {{"Host", self}, {"Origin", "http://" + self}});
  EXPECT_EQ(own.status, 200) << own.body;
  EXPECT_THAT(own.head, Not(HasSubstr("Access-Control-Allow")));
  // Another port of the same host is another origin.
  EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons",
                        {{"Host", self}, {"Origin", "http://127.0.0.1:1"}})
                .status,
            403);
}

TEST(GatewayGuardTest, ListedOriginsAreGrantedAndOnlyThey) {
  ServerOptions options = GatewayOptions();
  options.http_allowed_origins = {"http://tool.example:8000"};
  TestServer server(options);
  const int port = server.server->http_port();
  const HttpResponse preflight =
      HttpRequest(port, "OPTIONS", "/api/solve",
                  {{"Origin", "http://tool.example:8000"},
                   {"Access-Control-Request-Method", "POST"},
                   {"Access-Control-Request-Headers", "authorization"}});
  EXPECT_EQ(preflight.status, 204);
  EXPECT_THAT(preflight.head,
              HasSubstr("Access-Control-Allow-Origin: http://tool.example:8000"));
  EXPECT_THAT(preflight.head, HasSubstr("Access-Control-Allow-Methods: GET, POST"));
  EXPECT_THAT(preflight.head, Not(HasSubstr("*")));
  const HttpResponse get = HttpRequest(port, "GET", "/api/skeletons",
                                       {{"Origin", "http://tool.example:8000"}});
  EXPECT_EQ(get.status, 200);
  EXPECT_THAT(get.head,
              HasSubstr("Access-Control-Allow-Origin: http://tool.example:8000"));
  EXPECT_THAT(get.head, HasSubstr("Vary: Origin"));
  // A near miss is another origin.
  EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons",
                        {{"Origin", "http://tool.example:8001"}})
                .status,
            403);
  EXPECT_EQ(HttpRequest(port, "OPTIONS", "/api/solve",
                        {{"Origin", "http://tool.example"},
                         {"Access-Control-Request-Method", "POST"}})
                .status,
            403);
}

// DNS rebinding: a page on attacker.example rebinds its name to 127.0.0.1
// and calls the API same-origin; only the Host header tells.
TEST(GatewayGuardTest, ALoopbackViewerAnswersOnlyLoopbackHostNames) {
  TestServer server(GatewayOptions());
  const int port = server.server->http_port();
  for (const std::string& host :
       {absl::StrCat("attacker.example:", port), std::string("attacker.example"),
        absl::StrCat("127.0.0.1.attacker.example:", port)}) {
    const HttpResponse r = HttpRequest(
        port, "GET", "/api/skeletons",
        {{"Host", host}, {"Origin", "http://" + host}});
    EXPECT_EQ(r.status, 403) << host;
    EXPECT_THAT(r.body, HasSubstr("is not a loopback name")) << host;
    // Without an Origin (a same-origin GET) too.
    EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons", {{"Host", host}}).status,
              403)
        << host;
  }
  for (const std::string& host :
       {absl::StrCat("127.0.0.1:", port), absl::StrCat("localhost:", port),
        absl::StrCat("LOCALHOST:", port), std::string("127.0.0.1"),
        absl::StrCat("[::1]:", port)}) {
    EXPECT_EQ(HttpRequest(port, "GET", "/api/skeletons", {{"Host", host}}).status,
              200)
        << host;
  }
}

// A page on another origin watched a live stream: WebSockets carry Origin
// and Host too.
TEST(GatewayGuardTest, WatchesFromOtherOriginsAreRefusedBeforeTheHandshake) {
  TestServer server(GatewayOptions());
  const int port = server.server->http_port();
  const std::string self = absl::StrCat("127.0.0.1:", port);
  bool closed = false;
  std::string answer =
      WatchHandshake(port, "stream=1",
                     {{"Host", self}, {"Origin", "http://evil.example"}},
                     absl::Seconds(10), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(answer, Not(HasSubstr(" 101 ")));
  answer = WatchHandshake(port, "stream=1",
                          {{"Host", "attacker.example"},
                           {"Origin", "http://attacker.example"}},
                          absl::Seconds(10), &closed);
  EXPECT_TRUE(closed);
  EXPECT_THAT(answer, Not(HasSubstr(" 101 ")));
  // The viewer's own page is let in (and told there is no such stream).
  answer = WatchHandshake(port, "stream=1",
                          {{"Host", self}, {"Origin", "http://" + self}},
                          absl::Seconds(10), &closed);
  EXPECT_THAT(answer, HasSubstr(" 101 "));
  EXPECT_THAT(answer, HasSubstr("no open stream"));
}

// 16 unauthenticated upgrades that never answered the close held every
// worker for 75 s and more: a WebSocket that answers no ping is closed.
TEST(GatewayGuardTest, AWatcherThatNeverAnswersIsClosed) {
  const std::filesystem::path dir = testing::TempDir("gateway-ws");
  testing::WriteFile(dir / "tokens", TokenLine("viewer", "t-solve", "solve"));
  ServerOptions options = GatewayOptions();
  options.auth_tokens_file = (dir / "tokens").string();
  options.http_request_timeout = absl::Seconds(1);
  TestServer server(options);
  const int port = server.server->http_port();
  bool closed = false;
  // Without a token: refused before the handshake, and closed.
  std::string answer = WatchHandshake(port, "stream=1", {},
                                      absl::Seconds(30), &closed);
  EXPECT_THAT(answer, Not(HasSubstr(" 101 ")));
  EXPECT_TRUE(closed);
  // With a token, a watch of no stream is refused in the socket, then the
  // server's close frame, which this client never answers; nor the pings:
  // the server closes it (it kept it for as long as the client stayed).
  answer = WatchHandshake(port, "stream=1&access_token=t-solve", {},
                          absl::Seconds(30), &closed);
  EXPECT_THAT(answer, HasSubstr(" 101 "));
  EXPECT_THAT(answer, HasSubstr("no open stream"));
  EXPECT_TRUE(closed) << "still open after 30 s";
}

// Whether the server has not closed `fd` (nothing to read, or data).
bool StillOpen(int fd) {
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, 0) == 0) return true;
  char byte;
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

// Silent connections held the workers: every worker waited out a silent
// client before a scrape or a page was served.
TEST(GatewayGuardTest, IdleConnectionsDoNotBlockAnswers) {
  ServerOptions options = GatewayOptions();
  options.metrics_address = "127.0.0.1:0";
  options.http_request_timeout = absl::Seconds(60);
  TestServer server(options);
  const int http = server.server->http_port();
  const int metrics = server.server->metrics_port();
  std::vector<int> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(Connect(http));
    idle.push_back(Connect(metrics));
  }
  const HttpResponse scrape = HttpRequest(metrics, "GET", "/metrics");
  EXPECT_EQ(scrape.status, 200);
  const HttpResponse page = HttpRequest(http, "GET", "/api/skeletons");
  EXPECT_EQ(page.status, 200);
  // Both were answered while every idle socket was still held open: they
  // did not wait for workers the idle sockets freed by timing out.
  for (int fd : idle) {
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(StillOpen(fd));
    close(fd);
  }
}

TEST(GatewayGuardTest, IdleConnectionsAreShed) {
  ServerOptions options = GatewayOptions();
  options.http_request_timeout = absl::Seconds(1);
  TestServer server(options);
  std::vector<int> idle;
  for (int i = 0; i < 16; ++i) idle.push_back(Connect(server.server->http_port()));
  for (int fd : idle) {
    ASSERT_GE(fd, 0);
    EXPECT_TRUE(ReadUntilClosed(fd, absl::Seconds(30), nullptr));
    close(fd);
  }
}

// 4 x 15 MiB bodies without a token were read and parsed (784 MiB) before
// the token was checked: now the answer comes before the body is sent.
TEST(GatewayGuardTest, TheTokenIsCheckedBeforeTheBodyIsRead) {
  const std::filesystem::path dir = testing::TempDir("gateway-body");
  testing::WriteFile(dir / "tokens", TokenLine("viewer", "t-solve", "solve"));
  ServerOptions options = GatewayOptions();
  options.auth_tokens_file = (dir / "tokens").string();
  TestServer server(options);
  const int port = server.server->http_port();
  for (const std::string& authorization : {std::string(""), std::string("Bearer nope")}) {
    const int fd = Connect(port);
    ASSERT_GE(fd, 0);
    std::string head =
        "POST /api/solve HTTP/1.0\r\nContent-Type: application/json\r\n"
        "Content-Length: 15000000\r\n";
    if (!authorization.empty()) {
      absl::StrAppend(&head, "Authorization: ", authorization, "\r\n");
    }
    absl::StrAppend(&head, "\r\n{");
    ASSERT_TRUE(WriteAll(fd, head));
    // No more of the body is sent before the answer: it must not wait.
    std::string answer;
    char buffer[4096];
    while (answer.find("UNAUTHENTICATED") == std::string::npos) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      ASSERT_GT(n, 0) << answer;
      answer.append(buffer, static_cast<size_t>(n));
    }
    EXPECT_THAT(answer, HasSubstr(" 401 "));
    // Then the body trickles in; the server reads none of it (civetweb
    // would read it all, a worker held for as long as it trickles), and
    // closes.
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    bool closed = false;
    while (!closed && absl::Now() < give_up) {
      closed = send(fd, std::string(1024, ' ').data(), 1024, MSG_NOSIGNAL) < 0;
      if (!closed) {
        closed = ReadUntilClosed(fd, absl::Milliseconds(100), nullptr);
      }
    }
    close(fd);
    EXPECT_TRUE(closed) << "still open after 30 s of trickling";
  }
}

// civetweb takes comma lists: "127.0.0.1:X,0.0.0.0:Y" passed the loopback
// check and served on every address.
TEST(GatewayGuardTest, ListenAddressesAreOneLoopbackHostPort) {
  for (const char* address :
       {"127.0.0.1:0,0.0.0.0:0", "127.0.0.1:0s", "127.0.0.1:0r",
        "127.0.0.1:0+", "127.evil.example:0", ":0", "127.0.0.1"}) {
    ServerOptions options = GatewayOptions();
    options.http_address = address;
    absl::StatusOr<std::unique_ptr<ReachServer>> server =
        ReachServer::Start(options);
    EXPECT_FALSE(server.ok()) << address;
    EXPECT_THAT(std::string(server.status().message()),
                HasSubstr("--http_listen"))
        << address;
    options = GatewayOptions();
    options.metrics_address = address;
    server = ReachServer::Start(options);
    EXPECT_FALSE(server.ok()) << address;
    EXPECT_THAT(std::string(server.status().message()),
                HasSubstr("--metrics_listen"))
        << address;
  }
}

// Issue 39, 10: the viewer served the API in clear on a network address,
// and without a client certificate when the gRPC port asked for one.
TEST(GatewayGuardTest, ThePlainHttpViewerStaysOnLoopbackUnlessInsecure) {
  const std::filesystem::path dir = testing::TempDir("gateway-transport");
  testing::WriteFile(dir / "tokens", TokenLine("viewer", "t-solve", "solve"));
  ServerOptions options = GatewayOptions();
  options.http_address = "0.0.0.0:0";
  options.auth_tokens_file = (dir / "tokens").string();  // Tokens or not.
  absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("the viewer is plain HTTP"));
  options.insecure = true;
  server = ReachServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
  server->reset();

  // mTLS without tokens: the viewer would let anyone past the certificates.
  testing::Pki pki{dir};
  pki.MakeCa("ca");
  pki.MakeLeaf("server", "ca", "serverAuth");
  options = GatewayOptions();
  options.tls_cert = pki.PemPath("server");
  options.tls_key = pki.KeyPath("server");
  options.tls_client_ca = pki.PemPath("ca");
  server = ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("asks for no client certificate"));
  options.auth_tokens_file = (dir / "tokens").string();
  server = ReachServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status();
}

}  // namespace
}  // namespace reach
