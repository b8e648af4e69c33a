#include "server/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"

namespace reach {
namespace {

// protobuf's log handler (google::protobuf::LogHandler).
void ProtobufLog(google::protobuf::LogLevel level, const char* filename,
                 int line, const std::string& message) {
  const std::string text =
      absl::StrCat("libprotobuf: ", message, " (", filename, ":", line, ")");
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      LogLimited("I", text);
      return;
    case google::protobuf::LOGLEVEL_WARNING:
      LogLimited("W", text);
      return;
    case google::protobuf::LOGLEVEL_ERROR:
      LogLimited("E", text);
      return;
    case google::protobuf::LOGLEVEL_FATAL:
      LogLine("F", text);  // protobuf aborts after this.
      return;
  }
  LogLimited("E", text);
}

// gRPC's log function (gpr_log_func).
void GrpcLog(gpr_log_func_args* args) {
  const char* level = args->severity == GPR_LOG_SEVERITY_ERROR  ? "E"
                      : args->severity == GPR_LOG_SEVERITY_INFO ? "I"
                                                                : "D";
  const std::string text = absl::StrCat("grpc: ", args->message, " (",
                                        args->file, ":", args->line, ")");
  // GPR_ASSERT logs this, then aborts.
  if (absl::StartsWith(args->message, "assertion failed")) {
    LogLine(level, text);
  } else {
    LogLimited(level, text);
  }
}

}  // namespace

void LogLine(absl::string_view level, absl::string_view message) {
  const std::string line =
      absl::StrCat(level, " ",
                   absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                                    absl::UTCTimeZone()),
                   " ", message, "\n");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

bool LogLimiter::Admit(int64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (now - window_start_ >= period_) {
    window_start_ = now;
    in_window_ = 0;
  }
  if (in_window_ >= burst_) {
    ++suppressed_;
    return false;
  }
  ++in_window_;
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

LogLimiter& ProcessLogLimit() {
  static LogLimiter* const limiter =
      new LogLimiter(kProcessLogBurst, kProcessLogPeriod);
  return *limiter;
}

void LogLimited(absl::string_view level, absl::string_view message) {
  int64_t suppressed = 0;
  if (!ProcessLogLimit().Admit(&suppressed)) return;
  if (suppressed > 0) {
    LogLine("W",
            absl::StrCat("log: ", suppressed, " lines suppressed (at most ",
                         kProcessLogBurst, " per ",
                         absl::FormatDuration(kProcessLogPeriod), ")"));
  }
  LogLine(level, message);
}

void RouteLibraryLogs() {
  google::protobuf::SetLogHandler(&ProtobufLog);
  gpr_set_log_function(&GrpcLog);
}

void RateLimitedLog::Error(absl::string_view message) {
  int64_t suppressed = 0;
  if (!limiter_.Admit(&suppressed)) return;
  if (suppressed > 0) {
    LogLimited("E", absl::StrCat(message, " (", suppressed,
                                 " similar lines suppressed)"));
  } else {
    LogLimited("E", message);
  }
}

}  // namespace reach
