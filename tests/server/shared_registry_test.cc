// Issue 43, 1: many reach-server replicas, one registry in PostgreSQL. A
// real PostgreSQL (initdb into a temporary directory, a unix socket) and
// real reach-server processes, started at once on a fresh database (the
// schema is made by one of them). Exits 77 (CTest: skipped) only when the
// PostgreSQL binaries are absent; scripts/setup installs them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/connect.h"
#include "client/reach_client.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "reach/v1/retarget.grpc.pb.h"
#include "tests/testing/http.h"
#include "tests/testing/models.h"
#include "tests/testing/postgres.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::ScratchPostgres;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A reach-server child process on the shared registry, its log in a file.
// Start() forks; Wait() waits for its start line (so several start at
// once).
class Replica {
 public:
  Replica(std::string name, const std::string& url,
          std::vector<std::string> flags = {})
      : name_(std::move(name)) {
    char pattern[] = "/tmp/reach_replica_XXXXXX";
    log_path_ = std::string(mkdtemp(pattern)) + "/server.log";
    args_ = {REACH_SERVER_BINARY, "--listen=127.0.0.1:0",
             "--metrics_listen=127.0.0.1:0", "--http_listen=",
             "--solver_threads=1", "--registry=" + url};
    args_.insert(args_.end(), flags.begin(), flags.end());
  }
  ~Replica() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // The registry URL from the environment instead of argv (absl's
  // --fromenv reads FLAGS_registry), as deploy/k8s gives it from a Secret.
  void RegistryFromEnv() {
    for (std::string& a : args_) {
      if (a.rfind("--registry=", 0) == 0) {
        env_registry_ = a.substr(std::strlen("--registry="));
        a = "--fromenv=registry";
      }
    }
  }

  void Start() {
    pid_ = fork();
    if (pid_ == 0) {
      if (!env_registry_.empty()) {
        setenv("FLAGS_registry", env_registry_.c_str(), 1);
      }
      const int fd =
          open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (std::string& a : args_) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }

  // Whether it started (its ports are known).
  bool Wait() {
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    while (absl::Now() < give_up) {
      const std::string log = ReadFile(log_path_);
      const size_t first = log.find("(port ");
      const size_t second =
          first == std::string::npos ? first : log.find("(port ", first + 1);
      if (second != std::string::npos) {
        port_ = std::atoi(log.c_str() + first + 6);
        metrics_port_ = std::atoi(log.c_str() + second + 6);
        channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                       grpc::InsecureChannelCredentials());
        ik_ = v1::IkService::NewStub(channel_);
        retarget_ = v1::RetargetService::NewStub(channel_);
        health_ = grpc::health::v1::Health::NewStub(channel_);
        return true;
      }
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // SIGKILL: Kill(). Another signal is only sent (a drain takes its time;
  // the destructor reaps the process).
  void Signal(int signal) {
    if (signal == SIGKILL) return Kill();
    kill(pid_, signal);
  }
  int metrics_port() const { return metrics_port_; }
  v1::IkService::Stub& ik() { return *ik_; }
  v1::RetargetService::Stub& retarget() { return *retarget_; }
  std::string log() const { return ReadFile(log_path_); }

  // "SERVING", "NOT_SERVING", or the call's error.
  std::string Health(const std::string& service) {
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status status =
        health_->Check(Context(5).get(), request, &response);
    if (!status.ok()) return status.error_message();
    return HealthCheckResponse::ServingStatus_Name(response.status());
  }
  std::string Metrics() {
    return testing::HttpGet(metrics_port_, "/metrics", absl::Seconds(5));
  }

 private:
  std::string name_;
  std::string log_path_;
  std::vector<std::string> args_;
  std::string env_registry_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::IkService::Stub> ik_;
  std::unique_ptr<v1::RetargetService::Stub> retarget_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// Polls `done` every 10 ms for up to `timeout`; the time it took, or
// InfiniteDuration when it never held.
absl::Duration Within(absl::Duration timeout, const std::function<bool()>& done) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    if (done()) return absl::Now() - start;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::InfiniteDuration();
}

grpc::Status Solve(v1::IkService::Stub& stub, const std::string& id) {
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.2, 0, -0.6));
  v1::SolveResponse response;
  return stub.Solve(Context(10).get(), request, &response);
}

grpc::Status Register(v1::IkService::Stub& stub, const v1::Skeleton& skeleton,
                      std::string* id = nullptr) {
  v1::RegisterSkeletonRequest request;
  *request.mutable_skeleton() = skeleton;
  v1::RegisterSkeletonResponse response;
  grpc::Status status =
      stub.RegisterSkeleton(Context(10).get(), request, &response);
  if (id != nullptr) *id = response.skeleton_id();
  return status;
}

grpc::StatusCode GetSkeletonCode(v1::IkService::Stub& stub,
                                 const std::string& id) {
  v1::GetSkeletonRequest request;
  request.set_skeleton_id(id);
  v1::GetSkeletonResponse response;
  return stub.GetSkeleton(Context(5).get(), request, &response).error_code();
}

// The ids ListSkeletons shows: what the replica holds (no read-through).
std::vector<std::string> Listed(v1::IkService::Stub& stub) {
  v1::ListSkeletonsRequest request;
  request.set_page_size(1000);
  v1::ListSkeletonsResponse response;
  std::vector<std::string> ids;
  if (stub.ListSkeletons(Context(5).get(), request, &response).ok()) {
    for (const auto& s : response.skeletons()) ids.push_back(s.skeleton_id());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A distinct small skeleton: the leg, named `name`.
v1::Skeleton Leg(const std::string& name) {
  return ToWire(testing::TwoBoneLegDef(), name);
}

// The value of the metric line that starts with `prefix` (name and
// labels), or -1.
double MetricValue(const std::string& metrics, const std::string& prefix) {
  std::istringstream lines(metrics);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0 && line.size() > prefix.size() &&
        (line[prefix.size()] == ' ' || line[prefix.size()] == '{')) {
      return std::atof(line.substr(line.rfind(' ') + 1).c_str());
    }
  }
  return -1;
}

class SharedRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<ScratchPostgres>> pg =
        ScratchPostgres::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
  }

  // Starts replicas A, B, C at once on the fresh database.
  void StartReplicas(const std::vector<std::string>& flags = {}) {
    for (const char* name : {"A", "B", "C"}) {
      replicas_.push_back(std::make_unique<Replica>(name, pg_->url(), flags));
    }
    for (auto& replica : replicas_) replica->Start();
    int migrated = 0;
    for (auto& replica : replicas_) {
      ASSERT_TRUE(replica->Wait()) << replica->name() << ": " << replica->log();
      migrated += replica->log().find("schema migrated") != std::string::npos;
    }
    // Concurrent starts: one made the schema, none raced.
    EXPECT_EQ(migrated, 1);
  }
  Replica& A() { return *replicas_[0]; }
  Replica& B() { return *replicas_[1]; }
  Replica& C() { return *replicas_[2]; }

  std::unique_ptr<ScratchPostgres> pg_;
  std::vector<std::unique_ptr<Replica>> replicas_;
};

TEST_F(SharedRegistryTest, ReadThroughPropagationAndOneWinnerPerVersion) {
  StartReplicas();
  // Registered on A, solved on B at once: B reads it through.
  std::string leg;
  ASSERT_TRUE(Register(A().ik(), Leg("leg"), &leg).ok());
  const grpc::Status solved = Solve(B().ik(), leg);
  EXPECT_TRUE(solved.ok()) << solved.error_message();
  EXPECT_EQ(GetSkeletonCode(C().ik(), leg), grpc::StatusCode::OK);
  // B's metrics: the first solve read and built the skeleton (a cache
  // miss), the second found it built; an id B does not hold costs one
  // read-through (and is a miss too: the cache did not have it).
  ASSERT_TRUE(Solve(B().ik(), leg).ok());
  const double read_throughs =
      MetricValue(B().Metrics(), "reach_registry_read_throughs_total");
  ASSERT_GE(read_throughs, 0);
  EXPECT_EQ(Solve(B().ik(), std::string(64, 'e')).error_code(),
            grpc::StatusCode::NOT_FOUND);
  const std::string metrics = B().Metrics();
  EXPECT_EQ(MetricValue(metrics, "reach_registry_read_throughs_total"),
            read_throughs + 1);
  EXPECT_EQ(MetricValue(metrics, "reach_skeleton_cache_misses_total"), 2);
  EXPECT_EQ(MetricValue(metrics, "reach_skeleton_cache_hits_total"), 1);

  // A profile made on A, updated on B, seen by C within 1 s.
  const v1::ImportSkeletonResponse source = testing::MustImport(
      A().ik(), std::string(REACH_TEST_DATA) + "/mocap/cmu_02_01_walk.bvh",
      false);
  const v1::ImportSkeletonResponse target = testing::MustImport(
      A().ik(), std::string(REACH_TEST_DATA) + "/rigs/BCN_Epileptic.glb",
      false);
  v1::CreateRetargetProfileRequest create;
  create.mutable_spec()->mutable_source()->set_skeleton_id(
      source.skeleton_id());
  create.mutable_spec()->mutable_target()->set_skeleton_id(
      target.skeleton_id());
  v1::CreateRetargetProfileResponse created;
  ASSERT_TRUE(A().retarget()
                  .CreateRetargetProfile(Context().get(), create, &created)
                  .ok());
  const std::string profile = created.profile().profile_id();
  int64_t version = created.profile().version();

  const auto update = [&](Replica& on, int64_t from, double contact_height,
                          v1::UpdateRetargetProfileResponse* out) {
    v1::UpdateRetargetProfileRequest request;
    request.set_profile_id(profile);
    request.set_version(from);
    *request.mutable_spec() = create.spec();
    request.mutable_spec()->set_contact_height(contact_height);
    return on.retarget().UpdateRetargetProfile(Context().get(), request, out);
  };
  const auto seen_by = [&](Replica& replica, int64_t v) {
    v1::GetRetargetProfileRequest request;
    request.set_profile_id(profile);
    v1::GetRetargetProfileResponse response;
    return replica.retarget()
               .GetRetargetProfile(Context(5).get(), request, &response)
               .ok() &&
           response.profile().version() == v;
  };
  ASSERT_TRUE(Within(absl::Seconds(1), [&] { return seen_by(C(), version); }) <
              absl::Seconds(1));
  v1::UpdateRetargetProfileResponse updated;
  grpc::Status status = update(B(), version, 0.3, &updated);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(updated.profile().profile_id(), profile);
  EXPECT_GT(updated.profile().version(), version);
  EXPECT_DOUBLE_EQ(updated.profile().spec().contact_height(), 0.3);
  version = updated.profile().version();
  const absl::Duration seen =
      Within(absl::Seconds(1), [&] { return seen_by(C(), version); });
  std::printf("profile update on B seen by C after %s\n",
              absl::FormatDuration(seen).c_str());
  EXPECT_LT(seen, absl::Seconds(1));
  // An update naming a replaced version: ABORTED, naming the field.
  status = update(C(), created.profile().version(), 0.4, &updated);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(status.error_message(), HasSubstr("version: "));

  // Two updates of one version at once, on B and C: exactly one wins,
  // every round.
  for (int round = 0; round < 5; ++round) {
    v1::UpdateRetargetProfileResponse on_b, on_c;
    grpc::Status b_status, c_status;
    std::thread b([&] { b_status = update(B(), version, 0.21 + round * 0.01, &on_b); });
    std::thread c([&] { c_status = update(C(), version, 0.31 + round * 0.01, &on_c); });
    b.join();
    c.join();
    ASSERT_NE(b_status.ok(), c_status.ok())
        << "round " << round << ": B " << b_status.error_message() << "; C "
        << c_status.error_message();
    const grpc::Status& lost = b_status.ok() ? c_status : b_status;
    EXPECT_EQ(lost.error_code(), grpc::StatusCode::ABORTED)
        << lost.error_message();
    version = (b_status.ok() ? on_b : on_c).profile().version();
    ASSERT_LT(Within(absl::Seconds(1),
                     [&] {
                       return seen_by(A(), version) && seen_by(B(), version) &&
                              seen_by(C(), version);
                     }),
              absl::Seconds(1));
  }

  // A delete on A: NOT_FOUND on B and C within 1 s (both held it).
  v1::DeleteSkeletonRequest remove;
  remove.set_skeleton_id(leg);
  v1::DeleteSkeletonResponse removed;
  ASSERT_TRUE(A().ik().DeleteSkeleton(Context().get(), remove, &removed).ok());
  const absl::Duration gone = Within(absl::Seconds(1), [&] {
    return GetSkeletonCode(B().ik(), leg) == grpc::StatusCode::NOT_FOUND &&
           GetSkeletonCode(C().ik(), leg) == grpc::StatusCode::NOT_FOUND &&
           Solve(B().ik(), leg).error_code() == grpc::StatusCode::NOT_FOUND;
  });
  std::printf("delete on A NOT_FOUND on B and C after %s\n",
              absl::FormatDuration(gone).c_str());
  EXPECT_LT(gone, absl::Seconds(1));
}

TEST_F(SharedRegistryTest, AQuotaHoldsAcrossAllReplicas) {
  // Without auth every loopback caller is one owner, "peer:loopback".
  StartReplicas({"--quota_skeletons=4"});
  std::atomic<int> ok{0}, refused{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      for (int i = 0; i < 4; ++i) {
        const grpc::Status status =
            Register(replicas_[r]->ik(), Leg(absl::StrCat("leg ", r, ".", i)));
        if (status.ok()) {
          ++ok;
        } else {
          EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
          EXPECT_THAT(status.error_message(), HasSubstr("--quota_skeletons"));
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 4);
  EXPECT_EQ(refused.load(), 8);
  // One deleted on B makes room on C.
  const std::vector<std::string> held = Listed(B().ik());
  ASSERT_EQ(held.size(), 4u);
  v1::DeleteSkeletonRequest remove;
  remove.set_skeleton_id(held[0]);
  v1::DeleteSkeletonResponse removed;
  ASSERT_TRUE(B().ik().DeleteSkeleton(Context().get(), remove, &removed).ok());
  EXPECT_TRUE(Register(C().ik(), Leg("one more")).ok());
  EXPECT_EQ(Register(A().ik(), Leg("and another")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(SharedRegistryTest, AKilledListenerResynchronisesAndMissesNothing) {
  StartReplicas();
  for (int round = 0; round < 3; ++round) {
    // C's listening connection killed; A changes things at once, while C
    // reconnects. (It is killed once it is there: at start, and after the
    // last round's kill, C may still be connecting, the more so under the
    // sanitizers.)
    const std::string listener = absl::StrCat(
        "FROM pg_stat_activity WHERE application_name = 'reach-listen-",
        C().pid(), "'");
    const absl::Time give_up = absl::Now() + absl::Seconds(20);
    absl::StatusOr<std::string> present;
    while ((present = pg_->Query(absl::StrCat("SELECT count(*) ", listener)))
                   .ok() &&
           *present != "1" && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_TRUE(present.ok()) << present.status();
    ASSERT_EQ(*present, "1") << "C's listener never connected";
    absl::StatusOr<std::string> killed = pg_->Query(absl::StrCat(
        "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) ", listener,
        ") k"));
    ASSERT_TRUE(killed.ok()) << killed.status();
    EXPECT_EQ(*killed, "1");
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
      std::string id;
      ASSERT_TRUE(
          Register(A().ik(), Leg(absl::StrCat("leg ", round, ".", i)), &id)
              .ok());
      ids.push_back(id);
    }
    v1::DeleteSkeletonRequest remove;
    remove.set_skeleton_id(ids.back());
    v1::DeleteSkeletonResponse removed;
    ASSERT_TRUE(
        A().ik().DeleteSkeleton(Context().get(), remove, &removed).ok());
    // What A holds, C holds (ListSkeletons: what it applied, no
    // read-through).
    const std::vector<std::string> expected = Listed(A().ik());
    ASSERT_EQ(expected.size(), static_cast<size_t>(3 * (round + 1)));
    const absl::Duration synced = Within(
        absl::Seconds(2), [&] { return Listed(C().ik()) == expected; });
    std::printf("round %d: C resynchronised after %s\n", round,
                absl::FormatDuration(synced).c_str());
    EXPECT_LT(synced, absl::Seconds(2)) << C().log();
  }
  EXPECT_THAT(C().log(), HasSubstr("listener's connection"));
  // Each kill is one reconnect on C's /metrics; A's listener never broke.
  EXPECT_EQ(
      MetricValue(C().Metrics(), "reach_registry_listener_reconnects_total"),
      3);
  EXPECT_EQ(
      MetricValue(A().Metrics(), "reach_registry_listener_reconnects_total"),
      0);
  // A killed listener is no outage: C kept taking writes.
  EXPECT_EQ(C().Health("reach.registry"), "SERVING");
}

TEST_F(SharedRegistryTest, DatabaseDownSolvesGoOnWritesUnavailableThenResume) {
  StartReplicas();
  std::string leg;
  ASSERT_TRUE(Register(A().ik(), Leg("leg"), &leg).ok());
  ASSERT_TRUE(Solve(B().ik(), leg).ok());
  // A stream open across the outage.
  grpc::ClientContext stream_context;
  auto stream = B().ik().SolveStream(&stream_context);
  uint64_t sequence = 0;
  const auto frame = [&]() -> bool {
    v1::SolveRequest request;
    request.set_skeleton_id(leg);
    request.set_sequence(++sequence);
    *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.2, 0, -0.6));
    v1::SolveResponse response;
    return stream->Write(request) && stream->Read(&response) &&
           !response.has_error() && response.sequence() == sequence;
  };
  ASSERT_TRUE(frame());

  ASSERT_TRUE(pg_->Stop().ok());
  const absl::Time stopped = absl::Now();
  int solves = 0, frames = 0, unavailable = 0, writes = 0;
  std::string message;
  while (absl::Now() - stopped < absl::Seconds(10)) {
    const grpc::Status solved = Solve(B().ik(), leg);
    EXPECT_TRUE(solved.ok()) << solved.error_message();
    solves += solved.ok();
    EXPECT_TRUE(frame());
    ++frames;
    std::string id;
    const grpc::Status written =
        Register(A().ik(), Leg(absl::StrCat("down ", writes++)), &id);
    EXPECT_EQ(written.error_code(), grpc::StatusCode::UNAVAILABLE)
        << written.error_message();
    if (written.error_code() == grpc::StatusCode::UNAVAILABLE) {
      ++unavailable;
      message = written.error_message();
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  std::printf("database down 10 s: %d solves, %d stream frames, %d of %d "
              "writes UNAVAILABLE: %s\n",
              solves, frames, unavailable, writes, message.c_str());
  EXPECT_THAT(message, HasSubstr("registry database"));
  EXPECT_THAT(message, HasSubstr("unreachable"));
  // Health and metrics say so; the server as a whole still serves.
  for (Replica* r : {&A(), &B(), &C()}) {
    EXPECT_EQ(r->Health("reach.registry"), "NOT_SERVING") << r->name();
    EXPECT_EQ(r->Health(""), "SERVING") << r->name();
    EXPECT_THAT(r->Metrics(), HasSubstr("reach_registry_store_up 0"))
        << r->name();
  }

  ASSERT_TRUE(pg_->Start().ok());
  const absl::Duration back = Within(absl::Seconds(10), [&] {
    return A().Health("reach.registry") == "SERVING" &&
           B().Health("reach.registry") == "SERVING" &&
           C().Health("reach.registry") == "SERVING";
  });
  std::printf("writable again %s after the database returned\n",
              absl::FormatDuration(back).c_str());
  ASSERT_LT(back, absl::Seconds(10));
  std::string fresh;
  const grpc::Status written = Register(A().ik(), Leg("after"), &fresh);
  ASSERT_TRUE(written.ok()) << written.error_message();
  EXPECT_LT(Within(absl::Seconds(1),
                   [&] {
                     const std::vector<std::string> held = Listed(C().ik());
                     return std::find(held.begin(), held.end(), fresh) !=
                            held.end();
                   }),
            absl::Seconds(1));
  EXPECT_TRUE(Solve(B().ik(), fresh).ok());
  EXPECT_TRUE(frame());
  EXPECT_THAT(A().Metrics(), HasSubstr("reach_registry_store_up 1"));
  stream->WritesDone();
}

// Solve calls a replica has started (its Prometheus counter).
double SolvesStarted(Replica& replica) {
  std::istringstream lines(replica.Metrics());
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("grpc_server_started_total{", 0) == 0 &&
        line.find("grpc_method=\"Solve\"") != std::string::npos) {
      return std::atof(line.substr(line.rfind(' ') + 1).c_str());
    }
  }
  return 0;
}

// "127.0.0.1:A,127.0.0.1:B,...": every replica, for a round-robin client.
std::string AddressList(const std::vector<std::unique_ptr<Replica>>& replicas) {
  std::string out;
  for (auto& r : replicas) {
    absl::StrAppend(&out, out.empty() ? "" : ",", "127.0.0.1:", r->port());
  }
  return out;
}

// Issue 43, 3: one client over three replicas spreads its calls evenly
// (gRPC's round_robin), from the C++ client and from the reach tool.
TEST_F(SharedRegistryTest, RoundRobinSpreadsCallsOverReplicas) {
  StartReplicas();
  std::string leg;
  ASSERT_TRUE(Register(A().ik(), Leg("leg"), &leg).ok());
  const std::string addresses = AddressList(replicas_);

  // A name the list cannot hold is refused, naming the part.
  client::ConnectOptions bad;
  bad.address = absl::StrCat(addresses, ",localhost:1");
  EXPECT_THAT(client::Connect(bad).status().message(),
              HasSubstr("address: part 4 'localhost:1'"));

  const auto check_spread = [&](const char* who,
                                const std::vector<double>& before) {
    double total = 0;
    std::vector<double> counts;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      counts.push_back(SolvesStarted(*replicas_[i]) - before[i]);
      total += counts.back();
    }
    EXPECT_GE(total, 3000) << who;
    for (size_t i = 0; i < counts.size(); ++i) {
      std::printf("%s: replica %s answered %.0f of %.0f Solve calls\n", who,
                  replicas_[i]->name().c_str(), counts[i], total);
      // Within 15 % of an even share.
      EXPECT_NEAR(counts[i], total / 3, 0.15 * total / 3)
          << who << " replica " << i;
    }
  };
  const auto counts_now = [&] {
    std::vector<double> counts;
    for (auto& r : replicas_) counts.push_back(SolvesStarted(*r));
    return counts;
  };

  // The C++ client.
  client::ConnectOptions connect;
  connect.address = addresses;
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::Connect(connect);
  ASSERT_TRUE(channel.ok()) << channel.status();
  // Connected (and a moment for the other replicas' connections), so the
  // spread is the policy's, not the order connections came up in.
  for (int i = 0; i < 100 && (*channel)->GetState(true) != GRPC_CHANNEL_READY;
       ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  client::ReachClient reach(*channel);
  absl::SleepFor(absl::Milliseconds(100));
  std::vector<double> before = counts_now();
  v1::SolveRequest request;
  request.set_skeleton_id(leg);
  *request.add_goals() = MakeGoal("leg", Eigen::Vector3d(0.2, 0, -0.6));
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(reach.Solve(request).ok()) << i;
  }
  check_spread("C++ client", before);

  // The reach tool (one channel, calls one after another).
  before = counts_now();
  const std::string command = absl::StrCat(
      REACH_CLI_BINARY, " --addr ", addresses,
      " bench --rpc solve --concurrency 1 --requests 3000 --skeleton ", leg,
      " >/dev/null 2>&1");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  check_spread("reach bench", before);
}

// Issue 43, 1: a replica's skeleton cache (--skeleton_cache_bytes) smaller
// than what is registered: every skeleton still solves (a miss reads its
// definition from the database), the cache's bytes never pass the bound, a
// delete on another replica reaches an evicted-then-reloaded entry, and
// with the database down cached skeletons still solve while an evicted one
// is UNAVAILABLE, saying why.
TEST_F(SharedRegistryTest, ABoundedCacheReadsThroughAndStaysWithinItsBytes) {
  StartReplicas();
  // Names of one length: every leg takes the same bytes.
  std::vector<std::string> legs(10);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(
        Register(A().ik(), Leg(std::string("leg ") + char('a' + i)), &legs[i])
            .ok());
  }
  // What one built leg takes, from B's cache.
  ASSERT_TRUE(Solve(B().ik(), legs[0]).ok());
  const double one =
      MetricValue(B().Metrics(), "reach_skeleton_cache_bytes");
  ASSERT_GT(one, 0);
  EXPECT_EQ(MetricValue(B().Metrics(), "reach_skeleton_cache_entries"), 1);

  // D: room for three of the ten.
  const int64_t limit = static_cast<int64_t>(3.5 * one);
  Replica d("D", pg_->url(),
            {absl::StrCat("--skeleton_cache_bytes=", limit)});
  d.Start();
  ASSERT_TRUE(d.Wait()) << d.log();
  EXPECT_EQ(MetricValue(d.Metrics(), "reach_skeleton_cache_limit_bytes"),
            limit);
  double most_bytes = 0, most_entries = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 10; ++i) {
      const grpc::Status solved = Solve(d.ik(), legs[i]);
      ASSERT_TRUE(solved.ok()) << i << ": " << solved.error_message();
      const std::string metrics = d.Metrics();
      most_bytes = std::max(
          most_bytes, MetricValue(metrics, "reach_skeleton_cache_bytes"));
      most_entries = std::max(
          most_entries, MetricValue(metrics, "reach_skeleton_cache_entries"));
    }
  }
  const std::string metrics = d.Metrics();
  std::printf("cache of %lld bytes (%.0f a leg): at most %.0f bytes, %.0f "
              "entries; %.0f hits, %.0f misses, %.0f evictions\n",
              static_cast<long long>(limit), one, most_bytes, most_entries,
              MetricValue(metrics, "reach_skeleton_cache_hits_total"),
              MetricValue(metrics, "reach_skeleton_cache_misses_total"),
              MetricValue(metrics, "reach_skeleton_cache_evictions_total"));
  EXPECT_LE(most_bytes, limit);
  EXPECT_EQ(most_entries, 3);
  // Ten legs in turn through three places: every solve missed.
  EXPECT_EQ(MetricValue(metrics, "reach_skeleton_cache_misses_total"), 30);
  EXPECT_EQ(MetricValue(metrics, "reach_skeleton_cache_evictions_total"), 27);
  // The same leg again is a hit.
  ASSERT_TRUE(Solve(d.ik(), legs[9]).ok());
  EXPECT_EQ(MetricValue(d.Metrics(), "reach_skeleton_cache_hits_total"), 1);

  // legs[0] was evicted; solved again it is reloaded and cached. A delete
  // on A reaches it within 1 s; registered again on A, it solves on D again.
  ASSERT_TRUE(Solve(d.ik(), legs[0]).ok());
  v1::DeleteSkeletonRequest remove;
  remove.set_skeleton_id(legs[0]);
  v1::DeleteSkeletonResponse removed;
  ASSERT_TRUE(A().ik().DeleteSkeleton(Context().get(), remove, &removed).ok());
  EXPECT_LT(Within(absl::Seconds(1),
                   [&] {
                     return Solve(d.ik(), legs[0]).error_code() ==
                            grpc::StatusCode::NOT_FOUND;
                   }),
            absl::Seconds(1));
  std::string again;
  ASSERT_TRUE(Register(A().ik(), Leg("leg a"), &again).ok());
  EXPECT_EQ(again, legs[0]);
  EXPECT_TRUE(Solve(d.ik(), legs[0]).ok());

  // Cached now: 9, 0 and 8 (solved last); legs[1] is not.
  ASSERT_TRUE(Solve(d.ik(), legs[8]).ok());
  ASSERT_TRUE(pg_->Stop().ok());
  for (int k = 0; k < 5; ++k) {
    for (int i : {0, 8, 9}) {
      const grpc::Status solved = Solve(d.ik(), legs[i]);
      EXPECT_TRUE(solved.ok()) << i << ": " << solved.error_message();
    }
  }
  const grpc::Status evicted = Solve(d.ik(), legs[1]);
  EXPECT_EQ(evicted.error_code(), grpc::StatusCode::UNAVAILABLE)
      << evicted.error_message();
  EXPECT_THAT(evicted.error_message(),
              HasSubstr("is not in this server's skeleton cache"));
  EXPECT_THAT(evicted.error_message(), HasSubstr("registry database"));
  EXPECT_THAT(evicted.error_message(), HasSubstr("unreachable"));
  std::printf("database down, an evicted skeleton: %s\n",
              evicted.error_message().c_str());
  ASSERT_TRUE(pg_->Start().ok());
  EXPECT_LT(Within(absl::Seconds(10),
                   [&] { return Solve(d.ik(), legs[1]).ok(); }),
            absl::Seconds(10));
}

// Issue 43, 4: `reach stream` over several replicas resumes by default
// (--resume) when the replica holding its stream is killed with -9: every
// frame answered once, in order (the tool counts an answer out of sequence
// as an error); with --no-resume the kill ends it with UNAVAILABLE.
TEST_F(SharedRegistryTest, TheReachToolResumesAStreamWhoseReplicaIsKilled) {
  StartReplicas();
  const std::string clip =
      std::string(REACH_TEST_DATA) + "/mocap/cmu_02_01_walk.bvh";
  constexpr int kFrames = 240;  // 4 s at 60 frames/s.
  struct Run {
    int code = -1;
    std::string out;
  };
  // Runs `reach` with `flags`, kills the replica holding its stream half a
  // second into it, and returns what the tool said.
  const auto run_and_kill = [&](const std::string& flags) {
    const std::string command = absl::StrCat(
        REACH_CLI_BINARY, " --addr ", AddressList(replicas_), " ", flags,
        " stream ", clip, " --fps 60 --frames ", kFrames,
        " --json --quiet 2>&1");
    Run run;
    std::thread tool([&] {
      FILE* pipe = popen(command.c_str(), "r");
      char buffer[4096];
      size_t n;
      while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
        run.out.append(buffer, n);
      }
      const int status = pclose(pipe);
      run.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    });
    Replica* holder = nullptr;
    Within(absl::Seconds(10), [&] {
      for (auto& r : replicas_) {
        if (r->pid() > 0 &&
            MetricValue(r->Metrics(), "reach_active_streams") == 1) {
          holder = r.get();
        }
      }
      return holder != nullptr;
    });
    EXPECT_NE(holder, nullptr) << command;
    if (holder != nullptr) {
      absl::SleepFor(absl::Milliseconds(500));
      holder->Kill();
      std::printf("killed replica %s, holding the stream of: %s\n",
                  holder->name().c_str(), command.c_str());
    }
    tool.join();
    return run;
  };

  // Several addresses: on by default.
  const Run resumed = run_and_kill("");
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_THAT(resumed.out, HasSubstr(absl::StrCat("\"frames\":", kFrames)));
  EXPECT_THAT(resumed.out, HasSubstr(absl::StrCat("\"solved\":", kFrames)));
  EXPECT_THAT(resumed.out, HasSubstr("\"errors\":0,"));
  EXPECT_THAT(resumed.out, HasSubstr("\"resumes\":1}"));
  std::printf("%s", resumed.out.c_str());

  const Run ended = run_and_kill("--no-resume");
  EXPECT_EQ(ended.code, 1) << ended.out;
  EXPECT_THAT(ended.out, HasSubstr("UNAVAILABLE"));
  std::printf("%s", ended.out.c_str());
}

// The pose after an answer: `pose` (local rotations, w x y z) with the
// answer's rotated joints replaced.
void Apply(const v1::SolveResponse& response,
           std::vector<Eigen::Quaterniond>* pose) {
  for (int i = 0; i < response.rotated_joints_size(); ++i) {
    (*pose)[response.rotated_joints(i)] = Eigen::Quaterniond(
        response.rotations(4 * i), response.rotations(4 * i + 1),
        response.rotations(4 * i + 2), response.rotations(4 * i + 3));
  }
}

// The largest rotation, radians, of any joint between two poses.
double LargestStep(const std::vector<Eigen::Quaterniond>& a,
                   const std::vector<Eigen::Quaterniond>& b) {
  double largest = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    const double dot =
        std::min(1.0, std::abs(a[j].normalized().dot(b[j].normalized())));
    largest = std::max(largest, 2 * std::acos(dot));
  }
  return largest;
}

// Issue 43, 4: the replica holding a stream goes away (killed with -9, or
// drained by SIGTERM); the client reopens the stream on another replica and
// goes on warm from the last answered pose: every frame answered once, in
// order, within 1 s, and no joint jumps more than twice the warm stream's
// largest step.
class StreamResumeTest : public SharedRegistryTest,
                         public ::testing::WithParamInterface<int> {};

INSTANTIATE_TEST_SUITE_P(KilledOrDrained, StreamResumeTest,
                         ::testing::Values(SIGKILL, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(
                               info.param == SIGKILL ? "Kill9" : "Sigterm");
                         });

TEST_P(StreamResumeTest, AStreamResumesWarmOnAnotherReplica) {
  StartReplicas();
  const v1::Skeleton chain = ToWire(testing::StraightChainDef(8), "chain8");
  std::string id;
  ASSERT_TRUE(Register(A().ik(), chain, &id).ok());

  client::ConnectOptions connect;
  connect.address = AddressList(replicas_);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::Connect(connect);
  ASSERT_TRUE(channel.ok()) << channel.status();
  client::ClientOptions options;
  options.resume_streams = true;
  client::ReachClient reach(*channel, options);
  std::unique_ptr<client::SolveStream> stream =
      reach.OpenStream(absl::Seconds(60), /*max_in_flight=*/4);

  constexpr int kFrames = 400;
  constexpr int kKillAt = 150;
  const auto frame = [&](int i) {
    v1::SolveRequest request;
    request.set_skeleton_id(id);
    request.set_sequence(i + 1);
    const double angle = 0.01 * i;
    *request.add_goals() = MakeGoal(
        "chain",
        Eigen::Vector3d(0.35 * std::cos(angle), 0.35 * std::sin(angle), 0.3),
        v1::SOLVER_FABRIK);
    return request;
  };
  std::atomic<int> sent{0};
  std::atomic<bool> sender_done{false};
  std::thread sender([&] {
    for (int i = 0; i < kFrames; ++i) {
      if (!stream->Send(frame(i))) break;
      sent = i + 1;
      absl::SleepFor(absl::Milliseconds(2));
    }
    sender_done = true;
  });

  std::vector<Eigen::Quaterniond> pose;
  for (const v1::Joint& joint : chain.joints()) {
    const v1::Quat& q = joint.rest().rotation();
    pose.push_back(joint.rest().has_rotation()
                       ? Eigen::Quaterniond(q.w(), q.x(), q.y(), q.z())
                       : Eigen::Quaterniond::Identity());
  }
  double warm_largest = 0, resumed_largest = 0;
  absl::Duration largest_gap;
  absl::Time last_answer = absl::Now(), killed_at = absl::InfiniteFuture();
  uint64_t expected = 1;
  for (int answered = 0; answered < kFrames;) {
    client::StreamResult result;
    const bool all_sent = sender_done;
    if (!stream->Receive(&result)) {
      // Every frame sent so far is answered: wait for the sender.
      if (all_sent) break;
      absl::SleepFor(absl::Milliseconds(1));
      continue;
    }
    ++answered;
    const absl::Time now = absl::Now();
    ASSERT_EQ(result.response.sequence(), expected) << "in order, once each";
    ++expected;
    ASSERT_FALSE(result.response.has_error())
        << result.response.error().message();
    std::vector<Eigen::Quaterniond> next = pose;
    Apply(result.response, &next);
    const double step = LargestStep(pose, next);
    pose = std::move(next);
    if (answered > 10 && answered <= kKillAt) {
      warm_largest = std::max(warm_largest, step);
    } else if (answered > kKillAt) {
      resumed_largest = std::max(resumed_largest, step);
      largest_gap = std::max(largest_gap, now - last_answer);
    }
    last_answer = now;
    if (answered == kKillAt) {
      // Kill the replica that holds the stream.
      Replica* holder = nullptr;
      for (auto& r : replicas_) {
        if (MetricValue(r->Metrics(), "reach_active_streams") == 1) {
          holder = r.get();
        }
      }
      ASSERT_NE(holder, nullptr);
      std::printf("signal %d to replica %s (pid %d), which holds the stream\n",
                  GetParam(), holder->name().c_str(), holder->pid());
      holder->Signal(GetParam());
      killed_at = absl::Now();
    }
  }
  sender.join();
  const absl::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished;
  EXPECT_EQ(expected, kFrames + 1u) << "every frame answered";
  // A drained replica may refuse a reopened call before it goes: again.
  EXPECT_GE(stream->resumes(), 1);
  std::printf(
      "resumed: largest gap between answers %s; largest joint step warm "
      "%.4f rad, across the resume %.4f rad\n",
      absl::FormatDuration(largest_gap).c_str(), warm_largest, resumed_largest);
  EXPECT_LT(largest_gap, absl::Seconds(1));
  EXPECT_GT(warm_largest, 0);
  EXPECT_LE(resumed_largest, 2 * warm_largest);
  EXPECT_LT(killed_at, absl::InfiniteFuture());
}

// --max_connection_age closes every connection after about that long
// (GOAWAY), and cancels what is still open after the grace: a resuming
// stream carries on over it, each frame answered once, in order, and unary
// calls go on.
TEST_F(SharedRegistryTest, ConnectionsAgeOutAndResumingStreamsCarryOn) {
  StartReplicas(
      {"--max_connection_age=300ms", "--max_connection_age_grace=100ms"});
  const v1::Skeleton chain = ToWire(testing::StraightChainDef(4), "chain4");
  std::string id;
  ASSERT_TRUE(Register(A().ik(), chain, &id).ok());
  client::ConnectOptions connect;
  connect.address = AddressList(replicas_);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::Connect(connect);
  ASSERT_TRUE(channel.ok()) << channel.status();
  client::ClientOptions options;
  options.resume_streams = true;
  client::ReachClient reach(*channel, options);
  std::unique_ptr<client::SolveStream> stream =
      reach.OpenStream(absl::Seconds(30), /*max_in_flight=*/2);
  const absl::Time end = absl::Now() + absl::Milliseconds(1500);
  uint64_t sent = 0, expected = 1;
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal("chain", Eigen::Vector3d(0.1, 0.1, 0.25));
  while (absl::Now() < end) {
    request.set_sequence(++sent);
    ASSERT_TRUE(stream->Send(request)) << stream->Finish();
    client::StreamResult result;
    while (stream->TryReceive(&result)) {
      ASSERT_EQ(result.response.sequence(), expected++);
    }
    EXPECT_TRUE(reach.Solve(request).ok());
    absl::SleepFor(absl::Milliseconds(5));
  }
  const absl::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished;
  client::StreamResult result;
  while (stream->TryReceive(&result)) {
    ASSERT_EQ(result.response.sequence(), expected++);
  }
  EXPECT_EQ(expected, sent + 1);
  std::printf("%llu frames over 1.5 s, the stream reopened %d times\n",
              static_cast<unsigned long long>(sent), stream->resumes());
  EXPECT_GE(stream->resumes(), 1);
}

// A free loopback port (bound, read, released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

// Through haproxy (HTTP/2 to the replicas, as deploy/haproxy), a replica
// killed under a stream does not end it with UNAVAILABLE: haproxy has
// already forwarded the answers' headers, so it resets the client's
// stream (RST_STREAM CANCEL, which gRPC reports as CANCELLED). The client
// did not cancel, so it resumes on another replica all the same.
TEST_F(SharedRegistryTest, AStreamThroughHaproxyResumesWhenItsReplicaIsKilled) {
  if (system("command -v haproxy >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "haproxy is not installed (scripts/setup installs it)";
  }
  StartReplicas();
  char pattern[] = "/tmp/reach_haproxy_XXXXXX";
  const std::string dir = mkdtemp(pattern);
  const int port = FreePort();
  std::string config = absl::StrCat(
      "defaults\n  mode http\n  timeout connect 5s\n  timeout client 1h\n"
      "  timeout server 1h\n",
      "frontend grpc\n  bind 127.0.0.1:", port,
      " proto h2\n  default_backend reach\n",
      "backend reach\n  balance roundrobin\n"
      "  default-server proto h2 check inter 1s fall 2 rise 1\n");
  for (const auto& r : replicas_) {
    absl::StrAppend(&config, "  server ", r->name(), " 127.0.0.1:", r->port(),
                    "\n");
  }
  std::ofstream(dir + "/haproxy.cfg") << config;
  const pid_t haproxy = fork();
  if (haproxy == 0) {
    const int fd = open((dir + "/haproxy.log").c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    execlp("haproxy", "haproxy", "-db", "-f", (dir + "/haproxy.cfg").c_str(),
           static_cast<char*>(nullptr));
    _exit(127);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  } reap{haproxy};

  // haproxy listening before the client connects (a refused first
  // connection would put the channel into its reconnect backoff).
  const auto listening = [port] {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address),
                            sizeof(address)) == 0;
    close(fd);
    return ok;
  };
  ASSERT_LT(Within(absl::Seconds(20), listening), absl::Seconds(20))
      << "haproxy does not listen on " << port << ": "
      << ReadFile(dir + "/haproxy.log");

  const v1::Skeleton chain = ToWire(testing::StraightChainDef(4), "chain4");
  std::string id;
  ASSERT_TRUE(Register(A().ik(), chain, &id).ok());
  client::ConnectOptions connect;
  connect.address = absl::StrCat("127.0.0.1:", port);
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      client::Connect(connect);
  ASSERT_TRUE(channel.ok()) << channel.status();
  client::ClientOptions options;
  options.resume_streams = true;
  client::ReachClient reach(*channel, options);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> health;
  ASSERT_TRUE(Within(absl::Seconds(10),
                     [&] { return (health = reach.Health()).ok(); }) <
              absl::Seconds(10))
      << health.status() << "\n"
      << ReadFile(dir + "/haproxy.log");

  std::unique_ptr<client::SolveStream> stream =
      reach.OpenStream(absl::Seconds(60), /*max_in_flight=*/2);
  constexpr int kFrames = 300, kKillAt = 100;
  uint64_t expected = 1;
  std::string killed;
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  absl::Duration largest_gap;
  absl::Time last = absl::Now();
  for (int i = 1; i <= kFrames; ++i) {
    request.set_sequence(i);
    request.clear_goals();
    const double a = 0.01 * i;
    *request.add_goals() = MakeGoal(
        "chain", Eigen::Vector3d(0.2 * std::cos(a), 0.2 * std::sin(a), 0.25));
    ASSERT_TRUE(stream->Send(request)) << stream->Finish();
    client::StreamResult result;
    while (stream->TryReceive(&result)) {
      ASSERT_EQ(result.response.sequence(), expected++);
      const absl::Time now = absl::Now();
      if (!killed.empty()) largest_gap = std::max(largest_gap, now - last);
      last = now;
    }
    if (killed.empty() && expected > kKillAt) {
      for (auto& r : replicas_) {
        if (MetricValue(r->Metrics(), "reach_active_streams") == 1) {
          killed = r->name();
          r->Kill();
          last = absl::Now();
          break;
        }
      }
      ASSERT_FALSE(killed.empty()) << "no replica holds the stream";
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  const absl::Status finished = stream->Finish();
  EXPECT_TRUE(finished.ok()) << finished;
  client::StreamResult result;
  while (stream->TryReceive(&result)) {
    ASSERT_EQ(result.response.sequence(), expected++);
  }
  EXPECT_EQ(expected, static_cast<uint64_t>(kFrames) + 1);
  EXPECT_GE(stream->resumes(), 1);
  std::printf(
      "through haproxy: %s killed at frame %d; %d frames answered, "
      "resumed %d time(s), longest wait %s\n",
      killed.c_str(), kKillAt, static_cast<int>(expected - 1),
      stream->resumes(), absl::FormatDuration(largest_gap).c_str());
  EXPECT_LT(largest_gap, absl::Seconds(1));
}

// deploy/k8s gives the URL from a Secret as FLAGS_registry with
// --fromenv=registry: it reaches the database, and its password shows in
// neither the process's argv, its log nor /metrics.
TEST_F(SharedRegistryTest, TheRegistryUrlFromTheEnvironmentStaysOutOfArgv) {
  const std::string password = "pw-in-env-only-7c1e";
  StartReplicas();
  Replica from_env("E", pg_->url() + "&password=" + password);
  from_env.RegistryFromEnv();
  from_env.Start();
  ASSERT_TRUE(from_env.Wait()) << from_env.log();
  std::string leg;
  ASSERT_TRUE(Register(from_env.ik(), Leg("leg from env"), &leg).ok());
  EXPECT_EQ(GetSkeletonCode(A().ik(), leg), grpc::StatusCode::OK);
  const std::string argv =
      ReadFile(absl::StrCat("/proc/", from_env.pid(), "/cmdline"));
  EXPECT_THAT(argv, HasSubstr("--fromenv=registry"));
  EXPECT_THAT(argv, ::testing::Not(HasSubstr(password)));
  EXPECT_THAT(argv, ::testing::Not(HasSubstr("postgresql:")));
  EXPECT_THAT(from_env.log(), HasSubstr("store=postgresql://postgres@"));
  EXPECT_THAT(from_env.log(), ::testing::Not(HasSubstr(password)));
  EXPECT_THAT(from_env.Metrics(), ::testing::Not(HasSubstr(password)));
}

TEST(SharedRegistryFlagTest, ConnectionAgeFlagsAreChecked) {
  ServerOptions options = testing::TestServerOptions();
  options.max_connection_age = absl::Seconds(-1);
  absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("--max_connection_age must be in [0, 576h]"));
  options.max_connection_age = absl::Seconds(1);
  options.max_connection_age_grace = absl::Hours(1000);
  server = ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("--max_connection_age_grace must be in [0, 576h]"));
}

TEST(SharedRegistryFlagTest, BadOrUnreachableRegistryRefusesToStart) {
  ServerOptions options = testing::TestServerOptions();
  options.in_memory_store = false;
  options.registry = "mysql://db/reach";
  absl::StatusOr<std::unique_ptr<ReachServer>> server =
      ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("--registry=mysql://db/reach: expected sqlite"));
  options.registry = "postgresql://h/d?nonsense=1";
  server = ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("--registry"));
  options.registry =
      "postgresql://u:secret@/reach?host=/nonexistent-dir&port=1";
  server = ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("unreachable"));
  // The password is never repeated.
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::Not(HasSubstr("secret")));
  options.registry = "postgresql:///x";
  options.in_memory_store = true;
  server = ReachServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()),
              HasSubstr("exclude each other"));
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!::testing::GTEST_FLAG(list_tests) &&
      reach::testing::PostgresBinDir().empty()) {
    std::printf("SKIPPED: no PostgreSQL binaries under /usr/lib/postgresql "
                "(scripts/setup installs postgresql-15)\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
