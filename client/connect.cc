#include "client/connect.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace reach::client {
namespace {

// The file at `path` for option `option`, which must hold a PEM block whose
// BEGIN line ends with `kind` ("CERTIFICATE", "PRIVATE KEY").
absl::StatusOr<std::string> ReadPem(absl::string_view option,
                                    const std::string& path,
                                    absl::string_view kind) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(option, ": cannot read '", path,
                                            "': ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string pem = text.str();
  const size_t begin = pem.find("-----BEGIN ");
  const size_t end = begin == std::string::npos
                         ? std::string::npos
                         : pem.find("-----", begin + 11);
  if (end == std::string::npos ||
      !absl::EndsWith(absl::string_view(pem).substr(begin, end - begin),
                      kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, ": '", path, "' does not hold a PEM ",
        kind == "PRIVATE KEY" ? "private key" : "certificate"));
  }
  return pem;
}

// "host:port" with a port in 1..65535 and a host that is an IPv4 address
// ("1.2.3.4") or, `ipv6`, a bracketed IPv6 one ("[::1]").
bool IsIpHostPort(absl::string_view part, bool ipv6) {
  const size_t colon = part.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  const absl::string_view host = part.substr(0, colon);
  const absl::string_view port = part.substr(colon + 1);
  int port_number = 0;
  if (port.empty() || port.size() > 5 ||
      !absl::SimpleAtoi(port, &port_number) || port_number < 1 ||
      port_number > 65535 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit)) {
    return false;
  }
  if (ipv6) {
    if (host.size() < 3 || host.front() != '[' || host.back() != ']') {
      return false;
    }
    return std::all_of(host.begin() + 1, host.end() - 1, [](char c) {
      return absl::ascii_isxdigit(c) || c == ':' || c == '.';
    });
  }
  const std::vector<absl::string_view> octets = absl::StrSplit(host, '.');
  if (octets.size() != 4) return false;
  for (absl::string_view octet : octets) {
    int value = 0;
    if (octet.empty() || octet.size() > 3 ||
        !std::all_of(octet.begin(), octet.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(octet, &value) || value > 255) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<ChannelTarget> ParseAddress(absl::string_view address) {
  if (address.empty()) return absl::InvalidArgumentError("address: empty");
  ChannelTarget out;
  if (absl::StartsWith(address, "dns:")) {
    // gRPC's DNS resolver: every address of the name, in turn.
    out.target = std::string(address);
    out.round_robin = true;
    return out;
  }
  if (absl::StartsWith(address, "ipv4:") ||
      absl::StartsWith(address, "ipv6:") || absl::StrContains(address, ":/")) {
    out.target = std::string(address);
    out.round_robin = absl::StrContains(address, ',');
    return out;
  }
  if (!absl::StrContains(address, ',')) {
    out.target = std::string(address);
    return out;
  }
  // Several addresses: gRPC's ipv4:/ipv6: targets, whose resolver reads a
  // comma-separated list of IP addresses (it resolves no names).
  const std::vector<absl::string_view> parts = absl::StrSplit(address, ',');
  const bool ipv6 = absl::StartsWith(parts[0], "[");
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!IsIpHostPort(parts[i], ipv6)) {
      return absl::InvalidArgumentError(
          absl::StrCat("address: part ", i + 1, " '", parts[i], "' of '",
                       address, "' is not ", ipv6 ? "[IPv6]:port" : "IPv4:port",
                       " (several addresses are IP addresses of one family, "
                       "comma-separated; for a name use dns:///name:port)"));
    }
  }
  out.target = absl::StrCat(ipv6 ? "ipv6:" : "ipv4:", address);
  out.round_robin = true;
  // gRPC's authority for an ipv4: target is the whole list; the first
  // address is what a TLS certificate can name (tls_server_name overrides).
  out.authority = std::string(parts[0]);
  return out;
}

bool UsesTls(const ConnectOptions& options) {
  return !options.tls_ca.empty() || !options.tls_cert.empty() ||
         !options.tls_key.empty() || !options.tls_server_name.empty();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(
    const ConnectOptions& options) {
  absl::StatusOr<ChannelTarget> target = ParseAddress(options.address);
  if (!target.ok()) return target.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  if (target->round_robin) args.SetLoadBalancingPolicyName("round_robin");
  if (options.max_reconnect_backoff_ms > 0) {
    const int backoff = options.max_reconnect_backoff_ms;
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, backoff);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(backoff, 100));
    // Also the connection attempt's timeout: gRPC retries on its own only
    // after a failed or timed-out attempt (a subchannel whose backoff ran
    // out otherwise waits idle for a call to ask), so it is short, but not
    // so short that a server just started on a loaded machine cannot
    // finish the handshake in it (100 ms was, for seconds).
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  }
  if (!target->authority.empty()) {
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, target->authority);
  }
  if (!UsesTls(options)) {
    return grpc::CreateCustomChannel(target->target,
                                     grpc::InsecureChannelCredentials(), args);
  }
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "tls_cert and tls_key go together: give both for a client "
        "certificate, or neither");
  }
  grpc::SslCredentialsOptions ssl;
  if (!options.tls_ca.empty()) {
    absl::StatusOr<std::string> ca =
        ReadPem("tls_ca", options.tls_ca, "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
  }
  if (!options.tls_cert.empty()) {
    absl::StatusOr<std::string> cert =
        ReadPem("tls_cert", options.tls_cert, "CERTIFICATE");
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key =
        ReadPem("tls_key", options.tls_key, "PRIVATE KEY");
    if (!key.ok()) return key.status();
    ssl.pem_cert_chain = *std::move(cert);
    ssl.pem_private_key = *std::move(key);
  }
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  return grpc::CreateCustomChannel(target->target, grpc::SslCredentials(ssl),
                                   args);
}

absl::Status ValidateToken(absl::string_view token) {
  if (token.empty() || token.size() > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("token: expected 1 to 4096 characters, got ",
                     token.size()));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = token[i];
    if (c <= 0x20 || c >= 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "token: character ", i + 1,
          " is not visible ASCII (a token has no spaces or line breaks)"));
    }
  }
  return absl::OkStatus();
}

void AddToken(absl::string_view token, grpc::ClientContext* context) {
  if (token.empty()) return;
  context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
}

}  // namespace reach::client
