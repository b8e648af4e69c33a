// bench: a load generator in the manner of ghz. Workers send Solve,
// SolveBatch or SolveStream traffic for a duration or a request count,
// optionally at a fixed total rate, and report throughput, latency
// percentiles, a histogram, status codes and how many goals were reached.
// --full-body sends whole-body frames (feet, hands, head look-at) of a
// humanoid to SOLVER_FULL_BODY instead of one goal per chain.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/cli/common.h"
#include "importers/skeleton_file.h"
#include "solvers/limits.h"
#include "wire/convert.h"

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
  bool full_body = false;
  std::string skeleton_file;  // --full-body: the humanoid to register.
};

// --full-body's humanoid: the limited one when present, else the plain one,
// looked up from the working directory, then from the source tree above a
// build's client/reach.
constexpr const char* kFullBodySkeletons[] = {
    "examples/humanoid_limited.skeleton.json",
    "examples/humanoid.skeleton.json"};

std::string FindFullBodySkeleton() {
  std::vector<std::filesystem::path> roots = {"."};
  std::error_code error;
  const std::filesystem::path exe =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) roots.push_back(exe.parent_path() / ".." / "..");
  for (const char* name : kFullBodySkeletons) {
    for (const std::filesystem::path& root : roots) {
      const std::filesystem::path path = root / name;
      if (std::filesystem::exists(path, error)) return path.lexically_normal();
    }
  }
  return "";
}

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

// Goals for the chains of `skeleton`, towards the tips of random poses
// (fixed seed), reachable from the pose the server solves them from: its
// rest pose (the requests carry none). Only the chains' joints are turned,
// each within its limits; the joints the chains hang from (hips, chest)
// stay at rest, so every chain's root is where the server starts it.
// (Turning them too, as the generator once did, moved the roots and left
// half the targets out of reach.) A chain that carries another (a spine
// under the arms) gets no goal: solving it would move the other's root.
std::vector<v1::SolveRequest> MakeRequests(const Skeleton& skeleton,
                                           const std::string& id,
                                           v1::Solver solver, int count) {
  const int n = skeleton.num_joints();
  // Joints above some chain's root; the chains that get goals, and the
  // joints they turn (root up to the joint before the tip: the tip's own
  // rotation moves no tip).
  std::vector<bool> carries(n, false), turned(n, false);
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    for (int j = skeleton.joint(skeleton.chain(c).joints.front()).parent;
         j >= 0; j = skeleton.joint(j).parent) {
      carries[j] = true;
    }
  }
  std::vector<int> chains;
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    const std::vector<int>& joints = skeleton.chain(c).joints;
    if (std::any_of(joints.begin(), joints.end(),
                    [&](int j) { return carries[j]; })) {
      continue;
    }
    chains.push_back(c);
    for (size_t k = 0; k + 1 < joints.size(); ++k) turned[joints[k]] = true;
  }
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal;
  std::vector<v1::SolveRequest> requests(count);
  Pose pose = RestPose(skeleton);
  std::vector<Transform> globals(n);
  for (int r = 0; r < count; ++r) {
    for (int j = 0; j < n; ++j) {
      const Eigen::Quaterniond turn =
          Eigen::Quaterniond(1, 0.3 * normal(rng), 0.3 * normal(rng),
                             0.3 * normal(rng))
              .normalized();
      const Joint& joint = skeleton.joint(j);
      pose.local[j].rotation = joint.rest.rotation;
      if (!turned[j]) continue;
      pose.local[j].rotation = joint.rest.rotation * turn;
      ProjectIntoLimits(joint, &pose.local[j].rotation);
    }
    ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
    v1::SolveRequest& request = requests[r];
    request.set_skeleton_id(id);
    request.set_sequence(r);
    for (int c : chains) {
      const std::vector<int>& joints = skeleton.chain(c).joints;
      v1::Goal* goal = request.add_goals();
      goal->set_chain(skeleton.chain(c).name);
      goal->set_solver(solver);
      ToProto(globals[joints.back()].translation, goal->mutable_target());
    }
  }
  return requests;
}

// Whole-body frames for SOLVER_FULL_BODY on a humanoid with chains l_leg,
// r_leg, l_arm, r_arm and a joint "head" (+Y up, +Z forward, as
// examples/humanoid*.skeleton.json): both feet placed (position and their
// rest orientation, priority 0, knees facing forward), both hands in front
// of the chest (priority 1), the head looking at a point ahead (priority 2).
// Every target moves smoothly with the frame along a 120-frame cycle, so
// consecutive frames of a stream are close (warm starts have little to do)
// and the pool (8 cycles) loops without a jump.
absl::StatusOr<std::vector<v1::SolveRequest>> MakeFullBodyRequests(
    const Skeleton& skeleton, const std::string& id) {
  constexpr int kCycle = 120;
  constexpr int kCount = 8 * kCycle;
  const auto chain = [&](const char* name) -> absl::StatusOr<int> {
    const int c = skeleton.FindChain(name);
    if (c < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--full-body: the skeleton has no chain '", name,
          "' (it needs l_leg, r_leg, l_arm, r_arm and a joint 'head')"));
    }
    return c;
  };
  const int head = skeleton.FindJoint("head");
  if (head < 0) {
    return absl::InvalidArgumentError(
        "--full-body: the skeleton has no joint 'head'");
  }
  const absl::Span<const Transform> rest = skeleton.rest_globals();
  struct Limb {
    std::string name;
    int root, tip;
    double side;  // +1 left, -1 right.
    double length;
  };
  std::vector<Limb> legs, arms;
  for (const char* name : {"l_leg", "r_leg", "l_arm", "r_arm"}) {
    absl::StatusOr<int> c = chain(name);
    if (!c.ok()) return c.status();
    const std::vector<int>& joints = skeleton.chain(*c).joints;
    Limb limb{name, joints.front(), joints.back(), name[0] == 'l' ? 1.0 : -1.0,
              0.0};
    for (size_t k = 1; k < joints.size(); ++k) {
      limb.length +=
          (rest[joints[k]].translation - rest[joints[k - 1]].translation)
              .norm();
    }
    (name[2] == 'l' ? legs : arms).push_back(limb);
  }
  // The head's forward axis in its own frame: model +Z at rest.
  const Eigen::Vector3d aim =
      rest[head].rotation.conjugate() * Eigen::Vector3d::UnitZ();
  std::vector<v1::SolveRequest> requests(kCount);
  for (int r = 0; r < kCount; ++r) {
    const double t = 2.0 * M_PI * (r % kCycle) / kCycle;
    v1::SolveRequest& request = requests[r];
    request.set_skeleton_id(id);
    request.set_sequence(r);
    const auto add = [&](const Limb& limb, const Eigen::Vector3d& target,
                         int priority) {
      v1::Goal* goal = request.add_goals();
      goal->set_chain(limb.name);
      goal->set_solver(v1::SOLVER_FULL_BODY);
      goal->set_priority(priority);
      ToProto(target, goal->mutable_target());
      return goal;
    };
    for (const Limb& leg : legs) {
      // Striding in place: forward and back, lifted on the way forward,
      // never quite straight.
      const double phase = t + (leg.side > 0 ? 0.0 : M_PI);
      const Eigen::Vector3d foot =
          rest[leg.tip].translation +
          leg.length *
              Eigen::Vector3d(0.0, 0.06 + 0.05 * std::max(0.0, std::sin(phase)),
                              0.12 * std::cos(phase));
      v1::Goal* goal = add(leg, foot, 0);
      ToProto(rest[leg.tip].rotation, goal->mutable_target_orientation());
      // The knee faces forward.
      ToProto(rest[leg.root].translation +
                  leg.length * Eigen::Vector3d(0.0, -0.5, 1.0),
              goal->mutable_pole());
    }
    for (const Limb& arm : arms) {
      // In front of the chest, circling.
      const Eigen::Vector3d hand =
          rest[arm.root].translation +
          arm.length * Eigen::Vector3d(arm.side * (0.1 + 0.1 * std::cos(t)),
                                       -0.3 + 0.1 * std::sin(t), 0.55);
      add(arm, hand, 1);
    }
    v1::Goal* look = request.add_goals();
    look->set_tip_joint("head");
    look->set_solver(v1::SOLVER_FULL_BODY);
    look->set_priority(2);
    const double height = rest[head].translation.y();
    ToProto(rest[head].translation +
                height * Eigen::Vector3d(0.4 * std::sin(t), 0.0, 1.5),
            look->mutable_target());
    ToProto(aim, look->mutable_aim_axis());
  }
  return requests;
}

struct Sample {
  absl::Duration latency;
  absl::StatusCode code;
  int goals = 0;    // Results in the answer(s).
  int reached = 0;  // Of them, reached.
  int64_t iterations = 0;
};

// The goals of one answer, added to `sample`.
void CountGoals(const v1::SolveResponse& response, Sample* sample) {
  for (const v1::GoalResult& result : response.results()) {
    ++sample->goals;
    sample->reached += result.reached();
    sample->iterations += result.iterations();
  }
}

struct Shared {
  const BenchFlags* flags;
  absl::Time begin;
  absl::Time end;                // Duration mode.
  std::atomic<int64_t> next{0};  // Requests claimed.
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
    Sample sample;
    if (f.rpc == "batch") {
      // Every request is on the one --skeleton: the batch names it once.
      batch.clear_items();
      batch.set_skeleton_id(pool.front().skeleton_id());
      for (int i = 0; i < f.batch_size; ++i) {
        v1::SolveRequest* item = batch.add_items();
        *item = pool[(n * f.batch_size + i) % pool.size()];
        item->clear_skeleton_id();
      }
      absl::StatusOr<v1::SolveBatchResponse> answer = client.SolveBatch(batch);
      sample.code = answer.status().code();
      if (answer.ok()) {
        for (const v1::SolveResponse& item : answer->items()) {
          CountGoals(item, &sample);
        }
      }
    } else {
      absl::StatusOr<v1::SolveResponse> answer =
          client.Solve(pool[n % pool.size()]);
      sample.code = answer.status().code();
      if (answer.ok()) CountGoals(*answer, &sample);
    }
    sample.latency = absl::Now() - start;
    samples->push_back(sample);
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
    Sample sample;
    sample.latency = result.latency;
    sample.code =
        result.response.has_error()
            ? static_cast<absl::StatusCode>(result.response.error().code())
            : absl::StatusCode::kOk;
    CountGoals(result.response, &sample);
    samples->push_back(sample);
  };
  // Each stream plays the pool from its start, frame after frame, as one
  // character would (full-body frames then follow each other smoothly).
  int64_t n, frame = 0;
  while (Claim(shared, &n)) {
    if (!stream->Send(pool[frame++ % pool.size()])) break;
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
  auto made = MakeClient(globals);
  if (!made.ok()) return FailSetup(made.status());
  auto client = *std::move(made);

  // The skeleton: the one named, the full-body humanoid, or the built-in
  // four-limb rig. What this run registers it deletes when it ends.
  std::string id = flags.skeleton;
  std::string registered_id;
  const std::string run_tag = absl::StrFormat(
      "(reach bench %d-%x)", static_cast<int>(getpid()),
      static_cast<unsigned>(std::random_device()()));
  const auto cleanup = [&] {
    if (registered_id.empty()) return;
    if (absl::Status s = client->DeleteSkeleton(registered_id); !s.ok()) {
      std::fprintf(stderr,
                   "reach: bench: could not delete the skeleton it "
                   "registered, %s: %s\n",
                   registered_id.c_str(), s.ToString().c_str());
    }
    registered_id.clear();
  };
  struct Cleanup {
    std::function<void()> run;
    ~Cleanup() { run(); }
  } cleanup_at_exit{cleanup};
  std::string skeleton_file;
  SkeletonDef def;
  if (flags.full_body) {
    skeleton_file = flags.skeleton_file.empty() ? FindFullBodySkeleton()
                                                : flags.skeleton_file;
    if (skeleton_file.empty()) {
      return Fail(absl::NotFoundError(absl::StrCat(
                      "--full-body: found neither ", kFullBodySkeletons[0],
                      " nor ", kFullBodySkeletons[1],
                      " (run from the source tree, or pass --skeleton-file)")),
                  kExitFileError);
    }
    absl::StatusOr<v1::Skeleton> wire = import::LoadSkeletonFile(skeleton_file);
    if (!wire.ok()) return Fail(wire.status(), kExitFileError);
    if (absl::Status s = FromProto(*wire, &def); !s.ok()) {
      return Fail(s, kExitFileError);
    }
    // A name of this run's own (ids hash the name too), so that deleting
    // it at the end pulls nothing from under another run or a user.
    wire->set_name(absl::StrCat(wire->name(), " ", run_tag));
    auto registered = client->Register(*wire);
    if (!registered.ok()) return FailRpc(registered.status());
    id = registered->skeleton_id();
    registered_id = id;
  } else if (id.empty()) {
    def = BenchRig();
    v1::Skeleton wire;
    ToProto(def, &wire);
    wire.set_name(absl::StrCat("reach-bench-rig ", run_tag));
    auto registered = client->Register(wire);
    if (!registered.ok()) return FailRpc(registered.status());
    id = registered->skeleton_id();
    registered_id = id;
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
  std::vector<v1::SolveRequest> pool;
  if (flags.full_body) {
    absl::StatusOr<std::vector<v1::SolveRequest>> frames =
        MakeFullBodyRequests(*skeleton, id);
    if (!frames.ok()) return Fail(frames.status(), kExitFileError);
    pool = *std::move(frames);
  } else {
    pool = MakeRequests(*skeleton, id, *solver, 1024);
  }

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
  int64_t goals = 0, reached = 0, iterations = 0;
  for (const auto& per_worker : samples) {
    for (const Sample& s : per_worker) {
      latencies.push_back(s.latency);
      ++codes[absl::StatusCodeToString(s.code)];
      goals += s.goals;
      reached += s.reached;
      iterations += s.iterations;
    }
  }
  const double mean_iterations =
      goals > 0 ? static_cast<double>(iterations) / goals : 0.0;
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
  // Full-body frames solved per second: a request is one frame, a batch
  // one per character.
  const double frames_per_second =
      rate * (flags.rpc == "batch" ? flags.batch_size : 1);

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
        "{\"rpc\":\"%s\",\"fullBody\":%s,\"concurrency\":%d,"
        "\"batchSize\":%d,\"count\":%d,"
        "\"seconds\":%.4f,\"rps\":%.2f,\"latencyMs\":{\"min\":%.4f,"
        "\"mean\":%.4f,\"p50\":%.4f,\"p90\":%.4f,\"p99\":%.4f,\"max\":%.4f},"
        "\"histogram\":[%s],\"statusCodes\":{%s},"
        "\"goals\":%d,\"goalsReached\":%d,\"meanIterations\":%.3f,"
        "\"framesPerSecond\":%.2f}\n",
        flags.rpc, flags.full_body ? "true" : "false", flags.concurrency,
        flags.rpc == "batch" ? flags.batch_size : 1, count, seconds, rate,
        Ms(lo), Ms(mean), Ms(pct(0.5)), Ms(pct(0.9)), Ms(pct(0.99)), Ms(hi),
        absl::StrJoin(hist_json, ","), absl::StrJoin(code_json, ","), goals,
        reached, mean_iterations, frames_per_second);
  } else {
    absl::PrintF(
        "Summary:\n  RPC:          %s%s%s\n  Concurrency:  %d\n"
        "  Count:        %d\n  Total:        %.2f s\n"
        "  Requests/s:   %.2f\n",
        flags.rpc,
        flags.rpc == "batch"
            ? absl::StrCat(" (", flags.batch_size, " characters)")
            : "",
        flags.full_body ? absl::StrCat(", full-body frames of ", skeleton_file)
                        : "",
        flags.concurrency, count, seconds, rate);
    if (flags.full_body) {
      absl::PrintF("  Frames/s:     %.2f\n", frames_per_second);
    }
    absl::PrintF(
        "  Goals:        %d, %d reached (%.2f%%), %.1f iterations "
        "each on average\n",
        goals, reached, goals > 0 ? 100.0 * reached / goals : 0.0,
        mean_iterations);
    absl::PrintF(
        "\nLatency (ms):\n  min %.3f  mean %.3f  p50 %.3f  p90 %.3f  "
        "p99 %.3f  max %.3f\n",
        Ms(lo), Ms(mean), Ms(pct(0.5)), Ms(pct(0.9)), Ms(pct(0.99)), Ms(hi));
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
  duration->check(Positive());
  bench->add_option("--requests", flags->requests,
                    "Requests (stream frames) to send in total")
      ->check(Positive())
      ->excludes(duration);
  bench->add_option("--rps", flags->rps,
                    "Total requests per second (default: unlimited)")
      ->check(Positive());
  auto* skeleton = bench->add_option(
      "--skeleton", flags->skeleton,
      "Registered skeleton whose chains get goals (default: a built-in "
      "four-limb rig)");
  bench->add_option("--batch-size", flags->batch_size,
                    "Characters per SolveBatch call")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  bench->add_option("--window", flags->window, "Stream frames in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  auto* solver =
      bench->add_option("--solver", flags->solver, "One of: " + SolverNames())
          ->capture_default_str();
  auto* full_body = bench->add_flag(
      "--full-body", flags->full_body,
      "Whole-body frames for SOLVER_FULL_BODY: registers "
      "examples/humanoid_limited.skeleton.json (or, without it, "
      "examples/humanoid.skeleton.json; from the working directory or the "
      "source tree above the binary) and sends both feet (position and "
      "orientation, priority 0), both hands (priority 1) and a head look-at "
      "(priority 2), moving smoothly from frame to frame (each stream plays "
      "them in order)");
  bench
      ->add_option("--skeleton-file", flags->skeleton_file,
                   "--full-body: this humanoid instead (skeleton JSON; "
                   "chains l_leg, r_leg, l_arm, r_arm and a joint 'head')")
      ->needs(full_body);
  full_body->excludes(solver);
  full_body->excludes(skeleton);
  bench->add_option("--format", flags->format, "text or json")
      ->capture_default_str();
  bench->callback([=, &globals] {
    *run = [=, &globals] { return RunBench(globals, *flags); };
  });
}

}  // namespace reach::cli
