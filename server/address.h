// Listen addresses and Host headers: which reach this machine only.
#ifndef REACH_SERVER_ADDRESS_H_
#define REACH_SERVER_ADDRESS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace reach {

// Whether `host` (no port; an IPv6 address without brackets) names this
// machine only: "localhost", a numeric IPv4 address in 127.0.0.0/8, or
// ::1. A name that merely starts with "127." is not one.
bool IsLoopbackHost(absl::string_view host);

// The host of "host:port" or "[v6]:port" (brackets removed), or of a bare
// host ("localhost"); "" when it does not parse.
absl::string_view HostOf(absl::string_view address);

// Whether a listen address ("host:port", "[v6]:port", "unix:path") is
// reachable from this machine only.
bool IsLoopbackAddress(absl::string_view address);

// An HTTP listen address (`flag`): one host:port, not civetweb's comma
// lists or its "s"/"r" port suffixes, whose checks (loopback or not) would
// then see only the first address. InvalidArgument naming the flag.
absl::Status CheckSingleHttpAddress(absl::string_view flag,
                                    absl::string_view address);

}  // namespace reach

#endif  // REACH_SERVER_ADDRESS_H_
