#include "server/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace reach {

void LogLine(absl::string_view level, absl::string_view message) {
  const std::string line =
      absl::StrCat(level, " ",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

void RateLimitedLog::Error(absl::string_view message) {
  int64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    if (now - window_start_ >= period_) {
      window_start_ = now;
      in_window_ = 0;
    }
    if (in_window_ >= burst_) {
      ++suppressed_;
      return;
    }
    ++in_window_;
    suppressed = suppressed_;
    suppressed_ = 0;
  }
  if (suppressed > 0) {
    LogError(absl::StrCat(message, " (", suppressed,
                          " similar lines suppressed)"));
  } else {
    LogError(message);
  }
}

}  // namespace reach
