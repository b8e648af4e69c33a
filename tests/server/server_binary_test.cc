// The reach-server binary's own surface: --help, and what it writes to
// stderr when a client floods it with requests that make libraries log.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/log.h"
#include "tests/server/raw_call.h"
#include "tests/testing/expectations.h"

namespace reach {
namespace {

using ::reach::testing::RawUnaryCall;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

int CountContaining(const std::vector<std::string>& lines,
                    absl::string_view what) {
  int n = 0;
  for (const std::string& line : lines) n += absl::StrContains(line, what);
  return n;
}

// `command`'s stdout and exit status.
std::string RunCommand(const std::string& command, int* exit_status) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  if (pipe == nullptr) return output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, n);
  }
  const int status = pclose(pipe);
  *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

TEST(ServerBinaryTest, HelpListsEveryFlagWithItsDefaultAndExitsZero) {
  for (const char* help : {"--help", "-h"}) {
    int exit_status = -1;
    const std::string out =
        RunCommand(absl::StrCat(REACH_SERVER_BINARY, " ", help), &exit_status);
    EXPECT_EQ(exit_status, 0) << help;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("No flags matched"))) << help;
    for (const char* flag :
         {"--listen  (default: \"127.0.0.1:50051\")",
          "--metrics_listen  (default: \"127.0.0.1:9464\")", "--solver_threads",
          "--queue_capacity  (default: \"1024\")",
          "--data_dir  (default: \"reach-data\")", "--in_memory",
          "--max_joints", "--max_goals", "--max_iterations", "--max_batch",
          "--max_message_bytes", "--max_streams", "--stream_window",
          "--shutdown_grace  (default: \"10s\")"}) {
      EXPECT_THAT(out, HasSubstr(flag)) << help;
    }
    EXPECT_THAT(out, HasSubstr("gRPC listen address")) << help;
    // Sorted.
    const size_t flags = out.find("Flags:");
    ASSERT_NE(flags, std::string::npos) << help;
    EXPECT_LT(out.find("--data_dir", flags), out.find("--listen", flags));
    EXPECT_LT(out.find("--listen", flags), out.find("--shutdown_grace", flags));
  }
}

// --version: the project's version, this build's type and the commit CMake
// saw, not Abseil's "Debug build" (issue 46).
TEST(ServerBinaryTest, VersionNamesTheReleaseTheBuildAndTheCommit) {
  // The commit, when the source tree is a git checkout: 12 hex digits.
  const std::string want =
      absl::StrCat("reach-server ", REACH_PROJECT_VERSION, " \\(",
                   testing::RegexLiteral(REACH_BUILD_TYPE_STRING),
                   " build(, commit [0-9a-f]{12})?\\)\n");
  for (const char* flag : {"--version", "-version"}) {
    int exit_status = -1;
    const std::string out =
        RunCommand(absl::StrCat(REACH_SERVER_BINARY, " ", flag), &exit_status);
    EXPECT_EQ(exit_status, 0) << flag;
    EXPECT_THAT(out, ::testing::MatchesRegex(want)) << flag;
    EXPECT_THAT(out, ::testing::Not(HasSubstr("Debug build"))) << flag;
  }
  EXPECT_THAT(std::string(REACH_PROJECT_VERSION),
              ::testing::MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  int exit_status = -1;
  EXPECT_THAT(
      RunCommand(absl::StrCat(REACH_SERVER_BINARY, " --help"), &exit_status),
      HasSubstr("--version"));
}

// A reach-server child on kernel-picked ports, its stderr in a file.
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& log_path) : log_path_(log_path) {
    std::vector<std::string> args = {REACH_SERVER_BINARY,
                                     "--listen=127.0.0.1:0",
                                     "--metrics_listen=", "--http_listen=",
                                     "--in_memory"};
    pid_ = fork();
    if (pid_ == 0) {
      const int fd =
          open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Started once the config line (after the one with the port) is out.
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (absl::Now() < give_up) {
      const std::string log = ReadFile(log_path_);
      const size_t port = log.find("(port ");
      if (port != std::string::npos &&
          log.find("config:") != std::string::npos) {
        port_ = std::atoi(log.c_str() + port + 6);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }
  std::string log() const { return ReadFile(log_path_); }

  // SIGTERM; the exit status, or -1 if it did not exit within `timeout`.
  int Terminate(absl::Duration timeout) {
    kill(pid_, SIGTERM);
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
};

// SolveRequest{skeleton_id: C3 28}: not UTF-8, so it does not parse, and
// libprotobuf logs one line for every such request.
const std::string kInvalidUtf8Solve("\x0a\x02\xc3\x28", 4);

void Flood(const ServerProcess& server, int requests) {
  for (int i = 0; i < requests; ++i) {
    const grpc::Status status = RawUnaryCall(
        server.channel(), "/reach.v1.IkService/Solve", kInvalidUtf8Solve);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message();
  }
}

TEST(ServerBinaryTest, AFloodOfInvalidUtf8LogsAtMostABurst) {
  char pattern[] = "/tmp/reach_binary_test_XXXXXX";
  const std::string dir = mkdtemp(pattern);
  ServerProcess server(dir + "/server.log");
  ASSERT_GT(server.port(), 0) << server.log();
  const size_t started = Lines(server.log()).size();

  Flood(server, 500);
  std::vector<std::string> lines = Lines(server.log());
  std::vector<std::string> flood(lines.begin() + started, lines.end());
  // libprotobuf's own lines, through the process-wide limit.
  EXPECT_GE(CountContaining(flood, "libprotobuf"), 1);
  EXPECT_LE(static_cast<int>(flood.size()), kProcessLogBurst)
      << absl::StrJoin(flood, "\n");

  // After a quiet spell, the next line is preceded by the count of those
  // that were not written.
  absl::SleepFor(kProcessLogPeriod + absl::Milliseconds(500));
  Flood(server, 1);
  lines = Lines(server.log());
  const std::vector<std::string> after(lines.begin() + started + flood.size(),
                                       lines.end());
  ASSERT_GE(after.size(), 2u) << absl::StrJoin(after, "\n");
  EXPECT_THAT(after[0],
              HasSubstr(absl::StrCat(500 - static_cast<int>(flood.size()),
                                     " lines suppressed")));
  EXPECT_THAT(after[1], HasSubstr("libprotobuf"));

  // Shutdown's lines are written even while the limit is spent.
  Flood(server, 50);
  EXPECT_EQ(server.Terminate(absl::Seconds(30)), 0) << server.log();
  EXPECT_THAT(server.log(), HasSubstr("shutting down"));
  EXPECT_THAT(server.log(), HasSubstr("reach-server stopped"));
}

}  // namespace
}  // namespace reach
