#include "client/connect.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

}  // namespace

bool UsesTls(const ConnectOptions& options) {
  return !options.tls_ca.empty() || !options.tls_cert.empty() ||
         !options.tls_key.empty() || !options.tls_server_name.empty();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(
    const ConnectOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError("address: empty");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_bytes);
  if (!UsesTls(options)) {
    return grpc::CreateCustomChannel(
        options.address, grpc::InsecureChannelCredentials(), args);
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
  return grpc::CreateCustomChannel(options.address,
                                   grpc::SslCredentials(ssl), args);
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
