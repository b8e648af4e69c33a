// What watching a stream costs per frame, inside the server (issue 21:
// "viewing never slows solving"): WatchedStream::Published unwatched and
// watched (BM_Published/watched:0 and :1; a full-body request on the
// 31-joint humanoid with its hands, feet and a look-at), and the viewer's
// pump work per frame it sends (Latest and StreamFrameJson), which runs 60
// times a second at most.
//
//   taskset -c 1 build/bench/stream_watch_bench
#include <benchmark/benchmark.h>

#include <string>

#include "reach/v1/solve.pb.h"
#include "server/stream_watch.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "tests/testing/models.h"
#include "tests/testing/service.h"

namespace reach {
namespace {

struct Fixture {
  Fixture() : skeleton(*Skeleton::Create(testing::HumanoidDef())) {
    // A pose of full-precision numbers, as a solved one is (the JSON's
    // length depends on their digits).
    testing::Rng rng(21);
    pose = testing::RandomPose(skeleton, rng, 0.5);
    request.set_skeleton_id("0123456789abcdef");
    for (const char* chain : {"l_arm", "r_arm", "l_leg", "r_leg"}) {
      v1::Goal* goal = request.add_goals();
      *goal = testing::MakeGoal(chain, Eigen::Vector3d(0.3, 1.0, 0.2));
      goal->mutable_pole()->set_z(1.0);
      goal->set_solver(v1::SOLVER_FULL_BODY);
    }
    v1::Goal* look = request.add_goals();
    look->set_tip_joint("head");
    look->mutable_target()->set_z(2.0);
    look->set_solver(v1::SOLVER_FULL_BODY);
    for (int i = 0; i < request.goals_size(); ++i) {
      response.add_results()->set_reached(true);
    }
  }
  Skeleton skeleton;
  Pose pose;
  v1::SolveRequest request;
  v1::SolveResponse response;
};

// One frame published; range(0): 1 while watched (the frame is copied),
// 0 unwatched (a counter).
void BM_Published(benchmark::State& state) {
  Fixture f;
  WatchedStream stream(1, "owner", /*retarget=*/false);
  if (state.range(0) == 1) stream.AddWatcher();
  for (auto _ : state) {
    f.request.set_sequence(f.request.sequence() + 1);
    stream.Published(f.skeleton, "id", f.request, f.pose, f.response);
  }
}
BENCHMARK(BM_Published)->ArgName("watched")->Arg(0)->Arg(1);

// The pump's work for one frame sent: the copy out and its JSON.
void BM_SampleAndJson(benchmark::State& state) {
  Fixture f;
  WatchedStream stream(1, "owner", /*retarget=*/false);
  stream.AddWatcher();
  StreamFrame frame;
  uint64_t sent = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    stream.Published(f.skeleton, "id", f.request, f.pose, f.response);
    if (stream.Latest(sent, &frame)) sent = frame.version;
    const std::string json = StreamFrameJson(1, frame);
    bytes = json.size();
    benchmark::DoNotOptimize(json.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_SampleAndJson);

}  // namespace
}  // namespace reach

BENCHMARK_MAIN();
