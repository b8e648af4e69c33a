#include "server/address.h"

#include <arpa/inet.h>

#include <string>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace reach {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::EqualsIgnoreCase(host, "localhost")) return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

absl::string_view HostOf(absl::string_view address) {
  if (absl::StartsWith(address, "[")) {
    const size_t end = address.find(']');
    if (end == absl::string_view::npos) return "";
    const absl::string_view rest = address.substr(end + 1);
    if (!rest.empty() && !absl::StartsWith(rest, ":")) return "";
    return address.substr(1, end - 1);
  }
  const size_t colon = address.find(':');
  if (colon != address.rfind(':')) return "";  // Unbracketed IPv6.
  return address.substr(0, colon);
}

bool IsLoopbackAddress(absl::string_view address) {
  if (absl::StartsWith(address, "unix:") ||
      absl::StartsWith(address, "unix-abstract:")) {
    return true;
  }
  const absl::string_view host = HostOf(address);
  return !host.empty() && IsLoopbackHost(host);
}

absl::Status CheckSingleHttpAddress(absl::string_view flag,
                                    absl::string_view address) {
  if (address.empty()) return absl::OkStatus();
  const size_t colon = address.rfind(':');
  absl::string_view port =
      colon == absl::string_view::npos ? address : address.substr(colon + 1);
  int number = 0;
  const bool one =
      address.find(',') == absl::string_view::npos &&
      colon != absl::string_view::npos && !HostOf(address).empty() &&
      absl::SimpleAtoi(port, &number) && number >= 0 && number <= 65535 &&
      absl::c_all_of(port, [](char c) { return absl::ascii_isdigit(c); });
  if (!one) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, "=", address.substr(0, 200),
        ": give one host:port (e.g. 127.0.0.1:9465 or [::1]:9465); lists "
        "and port suffixes are not accepted"));
  }
  return absl::OkStatus();
}

}  // namespace reach
