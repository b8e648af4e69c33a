#include "server/viewer.h"

#include <civetweb.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/client_context.h"
#include "server/address.h"
#include "server/http_reply.h"
#include "server/log.h"
#include "viewer/assets.h"
#include "wire/json.h"

namespace reach {
namespace {

namespace pbutil = google::protobuf::util;

// What to quote of a header the client sent, in an error: its first bytes,
// non-printable ones escaped.
std::string Quote(absl::string_view text) {
  return absl::CHexEscape(text.substr(0, 100));
}

}  // namespace

absl::Status CheckHeaderValue(absl::string_view name, absl::string_view header) {
  for (size_t i = 0; i < header.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(header[i]);
    if (c < 0x20 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": byte 0x", absl::Hex(c, absl::kZeroPad2), " at offset ", i,
          " is not visible ASCII (tokens are ASCII; was something pasted "
          "with it?)"));
    }
  }
  return absl::OkStatus();
}

const std::string* Viewer::GrantedOrigin(absl::string_view origin) const {
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == origin) return &allowed;
  }
  return nullptr;
}

std::string Viewer::RefusalOf(const mg_connection* conn) const {
  const char* host = mg_get_header(conn, "Host");
  if (loopback_ && host != nullptr &&
      !IsLoopbackHost(HostOf(host))) {
    return absl::StrCat(
        "Host: '", Quote(host),
        "' is not a loopback name, and this viewer listens on loopback only "
        "(a page that rebound its own name to 127.0.0.1?): use "
        "http://127.0.0.1:PORT/ or http://localhost:PORT/");
  }
  const char* origin = mg_get_header(conn, "Origin");
  if (origin == nullptr) return "";
  const absl::string_view o = origin;
  // The page's own origin: this server, under the name the browser used.
  if (host != nullptr &&
      (o == absl::StrCat("http://", host) ||
       o == absl::StrCat("https://", host))) {
    return "";
  }
  if (GrantedOrigin(o) != nullptr) return "";
  return absl::StrCat("Origin: '", Quote(o),
                      "' may not call this server (only its own pages, and "
                      "--http_allowed_origins)");
}

bool Viewer::Admit(mg_connection* conn) {
  const std::string refusal = RefusalOf(conn);
  if (!refusal.empty()) {
    SendError(conn, 403, "PERMISSION_DENIED", refusal);
    return false;
  }
  const mg_request_info* info = mg_get_request_info(conn);
  if (absl::string_view(info->request_method) != "OPTIONS") return true;
  // A preflight: granted (Send adds the origin) only to a listed origin.
  const char* origin = mg_get_header(conn, "Origin");
  if (origin == nullptr || GrantedOrigin(origin) == nullptr) {
    SendError(conn, 405, "METHOD_NOT_ALLOWED",
              "OPTIONS: no cross-origin access (--http_allowed_origins)");
    return false;
  }
  mg_response_header_start(conn, 204);
  AddCorsGrant(conn);
  mg_response_header_add(conn, "Access-Control-Allow-Methods",
                         "GET, POST, PUT, DELETE", -1);
  mg_response_header_add(conn, "Access-Control-Allow-Headers",
                         "Authorization, Content-Type", -1);
  mg_response_header_add(conn, "Access-Control-Max-Age", "600", -1);
  mg_response_header_add(conn, "Content-Length", "0", -1);
  mg_response_header_send(conn);
  return false;
}

absl::StatusOr<std::unique_ptr<Viewer>> Viewer::Start(
    const ViewerOptions& options, std::shared_ptr<grpc::Channel> channel,
    const StreamWatch* streams, const TokenAuth* auth) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError("--http_threads must be >= 1");
  }
  if (options.max_watchers < 0) {
    return absl::InvalidArgumentError("--http_max_watchers must be >= 0");
  }
  if (options.max_watchers >= options.threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_max_watchers=", options.max_watchers,
        " must be less than --http_threads=", options.threads,
        " (each watcher holds a thread)"));
  }
  if (options.max_streams < 0) {
    return absl::InvalidArgumentError("--http_max_streams must be >= 0");
  }
  if (options.max_watchers + options.max_streams >= options.threads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_max_watchers=", options.max_watchers,
        " plus --http_max_streams=", options.max_streams,
        " must be less than --http_threads=", options.threads,
        " (each WebSocket holds a thread)"));
  }
  if (options.watch_fps < 1) {
    return absl::InvalidArgumentError("watch_fps must be >= 1");
  }
  static std::once_flag init;
  std::call_once(init, [] { mg_init_library(0); });
  std::unique_ptr<Viewer> v(new Viewer());
  v->options_ = options;
  v->channel_ = std::move(channel);
  v->stub_ = v1::IkService::NewStub(v->channel_);
  v->retarget_stub_ = v1::RetargetService::NewStub(v->channel_);
  v->streams_ = streams;
  v->auth_ = auth;
  v->loopback_ = IsLoopbackAddress(options.listen_address);

  const std::string threads = std::to_string(options.threads);
  const std::string timeout_ms =
      std::to_string(std::max<int64_t>(1, absl::ToInt64Milliseconds(
                                              options.request_timeout)));
  // Pinged every sixth of the timeout; civetweb closes a WebSocket after
  // six unanswered pings, so within about the timeout.
  const std::string ping_ms =
      std::to_string(std::max<int64_t>(1, absl::ToInt64Milliseconds(
                                              options.request_timeout / 6)));
  const char* civet_options[] = {
      "listening_ports", options.listen_address.c_str(),
      "num_threads", threads.c_str(),
      // A connection that sends nothing for this long is closed, so idle
      // sockets cannot hold the workers.
      "request_timeout_ms", timeout_ms.c_str(),
      "enable_keep_alive", "no",
      "websocket_timeout_ms", ping_ms.c_str(),
      "enable_websocket_ping_pong", "yes",
      // civetweb grants every origin by default (Access-Control-Allow-Origin
      // *, preflights answered with whatever they ask): none here; Admit
      // grants --http_allowed_origins itself.
      "access_control_allow_origin", "",
      "access_control_allow_methods", "",
      "access_control_allow_headers", "",
      nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = [](const mg_connection*, const char* message) {
    LogLimited("E", absl::StrCat("viewer: ", message));
    return 1;
  };
  v->context_ = mg_start(&callbacks, v.get(), civet_options);
  if (v->context_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on --http_listen=", options.listen_address));
  }
  // One handler for everything: civetweb would pick "/" over "/api/".
  mg_set_request_handler(v->context_, "/", &Viewer::Handle, v.get());
  mg_set_websocket_handler(v->context_, "/api/watch", &Viewer::OnWatchConnect,
                           &Viewer::OnWatchReady, &Viewer::OnWatchData,
                           &Viewer::OnWatchClose, v.get());
  for (const char* stream : {"/api/v1/solve-stream", "/api/v1/retarget-stream"}) {
    mg_set_websocket_handler(v->context_, stream, &Viewer::OnStreamConnect,
                             &Viewer::OnStreamReady, &Viewer::OnStreamData,
                             &Viewer::OnStreamClose, v.get());
  }
  v->pump_ = std::thread([viewer = v.get()] { viewer->Pump(); });
  mg_server_port ports[4];
  const int n = mg_get_server_ports(v->context_, 4, ports);
  v->port_ = n > 0 ? ports[0].port : 0;
  return v;
}

Viewer::~Viewer() {
  stop_.Notify();
  if (pump_.joinable()) pump_.join();
  // Runs the close handlers of open WebSockets, which free their watchers.
  if (context_ != nullptr) mg_stop(context_);
}

absl::StatusOr<std::string> Viewer::AuthorizationOf(
    const mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  std::string authorization;
  if (const char* header = mg_get_header(conn, "Authorization")) {
    authorization = header;
    if (absl::Status ok = CheckHeaderValue("Authorization", authorization);
        !ok.ok()) {
      return ok;
    }
  } else if (const std::string token = QueryParam(info, "access_token");
             !token.empty()) {
    if (absl::Status ok = CheckHeaderValue("access_token", token); !ok.ok()) {
      return ok;
    }
    authorization = absl::StrCat("Bearer ", token);
  }
  return authorization;
}

absl::StatusOr<Caller> Viewer::CallerOf(const mg_connection* conn,
                                        absl::string_view authorization) const {
  const mg_request_info* info = mg_get_request_info(conn);
  absl::StatusOr<Caller> caller = auth_->Authenticate(
      authorization,
      absl::StrCat("ipv4:", info->remote_addr, ":", info->remote_port));
  if (!caller.ok()) return caller;
  // Everything the gateway serves needs at least `solve`.
  if (absl::Status allowed = Authorize(*caller, Role::kSolve, "the viewer's API");
      !allowed.ok()) {
    return allowed;
  }
  return caller;
}

bool Viewer::MayWatch(const Caller& caller, const std::string& owner) {
  return caller.role == Role::kAdmin || caller.name == owner;
}

void Viewer::ListStreams(mg_connection* conn, const Caller& caller) {
  google::protobuf::Struct out;
  google::protobuf::ListValue* list =
      (*out.mutable_fields())["streams"].mutable_list_value();
  const absl::Time now = absl::Now();
  for (const std::shared_ptr<WatchedStream>& stream : streams_->List()) {
    if (!MayWatch(caller, stream->owner())) continue;
    auto& f = *list->add_values()->mutable_struct_value()->mutable_fields();
    f["id"].set_number_value(static_cast<double>(stream->id()));
    f["owner"].set_string_value(stream->owner());
    WatchedStream::Ids ids = stream->ids();
    f["skeletonId"].set_string_value(std::move(ids.skeleton_id));
    f["kind"].set_string_value(stream->kind());
    if (!ids.profile_id.empty()) {
      f["profileId"].set_string_value(std::move(ids.profile_id));
      f["sourceSkeletonId"].set_string_value(std::move(ids.source_skeleton_id));
    }
    f["frames"].set_number_value(static_cast<double>(stream->frames()));
    f["watchers"].set_number_value(stream->watchers());
    f["ageS"].set_number_value(absl::ToDoubleSeconds(now - stream->started()));
  }
  std::string json;
  if (!pbutil::MessageToJsonString(out, &json).ok()) {
    SendError(conn, 500, "INTERNAL", "cannot print the stream list");
    return;
  }
  SendJson(conn, 200, json);
}

std::optional<Viewer::Admitted> Viewer::AdmitSocket(
    const mg_connection* conn, absl::string_view what) const {
  if (const std::string refusal = RefusalOf(conn); !refusal.empty()) {
    LogLimited("I", absl::StrCat("viewer: ", what, " refused: ", refusal));
    return std::nullopt;
  }
  absl::StatusOr<std::string> authorization = AuthorizationOf(conn);
  absl::StatusOr<Caller> caller =
      authorization.ok() ? CallerOf(conn, *authorization)
                         : absl::StatusOr<Caller>(authorization.status());
  if (!caller.ok()) {
    LogLimited("I", absl::StrCat("viewer: ", what, " refused: ",
                                 caller.status().message()));
    return std::nullopt;
  }
  return Admitted{*std::move(authorization), *std::move(caller)};
}

int Viewer::OnWatchConnect(const mg_connection* conn, void* self) {
  auto* v = static_cast<Viewer*>(self);
  auto watcher = std::make_unique<Watcher>();
  // An authenticated caller's refusals are told in the socket (a browser
  // shows a refused handshake only as "failed"): the first message is
  // {"error": ...}, then it closes. Others are refused before the
  // handshake (the page learns of a bad token from /api/streams).
  const std::optional<Admitted> admitted = v->AdmitSocket(conn, "/api/watch");
  if (!admitted) return 1;
  const Caller* caller = &admitted->caller;
  const std::string id = QueryParam(mg_get_request_info(conn), "stream");
  int64_t stream_id = 0;
  if (!absl::SimpleAtoi(id, &stream_id) ||
      (watcher->stream = v->streams_->Find(stream_id)) == nullptr ||
      !MayWatch(*caller, watcher->stream->owner())) {
    watcher->stream = nullptr;
    watcher->error = absl::StrCat("stream: no open stream '", id.substr(0, 40),
                                  "' that this caller may watch");
  } else {
    watcher->caller = *caller;
    absl::MutexLock lock(&v->mu_);
    if (v->accepted_ >= v->options_.max_watchers) {
      watcher->stream = nullptr;
      watcher->error = absl::StrCat("too many watchers (--http_max_watchers=",
                                    v->options_.max_watchers, ")");
    } else {
      ++v->accepted_;
    }
  }
  mg_set_user_connection_data(conn, watcher.release());
  return 0;
}

void Viewer::OnWatchReady(mg_connection* conn, void* self) {
  auto* v = static_cast<Viewer*>(self);
  auto* w = static_cast<Watcher*>(mg_get_user_connection_data(conn));
  if (w == nullptr) return;
  if (!w->error.empty()) {
    google::protobuf::Struct error;
    (*error.mutable_fields())["error"].set_string_value(w->error);
    std::string json;
    if (!pbutil::MessageToJsonString(error, &json).ok()) json = "{\"error\":\"\"}";
    mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_TEXT, json.data(), json.size());
    mg_websocket_write(conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
    return;
  }
  // From the next frame answered on: the slot may hold a frame from an
  // earlier watch, long stale.
  w->sent_version = static_cast<uint64_t>(w->stream->frames());
  w->stream->AddWatcher();
  absl::MutexLock lock(&v->mu_);
  w->conn = conn;
  v->watchers_.push_back(w);
}

int Viewer::OnWatchData(mg_connection* /*conn*/, int bits, char* /*data*/,
                        size_t /*size*/, void* /*self*/) {
  // Nothing is read from the page; a close frame ends the watch.
  return (bits & 0xf) == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE ? 0 : 1;
}

void Viewer::OnWatchClose(const mg_connection* conn, void* self) {
  auto* v = static_cast<Viewer*>(self);
  std::unique_ptr<Watcher> w(
      static_cast<Watcher*>(mg_get_user_connection_data(conn)));
  if (w == nullptr) return;
  mg_set_user_connection_data(conn, nullptr);
  absl::MutexLock lock(&v->mu_);
  if (w->conn != nullptr) {
    v->watchers_.erase(
        std::remove(v->watchers_.begin(), v->watchers_.end(), w.get()),
        v->watchers_.end());
    w->stream->RemoveWatcher();
  }
  if (w->error.empty()) --v->accepted_;
}

void Viewer::Pump() {
  const absl::Duration period = absl::Seconds(1) / options_.watch_fps;
  StreamFrame frame;  // Reused: its vectors keep their capacity.
  while (!stop_.WaitForNotificationWithTimeout(period)) {
    absl::MutexLock lock(&mu_);
    for (Watcher* w : watchers_) {
      if (w->ended_sent) continue;
      if (!auth_->Admits(w->caller)) {
        // Revoked: the watch ends now, not when the stream does.
        const std::string json = absl::StrCat(
            "{\"stream\":", w->stream->id(),
            ",\"error\":\"the token was revoked\",\"ended\":true}");
        mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_TEXT, json.data(),
                           json.size());
        mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
        w->ended_sent = true;
        continue;
      }
      if (w->stream->Latest(w->sent_version, &frame)) {
        w->sent_version = frame.version;
        const std::string json = StreamFrameJson(w->stream->id(), frame);
        mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_TEXT, json.data(),
                           json.size());
      } else if (w->stream->ended()) {
        const std::string json = absl::StrCat(
            "{\"stream\":", w->stream->id(), ",\"ended\":true}");
        mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_TEXT, json.data(),
                           json.size());
        mg_websocket_write(w->conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
        w->ended_sent = true;
      }
    }
  }
}

int Viewer::Handle(mg_connection* conn, void* self) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (!static_cast<Viewer*>(self)->Admit(conn)) return 403;
  if (absl::StartsWith(info->local_uri, "/api/")) {
    static_cast<Viewer*>(self)->Api(conn);
    return 1;
  }
  const absl::string_view method = info->request_method;
  if (method != "GET" && method != "HEAD") {
    SendError(conn, 405, "METHOD_NOT_ALLOWED",
              absl::StrCat(method.substr(0, 20), ": only GET"));
    return 405;
  }
  const absl::string_view uri = info->local_uri;
  const EmbeddedAsset* asset = FindAsset(uri);
  if (asset == nullptr) {
    SendError(conn, 404, "NOT_FOUND",
              absl::StrCat("no file at ", uri.substr(0, 200)));
    return 404;
  }
  Send(conn, 200, asset->content_type, asset->data, asset->size,
       method == "GET");
  return 200;
}

void Viewer::Api(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  const absl::string_view method = info->request_method;
  const absl::string_view uri = info->local_uri;

  // The token first, before anything else of the request is read: gRPC
  // would assert on metadata that is not visible ASCII, and a body is not
  // worth reading for a caller the server will refuse.
  const absl::StatusOr<std::string> authorization = AuthorizationOf(conn);
  if (!authorization.ok()) {
    SendStatus(conn, authorization.status());
    return;
  }
  const absl::StatusOr<Caller> caller = CallerOf(conn, *authorization);
  if (!caller.ok()) {
    SendStatus(conn, caller.status());
    return;
  }
  if (uri == "/api/v1" || absl::StartsWith(uri, "/api/v1/")) {
    ApiV1(conn, *authorization);
    return;
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       absl::ToChronoNanoseconds(options_.call_timeout));
  if (!authorization->empty()) {
    context.AddMetadata("authorization", *authorization);
  }
  pbutil::JsonPrintOptions print;
  print.always_print_primitive_fields = true;

  // Runs `call` and answers its response (or error) in JSON.
  auto answer = [&](const grpc::Status& status,
                    const google::protobuf::Message& response) {
    if (!status.ok()) {
      SendError(conn, HttpStatus(status.error_code()),
                CodeName(status.error_code()), status.error_message());
      return;
    }
    std::string json;
    const auto printed =
        pbutil::MessageToJsonString(response, &json, print);
    if (!printed.ok()) {
      SendError(conn, 500, "INTERNAL", std::string(printed.message()));
      return;
    }
    SendJson(conn, 200, json);
  };

  if (uri == "/api/streams") {
    if (method != "GET") {
      SendError(conn, 405, "METHOD_NOT_ALLOWED", "/api/streams: only GET");
      return;
    }
    ListStreams(conn, *caller);
    return;
  }
  // A read-only collection at `base`: `list` for base (or base/), `get`
  // with the id after base/. False when `uri` is not under base.
  auto collection = [&](absl::string_view base, auto list, auto get) {
    if (uri != base && !absl::StartsWith(uri, absl::StrCat(base, "/"))) {
      return false;
    }
    const absl::string_view id =
        uri.size() > base.size() ? uri.substr(base.size() + 1) : "";
    if (method != "GET") {
      SendError(conn, 405, "METHOD_NOT_ALLOWED",
                absl::StrCat(base, id.empty() ? "" : "/ID", ": only GET"));
    } else if (id.empty()) {
      list(QueryParam(info, "page_token"));
    } else {
      get(std::string(id));
    }
    return true;
  };
  if (collection(
          "/api/skeletons",
          [&](const std::string& page_token) {
            v1::ListSkeletonsRequest request;
            request.set_page_token(page_token);
            v1::ListSkeletonsResponse response;
            answer(stub_->ListSkeletons(&context, request, &response),
                   response);
          },
          [&](const std::string& id) {
            v1::GetSkeletonRequest request;
            request.set_skeleton_id(id);
            v1::GetSkeletonResponse response;
            answer(stub_->GetSkeleton(&context, request, &response), response);
          })) {
    return;
  }
  if (collection(
          "/api/retarget-profiles",
          [&](const std::string& page_token) {
            v1::ListRetargetProfilesRequest request;
            request.set_page_token(page_token);
            v1::ListRetargetProfilesResponse response;
            answer(retarget_stub_->ListRetargetProfiles(&context, request,
                                                        &response),
                   response);
          },
          [&](const std::string& id) {
            v1::GetRetargetProfileRequest request;
            request.set_profile_id(id);
            // The page draws the pair the profile retargets between.
            request.set_include_skeletons(true);
            v1::GetRetargetProfileResponse response;
            answer(retarget_stub_->GetRetargetProfile(&context, request,
                                                      &response),
                   response);
          })) {
    return;
  }
  if (uri == "/api/solve") {
    if (method != "POST") {
      SendError(conn, 405, "METHOD_NOT_ALLOWED", "/api/solve: only POST");
      return;
    }
    // JSON only: a cross-site form cannot send it without a preflight,
    // which this server does not grant.
    const char* type = mg_get_header(conn, "Content-Type");
    if (type == nullptr ||
        !absl::StartsWith(absl::string_view(type), "application/json")) {
      SendError(conn, 415, "INVALID_ARGUMENT",
                "/api/solve: Content-Type must be application/json");
      return;
    }
    const long long length = info->content_length;
    if (length > options_.max_body_bytes) {
      SendError(conn, 413, "RESOURCE_EXHAUSTED",
                absl::StrCat("/api/solve: the body is ", length,
                             " bytes, more than --max_message_bytes=",
                             options_.max_body_bytes));
      return;
    }
    std::string body;
    char buffer[16384];
    int got;
    while ((got = mg_read(conn, buffer, sizeof(buffer))) > 0) {
      if (body.size() + got > static_cast<size_t>(options_.max_body_bytes)) {
        SendError(conn, 413, "RESOURCE_EXHAUSTED",
                  absl::StrCat("/api/solve: the body is more than "
                               "--max_message_bytes=",
                               options_.max_body_bytes, " bytes"));
        return;
      }
      body.append(buffer, got);
    }
    v1::SolveRequest request;
    // Bare NaN / Infinity (Python's json) read as protobuf's quoted ones,
    // so that Solve's validation names the field.
    const absl::Status parsed = JsonToMessage(body, &request);
    if (!parsed.ok()) {
      SendError(conn, 400, "INVALID_ARGUMENT",
                absl::StrCat("/api/solve: the body is not a SolveRequest: ",
                             std::string(parsed.message()).substr(0, 500)));
      return;
    }
    v1::SolveResponse response;
    answer(stub_->Solve(&context, request, &response), response);
    return;
  }
  SendError(conn, 404, "NOT_FOUND", absl::StrCat("no API at ", uri.substr(0, 200)));
}

}  // namespace reach
