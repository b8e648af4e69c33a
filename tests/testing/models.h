// Skeletons, poses and targets shared by tests and benchmarks: random
// chains with fixed seeds, a two-bone leg and the Franka Emika Panda arm.
#ifndef REACH_TESTS_TESTING_MODELS_H_
#define REACH_TESTS_TESTING_MODELS_H_

#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::testing {

using Rng = std::mt19937_64;

// Uniformly random unit quaternion (Shoemake 1992).
Eigen::Quaterniond RandomRotation(Rng& rng);

// Random rotation about a random axis by an angle uniform in [0, max_angle].
Eigen::Quaterniond RandomRotation(Rng& rng, double max_angle);

struct RandomChainOptions {
  int joints = 5;  // Including the tip; >= 2.
  double min_bone = 0.2;
  double max_bone = 1.0;
  double rest_bend_rad = 0.6;  // Largest random rest rotation per joint.
  bool with_base = true;       // A fixed-place "base" joint above the chain.
};

// A skeleton "base -> j0 -> ... -> j{n-1}" of ball joints with random bone
// lengths and rest rotations, and one chain "chain" from j0 to the tip.
SkeletonDef RandomChainDef(Rng& rng, const RandomChainOptions& options);

// RandomChainDef with every inner joint a hinge about X limited to
// [-0.2, 2.4]: a chain DLS alone reaches about half of the targets of
// (RestartTest's), the case restarts and time budgets are for.
SkeletonDef HingeRestartChainDef(Rng& rng, int joints);

// `restarts` for the solvers that take SolveOptions::max_restarts (the
// Jacobian family, gradient descent, AUTO), 0 for FABRIK and CCD, whose
// goals Solve refuses with the option.
int RestartsFor(SolverKind kind, int restarts);

// A pose with each chain joint (all but base and tip) turned from rest by a
// random rotation of up to `max_angle` (ball) or a random angle within its
// limits (hinge).
Pose RandomPose(const Skeleton& skeleton, Rng& rng, double max_angle);

// Random chains of limited ball joints: the families of
// bench/quality_bench.cc and tests/solvers/limited_chain_test.cc.
struct LimitedChainOptions {
  int joints = 8;  // Chain joints including the tip; >= 2.
  double min_bone = 0.2;
  double max_bone = 1.0;
  // Each joint's swing cone half-angle is drawn uniformly from
  // [min_swing_rad, max_swing_rad], and its twist range is [-t, t] with t
  // drawn uniformly from [min_twist_rad, max_twist_rad].
  double min_swing_rad = 20 * M_PI / 180;
  double max_swing_rad = 90 * M_PI / 180;
  double min_twist_rad = 10 * M_PI / 180;
  double max_twist_rad = 60 * M_PI / 180;
};

// A skeleton "j0 -> ... -> j{n-1}" of ball joints (j0 at the origin) with
// identity rest rotations and bones of random length in [min_bone,
// max_bone] along directions uniform on the sphere (each in its parent's
// frame). Every joint's twist axis is set explicitly to its own bone's
// direction (the tip's to its parent's); limits as drawn above. One chain
// "chain" from j0 to the tip.
SkeletonDef LimitedChainDef(Rng& rng, const LimitedChainOptions& options);

// A pose of a LimitedChainDef skeleton (any skeleton of ball joints) with
// every joint of chain 0 but the tip inside its limits: local = rest *
// swing * twist, the swing about a random axis square to the twist axis by
// an angle uniform in [0, cone], the twist uniform in the twist range.
// Unlimited swing or twist is drawn from [0, pi] / [-pi, pi].
Pose RandomLimitedPose(const Skeleton& skeleton, Rng& rng);

// One goal solved from `start` with a fresh workspace.
struct Solved {
  Pose pose;
  GoalResult result;
};
absl::StatusOr<Solved> SolveOne(const Skeleton& skeleton, const Goal& goal,
                                Pose start);

// Model-space transform of one joint.
Transform GlobalOf(const Skeleton& skeleton, const Pose& pose, int joint);

// Distances between every joint and its parent in model space.
std::vector<double> BoneLengths(const Skeleton& skeleton, const Pose& pose);

// hip -> knee -> ankle, thigh 0.45 and shin 0.42 down -Y, knee a ball joint
// by default or a hinge about +X; chain "leg".
SkeletonDef TwoBoneLegDef(bool hinge_knee = false);

// `joints` ball joints in a straight line along +X, bones `bone` long,
// named j0, j1, ...; chain "chain" from j0 to the last joint.
SkeletonDef StraightChainDef(int joints, double bone = 0.1);

// A 31-joint humanoid in the joint order of a CMU motion-capture skeleton
// (hips, legs with toes, a three-joint spine, neck and head, clavicles,
// arms, hands with two finger joints each), in metres, with chains
// "l_leg"/"r_leg" (hip..ankle) and "l_arm"/"r_arm" (shoulder..wrist).
SkeletonDef HumanoidDef();

// The Franka Emika Panda: 7 revolute joints with the manufacturer's limits
// (franka_description URDF), plus fixed base and flange joints. Chain "arm"
// runs from panda_joint1 to panda_flange.
SkeletonDef PandaDef();

// The Panda's joint limits, in joint order 1..7.
struct JointRange {
  double lo;
  double hi;
};
const std::vector<JointRange>& PandaLimits();

// The Panda's pose with every joint at the middle of its range: the seed of
// the TRAC-IK protocol.
Pose PandaMidLimitPose(const Skeleton& skeleton);

// Indices of panda_joint1..7 in PandaDef().
std::vector<int> PandaJointIndices(const Skeleton& skeleton);

// Adds limits to a RandomChainDef: every other chain joint a hinge about a
// random axis with a random range around its rest angle ([-a, b], a and b
// in [0.6, 2]), the rest balls with a random cone ([0.6, 2]) and twist
// range ([-a/2, b/2]).
void AddRandomLimits(Rng& rng, SkeletonDef* def);

// TwoBoneLegDef(/*hinge_knee=*/true) with real limits: the hip a ball with
// a 100-degree swing cone and +-40 degrees of twist, the knee a hinge about
// -X (positive angles bend it forward) limited to [0, 150] degrees.
SkeletonDef LimitedLegDef();

// Why `local` breaks `joint`'s type and limits, or "" when it does not,
// checked here apart from the library's limits code: delta = rest^-1 local;
// a fixed joint's delta is the identity; a hinge's is a turn about its axis
// by an angle (modulo 2pi) in [min, max]; a ball's swing (the angle between
// the twist axis a and delta a) is within its cone and what remains (a
// turn about a) within its twist range. Angles get `slack_rad`.
std::string LimitViolation(const Joint& joint, const Eigen::Quaterniond& local,
                           double slack_rad = 1e-6);

// `pose` with each of `joints` turned to a random rotation its limits
// allow: a hinge to an angle uniform in its range ([-pi, pi] when
// unlimited), a ball to a swing uniform in its cone about a uniform
// azimuth and a twist uniform in its range, a fixed joint to rest.
Pose RandomPoseWithinLimits(const Skeleton& skeleton, const std::vector<int>& joints,
                            Pose pose, Rng& rng);

// Joint names and parent indices of a definition, in joint order: for
// comparing imported hierarchies.
std::vector<std::string> JointNames(const SkeletonDef& def);
std::vector<int> JointParents(const SkeletonDef& def);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_MODELS_H_
