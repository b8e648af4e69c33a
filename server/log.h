// Minimal server logging to stderr: one line per event, with a UTC
// timestamp. Error paths that input can trigger go through a RateLimitedLog
// so a misbehaving client cannot flood the log.
#ifndef REACH_SERVER_LOG_H_
#define REACH_SERVER_LOG_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace reach {

void LogLine(absl::string_view level, absl::string_view message);
inline void LogInfo(absl::string_view message) { LogLine("I", message); }
inline void LogError(absl::string_view message) { LogLine("E", message); }

// Logs at most `burst` lines per `period`; the next line after a quiet spell
// says how many were suppressed.
class RateLimitedLog {
 public:
  RateLimitedLog(int burst, absl::Duration period)
      : burst_(burst), period_(period) {}
  void Error(absl::string_view message);

 private:
  const int burst_;
  const absl::Duration period_;
  absl::Mutex mu_;
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int in_window_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace reach

#endif  // REACH_SERVER_LOG_H_
