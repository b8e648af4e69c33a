// Our forward kinematics of the Panda against Orocos KDL's, and our DLS
// solutions checked by KDL's FK (an implementation we did not write).
#include <gtest/gtest.h>

#include <kdl/chainfksolverpos_recursive.hpp>
#include <kdl/jntarray.hpp>
#include <vector>

#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/kdl_models.h"
#include "tests/testing/models.h"

namespace reach {
namespace {

using ::reach::testing::Rng;

KDL::Frame KdlFk(const KDL::Chain& chain, const std::vector<double>& q) {
  KDL::ChainFkSolverPos_recursive fk(chain);
  KDL::JntArray joints(q.size());
  for (size_t i = 0; i < q.size(); ++i) joints(i) = q[i];
  KDL::Frame frame;
  EXPECT_GE(fk.JntToCart(joints, frame), 0);
  return frame;
}

TEST(KdlCrossCheckTest, PandaForwardKinematicsMatchesKdl) {
  auto skeleton = Skeleton::Create(testing::PandaDef());
  ASSERT_TRUE(skeleton.ok()) << skeleton.status();
  const KDL::Chain chain = testing::PandaKdlChain();
  ASSERT_EQ(chain.getNrOfJoints(), 7u);
  const std::vector<int> joints = testing::PandaJointIndices(*skeleton);
  const int flange = skeleton->FindJoint("panda_flange");
  Rng rng(99);
  for (int t = 0; t < 200; ++t) {
    Pose pose = RestPose(*skeleton);
    std::vector<double> q(7);
    for (int i = 0; i < 7; ++i) {
      const auto& range = testing::PandaLimits()[i];
      q[i] = std::uniform_real_distribution<double>(range.lo, range.hi)(rng);
      pose.local[joints[i]].rotation =
          HingeRotation(skeleton->joint(joints[i]), q[i]);
    }
    const Transform ours = testing::GlobalOf(*skeleton, pose, flange);
    const KDL::Frame theirs = KdlFk(chain, q);
    for (int a = 0; a < 3; ++a) {
      EXPECT_NEAR(ours.translation[a], theirs.p[a], 1e-12);
    }
    double x, y, z, w;
    theirs.M.GetQuaternion(x, y, z, w);
    EXPECT_LT(AngleBetween(ours.rotation, Eigen::Quaterniond(w, x, y, z)),
              1e-9);
    // And the hinge angles read back from the pose are the ones written.
    for (int i = 0; i < 7; ++i) {
      EXPECT_NEAR(HingeAngle(skeleton->joint(joints[i]),
                             pose.local[joints[i]].rotation),
                  q[i], 1e-12);
    }
  }
}

TEST(KdlCrossCheckTest, DlsSolutionsLandOnTargetByKdlFk) {
  auto skeleton = Skeleton::Create(testing::PandaDef());
  ASSERT_TRUE(skeleton.ok());
  const KDL::Chain chain = testing::PandaKdlChain();
  const std::vector<int> joints = testing::PandaJointIndices(*skeleton);
  const int flange = skeleton->FindJoint("panda_flange");
  Rng rng(5);
  int reached = 0;
  for (int t = 0; t < 100; ++t) {
    const Pose random = testing::RandomPose(*skeleton, rng, 1.0);
    const Transform want = testing::GlobalOf(*skeleton, random, flange);
    Goal goal;
    goal.chain = 0;
    goal.solver = SolverKind::kJacobianDls;
    goal.target = want.translation;
    goal.target_orientation = want.rotation;
    // From the mid-limit seed, then up to 30 random seeds within the limits
    // (the restarts of the TRAC-IK protocol, counted instead of timed).
    Pose seed = testing::PandaMidLimitPose(*skeleton);
    absl::StatusOr<testing::Solved> solved;
    for (int attempt = 0; attempt <= 30; ++attempt) {
      solved = testing::SolveOne(*skeleton, goal, seed);
      ASSERT_TRUE(solved.ok()) << solved.status();
      if (solved->result.reached) break;
      seed = testing::RandomPose(*skeleton, rng, 1.0);
    }
    if (!solved->result.reached) continue;
    ++reached;
    std::vector<double> q(7);
    for (int i = 0; i < 7; ++i) {
      q[i] = HingeAngle(skeleton->joint(joints[i]),
                        solved->pose.local[joints[i]].rotation);
      EXPECT_GE(q[i], testing::PandaLimits()[i].lo - 1e-12);
      EXPECT_LE(q[i], testing::PandaLimits()[i].hi + 1e-12);
    }
    const KDL::Frame frame = KdlFk(chain, q);
    EXPECT_LT((Eigen::Vector3d(frame.p.x(), frame.p.y(), frame.p.z()) -
               want.translation)
                  .norm(),
              2e-5);
  }
  std::printf("panda DLS solve rate with up to 30 restarts: %d/100\n", reached);
  EXPECT_GE(reached, 98);
}

}  // namespace
}  // namespace reach
