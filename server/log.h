// Minimal server logging to stderr: one line per event, with a UTC
// timestamp. Everything input can trigger goes through one process-wide
// limit (ProcessLogLimit: at most 10 lines per 10 s), including what
// protobuf and gRPC log themselves once RouteLibraryLogs() has run, so a
// misbehaving client cannot flood the log.
#ifndef REACH_SERVER_LOG_H_
#define REACH_SERVER_LOG_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace reach {

// Unlimited: for lines that input cannot multiply (configuration at start,
// shutdown, a failure to start).
void LogLine(absl::string_view level, absl::string_view message);
inline void LogInfo(absl::string_view message) { LogLine("I", message); }
inline void LogError(absl::string_view message) { LogLine("E", message); }

// Admits at most `burst` lines per `period` (a fixed window that starts at
// the first line after the previous one ran out).
class LogLimiter {
 public:
  LogLimiter(int burst, absl::Duration period)
      : burst_(burst), period_(period) {}

  // Whether a line may be written now. When it may and lines were refused
  // since the last one admitted, *suppressed says how many (else 0).
  bool Admit(int64_t* suppressed);

 private:
  const int burst_;
  const absl::Duration period_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

// The one limit every input-triggered line of the process shares.
inline constexpr int kProcessLogBurst = 10;
inline constexpr absl::Duration kProcessLogPeriod = absl::Seconds(10);
LogLimiter& ProcessLogLimit();

// Writes the line if ProcessLogLimit() admits it. After a quiet spell the
// first admitted line is preceded by one saying how many were suppressed.
void LogLimited(absl::string_view level, absl::string_view message);

// Sends protobuf's log (google::protobuf::SetLogHandler) and gRPC's
// (gpr_set_log_function) through LogLimited. FATAL lines and gRPC's
// assertion failures are written unconditionally: the process is about to
// abort. Call once, early in main.
void RouteLibraryLogs();

// An extra, per-source limit in front of the process-wide one: the next
// line after a quiet spell says how many of this source's lines were
// suppressed.
class RateLimitedLog {
 public:
  RateLimitedLog(int burst, absl::Duration period) : limiter_(burst, period) {}
  void Error(absl::string_view message);

 private:
  LogLimiter limiter_;
};

}  // namespace reach

#endif  // REACH_SERVER_LOG_H_
