// The branch-free two-bone kernel (SolveTwoBoneLimbs): it agrees with the
// general path to rounding, and a limb's result does not depend on how many
// limbs are solved with it (one, two SSE2 lanes or four AVX2 lanes).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "solvers/solve.h"
#include "solvers/two_bone.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using Eigen::Quaterniond;
using Eigen::Vector3d;
using ::reach::testing::GlobalOf;
using ::reach::testing::Rng;

// A random three-joint chain, a start pose and a goal, with the chain's
// model-space transforms.
struct LimbCase {
  Skeleton skeleton;
  Pose start;
  Goal goal;
  std::vector<Transform> globals;
};

enum class Start { kBent, kStraight };

LimbCase MakeCase(Rng& rng, Start start, bool with_pole, bool beyond) {
  testing::RandomChainOptions options;
  options.joints = 3;
  options.rest_bend_rad = start == Start::kStraight ? 0.0 : 0.6;
  auto skeleton = Skeleton::Create(testing::RandomChainDef(rng, options));
  EXPECT_TRUE(skeleton.ok()) << skeleton.status();
  LimbCase c{std::move(*skeleton), {}, {}, {}};
  c.start = start == Start::kStraight ? RestPose(c.skeleton)
                                      : testing::RandomPose(c.skeleton, rng, 1.0);
  const std::vector<int>& chain = c.skeleton.chain(0).joints;
  const Vector3d root = GlobalOf(c.skeleton, c.start, chain[0]).translation;
  Vector3d target =
      GlobalOf(c.skeleton, testing::RandomPose(c.skeleton, rng, 2.0), chain[2])
          .translation;
  if (beyond) target = root + 1.5 * (target - root);
  c.goal.chain = 0;
  c.goal.solver = SolverKind::kTwoBone;
  c.goal.target = target;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  if (with_pole) {
    c.goal.pole = root + Vector3d(unit(rng), unit(rng), unit(rng));
  }
  c.globals.resize(c.skeleton.num_joints());
  ComputeGlobals(c.skeleton, c.start, absl::MakeSpan(c.globals));
  return c;
}

// All kinds of case, in a fixed order.
std::vector<LimbCase> MakeCases(int count, uint64_t seed) {
  Rng rng(seed);
  std::vector<LimbCase> cases;
  for (int i = 0; i < count; ++i) {
    cases.push_back(MakeCase(rng, i % 3 == 0 ? Start::kStraight : Start::kBent,
                             i % 2 == 0, i % 5 == 0));
  }
  return cases;
}

TwoBoneLimb LimbOf(const LimbCase& c) {
  TwoBoneLimb limb;
  FillTwoBoneLimb(c.skeleton, c.globals, c.start, c.skeleton.chain(0).joints,
                  c.goal, &limb);
  return limb;
}

// TwoBoneSolver::Solve on the case, from its start pose.
Pose SolveWith(const TwoBoneSolver& solver, const LimbCase& c) {
  const std::vector<int>& chain = c.skeleton.chain(0).joints;
  Workspace ws;
  ws.Reserve(c.skeleton.num_joints());
  ChainProblem problem;
  problem.skeleton = &c.skeleton;
  problem.joints = chain;
  problem.goal = &c.goal;
  const int parent = c.skeleton.joint(chain[0]).parent;
  if (parent >= 0) problem.parent_global = c.globals[parent];
  for (int k = 0; k < 3; ++k) {
    ws.chain_globals[k] = c.globals[chain[k]];
    if (k > 0) {
      ws.lengths[k - 1] =
          (c.globals[chain[k]].translation - c.globals[chain[k - 1]].translation)
              .norm();
      problem.chain_length += ws.lengths[k - 1];
    }
  }
  problem.tolerance = 1e-5 * problem.chain_length;
  problem.orientation_tolerance_rad = 1e-4;
  problem.max_iterations = 1;
  Pose pose = c.start;
  solver.Solve(problem, ws, pose);
  return pose;
}

double MaxCoeffDiff(const Quaterniond& a, const Quaterniond& b) {
  return (a.coeffs() - b.coeffs()).cwiseAbs().maxCoeff();
}

// Each test runs on the kernel's default build (AVX2 + FMA where the CPU
// has them) and on its baseline build.
class TwoBoneLimbsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { UseBaselineTwoBoneKernel(GetParam()); }
  void TearDown() override { UseBaselineTwoBoneKernel(false); }
};

TEST_P(TwoBoneLimbsTest, BranchFreeKernelMatchesTheGeneralPath) {
  const std::vector<LimbCase> cases = MakeCases(600, 71);
  const TwoBoneSolver branch_free(true);
  const TwoBoneSolver general(false);
  int kernel_solved = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const LimbCase& c = cases[i];
    SCOPED_TRACE(i);
    ASSERT_TRUE(TwoBoneFastPathApplies(c.skeleton, c.skeleton.chain(0).joints,
                                       c.goal));
    const TwoBoneLimb limb = LimbOf(c);
    TwoBoneLimbResult result;
    SolveTwoBoneLimbs(absl::MakeConstSpan(&limb, 1), absl::MakeSpan(&result, 1));
    kernel_solved += result.solved;

    const Pose fast = SolveWith(branch_free, c);
    const Pose slow = SolveWith(general, c);
    const std::vector<int>& chain = c.skeleton.chain(0).joints;
    for (int k = 0; k < 2; ++k) {
      EXPECT_LT(MaxCoeffDiff(fast.local[chain[k]].rotation,
                             slow.local[chain[k]].rotation),
                1e-12)
          << "joint " << k;
    }
    if (result.solved) {
      EXPECT_EQ(result.root_local.coeffs(), fast.local[chain[0]].rotation.coeffs());
      EXPECT_EQ(result.mid_local.coeffs(), fast.local[chain[1]].rotation.coeffs());
    }
    const Vector3d fast_tip = GlobalOf(c.skeleton, fast, chain[2]).translation;
    const Vector3d slow_tip = GlobalOf(c.skeleton, slow, chain[2]).translation;
    EXPECT_LT((fast_tip - slow_tip).norm(), 1e-11);
  }
  std::printf("branch-free kernel solved %d/%zu limbs\n", kernel_solved,
              cases.size());
  // Straight starts, poles and targets beyond reach are all the kernel's:
  // the general path is left only rare degenerate cases.
  EXPECT_EQ(kernel_solved, static_cast<int>(cases.size()));
}

TEST_P(TwoBoneLimbsTest, DegenerateLimbsAreLeftToTheGeneralPath) {
  std::vector<LimbCase> cases = MakeCases(6, 72);
  const auto joint = [&](int i, int k) {
    return cases[i].globals[cases[i].skeleton.chain(0).joints[k]].translation;
  };
  // Target on the root; a zero-length first bone's limb is not built here
  // (the skeleton's rest translation would be zero).
  cases[1].goal.target = joint(1, 0);
  cases[2].goal.target = Vector3d(1e60, 0, 0);  // Past the kernel's range.
  // The tip's mirror image through the root: the bend stays, and the tip
  // must turn exactly away from where it points.
  cases[4].goal.target = 2.0 * joint(4, 0) - joint(4, 2);
  // A target 1e30 away with a pole: within kFarSq, but the twist's
  // unnormalised products leave the double range.
  ASSERT_TRUE(cases[0].goal.pole.has_value());
  cases[0].goal.target = Vector3d(1e30, 0, 0);
  std::vector<TwoBoneLimb> limbs;
  for (const LimbCase& c : cases) limbs.push_back(LimbOf(c));
  std::vector<TwoBoneLimbResult> results(limbs.size());
  SolveTwoBoneLimbs(limbs, absl::MakeSpan(results));
  EXPECT_FALSE(results[0].solved);
  EXPECT_FALSE(results[1].solved);
  EXPECT_FALSE(results[2].solved);
  EXPECT_TRUE(results[3].solved);
  EXPECT_FALSE(results[4].solved);
  EXPECT_TRUE(results[5].solved);
  // TwoBoneSolver still solves them, by the general path.
  for (int i : {0, 1, 2, 4}) {
    const Pose fast = SolveWith(TwoBoneSolver(true), cases[i]);
    const Pose slow = SolveWith(TwoBoneSolver(false), cases[i]);
    for (int k = 0; k < 2; ++k) {
      const int j = cases[i].skeleton.chain(0).joints[k];
      EXPECT_EQ(fast.local[j].rotation.coeffs(), slow.local[j].rotation.coeffs());
    }
  }
}

TEST_P(TwoBoneLimbsTest, ResultDoesNotDependOnTheLanes) {
  std::vector<LimbCase> cases = MakeCases(23, 73);
  // One limb the kernel leaves to the general path, inside a block.
  cases[5].goal.target =
      cases[5].globals[cases[5].skeleton.chain(0).joints[0]].translation;
  std::vector<TwoBoneLimb> limbs;
  for (const LimbCase& c : cases) limbs.push_back(LimbOf(c));
  std::vector<TwoBoneLimbResult> alone(limbs.size());
  for (size_t i = 0; i < limbs.size(); ++i) {
    SolveTwoBoneLimbs(absl::MakeConstSpan(&limbs[i], 1),
                      absl::MakeSpan(&alone[i], 1));
  }
  EXPECT_FALSE(alone[5].solved);
  // Every count from 1 to 23 (blocks of four, then a tail of 1, 2 or 3), at
  // every offset up to 3.
  for (size_t offset = 0; offset < 4; ++offset) {
    for (size_t n = 1; offset + n <= limbs.size(); ++n) {
      std::vector<TwoBoneLimbResult> together(n);
      SolveTwoBoneLimbs(absl::MakeConstSpan(&limbs[offset], n),
                        absl::MakeSpan(together));
      for (size_t i = 0; i < n; ++i) {
        const TwoBoneLimbResult& want = alone[offset + i];
        SCOPED_TRACE(::testing::Message() << "offset " << offset << " n " << n
                                        << " limb " << i);
        ASSERT_EQ(together[i].solved, want.solved);
        if (!want.solved) continue;
        // Bit for bit.
        EXPECT_EQ(std::memcmp(together[i].root_local.coeffs().data(),
                              want.root_local.coeffs().data(),
                              4 * sizeof(double)),
                  0);
        EXPECT_EQ(std::memcmp(together[i].mid_local.coeffs().data(),
                              want.mid_local.coeffs().data(),
                              4 * sizeof(double)),
                  0);
      }
    }
  }
}

// The two builds agree to rounding, and UseBaselineTwoBoneKernel does
// switch them: on a CPU with AVX2 and FMA some results differ in their last
// bits.
TEST(TwoBoneLimbsBuildsTest, BaselineAndDefaultBuildsAgree) {
  const std::vector<LimbCase> cases = MakeCases(200, 74);
  std::vector<TwoBoneLimb> limbs;
  for (const LimbCase& c : cases) limbs.push_back(LimbOf(c));
  std::vector<TwoBoneLimbResult> best(limbs.size()), baseline(limbs.size());
  SolveTwoBoneLimbs(limbs, absl::MakeSpan(best));
  UseBaselineTwoBoneKernel(true);
  SolveTwoBoneLimbs(limbs, absl::MakeSpan(baseline));
  UseBaselineTwoBoneKernel(false);
  int differ = 0;
  for (size_t i = 0; i < limbs.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_TRUE(best[i].solved && baseline[i].solved);
    EXPECT_LT(MaxCoeffDiff(best[i].root_local, baseline[i].root_local), 1e-12);
    EXPECT_LT(MaxCoeffDiff(best[i].mid_local, baseline[i].mid_local), 1e-12);
    differ += best[i].root_local.coeffs() != baseline[i].root_local.coeffs();
  }
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    EXPECT_GT(differ, 0);
  }
#endif
  std::printf("%d/%zu root rotations differ between the builds\n", differ,
              limbs.size());
}

INSTANTIATE_TEST_SUITE_P(Builds, TwoBoneLimbsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Baseline" : "Default";
                         });

}  // namespace
}  // namespace reach
