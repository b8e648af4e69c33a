// Nanoseconds per solve and iterations, per solver, on:
// - a two-bone limb (the leg of tests/testing/models.h);
// - a 10-joint chain with reachable and unreachable targets, tolerance 1e-3
//   of the chain's length (the setup of Aristidou & Lasenby 2011, FABRIK);
// - the 7-DOF Panda arm with joint limits and 6-D pose targets, one attempt
//   from the mid-limit seed (bench/ik_peer_bench.cc runs the full TRAC-IK
//   protocol with restarts beside KDL).
//
// Each solve goes through reach::Solve (validation, forward kinematics,
// solve, measured result) from the same start pose; resetting the start
// pose (a copy of a few transforms) is inside the timed loop. Targets cycle
// through 1024 precomputed ones (fixed seeds). Counters: `iterations` is
// the mean per solve, `solved` the fraction reached.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "solvers/two_bone.h"
#include "tests/testing/full_body.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::reach::testing::GlobalOf;
using ::reach::testing::Rng;

constexpr int kTargets = 1024;

struct Scenario {
  Skeleton skeleton;
  Pose start;
  std::vector<Goal> goals;
};

Skeleton MustCreate(SkeletonDef def) {
  auto s = Skeleton::Create(std::move(def));
  if (!s.ok()) std::abort();
  return std::move(*s);
}

void RunScenario(benchmark::State& state, const Scenario& scenario) {
  Workspace ws;
  Pose pose = scenario.start;
  GoalResult result;
  int64_t iterations = 0;
  int64_t solved = 0;
  size_t i = 0;
  for (auto _ : state) {
    pose.local = scenario.start.local;  // Same size: no allocation.
    const Goal& goal = scenario.goals[i];
    i = (i + 1) % scenario.goals.size();
    const absl::Status status =
        Solve(scenario.skeleton, absl::MakeConstSpan(&goal, 1), ws, &pose,
              absl::MakeSpan(&result, 1));
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    benchmark::DoNotOptimize(pose.local.data());
    iterations += result.iterations;
    solved += result.reached;
  }
  state.counters["iterations"] = benchmark::Counter(
      static_cast<double>(iterations), benchmark::Counter::kAvgIterations);
  state.counters["solved"] = benchmark::Counter(
      static_cast<double>(solved), benchmark::Counter::kAvgIterations);
}

const Scenario& TwoBoneLimb() {
  static const Scenario* scenario = [] {
    auto* s = new Scenario{MustCreate(testing::TwoBoneLegDef()), {}, {}};
    s->start = RestPose(s->skeleton);
    Rng rng(1);
    const int ankle = s->skeleton.FindJoint("ankle");
    for (int t = 0; t < kTargets; ++t) {
      Goal goal;
      goal.chain = 0;
      goal.solver = SolverKind::kTwoBone;
      goal.target = GlobalOf(s->skeleton,
                             testing::RandomPose(s->skeleton, rng, 2.0), ankle)
                        .translation;
      goal.pole = goal.target + Eigen::Vector3d(0, 0, 1);
      s->goals.push_back(goal);
    }
    return s;
  }();
  return *scenario;
}

// 10 joints (9 bones), bone lengths in [0.5, 1.5], a gently curved rest.
const Scenario& TenJointChain(bool reachable) {
  static const Scenario* scenarios[2] = {nullptr, nullptr};
  const Scenario*& slot = scenarios[reachable];
  if (slot) return *slot;
  Rng rng(10);
  testing::RandomChainOptions options;
  options.joints = 10;
  options.min_bone = 0.5;
  options.max_bone = 1.5;
  options.rest_bend_rad = 0.3;
  options.with_base = false;
  auto* s =
      new Scenario{MustCreate(testing::RandomChainDef(rng, options)), {}, {}};
  s->start = RestPose(s->skeleton);
  const int tip = s->skeleton.chain(0).joints.back();
  double length = 0.0;
  for (double l : testing::BoneLengths(s->skeleton, s->start)) length += l;
  const Eigen::Vector3d root = GlobalOf(s->skeleton, s->start, 0).translation;
  for (int t = 0; t < kTargets; ++t) {
    Goal goal;
    goal.chain = 0;
    goal.options.tolerance = 1e-3 * length;
    if (reachable) {
      goal.target =
          GlobalOf(s->skeleton, testing::RandomPose(s->skeleton, rng, 1.0), tip)
              .translation;
    } else {
      const Eigen::Vector3d dir =
          testing::RandomRotation(rng) * Eigen::Vector3d::UnitX();
      goal.target =
          root +
          std::uniform_real_distribution<double>(1.2, 2.0)(rng) * length * dir;
    }
    s->goals.push_back(goal);
  }
  slot = s;
  return *s;
}

const Scenario& PandaPose() {
  static const Scenario* scenario = [] {
    auto* s = new Scenario{MustCreate(testing::PandaDef()), {}, {}};
    s->start = testing::PandaMidLimitPose(s->skeleton);
    Rng rng(7);
    const int flange = s->skeleton.FindJoint("panda_flange");
    for (int t = 0; t < kTargets; ++t) {
      const Transform want = GlobalOf(
          s->skeleton, testing::RandomPose(s->skeleton, rng, 1.0), flange);
      Goal goal;
      goal.chain = 0;
      goal.target = want.translation;
      goal.target_orientation = want.rotation;
      goal.options.tolerance = 1e-5;
      goal.options.orientation_tolerance_rad = 1e-5;
      s->goals.push_back(goal);
    }
    return s;
  }();
  return *scenario;
}

// Four limbs of a 31-joint humanoid in one request (two feet, two hands;
// AUTO picks two-bone): what one character of a batch costs.
void BM_HumanoidFourLimbs(benchmark::State& state) {
  static const Scenario* scenario = [] {
    auto* s = new Scenario{MustCreate(testing::HumanoidDef()), {}, {}};
    s->start = RestPose(s->skeleton);
    Rng rng(31);
    for (int t = 0; t < kTargets; ++t) {
      const Pose random = testing::RandomPose(s->skeleton, rng, 1.5);
      for (int c = 0; c < 4; ++c) {
        Goal goal;
        goal.chain = c;
        goal.target =
            GlobalOf(s->skeleton, random, s->skeleton.chain(c).joints.back())
                .translation;
        goal.pole = goal.target + Eigen::Vector3d(0, 0, 1);
        s->goals.push_back(goal);
      }
    }
    return s;
  }();
  Workspace ws;
  Pose pose = scenario->start;
  GoalResult results[4];
  int64_t solved = 0;
  size_t i = 0;
  for (auto _ : state) {
    pose.local = scenario->start.local;
    const absl::Status status = Solve(
        scenario->skeleton, absl::MakeConstSpan(&scenario->goals[4 * i], 4), ws,
        &pose, absl::MakeSpan(results));
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    i = (i + 1) % kTargets;
    for (const GoalResult& r : results) solved += r.reached;
    benchmark::DoNotOptimize(pose.local.data());
  }
  state.counters["solved"] = benchmark::Counter(
      static_cast<double>(solved) / 4, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_HumanoidFourLimbs);

Scenario WithSolver(const Scenario& base, SolverKind kind) {
  Scenario s{base.skeleton, base.start, base.goals};
  for (Goal& g : s.goals) g.solver = kind;
  return s;
}

// The solver proper, as ozz's IKTwoBoneJob is measured: the chain's
// model-space transforms are given (as Solve hands them over after its FK
// pass) and the solver writes the chain's local rotations. No validation,
// no skeleton-wide FK, no result measurement. Resetting the chain's start
// state (three transforms) is inside the timed loop.
void RunSolverCore(benchmark::State& state, const Scenario& scenario) {
  const Skeleton& skeleton = scenario.skeleton;
  const std::vector<int>& chain = skeleton.chain(0).joints;
  const int n = static_cast<int>(chain.size());
  Workspace ws;
  ws.Reserve(skeleton.num_joints());
  ComputeGlobals(skeleton, scenario.start, absl::MakeSpan(ws.globals));
  std::vector<Transform> start_globals(n);
  double length = 0.0;
  for (int k = 0; k < n; ++k) {
    start_globals[k] = ws.globals[chain[k]];
    if (k > 0) {
      ws.lengths[k - 1] =
          (start_globals[k].translation - start_globals[k - 1].translation)
              .norm();
      length += ws.lengths[k - 1];
    }
  }
  ChainProblem problem;
  problem.skeleton = &skeleton;
  problem.joints = chain;
  problem.chain_length = length;
  problem.orientation_tolerance_rad = 1e-4;
  const int parent = skeleton.joint(chain[0]).parent;
  if (parent >= 0) problem.parent_global = ws.globals[parent];
  Pose pose = scenario.start;
  int64_t iterations = 0;
  size_t i = 0;
  for (auto _ : state) {
    const Goal& goal = scenario.goals[i];
    i = (i + 1) % scenario.goals.size();
    problem.goal = &goal;
    problem.tolerance =
        goal.options.tolerance > 0 ? goal.options.tolerance : 1e-5 * length;
    problem.max_iterations = 128;
    for (int k = 0; k < n; ++k) {
      pose.local[chain[k]] = scenario.start.local[chain[k]];
      ws.chain_globals[k] = start_globals[k];
    }
    iterations += GetSolver(goal.solver).Solve(problem, ws, pose);
    benchmark::DoNotOptimize(pose.local.data());
  }
  state.counters["iterations"] = benchmark::Counter(
      static_cast<double>(iterations), benchmark::Counter::kAvgIterations);
}

void BM_TwoBone(benchmark::State& state) { RunScenario(state, TwoBoneLimb()); }
BENCHMARK(BM_TwoBone);
void BM_TwoBoneCore(benchmark::State& state) {
  RunSolverCore(state, TwoBoneLimb());
}
BENCHMARK(BM_TwoBoneCore);
// SolveTwoBoneLimbs on range(0) limbs per call (the leg's start pose and
// successive targets): the branch-free solve two limbs at a time.
// `per_limb` is the time per limb.
void BM_TwoBoneLimbs(benchmark::State& state) {
  const Scenario& scenario = TwoBoneLimb();
  const Skeleton& skeleton = scenario.skeleton;
  const std::vector<int>& chain = skeleton.chain(0).joints;
  Workspace ws;
  ws.Reserve(skeleton.num_joints());
  ComputeGlobals(skeleton, scenario.start, absl::MakeSpan(ws.globals));
  const int per_call = static_cast<int>(state.range(0));
  std::vector<reach::TwoBoneLimb> limbs(scenario.goals.size());
  for (size_t t = 0; t < limbs.size(); ++t) {
    FillTwoBoneLimb(skeleton, ws.globals, scenario.start, chain,
                    scenario.goals[t], &limbs[t]);
  }
  std::vector<TwoBoneLimbResult> out(per_call);
  int64_t solved = 0;
  size_t i = 0;
  for (auto _ : state) {
    SolveTwoBoneLimbs(absl::MakeConstSpan(&limbs[i], per_call),
                      absl::MakeSpan(out));
    i = (i + per_call) % limbs.size();
    benchmark::DoNotOptimize(out.data());
    solved += out[0].solved;
  }
  state.counters["per_limb"] = benchmark::Counter(
      static_cast<double>(per_call),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.counters["solved"] = benchmark::Counter(
      static_cast<double>(solved), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_TwoBoneLimbs)->Arg(1)->Arg(2)->Arg(4)->Arg(64);

void BM_FabrikCore(benchmark::State& state) {
  RunSolverCore(state, WithSolver(TenJointChain(state.range(0) != 0),
                                  SolverKind::kFabrik));
  state.SetLabel(state.range(0) ? "reachable" : "unreachable");
}
BENCHMARK(BM_FabrikCore)->Arg(1)->Arg(0);

void BM_TenJointReachable(benchmark::State& state) {
  RunScenario(state, WithSolver(TenJointChain(true),
                                static_cast<SolverKind>(state.range(0))));
  state.SetLabel(
      std::string(SolverName(static_cast<SolverKind>(state.range(0)))));
}
void BM_TenJointUnreachable(benchmark::State& state) {
  RunScenario(state, WithSolver(TenJointChain(false),
                                static_cast<SolverKind>(state.range(0))));
  state.SetLabel(
      std::string(SolverName(static_cast<SolverKind>(state.range(0)))));
}
void BM_Panda6D(benchmark::State& state) {
  RunScenario(state,
              WithSolver(PandaPose(), static_cast<SolverKind>(state.range(0))));
  state.SetLabel(
      std::string(SolverName(static_cast<SolverKind>(state.range(0)))));
}

void IterativeSolvers(benchmark::internal::Benchmark* b) {
  for (SolverKind kind :
       {SolverKind::kFabrik, SolverKind::kCcd, SolverKind::kJacobianTranspose,
        SolverKind::kJacobianPinv, SolverKind::kJacobianDls,
        SolverKind::kGradientDescent}) {
    b->Arg(static_cast<int>(kind));
  }
}
BENCHMARK(BM_TenJointReachable)->Apply(IterativeSolvers);
BENCHMARK(BM_TenJointUnreachable)->Apply(IterativeSolvers);
BENCHMARK(BM_Panda6D)
    ->Arg(static_cast<int>(SolverKind::kJacobianDls))
    ->Arg(static_cast<int>(SolverKind::kJacobianPinv))
    ->Arg(static_cast<int>(SolverKind::kJacobianTranspose))
    ->Arg(static_cast<int>(SolverKind::kGradientDescent));


// SOLVER_FULL_BODY on a whole character: all effectors in one request,
// pelvis free, tolerance 1e-4 of the body. Targets come from gameplay
// poses (every joint 40% of the way from rest to a random pose within its
// limits, the root moved up to 5 cm), so every target set is reachable.
// - from_rest: each solve starts from the rest pose (a new character);
// - warm: a stream, each solve starting from the previous answer, targets
//   blended from one gameplay pose to the next over 30 frames.
// Counters: p50_us / p90_us (per-solve wall time, measured around each
// Solve call), iterations (mean), solved (fraction of solves with every
// goal reached).
struct FullBodyScenario {
  Skeleton skeleton;
  testing::GameplayTargets targets;
};

FullBodyScenario* MakeFullBodyScenario(const std::string& file,
                                       const testing::BodyEffectors& effectors) {
  absl::StatusOr<SkeletonDef> def = testing::LoadSkeletonJson(file);
  if (!def.ok()) return nullptr;
  auto* s = new FullBodyScenario{MustCreate(*def), {}};
  s->targets = testing::MakeGameplayTargets(s->skeleton, effectors);
  return s;
}

void RunFullBody(benchmark::State& state, const FullBodyScenario* scenario,
                 bool warm, const FullBodyOptions& options = {}) {
  if (scenario == nullptr) {
    state.SkipWithError("skeleton file not found");
    return;
  }
  const auto& sets =
      warm ? scenario->targets.stream : scenario->targets.from_rest;
  const Pose rest = RestPose(scenario->skeleton);
  Workspace ws;
  Pose pose = rest;
  std::vector<GoalResult> results(sets[0].size());
  std::vector<double> micros;
  micros.reserve(1 << 20);
  int64_t iterations = 0, solved = 0;
  size_t i = 0;
  for (auto _ : state) {
    if (!warm || i == 0) pose.local = rest.local;
    const std::vector<Goal>& goals = sets[i];
    i = (i + 1) % sets.size();
    const auto begin = std::chrono::steady_clock::now();
    const absl::Status status = Solve(scenario->skeleton, goals, ws, &pose,
                                      absl::MakeSpan(results), {}, {},
                                      options);
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) state.SkipWithError(status.ToString().c_str());
    if (micros.size() < micros.capacity()) {
      micros.push_back(std::chrono::duration<double, std::micro>(end - begin)
                           .count());
    }
    iterations += results[0].iterations;
    bool all = true;
    for (const GoalResult& r : results) all = all && r.reached;
    solved += all;
    benchmark::DoNotOptimize(pose.local.data());
  }
  if (micros.empty()) return;
  std::sort(micros.begin(), micros.end());
  state.counters["p50_us"] = micros[micros.size() / 2];
  state.counters["p90_us"] = micros[micros.size() * 9 / 10];
  state.counters["iterations"] = benchmark::Counter(
      static_cast<double>(iterations), benchmark::Counter::kAvgIterations);
  state.counters["solved"] = benchmark::Counter(
      static_cast<double>(solved), benchmark::Counter::kAvgIterations);
}

// The limited 31-joint humanoid: two feet, two hands and a head look-at.
const FullBodyScenario* Humanoid31() {
  static const FullBodyScenario* s = MakeFullBodyScenario(
      testing::ExamplePath("humanoid_limited.skeleton.json"),
      {{"l_ankle", "r_ankle"}, {"l_wrist", "r_wrist"}, "head"});
  return s;
}
// The 54-joint BCN_Epileptic rig (bench/data): feet, hands, the pelvis and
// a head look-at (6 effectors).
const FullBodyScenario* Rig54() {
  static const FullBodyScenario* s = MakeFullBodyScenario(
      testing::SourcePath("bench/data/bcn_epileptic.skeleton.json"),
      {{"B_Ankle_Left", "B_Ankle_Right"},
       {"B_Hand_Left", "B_Hand_Right", "B_Root_Pelvis_T"},
       "B_Root_Neck_H"});
  return s;
}

void BM_FullBodyHumanoid31(benchmark::State& state) {
  RunFullBody(state, Humanoid31(), state.range(0) != 0);
}
BENCHMARK(BM_FullBodyHumanoid31)->ArgName("warm")->Arg(0)->Arg(1);
// Sparse trackers on the limited humanoid: head and hands placed
// (position, priority 1), the feet planted where they stand
// (FullBodyOptions::plant_feet), the body model placing the pelvis.
const FullBodyScenario* Humanoid31Sparse() {
  static const FullBodyScenario* s = MakeFullBodyScenario(
      testing::ExamplePath("humanoid_limited.skeleton.json"),
      {{}, {"l_wrist", "r_wrist", "head"}, ""});
  return s;
}
void BM_FullBodyHumanoid31Sparse(benchmark::State& state) {
  FullBodyOptions options;
  options.plant_feet = true;
  RunFullBody(state, Humanoid31Sparse(), state.range(0) != 0, options);
}
BENCHMARK(BM_FullBodyHumanoid31Sparse)->ArgName("warm")->Arg(0)->Arg(1);
void BM_FullBodyRig54(benchmark::State& state) {
  RunFullBody(state, Rig54(), state.range(0) != 0);
}
BENCHMARK(BM_FullBodyRig54)->ArgName("warm")->Arg(0)->Arg(1);

// The same solves, each set of the scenario once (testing::
// MakeGameplayTargets: 128 from rest, 3810 in the warm stream), for
// counting instructions with callgrind, which the machine's load does not
// move (a timed run makes one iteration under valgrind):
//   valgrind --tool=callgrind --toggle-collect='reach::Solve(*'
//     build/bench/solver_bench --benchmark_filter='CG_FullBodyRig54/warm:1'
// and the instructions collected / 3810 (docs/benchmarks.md).
constexpr int kFromRestSets = 128;
constexpr int kStreamSets = 127 * 30;
BENCHMARK(BM_FullBodyHumanoid31)->Name("CG_FullBodyHumanoid31")
    ->ArgName("warm")->Arg(0)->Iterations(kFromRestSets);
BENCHMARK(BM_FullBodyHumanoid31)->Name("CG_FullBodyHumanoid31")
    ->ArgName("warm")->Arg(1)->Iterations(kStreamSets);
BENCHMARK(BM_FullBodyHumanoid31Sparse)->Name("CG_FullBodyHumanoid31Sparse")
    ->ArgName("warm")->Arg(0)->Iterations(kFromRestSets);
BENCHMARK(BM_FullBodyHumanoid31Sparse)->Name("CG_FullBodyHumanoid31Sparse")
    ->ArgName("warm")->Arg(1)->Iterations(kStreamSets);
BENCHMARK(BM_FullBodyRig54)->Name("CG_FullBodyRig54")
    ->ArgName("warm")->Arg(0)->Iterations(kFromRestSets);
BENCHMARK(BM_FullBodyRig54)->Name("CG_FullBodyRig54")
    ->ArgName("warm")->Arg(1)->Iterations(kStreamSets);

}  // namespace
}  // namespace reach

BENCHMARK_MAIN();
