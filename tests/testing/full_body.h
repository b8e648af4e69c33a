// Helpers of the full-body tests and benchmarks: the example skeletons read
// from their JSON files (independently of the wire code), and the standard
// humanoid goal sets.
#ifndef REACH_TESTS_TESTING_FULL_BODY_H_
#define REACH_TESTS_TESTING_FULL_BODY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach::testing {

// Reads a skeleton JSON file (the protobuf JSON form of reach.v1.Skeleton:
// lowerCamelCase fields, enum names as strings) with nlohmann-json, not the
// wire conversion, so tests of the solver do not depend on it.
absl::StatusOr<SkeletonDef> LoadSkeletonJson(const std::string& path);

// examples/<name>, from the source tree.
std::string ExamplePath(const std::string& name);

// A full-body goal at joint `effector` (position only).
Goal FullBodyGoal(int effector, const Eigen::Vector3d& target,
                  int priority = 0);

// The humanoid goals of the speed benchmark and the look-at scenario, on
// examples/humanoid*.skeleton.json (joint names l_ankle, r_ankle, l_wrist,
// r_wrist, head), from `pose` (its forward kinematics): both feet kept
// where they are with their orientation (priority 0), hands moved by
// `hand_offset` (left; mirrored in x for the right; priority 1), the head
// looking (+Z in its frame) at `look` (priority 2). `tolerance` in model
// units for every goal.
std::vector<Goal> HumanoidGoals(const Skeleton& skeleton, const Pose& pose,
                                const Eigen::Vector3d& hand_offset,
                                const Eigen::Vector3d& look,
                                double tolerance);

// Effectors of a full-body benchmark or test, by joint name: feet (position
// and orientation, priority 0), hands and other points (position,
// priority 1), and a head that looks (+Z of its frame) at the point 1 m
// ahead of it (priority 2). Unknown names are skipped.
struct BodyEffectors {
  std::vector<std::string> feet;
  std::vector<std::string> points;
  std::string head;
};

// The goals that put the effectors where `pose` has them (its forward
// kinematics), every position within `tolerance`, so they are reachable.
std::vector<Goal> GoalsFromPose(const Skeleton& skeleton, const Pose& pose,
                                const BodyEffectors& effectors,
                                double tolerance);

// A pose a game might ask for: every joint `amount` of the way from rest
// to a random rotation within its limits (a ball: a swing about a random
// axis square to its twist axis, uniform in [0, cone], and a twist uniform
// in its range; a hinge: an angle uniform in its range; unlimited parts as
// a human's: a 0.7 rad cone and a +-0.5 rad twist or hinge range), the root
// turned by up to 0.3 rad about a random axis (before the blend) and moved
// by up to `root_shift` along each axis.
Pose GameplayPose(const Skeleton& skeleton, uint64_t seed, double amount,
                  double root_shift);

// The full-body speed benchmark's targets for `effectors` on `skeleton`,
// every goal's tolerance 1e-4 of the body size: 128 gameplay poses
// (GameplayPose, seeds 1000 on, 40% of the way, the root moved up to
// 5 cm), one target set each for solves from rest, and a stream that
// blends each pose into the next over 30 frames (3810 frames) for
// warm-started solves. Every target set is reachable: a pose has it.
struct GameplayTargets {
  std::vector<std::vector<Goal>> from_rest;
  std::vector<std::vector<Goal>> stream;
};
GameplayTargets MakeGameplayTargets(const Skeleton& skeleton,
                                    const BodyEffectors& effectors);

// A file of the source tree, by its path from the top.
std::string SourcePath(const std::string& relative);

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_FULL_BODY_H_
