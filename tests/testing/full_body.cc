#include "tests/testing/full_body.h"

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "solvers/full_body.h"
#include "solvers/limits.h"
#include "tests/testing/models.h"

namespace reach::testing {
namespace {

Eigen::Vector3d Vec(const nlohmann::json& j) {
  if (!j.is_object()) return Eigen::Vector3d::Zero();
  return Eigen::Vector3d(j.value("x", 0.0), j.value("y", 0.0),
                         j.value("z", 0.0));
}

}  // namespace

absl::StatusOr<SkeletonDef> LoadSkeletonJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON"));
  }
  SkeletonDef def;
  for (const nlohmann::json& j : doc.at("joints")) {
    JointDef joint;
    joint.name = j.at("name").get<std::string>();
    joint.parent = j.value("parent", 0);
    if (j.contains("rest")) {
      const nlohmann::json& rest = j["rest"];
      joint.rest.translation = Vec(rest.value("translation", nlohmann::json()));
      if (rest.contains("rotation")) {
        const nlohmann::json& q = rest["rotation"];
        joint.rest.rotation = Eigen::Quaterniond(
            q.value("w", 0.0), q.value("x", 0.0), q.value("y", 0.0),
            q.value("z", 0.0));
      }
      joint.rest.scale = rest.value("scale", 1.0);
    }
    const std::string type = j.value("type", "JOINT_TYPE_BALL");
    joint.type = type == "JOINT_TYPE_HINGE"   ? JointType::kHinge
                 : type == "JOINT_TYPE_FIXED" ? JointType::kFixed
                                              : JointType::kBall;
    joint.axis = Vec(j.value("axis", nlohmann::json()));
    joint.min_angle_rad = j.value("minAngleRad", -kInf);
    joint.max_angle_rad = j.value("maxAngleRad", kInf);
    joint.max_swing_rad = j.value("maxSwingRad", kInf);
    joint.stiffness = j.value("stiffness", 0.0);
    def.joints.push_back(joint);
  }
  for (const nlohmann::json& c : doc.value("chains", nlohmann::json::array())) {
    def.chains.push_back({c.at("name").get<std::string>(),
                          c.at("root").get<std::string>(),
                          c.at("tip").get<std::string>()});
  }
  return def;
}

std::string SourcePath(const std::string& relative) {
  return absl::StrCat(REACH_SOURCE_DIR, "/", relative);
}

std::string ExamplePath(const std::string& name) {
  return SourcePath(absl::StrCat("examples/", name));
}

Goal FullBodyGoal(int effector, const Eigen::Vector3d& target, int priority) {
  Goal goal;
  goal.solver = SolverKind::kFullBody;
  goal.tip_joint = effector;
  goal.target = target;
  goal.priority = priority;
  return goal;
}

std::vector<Goal> HumanoidGoals(const Skeleton& skeleton, const Pose& pose,
                                const Eigen::Vector3d& hand_offset,
                                const Eigen::Vector3d& look,
                                double tolerance) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  std::vector<Goal> goals;
  for (const char* foot : {"l_ankle", "r_ankle"}) {
    const int j = skeleton.FindJoint(foot);
    Goal g = FullBodyGoal(j, globals[j].translation, 0);
    g.target_orientation = globals[j].rotation;
    goals.push_back(g);
  }
  for (const char* hand : {"l_wrist", "r_wrist"}) {
    const int j = skeleton.FindJoint(hand);
    Eigen::Vector3d offset = hand_offset;
    if (hand[0] == 'r') offset.x() = -offset.x();
    goals.push_back(FullBodyGoal(j, globals[j].translation + offset, 1));
  }
  Goal head = FullBodyGoal(skeleton.FindJoint("head"), look, 2);
  head.aim_axis = Eigen::Vector3d::UnitZ();
  goals.push_back(head);
  for (Goal& g : goals) g.options.tolerance = tolerance;
  return goals;
}

std::vector<Goal> GoalsFromPose(const Skeleton& skeleton, const Pose& pose,
                                const BodyEffectors& effectors,
                                double tolerance) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  std::vector<Goal> goals;
  for (const std::string& name : effectors.feet) {
    const int j = skeleton.FindJoint(name);
    if (j < 0) continue;
    Goal g = FullBodyGoal(j, globals[j].translation, 0);
    g.target_orientation = globals[j].rotation;
    goals.push_back(g);
  }
  for (const std::string& name : effectors.points) {
    const int j = skeleton.FindJoint(name);
    if (j >= 0) goals.push_back(FullBodyGoal(j, globals[j].translation, 1));
  }
  const int head = skeleton.FindJoint(effectors.head);
  if (head >= 0) {
    Goal g = FullBodyGoal(
        head, globals[head] * Eigen::Vector3d(0, 0, 1.0 / globals[head].scale),
        2);
    g.aim_axis = Eigen::Vector3d::UnitZ();
    goals.push_back(g);
  }
  for (Goal& g : goals) g.options.tolerance = tolerance;
  return goals;
}

Pose GameplayPose(const Skeleton& skeleton, uint64_t seed, double amount,
                  double root_shift) {
  constexpr double kFreeSwing = 0.7;  // Radians: unlimited parts.
  constexpr double kFreeTwist = 0.5;
  constexpr double kRootTurn = 0.3;
  Rng rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  auto range = [&](double lo, double hi) {
    lo = std::isfinite(lo) ? lo : -kFreeTwist;
    hi = std::isfinite(hi) ? hi : kFreeTwist;
    return lo + (hi - lo) * u(rng);
  };
  Pose pose = RestPose(skeleton);
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const Joint& joint = skeleton.joint(j);
    Eigen::Quaterniond delta = Eigen::Quaterniond::Identity();
    if (joint.parent < 0) {
      // One draw per statement (argument order is unspecified), z first:
      // the order GCC took, which docs/benchmarks.md's numbers were measured on.
      const double z = u(rng) - 0.5;
      const double y = u(rng) - 0.5;
      const double x = u(rng) - 0.5;
      const Eigen::Vector3d axis = Eigen::Vector3d(x, y, z).normalized();
      delta = Eigen::AngleAxisd(kRootTurn * u(rng), axis);
    } else if (joint.type == JointType::kHinge) {
      delta = Eigen::AngleAxisd(range(joint.min_angle_rad, joint.max_angle_rad),
                                joint.axis);
    } else if (joint.type == JointType::kBall) {
      const double cone = std::isfinite(joint.max_swing_rad)
                              ? joint.max_swing_rad
                              : kFreeSwing;
      const Eigen::Vector3d a = joint.axis.unitOrthogonal();
      const double azimuth = 2 * M_PI * u(rng);
      const Eigen::Vector3d swing_axis =
          std::cos(azimuth) * a + std::sin(azimuth) * joint.axis.cross(a);
      const double swing = cone * u(rng);
      delta = Eigen::AngleAxisd(swing, swing_axis) *
              Eigen::AngleAxisd(range(joint.min_angle_rad, joint.max_angle_rad),
                                joint.axis);
    }
    const Eigen::Quaterniond random = joint.rest.rotation * delta;
    pose.local[j].rotation =
        ConstrainRotation(joint,
                          pose.local[j].rotation.slerp(amount, random))
            .normalized();
  }
  std::uniform_real_distribution<double> shift(-root_shift, root_shift);
  pose.local[0].translation += Eigen::Vector3d(shift(rng), shift(rng), shift(rng));
  return pose;
}

GameplayTargets MakeGameplayTargets(const Skeleton& skeleton,
                                    const BodyEffectors& effectors) {
  const double tolerance = 1e-4 * BodySize(skeleton);
  constexpr int kSets = 128;
  constexpr int kBlend = 30;
  GameplayTargets targets;
  std::vector<Pose> poses;
  for (int t = 0; t < kSets; ++t) {
    poses.push_back(GameplayPose(skeleton, 1000 + t, 0.4, 0.05));
    targets.from_rest.push_back(
        GoalsFromPose(skeleton, poses.back(), effectors, tolerance));
  }
  for (int t = 0; t + 1 < kSets; ++t) {
    for (int f = 0; f < kBlend; ++f) {
      const double a = static_cast<double>(f) / kBlend;
      Pose pose = poses[t];
      for (int j = 0; j < skeleton.num_joints(); ++j) {
        pose.local[j].rotation =
            poses[t].local[j].rotation.slerp(a, poses[t + 1].local[j].rotation);
        pose.local[j].translation = (1 - a) * poses[t].local[j].translation +
                                    a * poses[t + 1].local[j].translation;
      }
      targets.stream.push_back(
          GoalsFromPose(skeleton, pose, effectors, tolerance));
    }
  }
  return targets;
}

}  // namespace reach::testing
