// Answers of the viewer's HTTP gateway (viewer.cc) and of the HTTP API
// (http_api.cc): JSON bodies, errors as {"code": "INVALID_ARGUMENT",
// "message": "..."} with the HTTP status closest to the gRPC code, and the
// headers every answer carries (no caching, no sniffing, a CSP, and the
// CORS grant of a listed origin).
#ifndef REACH_SERVER_HTTP_REPLY_H_
#define REACH_SERVER_HTTP_REPLY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

struct mg_connection;
struct mg_request_info;

namespace reach {

// The HTTP status a gRPC code answers as (400, 401, 403, 404, 409, 429,
// 499, 501, 503, 504, else 500).
int HttpStatus(grpc::StatusCode code);
// Its name: "INVALID_ARGUMENT".
std::string CodeName(grpc::StatusCode code);

// Access-Control-Allow-Origin for a listed origin (Viewer::GrantedOrigin).
void AddCorsGrant(mg_connection* conn);
void Send(mg_connection* conn, int status, const char* content_type,
          const char* data, size_t size, bool body = true);
void SendJson(mg_connection* conn, int status, const std::string& json);
// {"code": code, "message": message}; the connection closes after it.
void SendError(mg_connection* conn, int status, absl::string_view code,
               absl::string_view message);
// An absl error as SendError does a gRPC one.
void SendStatus(mg_connection* conn, const absl::Status& status);
// {"code": ..., "message": ...} as SendError writes it.
std::string ErrorJson(absl::string_view code, absl::string_view message);

// The query parameter `name` of the request (at most 1 KiB), or "".
std::string QueryParam(const mg_request_info* info, const char* name);

}  // namespace reach

#endif  // REACH_SERVER_HTTP_REPLY_H_
