// The browser viewer's endpoint (--http_listen): the page and its static
// files (viewer/assets.h), and a JSON gateway the page calls, which goes
// through the server's own gRPC service over an in-process channel, so a
// call from the page is authenticated, limited, solved and counted in the
// metrics exactly as a gRPC client's:
//
//   GET  /api/skeletons[?page_token=T]  ListSkeletons
//   GET  /api/skeletons/ID              GetSkeleton
//   GET  /api/retarget-profiles[?page_token=T]
//                                       ListRetargetProfiles
//   GET  /api/retarget-profiles/ID      GetRetargetProfile
//   POST /api/solve                     Solve (body: a SolveRequest in JSON)
//
// and, from the server itself, its live SolveStreams and RetargetStreams
// (stream_watch.h):
//
//   GET  /api/streams                   the open streams the caller may
//                                       watch: its own (a token's, or
//                                       without auth everyone's), an
//                                       admin's: all; each with its
//                                       kind ("solve" or "retarget"), and
//                                       a retarget's profile and source
//   WebSocket /api/watch?stream=ID[&access_token=T]
//                                       the stream's latest answered frame
//                                       (StreamFrameJson), sampled at most
//                                       60 times a second, latest wins;
//                                       {"stream": ID, "ended": true} when
//                                       it ends. A browser cannot set a
//                                       WebSocket's headers: the token
//                                       comes in the query.
//
// Bodies are the messages' proto3 JSON mapping (lowerCamelCase names).
//
// The HTTP API for programs (game engines, scripts) is under /api/v1
// (http_api.cc, docs/openapi.yaml): every IkService and RetargetService
// call, with the JSON of wire/api_json.h, and SolveStream and
// RetargetStream as WebSockets (/api/v1/solve-stream,
// /api/v1/retarget-stream: one request per text message, one answer per
// message in order). It goes through the same in-process gRPC service and
// the same checks as the routes above.
// The page sends the user's token as `Authorization: Bearer TOKEN`, which
// the gateway checks (visible ASCII only: anything else is a 400 naming the
// header, never passed to gRPC) and passes on as the call's metadata; the
// token is checked before a request's body is read. An error answers the
// HTTP status closest to the gRPC code with {"code": "INVALID_ARGUMENT",
// "message": "..."}. Static files need no token: they hold no data.
//
// Browsers: no cross-origin grants unless `allowed_origins` lists the
// origin (then preflights are answered and responses carry
// Access-Control-Allow-Origin for it). A request whose Origin header is
// neither this server's own (the Host it was sent to) nor listed is refused
// (403), WebSockets included, so a page elsewhere cannot watch a stream.
// On a loopback listen address a Host header must name a loopback host
// (localhost, 127.x.y.z, [::1]), so a DNS-rebinding page cannot reach the
// API through a name of its own.
//
// civetweb (Debian's libcivetweb, which prometheus-cpp's endpoint already
// uses) serves HTTP; each request holds one of `threads` workers while it
// runs, and a connection that sends nothing for `request_timeout` (or a
// WebSocket that answers none of its pings) is closed, so idle sockets are
// shed within a few seconds.
#ifndef REACH_SERVER_VIEWER_H_
#define REACH_SERVER_VIEWER_H_

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "reach/v1/ik_service.grpc.pb.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "server/auth.h"
#include "server/stream_watch.h"

struct mg_context;
struct mg_connection;

namespace reach {

struct ViewerOptions {
  std::string listen_address;  // host:port; port 0 picks a free port.
  // Requests served at once; an idle connection holds one until
  // request_timeout closes it.
  int threads = 128;
  // Largest request body (a Solve in JSON) the gateway reads.
  int max_body_bytes = 4 * 1024 * 1024;
  // Deadline of each gateway call.
  absl::Duration call_timeout = absl::Seconds(10);
  // WebSockets watching streams at once (each holds one of `threads`).
  int max_watchers = 8;
  // Frames sent to each watcher per second, at most.
  int watch_fps = 60;
  // Origins ("https://tool.example:8443") granted cross-origin access
  // (CORS); empty: none.
  std::vector<std::string> allowed_origins;
  // WebSockets streaming solves or retargets (/api/v1/*-stream) at once;
  // each holds one of `threads`.
  int max_streams = 8;
  // A connection silent this long is closed; a WebSocket is pinged every
  // third of it and closed when none of the pings is answered.
  absl::Duration request_timeout = absl::Seconds(5);
};

// Whether `header` (an Authorization value) may become gRPC metadata:
// visible ASCII and spaces only. Otherwise InvalidArgument naming it.
absl::Status CheckHeaderValue(absl::string_view name, absl::string_view header);

class Viewer {
 public:
  // Starts serving on options.listen_address; calls go to `channel`, the
  // streams come from `streams`, /api/streams and /api/watch callers are
  // checked by `auth` (both outlive the viewer).
  static absl::StatusOr<std::unique_ptr<Viewer>> Start(
      const ViewerOptions& options, std::shared_ptr<grpc::Channel> channel,
      const StreamWatch* streams, const TokenAuth* auth);
  ~Viewer();  // Stops serving; waits for requests in progress.

  int port() const { return port_; }

  // The origin to grant in Access-Control-Allow-Origin for a request with
  // Origin `origin`, or null when it is not in allowed_origins.
  const std::string* GrantedOrigin(absl::string_view origin) const;

  // A WebSocket of the HTTP API bridged to a gRPC stream (http_api.cc).
  class ApiStream;

 private:
  Viewer() = default;
  static int Handle(mg_connection* conn, void* self);
  // Checks Host and Origin (class comment); answers a refusal (or a
  // preflight) itself and returns false when the request goes no further.
  bool Admit(mg_connection* conn);
  // The same checks for a WebSocket handshake: the refusal, or "".
  std::string RefusalOf(const mg_connection* conn) const;
  void Api(mg_connection* conn);
  void ListStreams(mg_connection* conn, const Caller& caller);
  // The HTTP API's unary routes (/api/v1/..., http_api.cc) for a caller
  // already admitted and authenticated.
  void ApiV1(mg_connection* conn, absl::string_view authorization);
  // Reads the body (at most max_body_bytes) of a request to `route` whose
  // Content-Type must be `content_type`; false when it answered an error.
  bool ReadBody(mg_connection* conn, absl::string_view route,
                absl::string_view content_type, std::string* body);

  // A WebSocket streaming solves or retargets (http_api.cc).
  static int OnStreamConnect(const mg_connection* conn, void* self);
  static void OnStreamReady(mg_connection* conn, void* self);
  static int OnStreamData(mg_connection* conn, int bits, char* data,
                          size_t size, void* self);
  static void OnStreamClose(const mg_connection* conn, void* self);
  // The Authorization of an HTTP request: its header, else "Bearer " and
  // `access_token` from the query; InvalidArgument when not visible ASCII.
  static absl::StatusOr<std::string> AuthorizationOf(const mg_connection* conn);
  // The caller of an HTTP request whose Authorization (AuthorizationOf) is
  // `authorization`: Unauthenticated, or PermissionDenied without the
  // `solve` role.
  absl::StatusOr<Caller> CallerOf(const mg_connection* conn,
                                  absl::string_view authorization) const;
  // Whether `caller` may see a stream `owner` opened.
  static bool MayWatch(const Caller& caller, const std::string& owner);
  // A WebSocket handshake's admission (/api/watch and the API's streams):
  // another origin, and a caller without a valid token, are refused before
  // the handshake (an HTTP error, not a socket held open: one refused in
  // band is kept until the client answers the close, and unauthenticated
  // ones must not hold the workers that long). The caller and the
  // Authorization it came with, or nullopt when refused (logged, naming
  // `what`).
  struct Admitted {
    std::string authorization;
    Caller caller;
  };
  std::optional<Admitted> AdmitSocket(const mg_connection* conn,
                                      absl::string_view what) const;

  // A WebSocket watching a stream.
  struct Watcher {
    mg_connection* conn = nullptr;  // Set when ready.
    std::shared_ptr<WatchedStream> stream;
    uint64_t sent_version = 0;
    bool ended_sent = false;
    std::string error;  // Why the watch was refused; then nothing else.
    Caller caller;      // Checked again while the watch lasts.
  };
  static int OnWatchConnect(const mg_connection* conn, void* self);
  static void OnWatchReady(mg_connection* conn, void* self);
  static int OnWatchData(mg_connection* conn, int bits, char* data,
                         size_t size, void* self);
  static void OnWatchClose(const mg_connection* conn, void* self);
  // Sends each watcher its stream's newest frame, watch_fps times a second.
  void Pump();

  ViewerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::IkService::Stub> stub_;
  std::unique_ptr<v1::RetargetService::Stub> retarget_stub_;
  const StreamWatch* streams_ = nullptr;
  const TokenAuth* auth_ = nullptr;
  mg_context* context_ = nullptr;
  int port_ = 0;
  bool loopback_ = false;  // Listening on a loopback address only.

  absl::Mutex mu_;
  std::vector<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);  // Ready ones.
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;  // Connected, not yet closed.
  int api_streams_ ABSL_GUARDED_BY(mu_) = 0;  // /api/v1 streams open.
  absl::Notification stop_;
  std::thread pump_;
};

}  // namespace reach

#endif  // REACH_SERVER_VIEWER_H_
