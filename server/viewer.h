// The browser viewer's endpoint (--http_listen): the page and its static
// files (viewer/assets.h), and a JSON gateway the page calls, which goes
// through the server's own gRPC service over an in-process channel, so a
// call from the page is authenticated, limited, solved and counted in the
// metrics exactly as a gRPC client's:
//
//   GET  /api/skeletons[?page_token=T]  ListSkeletons
//   GET  /api/skeletons/ID              GetSkeleton
//   POST /api/solve                     Solve (body: a SolveRequest in JSON)
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

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "reach/v1/ik_service.grpc.pb.h"

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
};

class Viewer {
 public:
  // Starts serving on options.listen_address; calls go to `channel`.
  static absl::StatusOr<std::unique_ptr<Viewer>> Start(
      const ViewerOptions& options, std::shared_ptr<grpc::Channel> channel);
  ~Viewer();  // Stops serving; waits for requests in progress.

  int port() const { return port_; }

 private:
  Viewer() = default;
  static int Handle(mg_connection* conn, void* self);
  void Api(mg_connection* conn);

  ViewerOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::IkService::Stub> stub_;
  mg_context* context_ = nullptr;
  int port_ = 0;
};

}  // namespace reach

#endif  // REACH_SERVER_VIEWER_H_
