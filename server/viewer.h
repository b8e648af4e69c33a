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
// The page sends the user's token as `Authorization: Bearer TOKEN`, which
// the gateway passes on as the call's metadata. An error answers the HTTP
// status closest to the gRPC code with {"code": "INVALID_ARGUMENT",
// "message": "..."}. Static files need no token: they hold no data.
//
// civetweb (Debian's libcivetweb, which prometheus-cpp's endpoint already
// uses) serves HTTP; each request holds one of `threads` workers while it
// runs.
#ifndef REACH_SERVER_VIEWER_H_
#define REACH_SERVER_VIEWER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
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
  int threads = 16;            // Requests served at once.
  // Largest request body (a Solve in JSON) the gateway reads.
  int max_body_bytes = 4 * 1024 * 1024;
  // Deadline of each gateway call.
  absl::Duration call_timeout = absl::Seconds(10);
  // WebSockets watching streams at once (each holds one of `threads`).
  int max_watchers = 8;
  // Frames sent to each watcher per second, at most.
  int watch_fps = 60;
};

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

 private:
  Viewer() = default;
  static int Handle(mg_connection* conn, void* self);
  void Api(mg_connection* conn);
  void ListStreams(mg_connection* conn);
  // The caller of an HTTP request: its Authorization header, else
  // `access_token` in the query.
  absl::StatusOr<Caller> CallerOf(const mg_connection* conn) const;
  // Whether `caller` may see a stream `owner` opened.
  static bool MayWatch(const Caller& caller, const std::string& owner);

  // A WebSocket watching a stream.
  struct Watcher {
    mg_connection* conn = nullptr;  // Set when ready.
    std::shared_ptr<WatchedStream> stream;
    uint64_t sent_version = 0;
    bool ended_sent = false;
    std::string error;  // Why the watch was refused; then nothing else.
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

  absl::Mutex mu_;
  std::vector<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);  // Ready ones.
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;  // Connected, not yet closed.
  absl::Notification stop_;
  std::thread pump_;
};

}  // namespace reach

#endif  // REACH_SERVER_VIEWER_H_
