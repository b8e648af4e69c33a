#include "server/http_reply.h"

#include <civetweb.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "server/viewer.h"

namespace reach {

int HttpStatus(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return 400;
    case grpc::StatusCode::UNAUTHENTICATED:
      return 401;
    case grpc::StatusCode::PERMISSION_DENIED:
      return 403;
    case grpc::StatusCode::NOT_FOUND:
      return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED:
      return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return 429;
    case grpc::StatusCode::CANCELLED:
      return 499;
    case grpc::StatusCode::UNIMPLEMENTED:
      return 501;
    case grpc::StatusCode::UNAVAILABLE:
      return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return 504;
    default:
      return 500;
  }
}

// gRPC's codes are absl's, number for number.
std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

void AddCorsGrant(mg_connection* conn) {
  const char* origin = mg_get_header(conn, "Origin");
  if (origin == nullptr) return;
  const auto* viewer =
      static_cast<const Viewer*>(mg_get_user_data(mg_get_context(conn)));
  if (const std::string* granted = viewer->GrantedOrigin(origin)) {
    mg_response_header_add(conn, "Access-Control-Allow-Origin",
                           granted->c_str(), -1);
    mg_response_header_add(conn, "Vary", "Origin", -1);
  }
}

void Send(mg_connection* conn, int status, const char* content_type,
          const char* data, size_t size, bool body) {
  mg_response_header_start(conn, status);
  AddCorsGrant(conn);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  mg_response_header_add(conn, "Content-Length", std::to_string(size).c_str(),
                         -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
  // Everything the page loads comes from this server.
  mg_response_header_add(
      conn, "Content-Security-Policy",
      "default-src 'self'; script-src 'self' 'unsafe-inline'; "
      "style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
      "connect-src 'self'",
      -1);
  mg_response_header_send(conn);
  if (body && size > 0) mg_write(conn, data, size);
}

void SendJson(mg_connection* conn, int status, const std::string& json) {
  Send(conn, status, "application/json", json.data(), json.size());
}

void SendError(mg_connection* conn, int status, absl::string_view code,
               absl::string_view message) {
  // Close after the answer instead of reading what is left of the body:
  // civetweb would read a refused request's body to its end (up to the
  // Content-Length it declared), holding a worker for as long as a client
  // trickles it.
  mg_disable_connection_keep_alive(conn);
  SendJson(conn, status, ErrorJson(code, message));
}

std::string ErrorJson(absl::string_view code, absl::string_view message) {
  google::protobuf::Struct error;
  (*error.mutable_fields())["code"].set_string_value(std::string(code));
  (*error.mutable_fields())["message"].set_string_value(std::string(message));
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(error, &json).ok()) {
    json = absl::StrCat("{\"code\":\"", code, "\"}");
  }
  return json;
}

void SendStatus(mg_connection* conn, const absl::Status& status) {
  const auto code = static_cast<grpc::StatusCode>(status.code());
  SendError(conn, HttpStatus(code), CodeName(code), status.message());
}

std::string QueryParam(const mg_request_info* info, const char* name) {
  if (info->query_string == nullptr) return "";
  std::string value(1024, '\0');
  const int n = mg_get_var(info->query_string, strlen(info->query_string), name,
                           value.data(), value.size());
  value.resize(std::max(n, 0));
  return value;
}

}  // namespace reach
