// bench: a load generator in the manner of ghz. Workers send Solve,
// SolveBatch or SolveStream traffic for a duration or a request count,
// optionally at a fixed total rate, and report throughput, latency
// percentiles, a histogram and status codes.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/common.h"
#include "server/convert.h"

namespace reach::cli {
namespace {

struct BenchFlags {
  std::string rpc = "solve";
  int concurrency = 4;
  double duration_s = 0;
  int64_t requests = 0;
  double rps = 0;
  std::string skeleton;
  int batch_size = 100;
  int window = 8;
  std::string solver = "auto";
  std::string format = "text";
};

// A character with four two-bone limbs: what a game server sends.
SkeletonDef BenchRig() {
  SkeletonDef def;
  const auto add = [&](const std::string& name, int parent,
                       const Eigen::Vector3d& offset) {
    JointDef joint;
    joint.name = name;
    joint.parent = parent;
    joint.rest.translation = offset;
    def.joints.push_back(joint);
    return static_cast<int>(def.joints.size()) - 1;
  };
  const int hips = add("hips", -1, {0, 1.0, 0});
  const int chest = add("chest", hips, {0, 0.45, 0});
  for (const char* side : {"left", "right"}) {
    const double s = side[0] == 'l' ? 1 : -1;
    const int up = add(absl::StrCat(side, "_upper_leg"), hips, {s * 0.1, 0, 0});
    const int low = add(absl::StrCat(side, "_lower_leg"), up, {0, -0.45, 0.02});
    const int foot = add(absl::StrCat(side, "_foot"), low, {0, -0.45, -0.02});
    def.chains.push_back({absl::StrCat(side, "_leg"), def.joints[up].name,
                          def.joints[foot].name});
    const int arm = add(absl::StrCat(side, "_upper_arm"), chest, {s * 0.2, 0, 0});
    const int fore = add(absl::StrCat(side, "_forearm"), arm, {s * 0.3, 0, -0.02});
    const int hand = add(absl::StrCat(side, "_hand"), fore, {s * 0.28, 0, 0.02});
    def.chains.push_back({absl::StrCat(side, "_arm"), def.joints[arm].name,
                          def.joints[hand].name});
  }
  return def;
}

// Goals for every chain of `skeleton`, towards tips of random poses (fixed
// seed): reachable by construction.
std::vector<v1::SolveRequest> MakeRequests(const Skeleton& skeleton,
                                           const std::string& id,
                                           v1::Solver solver, int count) {
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal;
  std::vector<v1::SolveRequest> requests(count);
  Pose pose = RestPose(skeleton);
  std::vector<Transform> globals(skeleton.num_joints());
  for (int r = 0; r < count; ++r) {
    for (Transform& local : pose.local) {
      local.rotation = Eigen::Quaterniond(1, 0.3 * normal(rng),
                                          0.3 * normal(rng), 0.3 * normal(rng))
                           .normalized();
    }
    for (int j = 0; j < skeleton.num_joints(); ++j) {
      pose.local[j].rotation =
          skeleton.joint(j).rest.rotation * pose.local[j].rotation;
    }
    ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
    v1::SolveRequest& request = requests[r];
    request.set_skeleton_id(id);
    request.set_sequence(r);
    for (int c = 0; c < skeleton.num_chains(); ++c) {
      v1::Goal* goal = request.add_goals();
      goal->set_chain(skeleton.chain(c).name);
      goal->set_solver(solver);
      ToProto(globals[skeleton.chain(c).joints.back()].translation,
              goal->mutable_target());
    }
  }
  return requests;
}

struct Sample {
  absl::Duration latency;
  absl::StatusCode code;
};

struct Shared {
  const BenchFlags* flags;
  absl::Time begin;
  absl::Time end;                 // Duration mode.
  std::atomic<int64_t> next{0};   // Requests claimed.
  const std::vector<v1::SolveRequest>* requests;
};

// Claims the next request number; false when the run is over. Waits for
// its slot when a rate is set.
bool Claim(Shared& shared, int64_t* n) {
  *n = shared.next.fetch_add(1);
  const BenchFlags& f = *shared.flags;
  if (f.requests > 0 && *n >= f.requests) return false;
  if (f.rps > 0) {
    const absl::Time due = shared.begin + absl::Seconds(*n / f.rps);
    const absl::Time now = absl::Now();
    if (due > now) absl::SleepFor(due - now);
  }
  return f.requests > 0 || absl::Now() < shared.end;
}

void UnaryWorker(Shared& shared, client::ReachClient& client,
                 std::vector<Sample>* samples) {
  const BenchFlags& f = *shared.flags;
  const auto& pool = *shared.requests;
  v1::SolveBatchRequest batch;
  int64_t n;
  while (Claim(shared, &n)) {
    const absl::Time start = absl::Now();
    absl::Status status;
    if (f.rpc == "batch") {
      // Every request is on the one --skeleton: the batch names it once.
      batch.clear_items();
      batch.set_skeleton_id(pool.front().skeleton_id());
      for (int i = 0; i < f.batch_size; ++i) {
        v1::SolveRequest* item = batch.add_items();
        *item = pool[(n * f.batch_size + i) % pool.size()];
        item->clear_skeleton_id();
      }
      status = client.SolveBatch(batch).status();
    } else {
      status = client.Solve(pool[n % pool.size()]).status();
    }
    samples->push_back({absl::Now() - start, status.code()});
  }
}

void StreamWorker(Shared& shared, client::ReachClient& client,
                  absl::Duration deadline, std::vector<Sample>* samples,
                  absl::Status* stream_status) {
  const auto& pool = *shared.requests;
  std::unique_ptr<client::SolveStream> stream =
      client.OpenStream(deadline, shared.flags->window);
  client::StreamResult result;
  const auto take = [&] {
    samples->push_back(
        {result.latency, result.response.has_error()
                             ? static_cast<absl::StatusCode>(
                                   result.response.error().code())
                             : absl::StatusCode::kOk});
  };
  int64_t n;
  while (Claim(shared, &n)) {
    if (!stream->Send(pool[n % pool.size()])) break;
    while (stream->TryReceive(&result)) take();
  }
  while (stream->Receive(&result)) take();
  *stream_status = stream->Finish();
  while (stream->TryReceive(&result)) take();
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

int RunBench(const Globals& globals, const BenchFlags& flags) {
  if (flags.rpc != "solve" && flags.rpc != "batch" && flags.rpc != "stream") {
    return Fail(absl::InvalidArgumentError(
                    "--rpc: expected solve, batch or stream, got '" +
                    flags.rpc + "'"),
                kExitUsage);
  }
  if (flags.format != "text" && flags.format != "json") {
    return Fail(absl::InvalidArgumentError(
                    "--format: expected text or json, got '" + flags.format +
                    "'"),
                kExitUsage);
  }
  absl::StatusOr<v1::Solver> solver = ParseSolver(flags.solver);
  if (!solver.ok()) return Fail(solver.status(), kExitUsage);
  auto client = MakeClient(globals);

  // The skeleton: the one named, or the built-in four-limb rig.
  std::string id = flags.skeleton;
  SkeletonDef def;
  if (id.empty()) {
    def = BenchRig();
    v1::Skeleton wire;
    ToProto(def, &wire);
    wire.set_name("reach-bench-rig");
    auto registered = client->Register(wire);
    if (!registered.ok()) return FailRpc(registered.status());
    id = registered->skeleton_id();
  } else {
    auto got = client->GetSkeleton(id);
    if (!got.ok()) return FailRpc(got.status());
    if (absl::Status s = FromProto(got->skeleton(), &def); !s.ok()) {
      return FailRpc(s);
    }
  }
  absl::StatusOr<Skeleton> skeleton = Skeleton::Create(std::move(def));
  if (!skeleton.ok()) return FailRpc(skeleton.status());
  if (skeleton->num_chains() == 0) {
    return Fail(absl::InvalidArgumentError("--skeleton: it has no chains"),
                kExitUsage);
  }
  const std::vector<v1::SolveRequest> pool =
      MakeRequests(*skeleton, id, *solver, 1024);

  Shared shared;
  shared.flags = &flags;
  shared.requests = &pool;
  const double duration =
      flags.duration_s > 0 ? flags.duration_s : (flags.requests > 0 ? 0 : 10);
  shared.begin = absl::Now();
  shared.end = flags.requests > 0 && flags.duration_s <= 0
                   ? absl::InfiniteFuture()
                   : shared.begin + absl::Seconds(duration);
  const absl::Duration stream_deadline =
      absl::Seconds(duration + globals.timeout_s) +
      (flags.requests > 0 ? absl::Seconds(globals.timeout_s) +
                                absl::Milliseconds(10) * flags.requests
                          : absl::ZeroDuration());

  std::vector<std::vector<Sample>> samples(flags.concurrency);
  std::vector<absl::Status> stream_status(flags.concurrency);
  std::vector<std::thread> workers;
  for (int w = 0; w < flags.concurrency; ++w) {
    workers.emplace_back([&, w] {
      if (flags.rpc == "stream") {
        StreamWorker(shared, *client, stream_deadline, &samples[w],
                     &stream_status[w]);
      } else {
        UnaryWorker(shared, *client, &samples[w]);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - shared.begin);

  std::vector<absl::Duration> latencies;
  std::map<std::string, int64_t> codes;
  for (const auto& per_worker : samples) {
    for (const Sample& s : per_worker) {
      latencies.push_back(s.latency);
      ++codes[absl::StatusCodeToString(s.code)];
    }
  }
  for (const absl::Status& s : stream_status) {
    if (!s.ok()) ++codes[absl::StrCat("stream ", absl::StatusCodeToString(s.code()))];
  }
  std::sort(latencies.begin(), latencies.end());
  const int64_t count = static_cast<int64_t>(latencies.size());
  const auto pct = [&](double p) {
    return count == 0 ? absl::ZeroDuration()
                      : latencies[std::min<int64_t>(
                            count - 1, static_cast<int64_t>(p * (count - 1) + 0.5))];
  };
  absl::Duration total = absl::ZeroDuration();
  for (absl::Duration d : latencies) total += d;
  const absl::Duration mean = count ? total / count : absl::ZeroDuration();
  const absl::Duration lo = count ? latencies.front() : absl::ZeroDuration();
  const absl::Duration hi = count ? latencies.back() : absl::ZeroDuration();
  const double rate = seconds > 0 ? count / seconds : 0;
  // Ten equal-width buckets from min to max, as ghz prints.
  constexpr int kBuckets = 10;
  std::vector<int64_t> buckets(kBuckets, 0);
  for (absl::Duration d : latencies) {
    const double span = Ms(hi - lo);
    const int b = span > 0 ? std::min(kBuckets - 1, static_cast<int>(
                                                        Ms(d - lo) / span * kBuckets))
                           : 0;
    ++buckets[b];
  }
  const auto bucket_top = [&](int b) {
    return Ms(lo) + Ms(hi - lo) * (b + 1) / kBuckets;
  };
  const int64_t ok = codes.count("OK") ? codes["OK"] : 0;

  if (flags.format == "json") {
    std::vector<std::string> code_json, hist_json;
    for (const auto& [code, n] : codes) {
      code_json.push_back(absl::StrCat(JsonString(code), ":", n));
    }
    for (int b = 0; b < kBuckets; ++b) {
      hist_json.push_back(absl::StrFormat("{\"mark\":%.4f,\"count\":%d}",
                                          bucket_top(b), buckets[b]));
    }
    absl::PrintF(
        "{\"rpc\":\"%s\",\"concurrency\":%d,\"batchSize\":%d,\"count\":%d,"
        "\"seconds\":%.4f,\"rps\":%.2f,\"latencyMs\":{\"min\":%.4f,"
        "\"mean\":%.4f,\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,\"max\":%.4f},"
        "\"histogram\":[%s],\"statusCodes\":{%s}}\n",
        flags.rpc, flags.concurrency, flags.rpc == "batch" ? flags.batch_size : 1,
        count, seconds, rate, Ms(lo), Ms(mean), Ms(pct(0.5)), Ms(pct(0.9)),
        Ms(pct(0.99)), Ms(hi), absl::StrJoin(hist_json, ","),
        absl::StrJoin(code_json, ","));
  } else {
    absl::PrintF("Summary:\n  RPC:          %s%s\n  Concurrency:  %d\n"
                 "  Count:        %d\n  Total:        %.2f s\n"
                 "  Requests/s:   %.2f\n",
                 flags.rpc,
                 flags.rpc == "batch"
                     ? absl::StrCat(" (", flags.batch_size, " characters)")
                     : "",
                 flags.concurrency, count, seconds, rate);
    absl::PrintF("\nLatency (ms):\n  min %.3f  mean %.3f  p50 %.3f  p90 %.3f  "
                 "p99 %.3f  max %.3f\n",
                 Ms(lo), Ms(mean), Ms(pct(0.5)), Ms(pct(0.9)), Ms(pct(0.99)),
                 Ms(hi));
    absl::PrintF("\nLatency histogram (ms):\n");
    const int64_t peak = *std::max_element(buckets.begin(), buckets.end());
    for (int b = 0; b < kBuckets; ++b) {
      const int bar = peak > 0 ? static_cast<int>(40 * buckets[b] / peak) : 0;
      absl::PrintF("  %9.3f [%d]\t|%s\n", bucket_top(b), buckets[b],
                   std::string(bar, '#'));
    }
    absl::PrintF("\nStatus codes:\n");
    for (const auto& [code, n] : codes) absl::PrintF("  %s: %d\n", code, n);
  }
  return count > 0 && ok == count ? kExitOk : kExitRpcError;
}

}  // namespace

void AddBenchCommand(CLI::App& app, const Globals& globals, Command* run) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* bench = app.add_subcommand(
      "bench",
      "Load generator: send Solve, SolveBatch or SolveStream traffic and "
      "report requests/s, latency percentiles, a histogram and status codes. "
      "Exits 1 unless every request succeeded.");
  bench->add_option("--rpc", flags->rpc, "solve, batch or stream")
      ->capture_default_str();
  bench->add_option("--concurrency", flags->concurrency,
                    "Workers (each a stream for --rpc stream)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  auto* duration = bench->add_option("--duration", flags->duration_s,
                                     "Seconds to run (default 10)");
  duration->check(CLI::PositiveNumber);
  bench->add_option("--requests", flags->requests,
                    "Requests (stream frames) to send in total")
      ->check(CLI::PositiveNumber)
      ->excludes(duration);
  bench->add_option("--rps", flags->rps,
                    "Total requests per second (default: unlimited)")
      ->check(CLI::PositiveNumber);
  bench->add_option("--skeleton", flags->skeleton,
                    "Registered skeleton whose chains get goals (default: a "
                    "built-in four-limb rig)");
  bench->add_option("--batch-size", flags->batch_size,
                    "Characters per SolveBatch call")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--window", flags->window, "Stream frames in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  bench->add_option("--solver", flags->solver, "One of: " + SolverNames())
      ->capture_default_str();
  bench->add_option("--format", flags->format, "text or json")
      ->capture_default_str();
  bench->callback([=, &globals] {
    *run = [=, &globals] { return RunBench(globals, *flags); };
  });
}

}  // namespace reach::cli
