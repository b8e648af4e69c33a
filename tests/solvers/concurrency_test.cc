// Solvers are const and keep no per-call state: one skeleton and the shared
// solver instances serve many threads at once, each with its own
// workspace, and give bit-identical results to a single-threaded run.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "solvers/solve.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::reach::testing::GlobalOf;
using ::reach::testing::Rng;

struct Job {
  Goal goal;
  Pose solved;
  GoalResult result;
};

void RunJobs(const Skeleton& skeleton, std::vector<Job>& jobs, size_t begin,
             size_t step) {
  Workspace ws;  // One per thread.
  for (size_t i = begin; i < jobs.size(); i += step) {
    Pose pose = RestPose(skeleton);
    ASSERT_TRUE(Solve(skeleton, absl::MakeConstSpan(&jobs[i].goal, 1), ws,
                      &pose, absl::MakeSpan(&jobs[i].result, 1))
                    .ok());
    jobs[i].solved = std::move(pose);
  }
}

TEST(ConcurrencyTest, ParallelSolvesMatchSerialSolves) {
  Rng rng(404);
  testing::RandomChainOptions options;
  options.joints = 8;
  auto skeleton = Skeleton::Create(testing::RandomChainDef(rng, options));
  ASSERT_TRUE(skeleton.ok());
  const int tip = skeleton->chain(0).joints.back();
  std::vector<Job> serial;
  const SolverKind kinds[] = {SolverKind::kFabrik,
                              SolverKind::kCcd,
                              SolverKind::kJacobianDls,
                              SolverKind::kJacobianPinv,
                              SolverKind::kJacobianTranspose,
                              SolverKind::kGradientDescent};
  for (int t = 0; t < 240; ++t) {
    Job job;
    job.goal.chain = 0;
    job.goal.solver = kinds[t % 6];
    const Transform want =
        GlobalOf(*skeleton, testing::RandomPose(*skeleton, rng, 1.0), tip);
    job.goal.target = want.translation;
    if (t % 4 == 0) job.goal.target_orientation = want.rotation;
    serial.push_back(job);
  }
  std::vector<Job> parallel = serial;
  RunJobs(*skeleton, serial, 0, 1);

  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int k = 0; k < kThreads; ++k) {
    threads.emplace_back([&, k] {
      RunJobs(*skeleton, parallel, static_cast<size_t>(k), kThreads);
    });
  }
  for (std::thread& t : threads) t.join();

  for (size_t i = 0; i < serial.size(); ++i) {
    EXPECT_EQ(serial[i].result.iterations, parallel[i].result.iterations) << i;
    EXPECT_EQ(serial[i].result.position_error,
              parallel[i].result.position_error)
        << i;
    for (int j = 0; j < skeleton->num_joints(); ++j) {
      EXPECT_EQ(serial[i].solved.local[j].rotation.coeffs(),
                parallel[i].solved.local[j].rotation.coeffs())
          << "job " << i << " joint " << j;
    }
  }
}

}  // namespace
}  // namespace reach
