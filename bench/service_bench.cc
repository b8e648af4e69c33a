// Service benchmarks over loopback, load generator and server in one process
// on this machine (they share its cores, as the setup asks):
//
//  1. SolveStream of two-bone frames beside a bare echo stream whose
//     messages have the same sizes (the transport's own ceiling): frames/s
//     and round-trip p50/p99, for 1 and for several concurrent streams.
//  2. SolveBatch of 1000 characters x 4 two-bone limbs: time per call.
//
// Run: scripts/bench-service (or build/bench/service_bench --help).
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "echo.grpc.pb.h"
#include "server/batch_wire.h"
#include "wire/convert.h"
#include "server/memory.h"
#include "server/metrics.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "server/solve_call.h"
#include "tests/testing/models.h"
#include "tests/testing/postgres.h"
#include "tests/testing/service.h"

ABSL_FLAG(int, frames, 40000, "Frames per stream run");
ABSL_FLAG(int, window, 32, "Frames in flight per stream");
ABSL_FLAG(std::string, streams, "1,4", "Concurrent stream counts to run");
ABSL_FLAG(int, batch_calls, 60, "Timed SolveBatch calls");
ABSL_FLAG(int, batch_characters, 1000, "Characters per SolveBatch call");
ABSL_FLAG(int, solver_threads, 0, "Server solver threads; 0: hardware");
ABSL_FLAG(std::string, registry, "memory",
          "The server's registry: memory, sqlite (a temporary --data_dir), "
          "a postgresql:// URL, or scratch-postgresql (a PostgreSQL this "
          "bench starts itself, tests/testing/postgres.h)");
ABSL_FLAG(int, unary_solves, 5000,
          "Timed unary Solve calls on the cached leg (after 500 warm-up)");
ABSL_FLAG(int, miss_solves, 500,
          "Timed unary Solve calls each on a skeleton the server has not "
          "loaded yet: a skeleton cache miss (the definition read from the "
          "registry's store, then built); at most 998 (the server's "
          "--quota_skeletons); 0: none");
ABSL_FLAG(bool, unary_only, false,
          "Run only the unary Solve timing (registry comparisons)");
ABSL_FLAG(int, phase_reps, 50,
          "Repetitions of each SolveBatch phase timed alone on one thread");

namespace reach {
namespace {

// Arena blocks for a batch-sized message: 64 KiB first, growing to 1 MiB,
// so a 1000-character SolveBatchResponse lives in a handful of blocks (the
// default starts at 256 bytes and stops growing at 8 KiB). A client
// handling thousands of characters per call would size its arena so.
google::protobuf::ArenaOptions BatchArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = 64 << 10;
  options.max_block_size = 1 << 20;
  return options;
}

// Mean microseconds per call of `fn` over `reps` calls.
template <typename Fn>
double MeanMicros(int reps, Fn&& fn) {
  const absl::Time start = absl::Now();
  for (int i = 0; i < reps; ++i) fn();
  return absl::ToDoubleMicroseconds(absl::Now() - start) / reps;
}

// The SolveBatch call's phases, each alone on one thread and without gRPC:
// the client's serialize and parse run once per call; the server's work
// (split the request into items, then per item parse, solve, serialize: what
// the solver workers share) is spread over the pool.
void PrintBatchPhases(const v1::SolveBatchRequest& batch,
                      const SkeletonDef& humanoid, const std::string& id) {
  const int reps = absl::GetFlag(FLAGS_phase_reps);
  std::string request_wire;
  const double serialize_request =
      MeanMicros(reps, [&] { batch.SerializeToString(&request_wire); });

  auto registry = Registry::Create(NewMemoryStore(), SkeletonLimits{});
  if (!registry.ok()) std::abort();
  const std::string registered =
      (*registry)->Register(testing::ToWire(humanoid, "humanoid"))->id;
  if (registered != id) std::abort();
  Metrics metrics;
  SolveScratch scratch;
  BatchRequestView view;
  std::string response_wire;
  const double server = MeanMicros(reps, [&] {
    if (!SplitBatchItems(request_wire, batch.items_size(), &view).ok()) {
      std::abort();
    }
    response_wire.clear();
    SolveBatchItems(view, 0, static_cast<int>(view.items.size()), **registry,
                    SolveLimits{}, Deadline{}, &metrics, scratch,
                    &response_wire);
  });
  const double parse_response = MeanMicros(reps, [&] {
    google::protobuf::Arena arena(BatchArenaOptions());
    auto* parsed =
        google::protobuf::Arena::CreateMessage<v1::SolveBatchResponse>(&arena);
    if (!parsed->ParseFromString(response_wire)) std::abort();
  });
  // A client calling every frame can parse into the same message each
  // time: protobuf keeps cleared submessages for reuse.
  v1::SolveBatchResponse reused;
  const double parse_reused = MeanMicros(reps, [&] {
    if (!reused.ParseFromString(response_wire)) std::abort();
  });
  std::printf(
      "phases on one thread, no gRPC (mean of %d): client serialize %.0f us; "
      "server split, parse, solve, serialize %.0f us (%.2f us per "
      "character); client parse %.0f us (response %zu bytes), %.0f us into "
      "a reused message\n",
      reps, serialize_request, server, server / batch.items_size(),
      parse_response, response_wire.size(), parse_reused);
}

// ---- The echo server: read-ahead, one outstanding write, no work. ----

class EchoReactor final
    : public grpc::ServerBidiReactor<bench::Blob, bench::Blob> {
 public:
  EchoReactor() {
    absl::MutexLock lock(&mu_);
    reading_ = true;
    StartRead(&incoming_);
  }
  void OnReadDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    reading_ = false;
    if (!ok) {
      done_reading_ = true;
    } else {
      bench::Blob& reply = outgoing_.emplace_back();
      reply.mutable_payload()->resize(incoming_.reply_bytes());
      if (outgoing_.size() < 64) {
        reading_ = true;
        StartRead(&incoming_);
      }
    }
    Pump();
  }
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    outgoing_.pop_front();
    if (!ok) broken_ = true;
    if (!reading_ && !done_reading_ && !broken_) {
      reading_ = true;
      StartRead(&incoming_);
    }
    Pump();
  }
  void OnDone() override { delete this; }

 private:
  void Pump() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!writing_ && !outgoing_.empty() && !broken_) {
      writing_ = true;
      StartWrite(&outgoing_.front());
    } else if (!writing_ && (outgoing_.empty() || broken_) &&
               (done_reading_ || broken_) && !finished_) {
      finished_ = true;
      Finish(grpc::Status::OK);
    }
  }
  absl::Mutex mu_;
  bench::Blob incoming_;
  std::deque<bench::Blob> outgoing_;
  bool reading_ = false, writing_ = false, done_reading_ = false,
       broken_ = false, finished_ = false;
};

class EchoService final : public bench::Echo::CallbackService {
  grpc::ServerBidiReactor<bench::Blob, bench::Blob>* Stream(
      grpc::CallbackServerContext*) override {
    return new EchoReactor();
  }
  grpc::ServerUnaryReactor* Unary(grpc::CallbackServerContext* context,
                                  const bench::Blob* request,
                                  bench::Blob* response) override {
    response->mutable_payload()->resize(request->reply_bytes());
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// ---- The load generator. ----

struct LoadResult {
  double frames_per_second = 0;
  double p50_us = 0, p99_us = 0;
  int64_t frames = 0;
};

// Runs `streams` streams of `frames` messages each, `window` in flight per
// stream; `run_one` drives one stream and records one round trip per frame.
using StreamRun = std::function<void(int stream, std::vector<double>* rtts)>;

LoadResult RunLoad(int streams, const StreamRun& run_one) {
  std::vector<std::vector<double>> rtts(streams);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int s = 0; s < streams; ++s) {
    threads.emplace_back([&, s] { run_one(s, &rtts[s]); });
  }
  for (std::thread& t : threads) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  std::vector<double> all;
  for (const auto& r : rtts) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  LoadResult result;
  result.frames = static_cast<int64_t>(all.size());
  result.frames_per_second = all.size() / seconds;
  if (!all.empty()) {
    result.p50_us = all[all.size() / 2];
    result.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return result;
}

// One stream: a writer thread keeps `window` frames in flight; this thread
// reads and records each frame's round trip. Responses arrive in order.
template <typename Request, typename Response>
void DriveStream(grpc::ClientReaderWriter<Request, Response>* stream,
                 int frames, int window,
                 const std::function<void(int, Request*)>& fill,
                 std::vector<double>* rtts) {
  std::vector<absl::Time> sent(frames);
  absl::Mutex mu;
  int in_flight = 0;
  const auto has_room = [&in_flight, window] { return in_flight < window; };
  std::thread writer([&] {
    Request request;
    for (int i = 0; i < frames; ++i) {
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(&has_room));
        ++in_flight;
        sent[i] = absl::Now();
      }
      fill(i, &request);
      if (!stream->Write(request)) break;
    }
    stream->WritesDone();
  });
  Response response;
  rtts->reserve(frames);
  for (int i = 0; i < frames && stream->Read(&response); ++i) {
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu);
    rtts->push_back(absl::ToDoubleMicroseconds(now - sent[i]));
    --in_flight;
  }
  writer.join();
  const grpc::Status status = stream->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "stream ended: %s\n", status.error_message().c_str());
  }
}

Eigen::Vector3d FootTarget(int frame) {
  const double t = 0.01 * frame;
  return Eigen::Vector3d(0.1 + 0.25 * std::sin(t),
                         0.4 + 0.15 * std::cos(2 * t), 0.2 * std::sin(0.5 * t));
}

std::vector<int> ParseList(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',')) {
    int v;
    if (absl::SimpleAtoi(part, &v) && v > 0) out.push_back(v);
  }
  return out;
}

// Times `calls` SolveBatch calls of `batch` (after 5 of warm-up), then the
// bare unary echo with the same request and response sizes. False on error.
bool TimeBatch(v1::IkService::Stub& stub, bench::Echo::Stub& echo,
               const v1::SolveBatchRequest& batch, const char* label,
               int calls) {
  std::vector<double> call_ms;
  size_t response_bytes = 0;
  int unreached = 0;
  // One response message for every call, as a client calling every frame
  // would keep: parsing into it reuses the submessages the last call left
  // (protobuf clears them without freeing), so a call allocates nothing
  // per item. That parse takes about half the time of one into a fresh
  // arena (see the phases printed below).
  v1::SolveBatchResponse response;
  for (int i = 0; i < calls + 5; ++i) {
    const absl::Time start = absl::Now();
    const grpc::Status status =
        stub.SolveBatch(testing::Context().get(), batch, &response);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!status.ok()) {
      std::fprintf(stderr, "SolveBatch: %s\n", status.error_message().c_str());
      return false;
    }
    if (i < 5) continue;  // Warm-up.
    call_ms.push_back(ms);
    response_bytes = response.ByteSizeLong();
    for (const auto& item : response.items()) {
      if (item.has_error()) {
        std::fprintf(stderr, "item: %s\n", item.error().message().c_str());
        return false;
      }
      for (const auto& r : item.results()) unreached += !r.reached();
    }
  }
  // The same sizes through the bare echo: what the transport alone costs.
  bench::Blob blob;
  blob.mutable_payload()->resize(batch.ByteSizeLong());
  blob.set_reply_bytes(static_cast<int>(response_bytes));
  std::vector<double> echo_ms;
  for (int i = 0; i < calls + 5; ++i) {
    bench::Blob reply;
    const absl::Time start = absl::Now();
    const grpc::Status status =
        echo.Unary(testing::Context().get(), blob, &reply);
    if (!status.ok()) {
      std::fprintf(stderr, "echo: %s\n", status.error_message().c_str());
      return false;
    }
    if (i >= 5) {
      echo_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }
  }
  std::sort(echo_ms.begin(), echo_ms.end());
  std::sort(call_ms.begin(), call_ms.end());
  double sum = 0;
  for (double v : call_ms) sum += v;
  const int p99 = std::min(calls - 1, calls * 99 / 100);
  std::printf(
      "%s (request %zu bytes, response %zu):\n"
      "  time per call over %d calls: mean %.2f ms, min %.2f, p50 %.2f, p99 "
      "%.2f ms; %.0f limbs/s; unreached goals %d\n"
      "  echo of the same sizes (unary): p50 %.2f ms, p99 %.2f ms\n",
      label, batch.ByteSizeLong(), response_bytes, calls, sum / calls,
      call_ms.front(), call_ms[calls / 2], call_ms[p99],
      4.0 * batch.items_size() * calls / (sum / 1000.0), unreached,
      echo_ms[calls / 2], echo_ms[p99]);
  return true;
}

int Main() {
  const int frames = absl::GetFlag(FLAGS_frames);
  const int window = absl::GetFlag(FLAGS_window);

  ServerOptions options = testing::TestServerOptions();
  options.solver_threads = absl::GetFlag(FLAGS_solver_threads);
  const std::string registry = absl::GetFlag(FLAGS_registry);
  std::unique_ptr<testing::ScratchPostgres> postgres;
  if (registry == "sqlite") {
    char pattern[] = "/tmp/reach_service_bench_XXXXXX";
    options.in_memory_store = false;
    options.data_dir = std::string(mkdtemp(pattern)) + "/data";
  } else if (registry == "scratch-postgresql") {
    absl::StatusOr<std::unique_ptr<testing::ScratchPostgres>> started =
        testing::ScratchPostgres::Create();
    if (!started.ok()) {
      std::fprintf(stderr, "%s\n", started.status().ToString().c_str());
      return 1;
    }
    postgres = *std::move(started);
    options.in_memory_store = false;
    options.registry = postgres->url();
  } else if (registry != "memory") {
    options.in_memory_store = false;
    options.registry = registry;
  }
  testing::TestServer server(options);
  std::printf("registry: %s\n", registry.c_str());

  EchoService echo;
  grpc::ServerBuilder builder;
  int echo_port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &echo_port);
  builder.RegisterService(&echo);
  std::unique_ptr<grpc::Server> echo_server = builder.BuildAndStart();
  auto echo_channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", echo_port),
                          grpc::InsecureChannelCredentials());
  auto echo_stub = bench::Echo::NewStub(echo_channel);

  // The stream frame: one two-bone leg goal, warm-started.
  const std::string leg_id = testing::MustRegister(
      *server.stub, testing::ToWire(testing::TwoBoneLegDef(), "leg"));
  v1::SolveRequest frame;
  frame.set_skeleton_id(leg_id);
  frame.set_sequence(123456);
  *frame.add_goals() = testing::MakeGoal("leg", FootTarget(1));
  v1::SolveResponse sample;
  if (!server.stub->Solve(testing::Context().get(), frame, &sample).ok()) {
    std::fprintf(stderr, "sample solve failed\n");
    return 1;
  }
  {
    // Unary Solve on the cached leg, one call at a time: the registry's
    // part is the lookup of a cached skeleton (no store access).
    const int n = absl::GetFlag(FLAGS_unary_solves);
    std::vector<double> us;
    for (int i = -500; i < n; ++i) {
      ToProto(FootTarget(i + 2000), frame.mutable_goals(0)->mutable_target());
      const absl::Time start = absl::Now();
      if (!server.stub->Solve(testing::Context().get(), frame, &sample).ok()) {
        std::fprintf(stderr, "solve failed\n");
        return 1;
      }
      if (i >= 0) us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double u : us) sum += u;
    std::printf("unary Solve on a cached skeleton, %d calls: mean %.1f us, "
                "p50 %.1f us, p99 %.1f us\n",
                n, sum / n, us[n / 2], us[n * 99 / 100]);
  }
  if (const int n = absl::GetFlag(FLAGS_miss_solves); n > 0) {
    // Legs registered (not loaded: registering builds nothing into the
    // cache), then each solved once: every call is a cache miss.
    std::vector<std::string> ids;
    for (int i = 0; i < n; ++i) {
      ids.push_back(testing::MustRegister(
          *server.stub, testing::ToWire(testing::TwoBoneLegDef(),
                                        absl::StrCat("miss leg ", i))));
    }
    std::vector<double> us;
    v1::SolveRequest miss = frame;
    for (int i = 0; i < n; ++i) {
      miss.set_skeleton_id(ids[i]);
      ToProto(FootTarget(i), miss.mutable_goals(0)->mutable_target());
      const absl::Time start = absl::Now();
      if (!server.stub->Solve(testing::Context().get(), miss, &sample).ok()) {
        std::fprintf(stderr, "miss solve failed\n");
        return 1;
      }
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    }
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (double u : us) sum += u;
    std::printf("unary Solve on a skeleton not cached (a miss), %d calls: "
                "mean %.1f us, p50 %.1f us, p99 %.1f us\n",
                n, sum / n, us[n / 2], us[n * 99 / 100]);
  }
  if (absl::GetFlag(FLAGS_unary_only)) return 0;
  const int request_bytes = static_cast<int>(frame.ByteSizeLong());
  const int response_bytes = static_cast<int>(sample.ByteSizeLong());
  std::printf("SolveStream vs echo over loopback: %d frames per stream, %d in "
              "flight per stream, %d solver threads, %u cores\n",
              frames, window, server.server->options().solver_threads,
              std::thread::hardware_concurrency());
  std::printf("message sizes: request %d bytes, response %d bytes (echo "
              "uses the same)\n\n",
              request_bytes, response_bytes);
  std::printf("%-8s %-12s %12s %10s %10s %8s\n", "streams", "rpc", "frames/s",
              "p50 us", "p99 us", "ratio");

  for (int streams : ParseList(absl::GetFlag(FLAGS_streams))) {
    const StreamRun run_echo = [&](int, std::vector<double>* rtts) {
      grpc::ClientContext context;
      auto stream = echo_stub->Stream(&context);
      bench::Blob blob;
      // The payload field's own tag and length bytes make up the rest.
      blob.mutable_payload()->resize(std::max(0, request_bytes - 6));
      blob.set_reply_bytes(std::max(0, response_bytes - 3));
      DriveStream<bench::Blob, bench::Blob>(
          stream.get(), frames, window,
          [&blob](int, bench::Blob* out) {
            if (out->payload().empty()) *out = blob;
          },
          rtts);
    };
    const StreamRun run_solve = [&](int s, std::vector<double>* rtts) {
      grpc::ClientContext context;
      auto stream = server.stub->SolveStream(&context);
      auto stub_frame = frame;
      DriveStream<v1::SolveRequest, v1::SolveResponse>(
          stream.get(), frames, window,
          [&stub_frame, s](int i, v1::SolveRequest* out) {
            if (out->goals_size() == 0) *out = stub_frame;
            out->set_sequence(i);
            ToProto(FootTarget(i + 1000 * s),
                    out->mutable_goals(0)->mutable_target());
          },
          rtts);
    };
    RunLoad(streams, run_echo);  // Warm-up.
    const LoadResult e = RunLoad(streams, run_echo);
    RunLoad(streams, run_solve);
    const LoadResult r = RunLoad(streams, run_solve);
    std::printf("%-8d %-12s %12.0f %10.1f %10.1f %8s\n", streams, "echo",
                e.frames_per_second, e.p50_us, e.p99_us, "");
    std::printf("%-8d %-12s %12.0f %10.1f %10.1f %7.0f%%\n", streams,
                "SolveStream", r.frames_per_second, r.p50_us, r.p99_us,
                100.0 * r.frames_per_second / e.frames_per_second);
  }

  // ---- SolveBatch: 1000 characters x 4 two-bone limbs. ----
  const SkeletonDef humanoid_def = testing::HumanoidDef();
  const Skeleton humanoid = *Skeleton::Create(humanoid_def);
  const std::string humanoid_id = testing::MustRegister(
      *server.stub, testing::ToWire(humanoid_def, "humanoid"));
  const int characters = absl::GetFlag(FLAGS_batch_characters);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> offset(-0.05, 0.05);
  std::vector<Transform> rest_globals(humanoid.num_joints());
  ComputeGlobals(humanoid, RestPose(humanoid), absl::MakeSpan(rest_globals));
  v1::SolveBatchRequest batch;
  for (int c = 0; c < characters; ++c) {
    v1::SolveRequest* item = batch.add_items();
    item->set_skeleton_id(humanoid_id);
    item->set_sequence(c);
    for (const char* chain : {"l_leg", "r_leg", "l_arm", "r_arm"}) {
      const auto& joints = humanoid.chain(humanoid.FindChain(chain)).joints;
      const Eigen::Vector3d root = rest_globals[joints.front()].translation;
      const Eigen::Vector3d tip = rest_globals[joints.back()].translation;
      // 85% of the way from the limb's root to its rest tip, give or take
      // 5 cm: reachable, and every limb has to bend.
      const Eigen::Vector3d target =
          root + 0.85 * (tip - root) +
          Eigen::Vector3d(offset(rng), offset(rng), offset(rng));
      *item->add_goals() =
          testing::MakeGoal(chain, target, v1::SOLVER_TWO_BONE);
    }
  }
  const int calls = absl::GetFlag(FLAGS_batch_calls);
  std::printf("\nSolveBatch: %d characters x 4 two-bone limbs per call\n",
              characters);
  if (!TimeBatch(*server.stub, *echo_stub, batch,
                 "each item names its skeleton", calls)) {
    return 1;
  }
  // The same crowd naming its one rig once, in the batch.
  v1::SolveBatchRequest shared = batch;
  shared.set_skeleton_id(humanoid_id);
  for (v1::SolveRequest& item : *shared.mutable_items()) {
    item.clear_skeleton_id();
  }
  if (!TimeBatch(*server.stub, *echo_stub, shared,
                 "the batch names the skeleton once", calls)) {
    return 1;
  }
  PrintBatchPhases(shared, humanoid_def, humanoid_id);
  echo_server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // As reach-server does: the server runs in this process.
  if (!reach::RetainFreedMemory()) std::fprintf(stderr, "mallopt refused\n");
  reach::StartMemoryTrimmer();
  return reach::Main();
}
