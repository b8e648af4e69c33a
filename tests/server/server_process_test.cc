// The reach-server binary itself: persistence across kill -9 and restart,
// graceful SIGTERM that drains an open stream, /metrics through promtool.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/sha.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;

std::string TempDir() {
  char pattern[] = "/tmp/reach_process_test_XXXXXX";
  return mkdtemp(pattern);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A reach-server child process on kernel-picked ports, its log in a file.
class ServerProcess {
 public:
  ServerProcess(const std::string& data_dir, std::vector<std::string> flags = {})
      : log_path_(data_dir + "/server.log." + std::to_string(++starts_)) {
    std::vector<std::string> args = {REACH_SERVER_BINARY,
                                     "--listen=127.0.0.1:0",
                                     "--metrics_listen=127.0.0.1:0", "--http_listen=",
                                     "--data_dir=" + data_dir};
    args.insert(args.end(), flags.begin(), flags.end());
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Wait for the start line: "... (port N); metrics on ... (port M)".
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (absl::Now() < give_up) {
      const std::string log = ReadFile(log_path_);
      const size_t first = log.find("(port ");
      const size_t second =
          first == std::string::npos ? first : log.find("(port ", first + 1);
      if (second != std::string::npos) {
        port_ = std::atoi(log.c_str() + first + 6);
        metrics_port_ = std::atoi(log.c_str() + second + 6);
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::IkService::NewStub(channel_);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  pid_t pid() const { return pid_; }
  v1::IkService::Stub& stub() { return *stub_; }
  std::string log() const { return ReadFile(log_path_); }

  void Signal(int signal) { kill(pid_, signal); }
  // The exit status, or -1 if the process did not exit within `timeout`.
  int WaitForExit(absl::Duration timeout) {
    const absl::Time give_up = absl::Now() + timeout;
    while (absl::Now() < give_up) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status)
                                 : 128 + WTERMSIG(status);
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return -1;
  }

 private:
  static inline int starts_ = 0;
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::IkService::Stub> stub_;
};

bool Known(v1::IkService::Stub& stub, const std::string& id) {
  v1::GetSkeletonRequest request;
  request.set_skeleton_id(id);
  v1::GetSkeletonResponse response;
  return stub.GetSkeleton(Context().get(), request, &response).ok();
}

TEST(ServerProcessTest, AcknowledgedRegistrationSurvivesKillNineAndRestart) {
  const std::string dir = TempDir();
  std::string leg_id, humanoid_id;
  {
    ServerProcess server(dir);
    ASSERT_GT(server.port(), 0) << server.log();
    leg_id = MustRegister(server.stub(), ToWire(testing::TwoBoneLegDef(), "leg"));
    humanoid_id =
        MustRegister(server.stub(), ToWire(testing::HumanoidDef(), "humanoid"));
    server.Signal(SIGKILL);  // No chance to flush anything.
    EXPECT_EQ(server.WaitForExit(absl::Seconds(10)), 128 + SIGKILL);
  }
  {
    ServerProcess server(dir);
    ASSERT_GT(server.port(), 0) << server.log();
    EXPECT_TRUE(Known(server.stub(), leg_id));
    EXPECT_TRUE(Known(server.stub(), humanoid_id));
    EXPECT_THAT(server.log(), HasSubstr("skeletons=2"));
    server.Signal(SIGTERM);
    EXPECT_EQ(server.WaitForExit(absl::Seconds(20)), 0) << server.log();
  }
  {
    ServerProcess server(dir);  // And after a clean restart.
    ASSERT_GT(server.port(), 0) << server.log();
    EXPECT_TRUE(Known(server.stub(), leg_id));
  }
}

// Issue 43, 2: a second reach-server on a data directory in use refuses
// to start (exit 1) and names the first: its pid and gRPC address.
TEST(ServerProcessTest, SecondServerOnADataDirectoryNamesTheFirst) {
  const std::string dir = TempDir();
  ServerProcess first(dir);
  ASSERT_GT(first.port(), 0) << first.log();
  const std::string log = dir + "/second.log";
  const std::string command = absl::StrCat(
      REACH_SERVER_BINARY, " --listen=127.0.0.1:0 --metrics_listen= "
      "--http_listen= --data_dir=", dir, " 2>", log);
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  EXPECT_THAT(ReadFile(log),
              HasSubstr(absl::StrCat("is in use by another reach-server (pid ",
                                     first.pid(), ", gRPC on 127.0.0.1:",
                                     first.port())));
  // The first serves on.
  const std::string id =
      MustRegister(first.stub(), ToWire(testing::TwoBoneLegDef(), "leg"));
  EXPECT_TRUE(Known(first.stub(), id));
}

TEST(ServerProcessTest, SigtermDrainsAnOpenStreamAndExitsZero) {
  const std::string dir = TempDir();
  // A grace far beyond the queued work even under the sanitizers (about
  // 7 s there, 1 s in Release), so the drain, not the clock, is tested.
  ServerProcess server(dir, {"--solver_threads=1", "--shutdown_grace=90s"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string id = MustRegister(
      server.stub(), ToWire(testing::StraightChainDef(10), "chain"));

  // Slow frames (unreachable target, many restarts), so work is still
  // queued on the stream when SIGTERM arrives.
  constexpr int kFrames = 30;
  auto context = Context(180);
  auto stream = server.stub().SolveStream(context.get());
  for (int i = 0; i < kFrames; ++i) {
    v1::SolveRequest request;
    request.set_skeleton_id(id);
    request.set_sequence(i);
    v1::Goal goal =
        MakeGoal("chain", Eigen::Vector3d(3, 0, 0), v1::SOLVER_JACOBIAN_DLS);
    goal.mutable_options()->set_max_restarts(100);
    *request.add_goals() = goal;
    ASSERT_TRUE(stream->Write(request));
  }
  v1::SolveResponse response;
  ASSERT_TRUE(stream->Read(&response));  // Solving has started.
  absl::SleepFor(absl::Milliseconds(100));  // The server reads ahead.
  server.Signal(SIGTERM);
  int answered = 1;
  while (stream->Read(&response)) {
    EXPECT_EQ(response.sequence(), static_cast<uint64_t>(answered));
    EXPECT_FALSE(response.has_error()) << response.error().message();
    ++answered;
  }
  const grpc::Status status = stream->Finish();
  std::printf("answered %d of %d frames after SIGTERM; status %d %s\n",
              answered, kFrames, status.error_code(),
              status.error_message().c_str());
  EXPECT_EQ(answered, kFrames);  // Every frame sent before SIGTERM.
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  EXPECT_EQ(server.WaitForExit(absl::Seconds(120)), 0) << server.log();
  EXPECT_THAT(server.log(), HasSubstr("shutting down"));
  EXPECT_THAT(server.log(), HasSubstr("reach-server stopped"));
}

TEST(ServerProcessTest, MetricsPassPromtool) {
  const std::string dir = TempDir();
  ServerProcess server(dir);
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string id =
      MustRegister(server.stub(), ToWire(testing::TwoBoneLegDef(), "leg"));
  // Some traffic of every kind, including an error.
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.1, -0.5, 0.2));
  v1::SolveResponse response;
  ASSERT_TRUE(server.stub().Solve(Context().get(), request, &response).ok());
  // The full-body solver: its label is in the families too.
  v1::SolveRequest full_body = request;
  full_body.mutable_goals(0)->set_solver(v1::SOLVER_FULL_BODY);
  ASSERT_TRUE(server.stub().Solve(Context().get(), full_body, &response).ok());
  request.set_skeleton_id("nope");
  EXPECT_FALSE(server.stub().Solve(Context().get(), request, &response).ok());

  const std::string metrics_file = dir + "/metrics.txt";
  const std::string curl =
      absl::StrCat("curl -sf http://127.0.0.1:", server.metrics_port(),
                   "/metrics -o ", metrics_file);
  ASSERT_EQ(std::system(curl.c_str()), 0);
  const std::string text = ReadFile(metrics_file);
  for (const char* family :
       {"grpc_server_started_total", "grpc_server_handled_total",
        "grpc_server_handling_seconds_bucket", "grpc_server_msg_received_total",
        "grpc_server_msg_sent_total", "reach_solve_duration_seconds_bucket",
        "reach_solve_iterations_bucket", "reach_solve_position_error_bucket",
        "reach_goals_total", "reach_queue_wait_seconds_bucket",
        "reach_queue_depth", "reach_queue_capacity", "reach_active_streams", "reach_skeletons",
        "reach_stream_frames_skipped_total", "process_cpu_seconds_total",
        "process_resident_memory_bytes"}) {
    EXPECT_THAT(text, HasSubstr(family));
  }
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"NotFound\","
                              "grpc_method=\"Solve\",grpc_service=\"reach.v1."
                              "IkService\",grpc_type=\"unary\"} 1"));
  EXPECT_THAT(text, HasSubstr("reach_skeletons 1"));
  EXPECT_THAT(text, HasSubstr("reach_solve_duration_seconds_count{solver="
                              "\"full_body\"} 1"));
  EXPECT_THAT(text, HasSubstr("reach_goals_total{outcome=\"reached\","
                              "solver=\"full_body\"} 1"));
  const std::string promtool =
      absl::StrCat("promtool check metrics < ", metrics_file, " 2>&1");
  FILE* pipe = popen(promtool.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int rc = pclose(pipe);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_EQ(output, "") << output;
}

TEST(ServerProcessTest, SigtermWithALongSolveRunningExitsWithinTheGrace) {
  const std::string dir = TempDir();
  ServerProcess server(dir, {"--in_memory", "--max_solve_ms=0",
                             "--shutdown_grace=2s", "--solver_threads=1"});
  const std::string id = MustRegister(
      server.stub(), ToWire(testing::StraightChainDef(32), "chain"));
  grpc::Status status;
  std::thread call([&] {
    v1::SolveResponse response;
    // Uncapped, this solve would run for an hour.
    status = server.stub().Solve(Context(600).get(),
                                 testing::ExpensiveSolveRequest(id), &response);
  });
  absl::SleepFor(absl::Milliseconds(300));
  server.Signal(SIGTERM);
  // The grace (2 s) lets it run, then it is cancelled and stops within a
  // few iterations; a generous hang guard, not a timing measurement.
  EXPECT_EQ(server.WaitForExit(absl::Seconds(8)), 0) << server.log();
  call.join();
  EXPECT_FALSE(status.ok());
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

std::string Sha256Hex(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(),
         digest);
  std::string hex;
  for (unsigned char byte : digest) absl::StrAppend(&hex, absl::Hex(byte, absl::kZeroPad2));
  return hex;
}

grpc::Status ListAs(v1::IkService::Stub& stub, const std::string& token) {
  std::unique_ptr<grpc::ClientContext> context = Context(10);
  context->AddMetadata("authorization", "Bearer " + token);
  v1::ListSkeletonsResponse response;
  return stub.ListSkeletons(context.get(), {}, &response);
}

TEST(ServerProcessTest, SighupReloadsTheTokenFile) {
  const std::string dir = TempDir();
  const std::string tokens = dir + "/tokens";
  const auto write = [&](const std::string& token) {
    std::ofstream(tokens + ".tmp")
        << "game " << Sha256Hex(token) << " solve\n";
    std::rename((tokens + ".tmp").c_str(), tokens.c_str());
  };
  write("first-token");
  // No watching: only SIGHUP reads the file again.
  ServerProcess server(dir, {"--auth_tokens_file=" + tokens,
                             "--auth_reload_interval=0"});
  ASSERT_GT(server.port(), 0) << server.log();
  EXPECT_TRUE(ListAs(server.stub(), "first-token").ok());
  write("second-token");
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(ListAs(server.stub(), "first-token").ok());  // Not yet.
  server.Signal(SIGHUP);
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (!ListAs(server.stub(), "second-token").ok() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(ListAs(server.stub(), "second-token").ok()) << server.log();
  EXPECT_EQ(ListAs(server.stub(), "first-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(server.log(), HasSubstr("SIGHUP: auth tokens reloaded (1 tokens)"));
  // SIGTERM still shuts down.
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitForExit(absl::Seconds(15)), 0) << server.log();
}

}  // namespace
}  // namespace reach
