// The HTTP API (/api/v1, docs/openapi.yaml): every call of IkService and
// RetargetService in JSON (wire/api_json.h), and their streams as
// WebSockets. Like the viewer's routes it calls the server's own gRPC
// service in process, so tokens, roles, limits, quotas, budgets and
// metrics are gRPC's; here are only the routes, the body's size and type,
// and the JSON.
#include <civetweb.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "server/http_reply.h"
#include "server/log.h"
#include "server/viewer.h"
#include "wire/api_json.h"

namespace reach {
namespace {

// Answers `response` (or the call's error) in the API's JSON.
void Answer(mg_connection* conn, const grpc::Status& status,
            const google::protobuf::Message& response) {
  if (!status.ok()) {
    SendError(conn, HttpStatus(status.error_code()),
              CodeName(status.error_code()), status.error_message());
    return;
  }
  const absl::StatusOr<std::string> json = MessageToApiJson(response);
  if (!json.ok()) {
    SendStatus(conn, json.status());
    return;
  }
  SendJson(conn, 200, *json);
}

void MethodNotAllowed(mg_connection* conn, absl::string_view route,
                      absl::string_view allowed) {
  SendError(conn, 405, "METHOD_NOT_ALLOWED",
            absl::StrCat(route, ": only ", allowed));
}

// A boolean query parameter: "true"/"1" or "false"/"0"/absent; else
// InvalidArgument naming it.
absl::StatusOr<bool> BoolParam(const mg_request_info* info, const char* name) {
  const std::string value = QueryParam(info, name);
  if (value.empty() || value == "false" || value == "0") return false;
  if (value == "true" || value == "1") return true;
  return absl::InvalidArgumentError(
      absl::StrCat(name, ": '", value.substr(0, 40), "' is not true or false"));
}

// An int32 query parameter (absent: 0); else InvalidArgument naming it.
absl::StatusOr<int32_t> IntParam(const mg_request_info* info,
                                 const char* name) {
  const std::string value = QueryParam(info, name);
  int32_t number = 0;
  if (value.empty()) return 0;
  if (!absl::SimpleAtoi(value, &number)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": '", value.substr(0, 40), "' is not an integer"));
  }
  return number;
}

}  // namespace

bool Viewer::ReadBody(mg_connection* conn, absl::string_view route,
                      absl::string_view content_type, std::string* body) {
  const mg_request_info* info = mg_get_request_info(conn);
  // A declared type a cross-site form cannot send without a preflight,
  // which this server grants only to --http_allowed_origins.
  const char* type = mg_get_header(conn, "Content-Type");
  if (type == nullptr || !absl::StartsWith(type, content_type)) {
    SendError(conn, 415, "INVALID_ARGUMENT",
              absl::StrCat(route, ": Content-Type must be ", content_type));
    return false;
  }
  const long long length = info->content_length;
  if (length > options_.max_body_bytes) {
    SendError(conn, 413, "RESOURCE_EXHAUSTED",
              absl::StrCat(route, ": the body is ", length,
                           " bytes, more than --max_message_bytes=",
                           options_.max_body_bytes));
    return false;
  }
  body->clear();
  char buffer[16384];
  int got;
  while ((got = mg_read(conn, buffer, sizeof(buffer))) > 0) {
    if (body->size() + got > static_cast<size_t>(options_.max_body_bytes)) {
      SendError(
          conn, 413, "RESOURCE_EXHAUSTED",
          absl::StrCat(route, ": the body is more than --max_message_bytes=",
                       options_.max_body_bytes, " bytes"));
      return false;
    }
    body->append(buffer, got);
  }
  return true;
}

void Viewer::ApiV1(mg_connection* conn, absl::string_view authorization) {
  const mg_request_info* info = mg_get_request_info(conn);
  const absl::string_view method = info->request_method;
  const absl::string_view uri = info->local_uri;
  const absl::string_view path = uri.substr(std::strlen("/api/v1"));

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.call_timeout));
  if (!authorization.empty()) {
    context.AddMetadata("authorization", std::string(authorization));
  }

  // Reads a JSON body into `request`; false when it answered an error.
  auto read_json = [&](absl::string_view route,
                       google::protobuf::Message* request) {
    std::string body;
    if (!ReadBody(conn, route, "application/json", &body)) return false;
    if (const absl::Status parsed = ApiJsonToMessage(body, request);
        !parsed.ok()) {
      SendError(conn, 400, "INVALID_ARGUMENT",
                absl::StrCat(route, ": the body is not a ",
                             request->GetDescriptor()->name(), ": ",
                             std::string(parsed.message()).substr(0, 500)));
      return false;
    }
    return true;
  };
  // The id after `base`/ in the path ("" for base itself), or nullopt
  // when the path is not under base.
  auto under = [&](absl::string_view base) -> std::optional<absl::string_view> {
    if (path == base) return absl::string_view();
    if (absl::StartsWith(path, absl::StrCat(base, "/"))) {
      return path.substr(base.size() + 1);
    }
    return std::nullopt;
  };
  // A path id where the body may name it too: they must agree.
  auto same_id = [&](absl::string_view field, std::string* body_id,
                     absl::string_view path_id) {
    if (!body_id->empty() && *body_id != path_id) {
      SendError(conn, 400, "INVALID_ARGUMENT",
                absl::StrCat(field, ": '", body_id->substr(0, 80),
                             "' differs from the path's '",
                             path_id.substr(0, 80), "'"));
      return false;
    }
    *body_id = std::string(path_id);
    return true;
  };

  if (path == "/skeletons/import") {
    const std::string route = "/api/v1/skeletons/import";
    if (method != "POST") return MethodNotAllowed(conn, route, "POST");
    v1::ImportSkeletonRequest request;
    const std::string format = QueryParam(info, "format");
    if (format.empty()) {
      request.set_format(v1::SKELETON_FORMAT_UNSPECIFIED);
    } else if (format == "json") {
      request.set_format(v1::SKELETON_FORMAT_JSON);
    } else if (format == "bvh") {
      request.set_format(v1::SKELETON_FORMAT_BVH);
    } else if (format == "urdf") {
      request.set_format(v1::SKELETON_FORMAT_URDF);
    } else if (format == "gltf") {
      request.set_format(v1::SKELETON_FORMAT_GLTF);
    } else {
      return SendError(conn, 400, "INVALID_ARGUMENT",
                       absl::StrCat("format: '", format.substr(0, 40),
                                    "' is not json, bvh, urdf or gltf"));
    }
    const absl::StatusOr<int32_t> skin = IntParam(info, "gltf_skin");
    if (!skin.ok()) return SendStatus(conn, skin.status());
    const absl::StatusOr<bool> motion = BoolParam(info, "return_motion");
    if (!motion.ok()) return SendStatus(conn, motion.status());
    request.set_file_name(QueryParam(info, "file_name"));
    request.set_name(QueryParam(info, "name"));
    request.set_gltf_skin(*skin);
    request.set_return_motion(*motion);
    if (!QueryParam(info, "bvh_rest_frame").empty()) {
      const absl::StatusOr<int32_t> rest = IntParam(info, "bvh_rest_frame");
      if (!rest.ok()) return SendStatus(conn, rest.status());
      request.set_bvh_rest_frame(*rest);
    }
    if (!ReadBody(conn, route, "application/octet-stream",
                  request.mutable_data())) {
      return;
    }
    v1::ImportSkeletonResponse response;
    return Answer(conn, stub_->ImportSkeleton(&context, request, &response),
                  response);
  }
  if (const std::optional<absl::string_view> id = under("/skeletons")) {
    if (id->empty()) {
      const std::string route = "/api/v1/skeletons";
      if (method == "GET") {
        v1::ListSkeletonsRequest request;
        const absl::StatusOr<int32_t> size = IntParam(info, "page_size");
        if (!size.ok()) return SendStatus(conn, size.status());
        request.set_page_size(*size);
        request.set_page_token(QueryParam(info, "page_token"));
        v1::ListSkeletonsResponse response;
        return Answer(conn, stub_->ListSkeletons(&context, request, &response),
                      response);
      }
      if (method != "POST") return MethodNotAllowed(conn, route, "GET, POST");
      v1::RegisterSkeletonRequest request;
      if (!read_json(route, &request)) return;
      v1::RegisterSkeletonResponse response;
      return Answer(conn, stub_->RegisterSkeleton(&context, request, &response),
                    response);
    }
    if (method == "GET") {
      v1::GetSkeletonRequest request;
      request.set_skeleton_id(std::string(*id));
      v1::GetSkeletonResponse response;
      return Answer(conn, stub_->GetSkeleton(&context, request, &response),
                    response);
    }
    if (method != "DELETE") {
      return MethodNotAllowed(conn, "/api/v1/skeletons/{id}", "GET, DELETE");
    }
    v1::DeleteSkeletonRequest request;
    request.set_skeleton_id(std::string(*id));
    v1::DeleteSkeletonResponse response;
    return Answer(conn, stub_->DeleteSkeleton(&context, request, &response),
                  response);
  }
  if (const std::optional<absl::string_view> id = under("/retarget-profiles")) {
    if (id->empty()) {
      const std::string route = "/api/v1/retarget-profiles";
      if (method == "GET") {
        v1::ListRetargetProfilesRequest request;
        const absl::StatusOr<int32_t> size = IntParam(info, "page_size");
        if (!size.ok()) return SendStatus(conn, size.status());
        request.set_page_size(*size);
        request.set_page_token(QueryParam(info, "page_token"));
        v1::ListRetargetProfilesResponse response;
        return Answer(
            conn,
            retarget_stub_->ListRetargetProfiles(&context, request, &response),
            response);
      }
      if (method != "POST") return MethodNotAllowed(conn, route, "GET, POST");
      v1::CreateRetargetProfileRequest request;
      if (!read_json(route, &request)) return;
      v1::CreateRetargetProfileResponse response;
      return Answer(
          conn,
          retarget_stub_->CreateRetargetProfile(&context, request, &response),
          response);
    }
    const std::string route = "/api/v1/retarget-profiles/{id}";
    if (method == "GET") {
      v1::GetRetargetProfileRequest request;
      request.set_profile_id(std::string(*id));
      const absl::StatusOr<bool> include = BoolParam(info, "include_skeletons");
      if (!include.ok()) return SendStatus(conn, include.status());
      request.set_include_skeletons(*include);
      v1::GetRetargetProfileResponse response;
      return Answer(
          conn,
          retarget_stub_->GetRetargetProfile(&context, request, &response),
          response);
    }
    if (method == "PUT") {
      v1::UpdateRetargetProfileRequest request;
      if (!read_json(route, &request) ||
          !same_id("profile_id", request.mutable_profile_id(), *id)) {
        return;
      }
      v1::UpdateRetargetProfileResponse response;
      return Answer(
          conn,
          retarget_stub_->UpdateRetargetProfile(&context, request, &response),
          response);
    }
    if (method != "DELETE") {
      return MethodNotAllowed(conn, route, "GET, PUT, DELETE");
    }
    v1::DeleteRetargetProfileRequest request;
    request.set_profile_id(std::string(*id));
    v1::DeleteRetargetProfileResponse response;
    return Answer(
        conn,
        retarget_stub_->DeleteRetargetProfile(&context, request, &response),
        response);
  }
  // The JSON calls with a body and nothing in the path.
  auto post = [&](absl::string_view route, auto request, auto response,
                  auto call) {
    const std::string name = absl::StrCat("/api/v1", route);
    if (method != "POST") return MethodNotAllowed(conn, name, "POST");
    if (!read_json(name, &request)) return;
    Answer(conn, call(&request, &response), response);
  };
  if (path == "/solve") {
    return post(
        path, v1::SolveRequest(), v1::SolveResponse(),
        [&](auto* q, auto* r) { return stub_->Solve(&context, *q, r); });
  }
  if (path == "/solve-batch") {
    return post(
        path, v1::SolveBatchRequest(), v1::SolveBatchResponse(),
        [&](auto* q, auto* r) { return stub_->SolveBatch(&context, *q, r); });
  }
  if (path == "/retarget") {
    return post(path, v1::RetargetRequest(), v1::RetargetResponse(),
                [&](auto* q, auto* r) {
                  return retarget_stub_->Retarget(&context, *q, r);
                });
  }
  if (path == "/retarget-batch") {
    return post(path, v1::RetargetBatchRequest(), v1::RetargetBatchResponse(),
                [&](auto* q, auto* r) {
                  return retarget_stub_->RetargetBatch(&context, *q, r);
                });
  }
  if (path == "/solve-stream" || path == "/retarget-stream") {
    return SendError(conn, 400, "INVALID_ARGUMENT",
                     absl::StrCat(uri, ": a WebSocket (Upgrade: websocket)"));
  }
  SendError(conn, 404, "NOT_FOUND",
            absl::StrCat("no API at ", uri.substr(0, 200)));
}

// A WebSocket bridged to a gRPC stream of the in-process service: each text
// message from the client is a request, written to the stream; a thread
// reads the answers and sends each as a text message, in order. The last
// message is always {"status": {"code": ..., "message": ...}}: "OK" after
// the client's empty (or blank) message (no more frames) once every frame
// is answered, else why the stream ended (the gRPC status, or a frame this
// side refused: not JSON, too big, not text). Then the server closes.
class Viewer::ApiStream {
 public:
  virtual ~ApiStream() = default;
  // Opens the gRPC stream and starts the reader (the WebSocket is ready).
  virtual void Start(mg_connection* conn) = 0;
  // One WebSocket message.
  virtual void OnMessage(int opcode, bool fin, absl::string_view data) = 0;
  // The WebSocket closed: cancels the call and joins the reader.
  virtual void Close() = 0;

  // Why the stream was refused before it started; then it does nothing.
  std::string refusal_code;
  std::string refusal;
};

namespace {

std::string StatusJson(absl::string_view code, absl::string_view message) {
  return absl::StrCat("{\"status\":", ErrorJson(code, message), "}");
}

template <typename Request, typename Response>
class Bridge : public Viewer::ApiStream {
 public:
  using Open = std::function<std::unique_ptr<
      grpc::ClientReaderWriter<Request, Response>>(grpc::ClientContext*)>;

  Bridge(std::string route, std::string authorization, int max_message_bytes,
         Open open)
      : route_(std::move(route)),
        max_message_bytes_(max_message_bytes),
        open_(std::move(open)) {
    if (!authorization.empty()) {
      context_.AddMetadata("authorization", authorization);
    }
  }

  void Start(mg_connection* conn) override {
    conn_ = conn;
    stream_ = open_(&context_);
    reader_ = std::thread([this] { Read(); });
  }

  void OnMessage(int opcode, bool fin, absl::string_view data) override {
    if (done_writing_ || failed_) return;
    ++frames_;
    if (!fin || opcode == MG_WEBSOCKET_OPCODE_CONTINUATION) {
      return Fail("INVALID_ARGUMENT",
                  absl::StrCat(route_, ": frame ", frames_,
                               " is fragmented; send each request as one "
                               "text message"));
    }
    if (opcode != MG_WEBSOCKET_OPCODE_TEXT) {
      return Fail("INVALID_ARGUMENT",
                  absl::StrCat(route_, ": frame ", frames_,
                               " is not a text message (requests are JSON)"));
    }
    if (data.size() > static_cast<size_t>(max_message_bytes_)) {
      return Fail("RESOURCE_EXHAUSTED",
                  absl::StrCat(route_, ": frame ", frames_, " is ", data.size(),
                               " bytes, more than --max_message_bytes=",
                               max_message_bytes_));
    }
    if (absl::StripAsciiWhitespace(data).empty()) {
      // No more frames: the answers to those sent follow, then "OK".
      // Whitespace alone counts too: Godot 3's WebSocketPeer cannot send
      // an empty message (put_packet drops it), and no request is blank.
      done_writing_ = true;
      stream_->WritesDone();
      return;
    }
    Request request;
    if (const absl::Status parsed = ApiJsonToMessage(data, &request);
        !parsed.ok()) {
      return Fail("INVALID_ARGUMENT",
                  absl::StrCat(route_, ": frame ", frames_, " is not a ",
                               Request::descriptor()->name(), ": ",
                               std::string(parsed.message()).substr(0, 500)));
    }
    // Blocks while the server's read-ahead window is full: back-pressure.
    stream_->Write(request);
  }

  void Close() override {
    context_.TryCancel();
    if (reader_.joinable()) reader_.join();
  }

 private:
  // Ends the stream for a frame this side refused: no more frames are
  // written, those already written are answered, then the reader tells
  // why it ended.
  void Fail(absl::string_view code, std::string message) {
    {
      absl::MutexLock lock(&mu_);
      failure_ = StatusJson(code, message);
    }
    failed_ = true;
    if (!done_writing_) {
      done_writing_ = true;
      stream_->WritesDone();
    }
  }

  void Read() {
    Response response;
    while (stream_->Read(&response)) {
      const absl::StatusOr<std::string> json = MessageToApiJson(response);
      const std::string text =
          json.ok() ? *json : StatusJson("INTERNAL", json.status().message());
      if (mg_websocket_write(conn_, MG_WEBSOCKET_OPCODE_TEXT, text.data(),
                             text.size()) <= 0) {
        // The client is gone or reads nothing (civetweb gave up after
        // the request timeout): the call ends.
        context_.TryCancel();
        break;
      }
    }
    const grpc::Status status = stream_->Finish();
    std::string last;
    if (failed_) {
      absl::MutexLock lock(&mu_);
      last = failure_;
    } else {
      last = StatusJson(CodeName(status.error_code()), status.error_message());
    }
    mg_websocket_write(conn_, MG_WEBSOCKET_OPCODE_TEXT, last.data(),
                       last.size());
    mg_websocket_write(conn_, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
  }

  const std::string route_;
  const int max_message_bytes_;
  const Open open_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<Request, Response>> stream_;
  mg_connection* conn_ = nullptr;
  std::thread reader_;
  int64_t frames_ = 0;         // Messages received (the data thread's).
  bool done_writing_ = false;  // The data thread's.
  std::atomic<bool> failed_{false};
  absl::Mutex mu_;
  std::string failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

int Viewer::OnStreamConnect(const mg_connection* conn, void* self) {
  auto* v = static_cast<Viewer*>(self);
  const std::optional<Admitted> admitted = v->AdmitSocket(conn, "API stream");
  if (!admitted) return 1;
  const std::string& authorization = admitted->authorization;
  const absl::string_view uri = mg_get_request_info(conn)->local_uri;
  std::unique_ptr<ApiStream> stream;
  if (uri == "/api/v1/solve-stream") {
    stream = std::make_unique<Bridge<v1::SolveRequest, v1::SolveResponse>>(
        std::string(uri), authorization, v->options_.max_body_bytes,
        [v](grpc::ClientContext* context) {
          return v->stub_->SolveStream(context);
        });
  } else {
    stream =
        std::make_unique<Bridge<v1::RetargetRequest, v1::RetargetResponse>>(
            std::string(uri), authorization, v->options_.max_body_bytes,
            [v](grpc::ClientContext* context) {
              return v->retarget_stub_->RetargetStream(context);
            });
  }
  {
    absl::MutexLock lock(&v->mu_);
    if (v->api_streams_ >= v->options_.max_streams) {
      // Told in band: the caller is authenticated, and a browser shows a
      // refused handshake only as "failed".
      stream->refusal_code = "RESOURCE_EXHAUSTED";
      stream->refusal =
          absl::StrCat(uri, ": too many streams (--http_max_streams=",
                       v->options_.max_streams, ")");
    } else {
      ++v->api_streams_;
    }
  }
  mg_set_user_connection_data(conn, stream.release());
  return 0;
}

void Viewer::OnStreamReady(mg_connection* conn, void* /*self*/) {
  auto* stream = static_cast<ApiStream*>(mg_get_user_connection_data(conn));
  if (stream == nullptr) return;
  if (!stream->refusal.empty()) {
    const std::string json = StatusJson(stream->refusal_code, stream->refusal);
    mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_TEXT, json.data(),
                       json.size());
    mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
    return;
  }
  stream->Start(conn);
}

int Viewer::OnStreamData(mg_connection* conn, int bits, char* data, size_t size,
                         void* /*self*/) {
  auto* stream = static_cast<ApiStream*>(mg_get_user_connection_data(conn));
  const int opcode = bits & 0xf;
  if (opcode == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE) return 0;
  if (opcode == MG_WEBSOCKET_OPCODE_PING ||
      opcode == MG_WEBSOCKET_OPCODE_PONG) {
    return 1;
  }
  if (stream == nullptr || !stream->refusal.empty()) return 1;
  stream->OnMessage(opcode, (bits & 0x80) != 0, absl::string_view(data, size));
  return 1;
}

void Viewer::OnStreamClose(const mg_connection* conn, void* self) {
  auto* v = static_cast<Viewer*>(self);
  std::unique_ptr<ApiStream> stream(
      static_cast<ApiStream*>(mg_get_user_connection_data(conn)));
  if (stream == nullptr) return;
  mg_set_user_connection_data(conn, nullptr);
  const bool counted = stream->refusal.empty();
  stream->Close();
  if (counted) {
    absl::MutexLock lock(&v->mu_);
    --v->api_streams_;
  }
}

}  // namespace reach
