// Opening a channel to a reach-server: plaintext, TLS, or mutual TLS, and
// the bearer token every call carries.
//
// TLS is used when any of the TLS files or the server name is given: the
// server's certificate is checked against `tls_ca` (the system's roots
// when empty) and `tls_server_name` (the host part of the address when
// empty). `tls_cert` and `tls_key` go together and present a client
// certificate to a server that requires one (mTLS).
#ifndef REACH_CLIENT_CONNECT_H_
#define REACH_CLIENT_CONNECT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"

namespace reach::client {

struct ConnectOptions {
  // One server "host:port"; several, comma-separated IP addresses
  // ("10.0.0.1:50051,10.0.0.2:50051", IPv6 in brackets), called in turn
  // (gRPC's round_robin); or a gRPC target with a scheme ("dns:///name:port"
  // resolves every address of the name, called in turn; "ipv4:", "ipv6:",
  // "unix:" as gRPC reads them).
  std::string address = "127.0.0.1:50051";
  std::string tls_ca;           // PEM file: the CA that signed the server.
  std::string tls_cert;         // PEM file: this client's certificate.
  std::string tls_key;          // PEM file: its private key.
  std::string tls_server_name;  // The name the server's certificate holds.
  int max_receive_bytes = 64 << 20;
  // The longest the channel waits between attempts to reconnect to a server
  // that went away (0: gRPC's default, which grows to 120 s). A long-lived
  // stream that resumes (`reach vmc`) wants a restarted server found within
  // about this long.
  int max_reconnect_backoff_ms = 0;
};

// How `address` (ConnectOptions::address) reaches gRPC: its target, whether
// calls go round-robin over the target's addresses, and the authority
// (the name TLS checks) when gRPC's own would not do.
struct ChannelTarget {
  std::string target;
  bool round_robin = false;
  std::string authority;  // Empty: gRPC's default for the target.
};
// Errors name "address" and the part that is wrong.
absl::StatusOr<ChannelTarget> ParseAddress(absl::string_view address);

// True when `options` asks for TLS.
bool UsesTls(const ConnectOptions& options);

// A channel as `options` say (not yet connected). Errors name the option
// ("tls_ca: cannot read 'x': No such file or directory", "tls_key: ...
// does not hold a PEM private key", "tls_cert and tls_key go together").
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(
    const ConnectOptions& options);

// OK when `token` can travel as an `authorization: Bearer` header: 1 to
// 4096 visible ASCII characters, no spaces. Errors name "token".
absl::Status ValidateToken(absl::string_view token);

// Adds `authorization: Bearer <token>` to `context` (nothing when `token`
// is empty).
void AddToken(absl::string_view token, grpc::ClientContext* context);

}  // namespace reach::client

#endif  // REACH_CLIENT_CONNECT_H_
