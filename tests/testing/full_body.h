// Helpers of the full-body tests and benchmarks: the example skeletons read
// from their JSON files (independently of the wire code), and the standard
// humanoid goal sets.
#ifndef REACH_TESTS_TESTING_FULL_BODY_H_
#define REACH_TESTS_TESTING_FULL_BODY_H_

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

}  // namespace reach::testing

#endif  // REACH_TESTS_TESTING_FULL_BODY_H_
