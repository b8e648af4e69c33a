// Issue 16's bounds against a real server on loopback: solving stops at
// --max_solve_ms and when its call is cancelled, overload is refused instead
// of timing out in the queue, the byte budget and response cap refuse what
// does not fit, an unparseable stream frame is answered in band, the queue
// depth reads zero when idle, and a drain with streams, batches and a long
// solve in flight answers what it read and ends within the grace.
#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "gtest/gtest.h"
#include "wire/convert.h"
#include "server/memory.h"
#include "server/memory_budget.h"
#include "server/metrics.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

using ::reach::testing::Context;
using ::reach::testing::MakeGoal;
using ::reach::testing::MustRegister;
using ::reach::testing::TestServer;
using ::reach::testing::TestServerOptions;
using ::reach::testing::ToWire;
using ::testing::HasSubstr;

constexpr int kChainJoints = 32;

v1::SolveRequest ExpensiveRequest(const std::string& id) {
  return testing::ExpensiveSolveRequest(id);
}

v1::SolveRequest TrivialRequest(const std::string& id) {
  v1::SolveRequest request;
  request.set_skeleton_id(id);
  *request.add_goals() = MakeGoal("chain", Eigen::Vector3d(1.0, 1.0, 0.0));
  return request;
}

class HardeningTest : public ::testing::Test {
 protected:
  void Start(const ServerOptions& options) {
    server_ = std::make_unique<TestServer>(options);
    id_ = MustRegister(*server_->stub,
                       ToWire(testing::StraightChainDef(kChainJoints), "c"));
  }
  static ServerOptions OneThread() {
    ServerOptions options = TestServerOptions();
    options.solver_threads = 1;
    return options;
  }

  std::unique_ptr<TestServer> server_;
  std::string id_;
};

TEST_F(HardeningTest, MaxSolveCapsTheMostExpensiveRequest) {
  ServerOptions options = OneThread();
  options.service.max_solve = absl::Milliseconds(200);
  Start(options);
  v1::SolveResponse response;
  // Without the cap this call would take hours; the deadline fails the test.
  const grpc::Status status = server_->stub->Solve(
      Context(60).get(), ExpensiveRequest(id_), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.results_size(), 64);
  int64_t iterations = 0;
  for (const v1::GoalResult& result : response.results()) {
    EXPECT_FALSE(result.reached());
    iterations += result.iterations();
  }
  // Far below the 6.4e9 iterations the options allow.
  EXPECT_LT(iterations, 64 * 100000);
}

TEST_F(HardeningTest, AnAbandonedCallStopsSolving) {
  ServerOptions options = OneThread();
  options.service.max_solve = absl::ZeroDuration();  // No cap: only the call.
  Start(options);
  v1::SolveResponse response;
  // The client gives up after 0.5 s of a call whose deadline is far away.
  auto context = Context(600);
  std::thread give_up([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    context->TryCancel();
  });
  const grpc::Status expensive =
      server_->stub->Solve(context.get(), ExpensiveRequest(id_), &response);
  give_up.join();
  EXPECT_EQ(expensive.error_code(), grpc::StatusCode::CANCELLED);
  // The only worker is free again: it stopped when the call was cancelled
  // (else it would solve for an hour and this call would time out).
  const grpc::Status trivial = server_->stub->Solve(
      Context(5).get(), TrivialRequest(id_), &response);
  EXPECT_TRUE(trivial.ok()) << trivial.error_message();
}

TEST_F(HardeningTest, OverloadIsRefusedInsteadOfTimingOutInTheQueue) {
  ServerOptions options = OneThread();
  options.service.max_solve = absl::Seconds(2);
  options.service.max_queue_wait = absl::Milliseconds(100);
  Start(options);
  std::thread expensive([&] {
    v1::SolveResponse response;
    server_->stub->Solve(Context(60).get(), ExpensiveRequest(id_), &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::vector<grpc::StatusCode> codes(16);
  std::vector<std::string> messages(16);
  std::vector<std::thread> callers;
  for (int i = 0; i < 16; ++i) {
    callers.emplace_back([&, i] {
      v1::SolveResponse response;
      const grpc::Status status = server_->stub->Solve(
          Context(30).get(), TrivialRequest(id_), &response);
      codes[i] = status.error_code();
      messages[i] = status.error_message();
    });
  }
  for (std::thread& t : callers) t.join();
  expensive.join();
  int refused = 0;
  for (int i = 0; i < 16; ++i) {
    // Never left to hit the 30 s deadline in the queue.
    EXPECT_THAT(codes[i], ::testing::AnyOf(grpc::StatusCode::OK,
                                           grpc::StatusCode::RESOURCE_EXHAUSTED))
        << messages[i];
    if (codes[i] == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      EXPECT_THAT(messages[i], HasSubstr("--max_queue_wait"));
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(HardeningTest, ByteBudgetRefusesWhatDoesNotFitAndRecovers) {
  ServerOptions options = TestServerOptions();
  options.service.max_buffered_bytes = 256 << 10;
  Start(options);
  v1::SolveRequest big = TrivialRequest(id_);
  big.mutable_goals(0)->set_chain(std::string(300 << 10, 'x'));
  v1::SolveResponse response;
  const grpc::Status refused =
      server_->stub->Solve(Context().get(), big, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_buffered_bytes"));
  // Its bytes were given back: small calls still fit.
  EXPECT_TRUE(
      server_->stub->Solve(Context().get(), TrivialRequest(id_), &response)
          .ok());
  // (A call gives its bytes back when gRPC is done with it, just after the
  // client has its answer.)
  for (int i = 0; i < 500 && server_->server->service().budget().used() != 0;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->server->service().budget().used(), 0);

  // On a stream the frame that does not fit is answered in band.
  auto context = Context();
  auto stream = server_->stub->SolveStream(context.get());
  big.set_sequence(1);
  v1::SolveRequest small = TrivialRequest(id_);
  small.set_sequence(2);
  ASSERT_TRUE(stream->Write(big));
  ASSERT_TRUE(stream->Write(small));
  stream->WritesDone();
  v1::SolveResponse first, second;
  ASSERT_TRUE(stream->Read(&first));
  ASSERT_TRUE(stream->Read(&second));
  EXPECT_EQ(first.sequence(), 1u);
  EXPECT_EQ(first.error().code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(second.sequence(), 2u);
  EXPECT_FALSE(second.has_error());
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(HardeningTest, BatchResponseIsBoundedBeforeSolving) {
  ServerOptions options = TestServerOptions();
  options.service.max_response_bytes = 64 << 10;
  Start(options);
  v1::SolveBatchRequest batch;
  batch.set_skeleton_id(id_);
  for (int i = 0; i < 50; ++i) {
    v1::SolveRequest* item = batch.add_items();
    *item = TrivialRequest("");
    item->set_return_globals(true);  // 50 x 32 transforms: ~150 KB.
  }
  v1::SolveBatchResponse response;
  const grpc::Status refused =
      server_->stub->SolveBatch(Context().get(), batch, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_response_bytes"));
  for (v1::SolveRequest& item : *batch.mutable_items()) {
    item.set_return_globals(false);
  }
  const grpc::Status ok =
      server_->stub->SolveBatch(Context().get(), batch, &response);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response.items_size(), 50);
}

TEST_F(HardeningTest, WeightZeroAndAGoalAlreadyMetKeepTheStartBitForBit) {
  Start(TestServerOptions());
  const Skeleton chain = *Skeleton::Create(testing::StraightChainDef(kChainJoints));
  Pose start = RestPose(chain);
  for (int i = 0; i < kChainJoints; ++i) {
    start.local[i].rotation = Eigen::Quaterniond(Eigen::AngleAxisd(
        0.05 * (i % 5) - 0.1, Eigen::Vector3d(1, 2, 3).normalized()));
  }
  // The tip where the start pose puts it (forward kinematics here).
  const Eigen::Vector3d tip =
      testing::PositionOf(chain, start, kChainJoints - 1);
  for (const v1::Solver solver :
       {v1::SOLVER_AUTO, v1::SOLVER_CCD, v1::SOLVER_FABRIK,
        v1::SOLVER_JACOBIAN_DLS, v1::SOLVER_JACOBIAN_TRANSPOSE,
        v1::SOLVER_GRADIENT_DESCENT}) {
    for (const bool met : {false, true}) {
      v1::SolveRequest request;
      request.set_skeleton_id(id_);
      *request.add_goals() =
          MakeGoal("chain", met ? tip : Eigen::Vector3d(1, 1, 1), solver);
      if (!met) request.mutable_goals(0)->set_weight(0.0);
      for (const Transform& local : start.local) {
        ToProto(local.rotation, request.mutable_start_pose()->add_rotations());
      }
      v1::SolveResponse response;
      const grpc::Status status =
          server_->stub->Solve(Context().get(), request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      const std::string what = absl::StrCat(
          v1::Solver_Name(solver), met ? " goal already met" : " weight 0");
      EXPECT_EQ(response.rotated_joints_size(), 0) << what;
      EXPECT_EQ(response.translated_joints_size(), 0) << what;
      // The client's pose is the start, bit for bit.
      const Pose solved = testing::ApplyResponse(start, response);
      for (int i = 0; i < kChainJoints; ++i) {
        EXPECT_EQ(0, std::memcmp(solved.local[i].rotation.coeffs().data(),
                                 start.local[i].rotation.coeffs().data(),
                                 4 * sizeof(double)))
            << what << " joint " << i;
      }
    }
  }
}

// A bidi stream of raw bytes, as a client with a broken encoder sends them.
using RawStream = grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>;

std::unique_ptr<RawStream> OpenRawStream(grpc::Channel* channel,
                                         grpc::ClientContext* context) {
  return std::unique_ptr<RawStream>(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer,
                                                grpc::ByteBuffer>::
          Create(channel,
                 grpc::internal::RpcMethod(
                     "/reach.v1.IkService/SolveStream",
                     grpc::internal::RpcMethod::BIDI_STREAMING),
                 context));
}

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

TEST_F(HardeningTest, UnparseableStreamFrameIsAnsweredInBandAndTheStreamGoesOn) {
  Start(TestServerOptions());
  auto context = Context();
  std::unique_ptr<RawStream> stream =
      OpenRawStream(server_->channel.get(), context.get());
  v1::SolveRequest first = TrivialRequest(id_);
  first.set_sequence(1);
  v1::SolveRequest third = TrivialRequest(id_);
  third.set_sequence(3);
  ASSERT_TRUE(stream->Write(Bytes(first.SerializeAsString())));
  // A string field (chain name) holding invalid UTF-8, as grpc-js sends a
  // lone UTF-16 surrogate: not a valid proto3 message.
  v1::SolveRequest bad = TrivialRequest(id_);
  bad.set_sequence(2);
  bad.mutable_goals(0)->set_chain("\xed\xa0\x80");
  std::string bad_bytes;
  bad.SerializePartialToString(&bad_bytes);
  ASSERT_TRUE(stream->Write(Bytes(bad_bytes)));
  ASSERT_TRUE(stream->Write(Bytes("\xff\xff\xff\xff")));
  ASSERT_TRUE(stream->Write(Bytes(third.SerializeAsString())));
  stream->WritesDone();
  std::vector<v1::SolveResponse> answers;
  grpc::ByteBuffer buffer;
  while (stream->Read(&buffer)) {
    v1::SolveResponse& answer = answers.emplace_back();
    ASSERT_TRUE(grpc::SerializationTraits<v1::SolveResponse>::Deserialize(
                    &buffer, &answer)
                    .ok());
  }
  EXPECT_TRUE(stream->Finish().ok());
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_EQ(answers[0].sequence(), 1u);
  EXPECT_FALSE(answers[0].has_error());
  for (int i : {1, 2}) {
    EXPECT_EQ(answers[i].sequence(), 0u);
    EXPECT_EQ(answers[i].error().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(answers[i].error().message(),
                HasSubstr(absl::StrCat("frame ", i + 1, " ")));
  }
  EXPECT_EQ(answers[3].sequence(), 3u);
  EXPECT_FALSE(answers[3].has_error());
}

double GaugeValue(ReachServer& server, const std::string& name) {
  for (const prometheus::MetricFamily& family :
       server.service().metrics().registry()->Collect()) {
    if (family.name == name && !family.metric.empty()) {
      return family.metric[0].gauge.value;
    }
  }
  ADD_FAILURE() << "no gauge " << name;
  return -1;
}

TEST_F(HardeningTest, QueueDepthReadsZeroWhenIdle) {
  Start(TestServerOptions());
  for (int round = 0; round < 5; ++round) {
    std::vector<std::thread> callers;
    for (int t = 0; t < 8; ++t) {
      callers.emplace_back([&] {
        auto stub = server_->NewStub();
        v1::SolveResponse response;
        for (int i = 0; i < 40; ++i) {
          stub->Solve(Context().get(), TrivialRequest(id_), &response);
        }
      });
    }
    for (std::thread& t : callers) t.join();
    EXPECT_EQ(GaugeValue(*server_->server, "reach_queue_depth"), 0)
        << "round " << round;
  }
}

// One drain: two streams sending until refused, a batch loop and an
// uncapped long solve in flight, then Shutdown. Every stream's answers are
// in order, and a stream ended by the drain was answered for every frame
// the server says it read. On a loaded machine a stream may also start
// after the server stopped listening (never answered), or still be open at
// the grace's end (cancelled); `drained` counts the streams the drain
// itself ended.
void DrainOnce(int round, std::atomic<int>* drained) {
  ServerOptions options = TestServerOptions();
  options.solver_threads = 2;
  options.service.max_solve = absl::ZeroDuration();
  options.shutdown_grace = absl::Milliseconds(300);
  TestServer server(options);
  const std::string id = MustRegister(
      *server.stub, ToWire(testing::StraightChainDef(kChainJoints), "c"));
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int s = 0; s < 2; ++s) {
    clients.emplace_back([&, s] {
      auto stub = server.NewStub();
      auto context = Context(30);
      auto stream = stub->SolveStream(context.get());
      // A client keeps a window of frames in flight (as reach_client does).
      std::atomic<uint64_t> answered{0};
      std::thread writer([&] {
        for (uint64_t seq = 1; !stop; ++seq) {
          while (!stop && seq > answered + 8) std::this_thread::yield();
          v1::SolveRequest frame = TrivialRequest(id);
          frame.set_sequence(seq);
          if (!stream->Write(frame)) break;
        }
        stream->WritesDone();
      });
      v1::SolveResponse answer;
      while (stream->Read(&answer)) {
        EXPECT_EQ(answer.sequence(), answered + 1) << "round " << round;
        ++answered;
      }
      stop = true;
      writer.join();
      const grpc::Status status = stream->Finish();
      const std::string message = status.error_message();
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
          message.find("failed to connect") != std::string::npos) {
        EXPECT_EQ(answered.load(), 0u) << message;
      } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE &&
                 message.find(" frames it read were answered") !=
                     std::string::npos) {
        // "... all N frames it read were answered"
        ++*drained;
        const size_t at = message.find("all ");
        ASSERT_NE(at, std::string::npos) << message;
        uint64_t read = 0;
        ASSERT_TRUE(absl::SimpleAtoi(
            message.substr(at + 4, message.find(' ', at + 4) - at - 4), &read))
            << message;
        EXPECT_EQ(read, answered.load())
            << "stream " << s << " round " << round << ": " << message;
      }
    });
  }
  clients.emplace_back([&] {
    auto stub = server.NewStub();
    v1::SolveBatchRequest batch;
    batch.set_skeleton_id(id);
    for (int i = 0; i < 64; ++i) *batch.add_items() = TrivialRequest("");
    v1::SolveBatchResponse response;
    while (!stop) {
      if (!stub->SolveBatch(Context(30).get(), batch, &response).ok()) break;
    }
  });
  clients.emplace_back([&] {
    auto stub = server.NewStub();
    v1::SolveResponse response;
    stub->Solve(Context(30).get(), ExpensiveRequest(id), &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto begin = std::chrono::steady_clock::now();
  server.server->Shutdown();
  const double seconds = std::chrono::duration<double>(
                             std::chrono::steady_clock::now() - begin)
                             .count();
  stop = true;
  for (std::thread& t : clients) t.join();
  // The uncapped solve was cancelled at the grace (0.3 s); a hang guard,
  // not a timing measurement.
  EXPECT_LT(seconds, 10.0) << "round " << round;
}

TEST(DrainTest, FiftyDrainsUnderLoadAnswerWhatTheyReadAndEndInTime) {
  std::atomic<int> drained{0};
  for (int round = 0; round < 50; ++round) {
    DrainOnce(round, &drained);
    if (HasFatalFailure()) return;
  }
  // Most streams are ended by the drain itself; a loaded machine may lose
  // some to the cases above.
  EXPECT_GE(drained.load(), 25);
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

TEST_F(HardeningTest, AConnectionOpensAtMostMaxConcurrentStreamsCalls) {
  ServerOptions options = TestServerOptions();
  options.max_concurrent_streams = 2;
  Start(options);
  // Two streams open on the one connection: a third call waits for one of
  // them to end (in the client), it is not refused.
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<
      grpc::ClientReaderWriter<v1::SolveRequest, v1::SolveResponse>>>
      streams;
  for (int s = 0; s < 2; ++s) {
    contexts.push_back(Context());
    streams.push_back(server_->stub->SolveStream(contexts.back().get()));
    ASSERT_TRUE(streams.back()->Write(TrivialRequest(id_)));
    v1::SolveResponse answer;
    ASSERT_TRUE(streams.back()->Read(&answer));  // Open and served.
  }
  std::atomic<bool> third_done{false};
  grpc::Status third_status;
  std::thread third([&] {
    v1::SolveResponse response;
    third_status = server_->stub->Solve(Context(20).get(),
                                        TrivialRequest(id_), &response);
    third_done = true;
  });
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(third_done) << "a third call ran beside two open streams";
  streams[0]->WritesDone();
  EXPECT_TRUE(streams[0]->Finish().ok());
  third.join();
  EXPECT_TRUE(third_status.ok()) << third_status.error_message();
  streams[1]->WritesDone();
  EXPECT_TRUE(streams[1]->Finish().ok());

  options.max_concurrent_streams = 0;
  EXPECT_THAT(
      std::string(ReachServer::Start(options).status().message()),
      HasSubstr("--max_concurrent_streams"));
}

// `calls` Solve calls padded to `bytes` with an unknown field, sent at once
// from as many connections (channels with their own subchannel pools) on as
// many threads, so that their uploads overlap. Returns their status codes.
std::vector<grpc::StatusCode> PaddedSolvesFromManyConnections(
    const TestServer& server, const std::string& id, int calls, int bytes) {
  v1::SolveRequest request = TrivialRequest(id);
  request.GetReflection()
      ->MutableUnknownFields(&request)
      ->AddLengthDelimited(1000, std::string(bytes, 'p'));
  std::vector<grpc::StatusCode> codes(calls);
  std::vector<std::thread> threads;
  for (int c = 0; c < calls; ++c) {
    threads.emplace_back([&, c] {
      grpc::ChannelArguments args;
      args.SetInt("grpc.use_local_subchannel_pool", 1);
      args.SetMaxSendMessageSize(-1);
      auto stub = v1::IkService::NewStub(grpc::CreateCustomChannel(
          server.address(), grpc::InsecureChannelCredentials(), args));
      v1::SolveResponse response;
      codes[c] = stub->Solve(Context(60).get(), request, &response).error_code();
    });
  }
  for (std::thread& t : threads) t.join();
  return codes;
}

// --max_transport_bytes is gRPC's resource quota: the one bound on what the
// transport holds for all connections together. Under it, uploads beyond
// the quota are refused (gRPC's RST_STREAM ENHANCE_YOUR_CALM, which clients
// see as RESOURCE_EXHAUSTED, or a closed connection: UNAVAILABLE); without
// it the same calls all succeed. Either way the server goes on serving.
TEST_F(HardeningTest, MaxTransportBytesRefusesUploadsBeyondItAcrossConnections) {
  constexpr int kCalls = 16;
  constexpr int kBytes = 4 << 20;
  ServerOptions options = TestServerOptions();
  options.max_transport_bytes = 0;
  // All from one address: one caller, who may hold the whole byte budget
  // here (this is about gRPC's transport, not the budget's shares).
  options.service.max_buffered_bytes_per_caller =
      options.service.max_buffered_bytes;
  Start(options);
  for (grpc::StatusCode code :
       PaddedSolvesFromManyConnections(*server_, id_, kCalls, kBytes)) {
    EXPECT_EQ(code, grpc::StatusCode::OK);
  }
  server_.reset();

  options.max_transport_bytes = 2 << 20;
  Start(options);
  int refused = 0;
  for (int round = 0; round < 5 && refused == 0; ++round) {
    for (grpc::StatusCode code :
         PaddedSolvesFromManyConnections(*server_, id_, kCalls, kBytes)) {
      EXPECT_TRUE(code == grpc::StatusCode::OK ||
                  code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                  code == grpc::StatusCode::UNAVAILABLE)
          << code;
      refused += code != grpc::StatusCode::OK;
    }
  }
  EXPECT_GT(refused, 0) << kCalls << " uploads of 4 MiB under a 2 MiB quota";
  v1::SolveResponse response;
  EXPECT_TRUE(server_->stub->Solve(Context().get(), TrivialRequest(id_),
                                   &response)
                  .ok());
}

TEST(MemoryTrimmerTest, ALargeReleaseTrimsAndASmallOneDoesNot) {
  StartMemoryTrimmer();
  const auto wait_for_trims = [](int64_t above) {
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (MemoryTrims() <= above && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    return MemoryTrims();
  };
  // Settle whatever earlier tests set off (a trim, then the settle trim).
  absl::SleepFor(kTrimDelay + kMinTrimInterval + kSettleTrimDelay +
                 absl::Milliseconds(200));
  const int64_t before = MemoryTrims();
  MemoryBudget budget(0);
  budget.Charge(kTrimAfterBytes - 1);
  budget.Release(kTrimAfterBytes - 1);
  absl::SleepFor(kTrimDelay + absl::Milliseconds(200));
  EXPECT_EQ(MemoryTrims(), before);
  budget.Charge(kTrimAfterBytes);
  budget.Release(kTrimAfterBytes);
  // One trim soon after, and the settle trim once nothing else comes.
  EXPECT_GT(wait_for_trims(before), before);
  EXPECT_GE(wait_for_trims(before + 1), before + 2);
}

// The trimmer thread blocks every signal, whoever starts it: a SIGTERM or
// SIGHUP sent to the server must reach main's sigwait, not this thread,
// whose default action would end the process (a SIGHUP reload once killed
// the server this way). Read from the kernel: /proc/self/task/*/status.
TEST(MemoryTrimmerTest, TheTrimmerThreadTakesNoSignals) {
  StartMemoryTrimmer();
  std::string mask;
  const absl::Time until = absl::Now() + absl::Seconds(5);
  while (mask.empty() && absl::Now() < until) {
    for (const auto& task :
         std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name != "reach-trim") continue;
      std::ifstream status(task.path() / "status");
      for (std::string line; std::getline(status, line);) {
        if (absl::StartsWith(line, "SigBlk:")) mask = line.substr(7);
      }
    }
    if (mask.empty()) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_FALSE(mask.empty()) << "no thread named reach-trim";
  uint64_t blocked = 0;
  ASSERT_TRUE(absl::SimpleHexAtoi(absl::StripAsciiWhitespace(mask), &blocked))
      << mask;
  for (const int signal : {SIGHUP, SIGINT, SIGTERM}) {
    EXPECT_NE(blocked & (uint64_t{1} << (signal - 1)), 0u)
        << strsignal(signal) << " is not blocked: SigBlk " << mask;
  }
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

// grpc_server_handled_total for `method` by grpc_code.
std::map<std::string, double> HandledCodes(ReachServer& server,
                                           const std::string& method) {
  std::map<std::string, double> out;
  for (const prometheus::MetricFamily& family :
       server.service().metrics().registry()->Collect()) {
    if (family.name != "grpc_server_handled_total") continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::string code;
      bool match = false;
      for (const prometheus::ClientMetric::Label& label : metric.label) {
        if (label.name == "grpc_method") match = label.value == method;
        if (label.name == "grpc_code") code = label.value;
      }
      if (match && metric.counter.value > 0) {
        out[code] += metric.counter.value;
      }
    }
  }
  return out;
}

TEST_F(HardeningTest, ABatchWhoseDeadlinePassesWhileUploadingIsCountedSo) {
  Start(TestServerOptions());
  // ~12 MiB: loopback takes tens of milliseconds to carry it, so short
  // deadlines pass while it arrives, longer ones while it is solved, the
  // longest not at all.
  v1::SolveBatchRequest batch;
  batch.set_skeleton_id(id_);
  v1::SolveRequest item = TrivialRequest("");
  item.mutable_goals(0)->set_chain(std::string(1200, 'c'));
  for (int i = 0; i < 10000; ++i) *batch.add_items() = item;
  ASSERT_GT(batch.ByteSizeLong(), 11u << 20);
  std::map<grpc::StatusCode, int> client_codes;
  for (double ms : {2, 5, 10, 20, 40, 80, 160, 320, 5000}) {
    for (int i = 0; i < 3; ++i) {
      v1::SolveBatchResponse response;
      const grpc::Status status = server_->stub->SolveBatch(
          Context(ms / 1000).get(), batch, &response);
      ++client_codes[status.error_code()];
    }
  }
  for (const auto& [code, count] : client_codes) {
    EXPECT_TRUE(code == grpc::StatusCode::OK ||
                code == grpc::StatusCode::DEADLINE_EXCEEDED ||
                code == grpc::StatusCode::RESOURCE_EXHAUSTED)
        << count << " calls got " << code;
  }
  EXPECT_GT(client_codes[grpc::StatusCode::DEADLINE_EXCEEDED], 0);
  // Every call the server saw is recorded OK, DeadlineExceeded, Canceled
  // or ResourceExhausted (admission: the expected wait for a solver thread
  // is longer than what is left of the call), never InvalidArgument,
  // Internal or Unknown. (Calls whose deadline passed
  // before the request had fully arrived never reach any C++ code: gRPC
  // drops them, and they are not counted.)
  absl::SleepFor(absl::Milliseconds(200));
  const std::map<std::string, double> recorded =
      HandledCodes(*server_->server, "SolveBatch");
  double total = 0;
  for (const auto& [code, count] : recorded) {
    total += count;
    EXPECT_TRUE(code == "OK" || code == "DeadlineExceeded" ||
                code == "Canceled" || code == "ResourceExhausted")
        << count << " SolveBatch calls recorded " << code;
  }
  EXPECT_GE(total, 3);  // At least the 5 s calls.
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

// Issue 39, 4: a stream's task solved up to 16 frames back to back, so two
// streams of heavy frames held the threads for seconds and every other
// client's Solve waited past --max_queue_wait and was refused. A stream
// now yields its thread between frames whenever other work waits.
TEST_F(HardeningTest, StreamsYieldTheirThreadBetweenFramesToOtherCalls) {
  ServerOptions options = OneThread();
  options.service.max_solve = absl::Milliseconds(150);
  Start(options);
  const std::string humanoid = MustRegister(
      *server_->stub, ToWire(testing::HumanoidDef(), "humanoid"));
  using Stream = grpc::ClientReaderWriter<v1::SolveRequest, v1::SolveResponse>;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int s = 0; s < 2; ++s) {
    contexts.push_back(Context(60));
    streams.push_back(server_->stub->SolveStream(contexts.back().get()));
    // 16 heavy frames each: 2.4 s of solving per stream.
    for (int f = 0; f < 16; ++f) {
      v1::SolveRequest frame = ExpensiveRequest(id_);
      frame.set_sequence(f + 1);
      ASSERT_TRUE(streams.back()->Write(frame));
    }
  }
  v1::SolveResponse answer;
  ASSERT_TRUE(streams[0]->Read(&answer));  // The streams are solving.
  // Cheap calls from another client meanwhile: each waits for at most the
  // frame in progress (150 ms), far below --max_queue_wait (1 s).
  for (int i = 0; i < 3; ++i) {
    v1::SolveRequest request;
    request.set_skeleton_id(humanoid);
    *request.add_goals() =
        MakeGoal("l_arm", Eigen::Vector3d(0.3, 1.1, 0.25));
    v1::SolveResponse response;
    const grpc::Status status =
        server_->stub->Solve(Context(10).get(), request, &response);
    EXPECT_TRUE(status.ok()) << i << ": " << status.error_message();
  }
  // The streams were not refused either: every frame is answered.
  for (auto& stream : streams) {
    stream->WritesDone();
    int answered = stream.get() == streams[0].get() ? 1 : 0;
    while (stream->Read(&answer)) {
      EXPECT_FALSE(answer.has_error()) << answer.error().message();
      ++answered;
    }
    EXPECT_EQ(answered, 16);
    EXPECT_TRUE(stream->Finish().ok());
  }
}

}  // namespace
}  // namespace reach

namespace reach {
namespace {

// Issue 39, 9: 5-6 clients that never read their answers held the whole
// byte budget. A caller's calls draw on its share (a quarter by default),
// and every share on the server's budget.
TEST(BudgetShareTest, ASharesChargesCountTowardsBothAndStopAtEither) {
  MemoryBudget server(1000);
  MemoryBudget a(400, &server), b(400, &server), c(400, &server);
  EXPECT_TRUE(a.TryCharge(400));
  EXPECT_FALSE(a.TryCharge(1));  // Its share is full...
  EXPECT_TRUE(b.TryCharge(400));  // ...others still have theirs.
  EXPECT_EQ(server.used(), 800);
  EXPECT_FALSE(c.TryCharge(300));  // The server's budget is the bound.
  EXPECT_EQ(c.used(), 0);
  EXPECT_EQ(server.used(), 800);
  a.Release(400);
  EXPECT_TRUE(c.TryCharge(300));
  EXPECT_EQ(server.used(), 700);
  c.Charge(200);  // Owed memory goes over either.
  EXPECT_EQ(c.used(), 500);
  EXPECT_EQ(server.used(), 900);
}

TEST_F(HardeningTest, OneCallerHoldsAtMostItsShareOfTheBudget) {
  ServerOptions options = TestServerOptions();
  options.service.max_buffered_bytes = 1 << 20;  // Share: 256 KiB.
  Start(options);
  v1::SolveRequest big = TrivialRequest(id_);
  big.mutable_goals(0)->set_chain(std::string(300 << 10, 'x'));
  v1::SolveResponse response;
  const grpc::Status refused =
      server_->stub->Solve(Context().get(), big, &response);
  // It would fit the server's budget, not this caller's share of it.
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("this caller's calls hold"));
  EXPECT_THAT(refused.error_message(),
              HasSubstr("--max_buffered_bytes_per_caller"));
  // A share set by flag.
  options.service.max_buffered_bytes_per_caller = 512 << 10;
  Start(options);
  const grpc::Status fits = server_->stub->Solve(Context().get(), big, &response);
  EXPECT_NE(fits.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << fits.error_message();
}

}  // namespace
}  // namespace reach
