#include "tests/testing/models.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/limits.h"
#include "solvers/solve.h"

namespace reach::testing {
namespace {

// URDF origin: translation, then fixed-axis roll-pitch-yaw (R = Rz Ry Rx).
Transform UrdfOrigin(double x, double y, double z, double roll, double pitch,
                     double yaw) {
  Transform t;
  t.translation = Eigen::Vector3d(x, y, z);
  t.rotation = Eigen::AngleAxisd(yaw, Eigen::Vector3d::UnitZ()) *
               Eigen::AngleAxisd(pitch, Eigen::Vector3d::UnitY()) *
               Eigen::AngleAxisd(roll, Eigen::Vector3d::UnitX());
  return t;
}

}  // namespace

Eigen::Quaterniond RandomRotation(Rng& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double u1 = u(rng), u2 = u(rng), u3 = u(rng);
  const double a = std::sqrt(1.0 - u1), b = std::sqrt(u1);
  return Eigen::Quaterniond(
      a * std::sin(2 * M_PI * u2), a * std::cos(2 * M_PI * u2),
      b * std::sin(2 * M_PI * u3), b * std::cos(2 * M_PI * u3));
}

Eigen::Quaterniond RandomRotation(Rng& rng, double max_angle) {
  std::uniform_real_distribution<double> angle(0.0, max_angle);
  std::normal_distribution<double> n(0.0, 1.0);
  Eigen::Vector3d axis(n(rng), n(rng), n(rng));
  axis.normalize();
  return Eigen::Quaterniond(Eigen::AngleAxisd(angle(rng), axis));
}

SkeletonDef RandomChainDef(Rng& rng, const RandomChainOptions& options) {
  std::uniform_real_distribution<double> bone(options.min_bone,
                                              options.max_bone);
  SkeletonDef def;
  if (options.with_base) {
    JointDef base;
    base.name = "base";
    def.joints.push_back(base);
  }
  for (int k = 0; k < options.joints; ++k) {
    JointDef j;
    j.name = absl::StrCat("j", k);
    j.parent = static_cast<int>(def.joints.size()) - 1;
    if (k > 0) j.rest.translation = Eigen::Vector3d(0, bone(rng), 0);
    j.rest.rotation = RandomRotation(rng, options.rest_bend_rad);
    def.joints.push_back(j);
  }
  def.chains.push_back({"chain", "j0", absl::StrCat("j", options.joints - 1)});
  return def;
}

SkeletonDef HingeRestartChainDef(Rng& rng, int joints) {
  RandomChainOptions options;
  options.joints = joints;
  SkeletonDef def = RandomChainDef(rng, options);
  for (size_t k = 1; k + 1 < def.joints.size(); ++k) {
    def.joints[k].type = JointType::kHinge;
    def.joints[k].axis = Eigen::Vector3d::UnitX();
    def.joints[k].min_angle_rad = -0.2;
    def.joints[k].max_angle_rad = 2.4;
  }
  return def;
}

int RestartsFor(SolverKind kind, int restarts) {
  return kind == SolverKind::kFabrik || kind == SolverKind::kCcd ? 0
                                                                 : restarts;
}

Pose RandomPose(const Skeleton& skeleton, Rng& rng, double max_angle) {
  Pose pose = RestPose(skeleton);
  for (int c = 0; c < skeleton.num_chains(); ++c) {
    const std::vector<int>& joints = skeleton.chain(c).joints;
    for (size_t k = 0; k + 1 < joints.size(); ++k) {
      const Joint& joint = skeleton.joint(joints[k]);
      Eigen::Quaterniond& q = pose.local[joints[k]].rotation;
      switch (joint.type) {
        case JointType::kBall:
          q = ConstrainRotation(
              joint, joint.rest.rotation * RandomRotation(rng, max_angle));
          break;
        case JointType::kHinge: {
          const double lo = std::isfinite(joint.min_angle_rad)
                                ? joint.min_angle_rad
                                : -max_angle;
          const double hi = std::isfinite(joint.max_angle_rad)
                                ? joint.max_angle_rad
                                : max_angle;
          q = HingeRotation(
              joint, std::uniform_real_distribution<double>(lo, hi)(rng));
          break;
        }
        case JointType::kFixed:
          break;
      }
    }
  }
  return pose;
}

SkeletonDef LimitedChainDef(Rng& rng, const LimitedChainOptions& options) {
  std::uniform_real_distribution<double> bone(options.min_bone,
                                              options.max_bone);
  std::uniform_real_distribution<double> swing(options.min_swing_rad,
                                               options.max_swing_rad);
  std::uniform_real_distribution<double> twist(options.min_twist_rad,
                                               options.max_twist_rad);
  std::normal_distribution<double> n(0.0, 1.0);
  SkeletonDef def;
  for (int k = 0; k < options.joints; ++k) {
    JointDef& j = def.joints.emplace_back();
    j.name = absl::StrCat("j", k);
    j.parent = k - 1;
    if (k > 0) {
      // Uniform on the sphere: a normalised Gaussian vector.
      Eigen::Vector3d dir(n(rng), n(rng), n(rng));
      dir.normalize();
      j.rest.translation = bone(rng) * dir;
      def.joints[k - 1].axis = dir;  // The parent's twist axis: its bone.
    }
    j.max_swing_rad = swing(rng);
    const double t = twist(rng);
    j.min_angle_rad = -t;
    j.max_angle_rad = t;
  }
  def.joints.back().axis = options.joints > 1
                               ? def.joints[options.joints - 2].axis
                               : Eigen::Vector3d::UnitX();
  def.chains.push_back({"chain", "j0", absl::StrCat("j", options.joints - 1)});
  return def;
}

Pose RandomLimitedPose(const Skeleton& skeleton, Rng& rng) {
  Pose pose = RestPose(skeleton);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const std::vector<int>& joints = skeleton.chain(0).joints;
  for (size_t k = 0; k + 1 < joints.size(); ++k) {
    const Joint& joint = skeleton.joint(joints[k]);
    const double cone =
        std::isfinite(joint.max_swing_rad) ? joint.max_swing_rad : M_PI;
    const double lo =
        std::isfinite(joint.min_angle_rad) ? joint.min_angle_rad : -M_PI;
    const double hi =
        std::isfinite(joint.max_angle_rad) ? joint.max_angle_rad : M_PI;
    // A unit axis square to the twist axis, at a uniform azimuth.
    const Eigen::Vector3d a = joint.axis.unitOrthogonal();
    const Eigen::Vector3d b = joint.axis.cross(a);
    const double azimuth = 2 * M_PI * u(rng);
    const Eigen::Vector3d swing_axis =
        std::cos(azimuth) * a + std::sin(azimuth) * b;
    const Eigen::Quaterniond swing(
        Eigen::AngleAxisd(cone * u(rng), swing_axis));
    const Eigen::Quaterniond twist(
        Eigen::AngleAxisd(lo + (hi - lo) * u(rng), joint.axis));
    pose.local[joints[k]].rotation =
        (joint.rest.rotation * swing * twist).normalized();
  }
  return pose;
}

absl::StatusOr<Solved> SolveOne(const Skeleton& skeleton, const Goal& goal,
                                Pose start) {
  Workspace ws;
  Solved out{std::move(start), GoalResult()};
  const absl::Status status = Solve(skeleton, absl::MakeConstSpan(&goal, 1), ws,
                                    &out.pose, absl::MakeSpan(&out.result, 1));
  if (!status.ok()) return status;
  return out;
}

Transform GlobalOf(const Skeleton& skeleton, const Pose& pose, int joint) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  return globals[joint];
}

std::vector<double> BoneLengths(const Skeleton& skeleton, const Pose& pose) {
  std::vector<Transform> globals(skeleton.num_joints());
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  std::vector<double> lengths(skeleton.num_joints(), 0.0);
  for (int i = 0; i < skeleton.num_joints(); ++i) {
    const int p = skeleton.joint(i).parent;
    if (p >= 0) {
      lengths[i] = (globals[i].translation - globals[p].translation).norm();
    }
  }
  return lengths;
}

SkeletonDef StraightChainDef(int joints, double bone) {
  SkeletonDef def;
  for (int i = 0; i < joints; ++i) {
    JointDef& j = def.joints.emplace_back();
    j.name = absl::StrCat("j", i);
    j.parent = i - 1;
    j.rest.translation =
        i == 0 ? Eigen::Vector3d::Zero() : Eigen::Vector3d(bone, 0, 0);
  }
  def.chains.push_back({"chain", "j0", absl::StrCat("j", joints - 1)});
  return def;
}

SkeletonDef TwoBoneLegDef(bool hinge_knee) {
  SkeletonDef def;
  JointDef hip;
  hip.name = "hip";
  hip.rest.translation = Eigen::Vector3d(0.1, 1.0, 0.0);
  JointDef knee;
  knee.name = "knee";
  knee.parent = 0;
  knee.rest.translation = Eigen::Vector3d(0, -0.45, 0);
  if (hinge_knee) {
    knee.type = JointType::kHinge;
    knee.axis = Eigen::Vector3d::UnitX();
  }
  JointDef ankle;
  ankle.name = "ankle";
  ankle.parent = 1;
  ankle.rest.translation = Eigen::Vector3d(0, -0.42, 0);
  def.joints = {hip, knee, ankle};
  def.chains.push_back({"leg", "hip", "ankle"});
  return def;
}

void AddRandomLimits(Rng& rng, SkeletonDef* def) {
  std::uniform_real_distribution<double> range(0.6, 2.0);
  std::normal_distribution<double> n(0.0, 1.0);
  const int first = def->joints[0].name == "base" ? 1 : 0;
  for (int k = first; k + 1 < static_cast<int>(def->joints.size()); ++k) {
    JointDef& j = def->joints[k];
    if ((k - first) % 2 == 1) {
      j.type = JointType::kHinge;
      j.axis = Eigen::Vector3d(n(rng), n(rng), n(rng)).normalized();
      j.min_angle_rad = -range(rng);
      j.max_angle_rad = range(rng);
    } else {
      j.max_swing_rad = range(rng);
      j.min_angle_rad = -range(rng) / 2;
      j.max_angle_rad = range(rng) / 2;
    }
  }
}

SkeletonDef LimitedLegDef() {
  SkeletonDef def = TwoBoneLegDef(/*hinge_knee=*/true);
  def.joints[0].max_swing_rad = 100.0 * M_PI / 180.0;
  def.joints[0].min_angle_rad = -40.0 * M_PI / 180.0;
  def.joints[0].max_angle_rad = 40.0 * M_PI / 180.0;
  def.joints[1].axis = -Eigen::Vector3d::UnitX();
  def.joints[1].min_angle_rad = 0.0;
  def.joints[1].max_angle_rad = 150.0 * M_PI / 180.0;
  return def;
}

namespace {

// `angle` (radians) within [lo - slack, hi + slack] modulo 2pi.
bool InRangeModulo(double angle, double lo, double hi, double slack) {
  for (double a : {angle, angle - 2 * M_PI, angle + 2 * M_PI,
                   angle - 4 * M_PI, angle + 4 * M_PI}) {
    if (a >= lo - slack && a <= hi + slack) return true;
  }
  return false;
}

}  // namespace

std::string LimitViolation(const Joint& joint, const Eigen::Quaterniond& local,
                           double slack_rad) {
  const Eigen::Quaterniond d = joint.rest.rotation.conjugate() * local;
  const Eigen::Vector3d a = joint.axis.normalized();
  // Angle of a turn about a (sign from the quaternion), and its part off a.
  auto angle_about_a = [&a](const Eigen::Quaterniond& q) {
    return 2.0 * std::atan2(q.vec().dot(a), q.w());
  };
  switch (joint.type) {
    case JointType::kFixed: {
      const double angle = 2.0 * std::atan2(d.vec().norm(), std::abs(d.w()));
      return angle <= slack_rad ? ""
                                : absl::StrCat("fixed joint turned ", angle);
    }
    case JointType::kHinge: {
      const double off = 2.0 * std::asin(std::min(1.0, d.vec().cross(a).norm()));
      if (off > slack_rad) return absl::StrCat("hinge turned off its axis ", off);
      const double angle = angle_about_a(d);
      if (!InRangeModulo(angle, joint.min_angle_rad, joint.max_angle_rad,
                         slack_rad)) {
        return absl::StrCat("hinge angle ", angle, " outside [",
                            joint.min_angle_rad, ", ", joint.max_angle_rad,
                            "]");
      }
      return "";
    }
    case JointType::kBall:
      break;
  }
  const Eigen::Vector3d b = d.toRotationMatrix() * a;
  const double swing = std::acos(std::clamp(a.dot(b), -1.0, 1.0));
  if (swing > joint.max_swing_rad + slack_rad) {
    return absl::StrCat("swing ", swing, " > cone ", joint.max_swing_rad);
  }
  const Eigen::Quaterniond twist =
      Eigen::Quaterniond::FromTwoVectors(a, b).conjugate() * d;
  if (twist.vec().cross(a).norm() > 1e-9) {
    return "the rest after the swing is not a twist about the axis";
  }
  const double angle = std::remainder(angle_about_a(twist), 2.0 * M_PI);
  if (!InRangeModulo(angle, joint.min_angle_rad, joint.max_angle_rad,
                     slack_rad)) {
    return absl::StrCat("twist ", angle, " outside [", joint.min_angle_rad,
                        ", ", joint.max_angle_rad, "]");
  }
  return "";
}

Pose RandomPoseWithinLimits(const Skeleton& skeleton,
                            const std::vector<int>& joints, Pose pose,
                            Rng& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int j : joints) {
    const Joint& joint = skeleton.joint(j);
    const double lo =
        std::isfinite(joint.min_angle_rad) ? joint.min_angle_rad : -M_PI;
    const double hi =
        std::isfinite(joint.max_angle_rad) ? joint.max_angle_rad : M_PI;
    const Eigen::Vector3d axis = joint.axis.normalized();
    Eigen::Quaterniond delta = Eigen::Quaterniond::Identity();
    if (joint.type == JointType::kHinge) {
      delta = Eigen::AngleAxisd(lo + (hi - lo) * u(rng), axis);
    } else if (joint.type == JointType::kBall) {
      const double cone =
          std::isfinite(joint.max_swing_rad) ? joint.max_swing_rad : M_PI;
      const Eigen::Vector3d a = axis.unitOrthogonal();
      const Eigen::Vector3d b = axis.cross(a);
      const double azimuth = 2 * M_PI * u(rng);
      const Eigen::Quaterniond swing(Eigen::AngleAxisd(
          cone * u(rng), std::cos(azimuth) * a + std::sin(azimuth) * b));
      delta = swing * Eigen::Quaterniond(
                          Eigen::AngleAxisd(lo + (hi - lo) * u(rng), axis));
    }
    pose.local[j].rotation = (joint.rest.rotation * delta).normalized();
  }
  return pose;
}

SkeletonDef HumanoidDef() {
  SkeletonDef def;
  auto add = [&def](const std::string& name, int parent,
                    const Eigen::Vector3d& t) {
    JointDef j;
    j.name = name;
    j.parent = parent;
    j.rest.translation = t;
    def.joints.push_back(j);
    return static_cast<int>(def.joints.size()) - 1;
  };
  const int hips = add("hips", -1, Eigen::Vector3d(0, 0.95, 0));
  for (const char* side : {"l", "r"}) {
    const double s = side[0] == 'l' ? 1.0 : -1.0;
    const std::string p(side);
    const int root =
        add(p + "_hip_root", hips, Eigen::Vector3d(s * 0.05, -0.05, 0));
    const int hip = add(p + "_hip", root, Eigen::Vector3d(s * 0.05, -0.02, 0));
    const int knee = add(p + "_knee", hip, Eigen::Vector3d(0, -0.42, 0));
    const int ankle = add(p + "_ankle", knee, Eigen::Vector3d(0, -0.41, 0));
    add(p + "_toe", ankle, Eigen::Vector3d(0, -0.05, 0.12));
  }
  const int spine0 = add("spine0", hips, Eigen::Vector3d(0, 0.1, 0));
  const int spine1 = add("spine1", spine0, Eigen::Vector3d(0, 0.12, 0));
  const int spine2 = add("spine2", spine1, Eigen::Vector3d(0, 0.12, 0));
  const int neck = add("neck", spine2, Eigen::Vector3d(0, 0.15, 0));
  const int neck1 = add("neck1", neck, Eigen::Vector3d(0, 0.05, 0));
  add("head", neck1, Eigen::Vector3d(0, 0.08, 0));
  for (const char* side : {"l", "r"}) {
    const double s = side[0] == 'l' ? 1.0 : -1.0;
    const std::string p(side);
    const int clavicle =
        add(p + "_clavicle", spine2, Eigen::Vector3d(s * 0.03, 0.12, 0));
    const int shoulder =
        add(p + "_shoulder", clavicle, Eigen::Vector3d(s * 0.15, 0, 0));
    const int elbow =
        add(p + "_elbow", shoulder, Eigen::Vector3d(s * 0.28, 0, 0));
    const int wrist = add(p + "_wrist", elbow, Eigen::Vector3d(s * 0.25, 0, 0));
    const int finger =
        add(p + "_finger", wrist, Eigen::Vector3d(s * 0.05, 0, 0));
    add(p + "_finger1", finger, Eigen::Vector3d(s * 0.03, 0, 0));
    add(p + "_thumb", wrist, Eigen::Vector3d(s * 0.02, 0, 0.03));
  }
  def.chains = {{"l_leg", "l_hip", "l_ankle"},
                {"r_leg", "r_hip", "r_ankle"},
                {"l_arm", "l_shoulder", "l_wrist"},
                {"r_arm", "r_shoulder", "r_wrist"}};
  return def;
}

const std::vector<JointRange>& PandaLimits() {
  static const std::vector<JointRange> limits = {
      {-2.8973, 2.8973},  {-1.7628, 1.7628}, {-2.8973, 2.8973},
      {-3.0718, -0.0698}, {-2.8973, 2.8973}, {-0.0175, 3.7525},
      {-2.8973, 2.8973}};
  return limits;
}

SkeletonDef PandaDef() {
  // Joint origins from franka_description's panda_arm.xacro.
  const double h = M_PI / 2;
  const Transform origins[8] = {UrdfOrigin(0, 0, 0.333, 0, 0, 0),
                                UrdfOrigin(0, 0, 0, -h, 0, 0),
                                UrdfOrigin(0, -0.316, 0, h, 0, 0),
                                UrdfOrigin(0.0825, 0, 0, h, 0, 0),
                                UrdfOrigin(-0.0825, 0.384, 0, -h, 0, 0),
                                UrdfOrigin(0, 0, 0, h, 0, 0),
                                UrdfOrigin(0.088, 0, 0, h, 0, 0),
                                UrdfOrigin(0, 0, 0.107, 0, 0, 0)};
  SkeletonDef def;
  JointDef base;
  base.name = "panda_link0";
  base.type = JointType::kFixed;
  def.joints.push_back(base);
  for (int i = 0; i < 7; ++i) {
    JointDef j;
    j.name = absl::StrCat("panda_joint", i + 1);
    j.parent = i;
    j.rest = origins[i];
    j.type = JointType::kHinge;
    j.axis = Eigen::Vector3d::UnitZ();
    j.min_angle_rad = PandaLimits()[i].lo;
    j.max_angle_rad = PandaLimits()[i].hi;
    def.joints.push_back(j);
  }
  JointDef flange;
  flange.name = "panda_flange";
  flange.parent = 7;
  flange.rest = origins[7];
  flange.type = JointType::kFixed;
  def.joints.push_back(flange);
  def.chains.push_back({"arm", "panda_joint1", "panda_flange"});
  return def;
}

Pose PandaMidLimitPose(const Skeleton& skeleton) {
  Pose pose = RestPose(skeleton);
  const std::vector<int> joints = PandaJointIndices(skeleton);
  for (int i = 0; i < 7; ++i) {
    const JointRange& range = PandaLimits()[i];
    pose.local[joints[i]].rotation =
        HingeRotation(skeleton.joint(joints[i]), 0.5 * (range.lo + range.hi));
  }
  return pose;
}

std::vector<int> PandaJointIndices(const Skeleton& skeleton) {
  std::vector<int> out;
  for (int i = 1; i <= 7; ++i) {
    out.push_back(skeleton.FindJoint(absl::StrCat("panda_joint", i)));
  }
  return out;
}

std::vector<std::string> JointNames(const SkeletonDef& def) {
  std::vector<std::string> names;
  for (const JointDef& j : def.joints) names.push_back(j.name);
  return names;
}

std::vector<int> JointParents(const SkeletonDef& def) {
  std::vector<int> parents;
  for (const JointDef& j : def.joints) parents.push_back(j.parent);
  return parents;
}

}  // namespace reach::testing
