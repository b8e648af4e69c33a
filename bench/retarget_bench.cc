// One retargeted frame in-process: the CMU walk (31 joints) onto the BCN
// rig (54 joints) and onto the Boxing rig, transfer plus the full-body solve
// of hands and feet with planting, the clip's frames in order (a stream).
// Reports the time per frame and, as counters, the solve's iterations.
//
//   taskset -c 1 build/bench/retarget_bench --benchmark_min_time=0.5
//
// Issue 18's bar: CMU -> BCN p50 <= 50 us per frame (the p50_us counter:
// each frame timed, percentiles over every frame run).
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "importers/bvh.h"
#include "importers/gltf.h"
#include "retarget/characterize.h"
#include "retarget/retargeter.h"

namespace reach::retarget {
namespace {

std::string Data(const std::string& path) {
  return absl::StrCat(REACH_SOURCE_DIR, "/tests/data/", path);
}

struct Side {
  Skeleton skeleton;
  Characterization roles;
};

Side MakeSide(const SkeletonDef& def) {
  Skeleton skeleton = *Skeleton::Create(def);
  Characterization roles = *Characterize(skeleton);
  return Side{std::move(skeleton), std::move(roles)};
}

struct Setup {
  import::BvhClip clip;
  Side source;
  Side target;
  std::optional<Retargeter> retargeter;
  std::vector<Pose> frames;
};

Setup* MakeSetup(const std::string& target_file) {
  import::BvhClip clip = *import::ImportBvh(Data("mocap/cmu_02_01_walk.bvh"));
  Side source = MakeSide(clip.skeleton.def);
  SkeletonDef target_def =
      target_file.find(".bvh") != std::string::npos
          ? import::ImportBvh(Data(target_file))->skeleton.def
          : import::ImportGltf(Data(target_file))->def;
  Side target = MakeSide(target_def);
  // Heap-stable: the retargeter points at the skeletons.
  auto* s = new Setup{std::move(clip), std::move(source), std::move(target),
                      std::nullopt, {}};
  const RetargetSide from{&s->source.skeleton, &s->source.roles,
                          RestPose(s->source.skeleton)};
  const Pose aligned = *AlignLimbs(
      from, {&s->target.skeleton, &s->target.roles, RestPose(s->target.skeleton)});
  s->retargeter = *Retargeter::Create(
      from, {&s->target.skeleton, &s->target.roles, aligned}, {});
  for (int f = 1; f < s->clip.num_frames; ++f) {
    s->clip.FramePose(f, &s->frames.emplace_back());
  }
  return s;
}

void RetargetFrame(benchmark::State& state, const std::string& target) {
  static Setup* bcn = MakeSetup("rigs/BCN_Epileptic.glb");
  static Setup* boxing = MakeSetup("rigs/Boxing_Toes.bvh");
  Setup* s = target == "bcn" ? bcn : boxing;
  RetargetState stream;
  RetargetScratch scratch;
  RetargetFrameResult result;
  Pose out;
  size_t f = 0;
  double iterations = 0.0;
  std::vector<double> times;
  times.reserve(1 << 20);
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    if (f == s->frames.size()) {
      f = 0;
      stream = RetargetState();
    }
    const Clock::time_point start = Clock::now();
    const absl::Status ok = s->retargeter->Apply(
        s->frames[f++], s->clip.frame_time, stream, scratch, &out, &result);
    const Clock::time_point end = Clock::now();
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(out.local.data());
    iterations += result.iterations;
    if (times.size() < times.capacity()) {
      times.push_back(std::chrono::duration<double, std::micro>(end - start).count());
    }
  }
  if (times.empty()) return;
  state.counters["iterations"] = iterations / times.size();
  std::sort(times.begin(), times.end());
  state.counters["p50_us"] = times[times.size() / 2];
  state.counters["p99_us"] = times[times.size() * 99 / 100];
}
BENCHMARK_CAPTURE(RetargetFrame, CmuWalkToBcn, std::string("bcn"))
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(RetargetFrame, CmuWalkToBoxing, std::string("boxing"))
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace reach::retarget

BENCHMARK_MAIN();
