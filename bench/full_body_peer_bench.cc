// Full-body IK beside a peer: our SOLVER_FULL_BODY (reach::Solve) and DART's
// whole-body IK (dart::dynamics::WholeBodyIK, a HierarchicalIK over one
// dart::dynamics::InverseKinematics module per effector, solved by DART's
// GradientDescentSolver with JacobianDLS gradients), on the same skeletons,
// targets and tolerance. Built only when DART is found
// (scripts/bench-full-body-peer installs libdart-dev and runs it).
//
// Rigs: examples/humanoid.skeleton.json (31 joints, unlimited balls),
// examples/humanoid_limited.skeleton.json when present (hinge knees and
// elbows, swing cones and twist ranges), and bench/data/
// bcn_epileptic.skeleton.json (a real 54-joint skin). Effectors:
//   feet (the leg chains' ankles): position + orientation, priority 0;
//   hands (wrists): position, priority 1;
//   head: look-at (an axis of the head points at a point), priority 1 —
//     DART has no look-at of its own: AimErrorMethod below, a small
//     InverseKinematics::ErrorMethod, gives its module the angular error;
//   BCN only, a sixth: the chest (B_Spine4) position, priority 1.
// Priority p is DART's hierarchy level p: level 1 is solved in the null
// space of level 0, as our priority levels are.
//
// Targets: random poses within the joint limits (unlimited ball joints: a
// swing of up to 0.7 rad and a twist of up to 0.5 rad; the root shifted up
// to 5% of the rig's height per axis and turned up to 0.3 rad), their
// effectors' forward kinematics as targets, so every set is reachable
// (fixed seed). Each set is solved from the rest pose; then a warm-started
// sequence (poses interpolated between random key poses, each frame solved
// from the previous frame's solution) by both.
//
// Tolerance: 1e-4 of the rig's height in position (reach::BodySize: the
// rest pose's largest extent along a model axis) and 1e-4 rad in
// orientation and look-at angle. A set counts as solved when every
// effector is within them. Errors are measured independently: ours by a
// forward kinematics written here (not the library's), DART's by DART's
// own (BodyNode::getWorldTransform).
//
// The DART model: each of our joints a BodyNode whose frame is our joint's
// frame; the root a FreeJoint; ball joints BallJoints, hinges
// RevoluteJoints (axis, rest rotation as the parent-to-joint transform),
// fixed joints WeldJoints. Limits become DART position limits: a hinge's
// range exactly; a ball's swing cone and twist range only as a box on
// DART's exponential coordinates, taken in a frame whose x axis is the
// twist axis (x within the twist range, y and z within +-cone), which
// contains the cone but is not it — DART has no cone limit. The "in lim"
// column checks every solution against our limits (reach::WithinLimits).
// Joint stiffness (Joint.stiffness in the rig files) weights our solver's
// steps; DART gets it as gradient component weights of 1 - stiffness per
// DOF.
// Joints on no path from the root to an effector move no effector; they
// are welded in DART (--dart_weld_unused=0 keeps them) so DART's
// null-space projections run on the DOFs that matter, as ours do.
//
// DART's settings are its own defaults for whole-body IK (the solver's step
// 1.0, JacobianDLS damping 0.05, its error and gradient clamps) with a
// budget of 500 iterations (its Solver default; ours stops at 64); flags
// vary them. DART sums the modules' separate DLS steps (each moves the
// shared root and spine as if it were alone) and projects a level through
// the product of its modules' null-space projectors (which leaks into the
// level above when they do not commute), so on some sets its iteration
// does not descend and wanders off; a warm-started sequence that has lost
// the pose rarely finds it again. Smaller steps, more damping, a weighted
// root or one level did not do better on these rigs.
//
// Usage: full_body_peer_bench [--sets N] [--frames N] [--seed S]
//          [--rigs humanoid,humanoid_limited,bcn] [--look_at 0|1]
//          [--our_iterations N] [--dart_iterations N] [--dart_step S]
//          [--dart_damping D] [--dart_root_weight W] [--dart_one_level 0|1]
//          [--dart_weld_unused 0|1] [--source_dir DIR]
//   --look_at 0          leaves the head's look-at goal out of both sides
//   --dart_root_weight   weight of the root's six DOFs in the gradients of
//                        the priority > 0 modules (DART's Atlas example uses
//                        0.01 for its hands); 1: unweighted
//   --dart_one_level 1   every DART module on hierarchy level 0 (no
//                        priorities)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <dart/config.hpp>
#include <dart/dynamics/BallJoint.hpp>
#include <dart/dynamics/BodyNode.hpp>
#include <dart/dynamics/FreeJoint.hpp>
#include <dart/dynamics/HierarchicalIK.hpp>
#include <dart/dynamics/InverseKinematics.hpp>
#include <dart/dynamics/RevoluteJoint.hpp>
#include <dart/dynamics/SimpleFrame.hpp>
#include <dart/dynamics/Skeleton.hpp>
#include <dart/dynamics/WeldJoint.hpp>
#include <dart/optimizer/GradientDescentSolver.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "solvers/full_body.h"
#include "solvers/limits.h"
#include "solvers/solve.h"
#include "tests/testing/full_body.h"

#ifndef REACH_SOURCE_DIR
#define REACH_SOURCE_DIR "."
#endif

namespace reach {
namespace {

using Clock = std::chrono::steady_clock;
using Rng = std::mt19937_64;

constexpr double kToleranceOfHeight = 1e-4;
constexpr double kAngularTolerance = 1e-4;  // rad
// Sampling ranges where a joint has no limit of its own.
constexpr double kFreeSwing = 0.7;   // rad
constexpr double kFreeTwist = 0.5;   // rad; also an unlimited hinge's range
constexpr double kRootShiftOfHeight = 0.05;
constexpr double kRootTurn = 0.3;    // rad
// A look-at target lies this far (x height) from the head along its aim.
constexpr double kLookDistanceOfHeight = 0.5;
// Frames between two key poses of the warm-started sequence.
constexpr int kFramesPerKey = 20;

struct Config {
  int sets = 200;
  int frames = 200;
  unsigned seed = 2024;
  std::vector<std::string> rigs = {"humanoid", "humanoid_limited", "bcn"};
  int our_iterations = 0;  // 0: the solver's default.
  int dart_iterations = 500;
  double dart_root_weight = 1.0;
  double dart_step = 1.0;      // GradientDescentSolver step; DART's IK default.
  double dart_damping = 0.05;  // JacobianDLS damping; DART's default.
  bool dart_weld_unused = true;
  bool dart_one_level = false;  // Every DART module on hierarchy level 0.
  bool look_at = true;  // Include the head's look-at goal (both sides).
  std::string source_dir = REACH_SOURCE_DIR;
};

// ---------------------------------------------------------------------------
// Rigs and effectors.

enum class Kind { kPosition, kPose, kLookAt };

struct EffectorSpec {
  const char* joint;
  Kind kind;
  int priority;
};

struct RigSpec {
  const char* name;
  const char* file;  // Relative to the source directory.
  // Joints that give the rig's forward direction: (left hip - right hip) x
  // (head - root) at rest.
  const char* left_hip;
  const char* right_hip;
  const char* head;
  std::vector<EffectorSpec> effectors;
  // Skipped with a note, not an error, when its file is missing or does
  // not load (examples/humanoid_limited.skeleton.json is new).
  bool optional = false;
};

std::vector<RigSpec> AllRigs() {
  const std::vector<EffectorSpec> humanoid = {
      {"l_ankle", Kind::kPose, 0},     {"r_ankle", Kind::kPose, 0},
      {"l_wrist", Kind::kPosition, 1}, {"r_wrist", Kind::kPosition, 1},
      {"head", Kind::kLookAt, 1},
  };
  return {
      {"humanoid", "examples/humanoid.skeleton.json", "l_hip", "r_hip", "head",
       humanoid},
      {"humanoid_limited", "examples/humanoid_limited.skeleton.json", "l_hip",
       "r_hip", "head", humanoid, /*optional=*/true},
      {"bcn", "bench/data/bcn_epileptic.skeleton.json", "B_Hip_Left",
       "B_Hip_Right", "B_Neck",
       {
           {"B_Ankle_Left", Kind::kPose, 0},
           {"B_Ankle_Right", Kind::kPose, 0},
           {"B_Hand_Left", Kind::kPosition, 1},
           {"B_Hand_Right", Kind::kPosition, 1},
           {"B_Neck", Kind::kLookAt, 1},
           {"B_Spine4", Kind::kPosition, 1},
       }},
  };
}

struct Effector {
  int joint;
  Kind kind;
  int priority;
  Eigen::Vector3d aim_axis = Eigen::Vector3d::UnitZ();  // Look-at, own frame.
};

// One effector's target: a position (or the point to look at) and, for
// kPose, an orientation.
struct Target {
  Eigen::Vector3d point = Eigen::Vector3d::Zero();
  Eigen::Quaterniond orientation = Eigen::Quaterniond::Identity();
};
using TargetSet = std::vector<Target>;

// ---------------------------------------------------------------------------
// The bench's own forward kinematics (not the library's ComputeGlobals).

void BenchFk(const Skeleton& skeleton, const Pose& pose,
             std::vector<Transform>* globals) {
  globals->resize(skeleton.num_joints());
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const Transform& local = pose.local[j];
    const int parent = skeleton.joint(j).parent;
    Transform& g = (*globals)[j];
    if (parent < 0) {
      g = local;
      continue;
    }
    const Transform& p = (*globals)[parent];
    const Eigen::Matrix3d r = p.rotation.toRotationMatrix();
    g.translation = p.translation + p.scale * (r * local.translation);
    g.rotation = (p.rotation * local.rotation).normalized();
    g.scale = p.scale * local.scale;
  }
}

double AngleOf(const Eigen::Quaterniond& a, const Eigen::Quaterniond& b) {
  const Eigen::Quaterniond d = a.conjugate() * b;
  return 2.0 * std::atan2(d.vec().norm(), std::abs(d.w()));
}

double AngleBetweenVectors(const Eigen::Vector3d& a, const Eigen::Vector3d& b) {
  return std::atan2(a.cross(b).norm(), a.dot(b));
}

// An effector's error: position distance (kPosition, kPose), and angle
// (kPose: to the target orientation; kLookAt: between the aimed axis and
// the direction to the point).
struct EffectorError {
  double position = 0.0;
  double angle = 0.0;
};

EffectorError ErrorOf(const Effector& e, const Eigen::Vector3d& position,
                      const Eigen::Quaterniond& rotation, const Target& t) {
  EffectorError out;
  switch (e.kind) {
    case Kind::kPosition:
      out.position = (position - t.point).norm();
      break;
    case Kind::kPose:
      out.position = (position - t.point).norm();
      out.angle = AngleOf(rotation, t.orientation);
      break;
    case Kind::kLookAt: {
      const Eigen::Vector3d to = t.point - position;
      out.angle = to.norm() == 0.0
                      ? 0.0
                      : AngleBetweenVectors(rotation * e.aim_axis, to);
      break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Random poses within the limits, as parameters that interpolate linearly
// without leaving them.
//
// Ball joint: (twist, swing_y, swing_z) in the joint's limit frame (x along
// its twist axis): delta = A * exp(0, sy, sz) * exp(twist, 0, 0) * A^-1,
// local = rest * delta, with |(sy, sz)| within the cone and the twist
// within its range (the disc and the interval are convex). Hinge: (angle).
// Root: a rotation vector in model space and a shift.

struct PoseParams {
  std::vector<Eigen::Vector3d> joint;
  Eigen::Vector3d root_shift = Eigen::Vector3d::Zero();
};

// The rotation taking +X to a ball joint's twist axis.
Eigen::Quaterniond LimitFrame(const Joint& joint) {
  return Eigen::Quaterniond::FromTwoVectors(Eigen::Vector3d::UnitX(),
                                            joint.axis);
}

struct Range {
  double lo;
  double hi;
};

Range TwistRange(const Joint& j, double free) {
  return {std::isfinite(j.min_angle_rad) ? j.min_angle_rad : -free,
          std::isfinite(j.max_angle_rad) ? j.max_angle_rad : free};
}

PoseParams RandomParams(const Skeleton& skeleton, double height, Rng& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> n(0.0, 1.0);
  PoseParams p;
  p.joint.assign(skeleton.num_joints(), Eigen::Vector3d::Zero());
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const Joint& joint = skeleton.joint(j);
    Eigen::Vector3d& v = p.joint[j];
    if (joint.parent < 0) {
      Eigen::Vector3d axis(n(rng), n(rng), n(rng));
      v = axis.normalized() * kRootTurn * std::cbrt(u(rng));
      for (int k = 0; k < 3; ++k) {
        p.root_shift[k] = (2 * u(rng) - 1) * kRootShiftOfHeight * height;
      }
      continue;
    }
    switch (joint.type) {
      case JointType::kFixed:
        break;
      case JointType::kHinge: {
        const Range r = TwistRange(joint, kFreeTwist);
        v.x() = r.lo + (r.hi - r.lo) * u(rng);
        break;
      }
      case JointType::kBall: {
        const Range twist = TwistRange(joint, kFreeTwist);
        const double cone = std::isfinite(joint.max_swing_rad)
                                ? joint.max_swing_rad
                                : kFreeSwing;
        const double radius = cone * std::sqrt(u(rng));
        const double phi = 2 * M_PI * u(rng);
        v = Eigen::Vector3d(twist.lo + (twist.hi - twist.lo) * u(rng),
                            radius * std::cos(phi), radius * std::sin(phi));
        break;
      }
    }
  }
  return p;
}

PoseParams Lerp(const PoseParams& a, const PoseParams& b, double t) {
  PoseParams out = a;
  for (size_t j = 0; j < a.joint.size(); ++j) {
    out.joint[j] = (1 - t) * a.joint[j] + t * b.joint[j];
  }
  out.root_shift = (1 - t) * a.root_shift + t * b.root_shift;
  return out;
}

Eigen::Quaterniond ExpMap(const Eigen::Vector3d& v) {
  const double angle = v.norm();
  if (angle == 0.0) return Eigen::Quaterniond::Identity();
  return Eigen::Quaterniond(Eigen::AngleAxisd(angle, v / angle));
}

Pose ParamsToPose(const Skeleton& skeleton, const PoseParams& p) {
  Pose pose;
  pose.local.assign(skeleton.rest_locals().begin(),
                    skeleton.rest_locals().end());
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const Joint& joint = skeleton.joint(j);
    Transform& local = pose.local[j];
    const Eigen::Vector3d& v = p.joint[j];
    if (joint.parent < 0) {
      local.rotation = (ExpMap(v) * joint.rest.rotation).normalized();
      local.translation = joint.rest.translation + p.root_shift;
      continue;
    }
    switch (joint.type) {
      case JointType::kFixed:
        break;
      case JointType::kHinge:
        local.rotation = HingeRotation(joint, v.x());
        break;
      case JointType::kBall: {
        const Eigen::Quaterniond a = LimitFrame(joint);
        const Eigen::Quaterniond delta =
            a * ExpMap(Eigen::Vector3d(0, v.y(), v.z())) *
            ExpMap(Eigen::Vector3d(v.x(), 0, 0)) * a.conjugate();
        local.rotation = (joint.rest.rotation * delta).normalized();
        break;
      }
    }
  }
  return pose;
}

bool PoseWithinLimits(const Skeleton& skeleton, const Pose& pose);

TargetSet TargetsOf(const Skeleton& skeleton, const Pose& pose,
                    const std::vector<Effector>& effectors, double height) {
  if (!PoseWithinLimits(skeleton, pose)) {
    std::fprintf(stderr, "a sampled pose is outside the limits\n");
    std::exit(1);
  }
  std::vector<Transform> g;
  BenchFk(skeleton, pose, &g);
  TargetSet set(effectors.size());
  for (size_t i = 0; i < effectors.size(); ++i) {
    const Effector& e = effectors[i];
    const Transform& t = g[e.joint];
    if (e.kind == Kind::kLookAt) {
      set[i].point = t.translation + kLookDistanceOfHeight * height *
                                         (t.rotation * e.aim_axis);
    } else {
      set[i].point = t.translation;
      set[i].orientation = t.rotation;
    }
  }
  return set;
}

bool PoseWithinLimits(const Skeleton& skeleton, const Pose& pose) {
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    if (skeleton.joint(j).parent < 0) continue;  // The free root.
    if (!WithinLimits(skeleton.joint(j), pose.local[j].rotation, 1e-6)) {
      return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// What one solve gave, measured here.

struct SolveOutcome {
  std::vector<EffectorError> errors;
  double micros = 0.0;
  int iterations = 0;
  bool within_limits = true;
};

struct Tally {
  int solves = 0;
  int solved = 0;
  int within_limits = 0;
  double position_sum = 0.0, position_max = 0.0;
  int position_count = 0;
  double angle_sum = 0.0, angle_max = 0.0;
  int angle_count = 0;
  double iterations_sum = 0.0;
  std::vector<double> micros;

  void Add(const std::vector<Effector>& effectors, const SolveOutcome& o,
           double tolerance) {
    ++solves;
    bool ok = true;
    for (size_t i = 0; i < effectors.size(); ++i) {
      const EffectorError& e = o.errors[i];
      if (effectors[i].kind != Kind::kLookAt) {
        position_sum += e.position;
        position_max = std::max(position_max, e.position);
        ++position_count;
        ok = ok && e.position <= tolerance;
      }
      if (effectors[i].kind != Kind::kPosition) {
        angle_sum += e.angle;
        angle_max = std::max(angle_max, e.angle);
        ++angle_count;
        ok = ok && e.angle <= kAngularTolerance;
      }
    }
    solved += ok;
    within_limits += o.within_limits;
    iterations_sum += o.iterations;
    micros.push_back(o.micros);
  }

  void Print(const char* rig, const char* start, const char* solver) const {
    std::vector<double> sorted = micros;
    std::sort(sorted.begin(), sorted.end());
    double mean_us = 0.0;
    for (double m : sorted) mean_us += m;
    mean_us /= std::max<size_t>(1, sorted.size());
    const double p50 = sorted.empty() ? 0.0 : sorted[sorted.size() / 2];
    std::printf(
        "%-16s %-5s %-9s %6.1f%% %10.2e %10.2e %10.2e %10.2e %10.1f %10.1f "
        "%8.1f %6.1f%%\n",
        rig, start, solver, 100.0 * solved / std::max(1, solves),
        position_sum / std::max(1, position_count), position_max,
        angle_sum / std::max(1, angle_count), angle_max, mean_us, p50,
        iterations_sum / std::max(1, solves),
        100.0 * within_limits / std::max(1, solves));
  }
};

// ---------------------------------------------------------------------------
// Ours: every effector one SOLVER_FULL_BODY goal, one reach::Solve.

class OurSolver {
 public:
  OurSolver(const Skeleton& skeleton, const std::vector<Effector>& effectors,
            double tolerance, int max_iterations)
      : skeleton_(skeleton), effectors_(effectors) {
    goals_.resize(effectors.size());
    results_.resize(effectors.size());
    for (size_t i = 0; i < effectors.size(); ++i) {
      Goal& g = goals_[i];
      g.solver = SolverKind::kFullBody;
      g.tip_joint = effectors[i].joint;
      g.priority = effectors[i].priority;
      g.options.tolerance = tolerance;
      g.options.orientation_tolerance_rad = kAngularTolerance;
      if (effectors[i].kind == Kind::kLookAt) {
        g.aim_axis = effectors[i].aim_axis;
      }
    }
    options_.max_iterations = max_iterations;
  }

  // Solves from *pose (in: the start; out: the solution).
  SolveOutcome Solve(const TargetSet& targets, Pose* pose) {
    for (size_t i = 0; i < goals_.size(); ++i) {
      goals_[i].target = targets[i].point;
      if (effectors_[i].kind == Kind::kPose) {
        goals_[i].target_orientation = targets[i].orientation;
      }
    }
    const Clock::time_point start = Clock::now();
    const absl::Status status =
        reach::Solve(skeleton_, goals_, ws_, pose, absl::MakeSpan(results_),
                     SolveLimits{}, Deadline{}, options_);
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count();
    if (!status.ok()) {
      std::fprintf(stderr, "reach::Solve failed: %s\n",
                   status.ToString().c_str());
      std::exit(1);
    }
    SolveOutcome out;
    out.micros = us;
    out.iterations = results_.empty() ? 0 : results_[0].iterations;
    BenchFk(skeleton_, *pose, &globals_);
    for (size_t i = 0; i < effectors_.size(); ++i) {
      const Transform& g = globals_[effectors_[i].joint];
      out.errors.push_back(
          ErrorOf(effectors_[i], g.translation, g.rotation, targets[i]));
    }
    out.within_limits = PoseWithinLimits(skeleton_, *pose);
    return out;
  }

 private:
  const Skeleton& skeleton_;
  const std::vector<Effector>& effectors_;
  std::vector<Goal> goals_;
  std::vector<GoalResult> results_;
  FullBodyOptions options_;
  Workspace ws_;
  std::vector<Transform> globals_;
};

// ---------------------------------------------------------------------------
// DART.

namespace dd = dart::dynamics;

// Look-at for DART's IK: an ErrorMethod whose error is the rotation that
// turns the effector's aimed axis onto the direction to the target's
// origin (angular part only; zero within `tolerance`), weighted and clamped
// as TaskSpaceRegion's error is. DART has no look-at of its own.
class AimErrorMethod final : public dd::InverseKinematics::ErrorMethod {
 public:
  AimErrorMethod(dd::InverseKinematics* ik, const Eigen::Vector3d& aim_axis,
                 double tolerance)
      : ErrorMethod(ik, "AimError"), aim_axis_(aim_axis),
        tolerance_(tolerance) {}

  std::unique_ptr<ErrorMethod> clone(
      dd::InverseKinematics* ik) const override {
    return std::make_unique<AimErrorMethod>(ik, aim_axis_, tolerance_);
  }

  Eigen::Vector6d computeError() override {
    Eigen::Vector6d error = Eigen::Vector6d::Zero();
    const Eigen::Isometry3d tf = mIK->getNode()->getWorldTransform();
    const Eigen::Vector3d to =
        mIK->getTarget()->getWorldTransform().translation() - tf.translation();
    if (to.norm() == 0.0) return error;
    const Eigen::Vector3d aimed = tf.linear() * aim_axis_;
    const Eigen::Vector3d cross = aimed.cross(to);
    const double angle = std::atan2(cross.norm(), aimed.dot(to));
    if (angle <= tolerance_) return error;
    Eigen::Vector3d axis;
    if (cross.norm() > 1e-12) {
      axis = cross.normalized();
    } else {  // Aimed exactly away: any axis square to it.
      axis = aimed.unitOrthogonal();
    }
    // TaskSpaceRegion's sign: the error is actual relative to desired, and
    // the solver steps against it.
    error.head<3>() = -angle * axis;
    error = error.cwiseProduct(mErrorP.mErrorWeights);
    if (error.norm() > mErrorP.mErrorLengthClamp) {
      error = error.normalized() * mErrorP.mErrorLengthClamp;
    }
    return error;
  }

  Eigen::Isometry3d computeDesiredTransform(
      const Eigen::Isometry3d& current, const Eigen::Vector6d& error) override {
    Eigen::Isometry3d tf = current;
    const Eigen::Vector3d r = -error.head<3>();
    if (r.norm() > 0.0) {
      tf.linear() =
          Eigen::AngleAxisd(r.norm(), r.normalized()).toRotationMatrix() *
          current.linear();
    }
    return tf;
  }

 private:
  Eigen::Vector3d aim_axis_;
  double tolerance_;
};

class DartSolver {
 public:
  DartSolver(const Skeleton& skeleton, const std::vector<Effector>& effectors,
             double tolerance, const Config& config)
      : skeleton_(skeleton), effectors_(effectors) {
    BuildSkeleton(config.dart_weld_unused);
    SetUpIk(tolerance, config);
  }

  int num_dofs() const { return static_cast<int>(dart_->getNumDofs()); }
  bool welded(int j) const { return welded_[j]; }

  // Our pose -> DART positions.
  void SetPose(const Pose& pose) {
    Eigen::VectorXd q = dart_->getPositions();
    for (int j = 0; j < skeleton_.num_joints(); ++j) {
      dd::Joint* dj = joints_[j];
      if (dj->getNumDofs() == 0) continue;
      const Joint& joint = skeleton_.joint(j);
      const Transform& local = pose.local[j];
      const size_t first = dj->getIndexInSkeleton(0);
      if (joint.parent < 0) {
        Eigen::Isometry3d tf = Eigen::Isometry3d::Identity();
        tf.linear() = local.rotation.toRotationMatrix();
        tf.translation() = local.translation;
        q.segment<6>(first) = dd::FreeJoint::convertToPositions(tf);
      } else if (joint.type == JointType::kHinge) {
        q[first] = HingeAngle(joint, local.rotation);
      } else {
        const Eigen::Quaterniond a = LimitFrame(joint);
        const Eigen::Quaterniond delta =
            joint.rest.rotation.conjugate() * local.rotation;
        q.segment<3>(first) = RotationVector(a.conjugate() * delta * a);
      }
    }
    dart_->setPositions(q);
  }

  // DART positions -> our pose.
  Pose GetPose() const {
    Pose pose;
    pose.local.assign(skeleton_.rest_locals().begin(),
                      skeleton_.rest_locals().end());
    const Eigen::VectorXd q = dart_->getPositions();
    for (int j = 0; j < skeleton_.num_joints(); ++j) {
      const dd::Joint* dj = joints_[j];
      if (dj->getNumDofs() == 0) continue;
      const Joint& joint = skeleton_.joint(j);
      Transform& local = pose.local[j];
      const size_t first = dj->getIndexInSkeleton(0);
      if (joint.parent < 0) {
        const Eigen::Isometry3d tf =
            dd::FreeJoint::convertToTransform(q.segment<6>(first));
        local.rotation = Eigen::Quaterniond(tf.linear()).normalized();
        local.translation = tf.translation();
      } else if (joint.type == JointType::kHinge) {
        local.rotation = HingeRotation(joint, q[first]);
      } else {
        const Eigen::Quaterniond a = LimitFrame(joint);
        const Eigen::Quaterniond delta =
            a * FromRotationVector(q.segment<3>(first)) * a.conjugate();
        local.rotation = (joint.rest.rotation * delta).normalized();
      }
    }
    return pose;
  }

  // The model-space transform DART gives joint j's BodyNode.
  Eigen::Isometry3d WorldOf(int j) const {
    return bodies_[j]->getWorldTransform();
  }

  // Solves from DART's current positions (set them first).
  SolveOutcome Solve(const TargetSet& targets) {
    for (size_t i = 0; i < effectors_.size(); ++i) {
      Eigen::Isometry3d tf = Eigen::Isometry3d::Identity();
      tf.translation() = targets[i].point;
      if (effectors_[i].kind == Kind::kPose) {
        tf.linear() = targets[i].orientation.toRotationMatrix();
      }
      frames_[i]->setRelativeTransform(tf);
    }
    const Clock::time_point start = Clock::now();
    dart_->getIK(true)->solveAndApply(true);
    const double us =
        std::chrono::duration<double, std::micro>(Clock::now() - start)
            .count();
    SolveOutcome out;
    out.micros = us;
    out.iterations = static_cast<int>(solver_->getLastNumIterations());
    for (size_t i = 0; i < effectors_.size(); ++i) {
      const Eigen::Isometry3d tf = WorldOf(effectors_[i].joint);
      out.errors.push_back(ErrorOf(effectors_[i], tf.translation(),
                                   Eigen::Quaterniond(tf.linear()),
                                   targets[i]));
    }
    out.within_limits = PoseWithinLimits(skeleton_, GetPose());
    return out;
  }

 private:
  void BuildSkeleton(bool weld_unused) {
    const int n = skeleton_.num_joints();
    // Joints whose rotation can move an effector: the effectors and their
    // ancestors.
    std::vector<char> used(n, !weld_unused);
    for (const Effector& e : effectors_) {
      for (int j = e.joint; j >= 0; j = skeleton_.joint(j).parent) used[j] = 1;
    }
    // Global scale at rest: DART's transforms are rigid, so each bone's
    // offset carries its ancestors' scale.
    std::vector<double> scale(n, 1.0);
    dart_ = dd::Skeleton::create("reach");
    joints_.assign(n, nullptr);
    bodies_.assign(n, nullptr);
    welded_.assign(n, false);
    for (int j = 0; j < n; ++j) {
      const Joint& joint = skeleton_.joint(j);
      const int parent = joint.parent;
      scale[j] = (parent < 0 ? 1.0 : scale[parent]) * joint.rest.scale;
      dd::BodyNode* parent_body = parent < 0 ? nullptr : bodies_[parent];
      dd::BodyNode::Properties body;
      body.mName = joint.name;
      Eigen::Isometry3d rest = Eigen::Isometry3d::Identity();
      rest.linear() = joint.rest.rotation.toRotationMatrix();
      rest.translation() =
          (parent < 0 ? 1.0 : scale[parent]) * joint.rest.translation;
      const std::string name = joint.name + "_joint";
      if (parent < 0) {
        dd::FreeJoint::Properties p;
        p.mName = name;
        auto pair =
            dart_->createJointAndBodyNodePair<dd::FreeJoint>(nullptr, p, body);
        joints_[j] = pair.first;
        bodies_[j] = pair.second;
        continue;
      }
      if (joint.type == JointType::kFixed || !used[j]) {
        dd::WeldJoint::Properties p;
        p.mName = name;
        p.mT_ParentBodyToJoint = rest;
        auto pair = dart_->createJointAndBodyNodePair<dd::WeldJoint>(
            parent_body, p, body);
        joints_[j] = pair.first;
        bodies_[j] = pair.second;
        welded_[j] = joint.type != JointType::kFixed;
        continue;
      }
      if (joint.type == JointType::kHinge) {
        dd::RevoluteJoint::Properties p;
        p.mName = name;
        p.mT_ParentBodyToJoint = rest;
        p.mAxis = joint.axis;
        auto pair = dart_->createJointAndBodyNodePair<dd::RevoluteJoint>(
            parent_body, p, body);
        joints_[j] = pair.first;
        bodies_[j] = pair.second;
        if (std::isfinite(joint.min_angle_rad)) {
          pair.first->setPositionLowerLimit(0, joint.min_angle_rad);
        }
        if (std::isfinite(joint.max_angle_rad)) {
          pair.first->setPositionUpperLimit(0, joint.max_angle_rad);
        }
        continue;
      }
      // Ball: exponential coordinates in the limit frame A (x = twist
      // axis): parent-to-joint rest * A, child-to-joint A, so the body's
      // frame is rest * A * exp(q) * A^-1, our joint frame.
      const Eigen::Matrix3d a = LimitFrame(joint).toRotationMatrix();
      dd::BallJoint::Properties p;
      p.mName = name;
      p.mT_ParentBodyToJoint = rest;
      p.mT_ParentBodyToJoint.linear() = rest.linear() * a;
      p.mT_ChildBodyToJoint = Eigen::Isometry3d::Identity();
      p.mT_ChildBodyToJoint.linear() = a;
      auto pair = dart_->createJointAndBodyNodePair<dd::BallJoint>(
          parent_body, p, body);
      joints_[j] = pair.first;
      bodies_[j] = pair.second;
      if (std::isfinite(joint.min_angle_rad)) {
        pair.first->setPositionLowerLimit(0, joint.min_angle_rad);
      }
      if (std::isfinite(joint.max_angle_rad)) {
        pair.first->setPositionUpperLimit(0, joint.max_angle_rad);
      }
      if (std::isfinite(joint.max_swing_rad)) {
        for (int k = 1; k < 3; ++k) {
          pair.first->setPositionLowerLimit(k, -joint.max_swing_rad);
          pair.first->setPositionUpperLimit(k, joint.max_swing_rad);
        }
      }
    }
  }

  // Which of our joints each DART DOF belongs to, and each joint's first.
  void MapDofs() {
    dof_joint_.assign(dart_->getNumDofs(), -1);
    first_dof_.assign(skeleton_.num_joints(), 0);
    for (int j = 0; j < skeleton_.num_joints(); ++j) {
      if (joints_[j]->getNumDofs() == 0) continue;
      first_dof_[j] = joints_[j]->getIndexInSkeleton(0);
      for (size_t k = 0; k < joints_[j]->getNumDofs(); ++k) {
        dof_joint_[joints_[j]->getIndexInSkeleton(k)] = j;
      }
    }
  }

  void SetUpIk(double tolerance, const Config& config) {
    MapDofs();
    // A box inside the tolerance ball: within it every component is within
    // tolerance / sqrt(3), so the distance (angle) is within tolerance.
    const double linear = tolerance / std::sqrt(3.0);
    const double angular = kAngularTolerance / std::sqrt(3.0);
    const Eigen::Vector3d inf = Eigen::Vector3d::Constant(INFINITY);
    for (const Effector& e : effectors_) {
      dd::BodyNode* body = bodies_[e.joint];
      const std::shared_ptr<dd::InverseKinematics>& ik = body->getIK(true);
      auto frame = std::make_shared<dd::SimpleFrame>(
          dd::Frame::World(), body->getName() + "_target");
      ik->setTarget(frame);
      frames_.push_back(frame);
      ik->useWholeBody();
      ik->setHierarchyLevel(config.dart_one_level ? 0 : e.priority);
      if (e.kind == Kind::kLookAt) {
        ik->setErrorMethod<AimErrorMethod>(e.aim_axis, kAngularTolerance);
      } else {
        dd::InverseKinematics::ErrorMethod& error = ik->getErrorMethod();
        error.setLinearBounds(Eigen::Vector3d::Constant(-linear),
                              Eigen::Vector3d::Constant(linear));
        if (e.kind == Kind::kPose) {
          error.setAngularBounds(Eigen::Vector3d::Constant(-angular),
                                 Eigen::Vector3d::Constant(angular));
        } else {
          error.setAngularBounds(-inf, inf);
        }
      }
      // JacobianDLS (the default). Its gradient's components are weighted
      // by 1 - stiffness of their joint (our joints' stiffness; the root's
      // translation is free), and the root's six by --dart_root_weight in
      // the modules below priority 0, as DART's Atlas example weights its
      // hands'.
      static_cast<dd::InverseKinematics::JacobianDLS&>(ik->getGradientMethod())
          .setDampingCoefficient(config.dart_damping);
      const std::vector<size_t>& dofs = ik->getDofs();
      Eigen::VectorXd weights = Eigen::VectorXd::Ones(dofs.size());
      for (size_t k = 0; k < dofs.size(); ++k) {
        const int j = dof_joint_[dofs[k]];
        const bool root = skeleton_.joint(j).parent < 0;
        const bool translation = root && dofs[k] - first_dof_[j] >= 3;
        if (!translation) weights[k] = 1.0 - skeleton_.joint(j).stiffness;
        if (root && e.priority > 0) weights[k] *= config.dart_root_weight;
      }
      if (!weights.isOnes()) {
        ik->getGradientMethod().setComponentWeights(weights);
      }
    }
    const std::shared_ptr<dd::WholeBodyIK>& whole = dart_->getIK(true);
    solver_ = std::dynamic_pointer_cast<dart::optimizer::GradientDescentSolver>(
        whole->getSolver());
    if (solver_ == nullptr) {
      std::fprintf(stderr, "DART's WholeBodyIK has no GradientDescentSolver\n");
      std::exit(1);
    }
    solver_->setNumMaxIterations(config.dart_iterations);
    solver_->setStepSize(config.dart_step);
  }

  const Skeleton& skeleton_;
  const std::vector<Effector>& effectors_;
  dd::SkeletonPtr dart_;
  std::vector<dd::Joint*> joints_;
  std::vector<dd::BodyNode*> bodies_;
  std::vector<bool> welded_;
  std::vector<int> dof_joint_;
  std::vector<size_t> first_dof_;
  std::vector<std::shared_ptr<dd::SimpleFrame>> frames_;
  std::shared_ptr<dart::optimizer::GradientDescentSolver> solver_;
};

// ---------------------------------------------------------------------------

// A skeleton JSON file (the protobuf JSON of reach.v1.Skeleton, stiffness
// included), read as the solver tests and solver_bench read it.
absl::StatusOr<Skeleton> LoadRig(const std::string& path) {
  absl::StatusOr<SkeletonDef> def = testing::LoadSkeletonJson(path);
  if (!def.ok()) return def.status();
  return Skeleton::Create(*std::move(def));
}

// Our FK against DART's on a random pose (joints welded in DART at rest),
// and the pose's round trip through DART's coordinates.
void CheckModel(const Skeleton& skeleton, DartSolver& dart, double height,
                Rng& rng) {
  PoseParams params = RandomParams(skeleton, height, rng);
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    if (dart.welded(j)) params.joint[j].setZero();
  }
  const Pose pose = ParamsToPose(skeleton, params);
  std::vector<Transform> ours;
  BenchFk(skeleton, pose, &ours);
  dart.SetPose(pose);
  double dp = 0.0, da = 0.0;
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    const Eigen::Isometry3d tf = dart.WorldOf(j);
    dp = std::max(dp, (tf.translation() - ours[j].translation).norm());
    da = std::max(da, AngleOf(Eigen::Quaterniond(tf.linear()),
                              ours[j].rotation));
  }
  const Pose back = dart.GetPose();
  double round_trip = 0.0;
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    round_trip = std::max(
        round_trip, AngleOf(back.local[j].rotation, pose.local[j].rotation));
    round_trip = std::max(
        round_trip,
        (back.local[j].translation - pose.local[j].translation).norm());
  }
  std::printf(
      "model check (DART's FK vs ours, random pose): max |dp| %.1e, max "
      "angle %.1e rad; pose round trip %.1e\n",
      dp, da, round_trip);
  if (dp > 1e-9 * std::max(1.0, height) || da > 1e-9 || round_trip > 1e-9) {
    std::fprintf(stderr, "the DART model does not match the skeleton\n");
    std::exit(1);
  }
}

void RunRig(const RigSpec& spec, const Config& config) {
  const std::string path = config.source_dir + "/" + spec.file;
  if (!std::ifstream(path).good()) {
    std::printf("\n== %s: %s not found, skipped\n", spec.name, spec.file);
    if (!spec.optional) std::exit(1);
    return;
  }
  absl::StatusOr<Skeleton> loaded = LoadRig(path);
  if (!loaded.ok() && spec.optional) {
    std::printf("\n== %s: %s does not load, skipped: %s\n", spec.name,
                spec.file, loaded.status().ToString().c_str());
    return;
  }
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(),
                 loaded.status().ToString().c_str());
    std::exit(1);
  }
  const Skeleton& skeleton = *loaded;
  int roots = 0;
  for (const Joint& j : skeleton.joints()) roots += j.parent < 0;
  if (roots != 1) {
    std::fprintf(stderr, "%s: %d roots; the bench wants one\n", spec.name,
                 roots);
    std::exit(1);
  }
  const double height = BodySize(skeleton);
  const double tolerance = kToleranceOfHeight * height;

  // Effectors; the look-at axis is the rig's forward direction at rest in
  // the head's own frame.
  auto find = [&](const char* name) {
    const int j = skeleton.FindJoint(name);
    if (j < 0) {
      std::fprintf(stderr, "%s: no joint '%s'\n", spec.name, name);
      std::exit(1);
    }
    return j;
  };
  const auto& rest = skeleton.rest_globals();
  const Eigen::Vector3d left =
      rest[find(spec.left_hip)].translation - rest[find(spec.right_hip)].translation;
  const Eigen::Vector3d up = rest[find(spec.head)].translation - rest[0].translation;
  const Eigen::Vector3d forward = left.cross(up).normalized();
  std::vector<Effector> effectors;
  std::string described;
  for (const EffectorSpec& e : spec.effectors) {
    if (e.kind == Kind::kLookAt && !config.look_at) continue;
    Effector eff{find(e.joint), e.kind, e.priority};
    if (e.kind == Kind::kLookAt) {
      eff.aim_axis =
          (rest[eff.joint].rotation.conjugate() * forward).normalized();
    }
    effectors.push_back(eff);
    static const char* kKinds[] = {"position", "pose", "look-at"};
    described += std::string(described.empty() ? "" : ", ") + e.joint + " " +
                 kKinds[static_cast<int>(e.kind)] + " p" +
                 std::to_string(e.priority);
  }

  std::string stiff;
  for (const Joint& j : skeleton.joints()) {
    if (j.stiffness > 0.0) {
      stiff += absl::StrCat(stiff.empty() ? "" : ", ", j.name, " ",
                            j.stiffness);
    }
  }
  if (!stiff.empty()) described += "\n   stiffness: " + stiff;

  DartSolver dart(skeleton, effectors, tolerance, config);
  OurSolver ours(skeleton, effectors, tolerance, config.our_iterations);

  std::printf("\n== %s (%s): %d joints, DART %d DOFs; height %.3f, tolerance "
              "%.2e model units and %.0e rad\n   effectors: %s\n",
              spec.name, spec.file, skeleton.num_joints(), dart.num_dofs(),
              height, tolerance, kAngularTolerance, described.c_str());
  Rng rng(config.seed);
  CheckModel(skeleton, dart, height, rng);

  // Target sets: FK of random poses within the limits.
  std::vector<TargetSet> sets;
  for (int i = 0; i < config.sets; ++i) {
    sets.push_back(TargetsOf(
        skeleton, ParamsToPose(skeleton, RandomParams(skeleton, height, rng)),
        effectors, height));
  }
  // The warm-started sequence: key poses, interpolated.
  std::vector<TargetSet> frames;
  {
    const int keys = config.frames / kFramesPerKey + 2;
    std::vector<PoseParams> key;
    for (int k = 0; k < keys; ++k) {
      key.push_back(RandomParams(skeleton, height, rng));
    }
    for (int f = 0; f < config.frames; ++f) {
      const int k = f / kFramesPerKey;
      const double t = static_cast<double>(f % kFramesPerKey) / kFramesPerKey;
      frames.push_back(TargetsOf(
          skeleton, ParamsToPose(skeleton, Lerp(key[k], key[k + 1], t)),
          effectors, height));
    }
  }

  const Pose rest_pose = RestPose(skeleton);
  std::printf("%-16s %-5s %-9s %7s %10s %10s %10s %10s %10s %10s %8s %7s\n",
              "rig", "start", "solver", "solved", "pos mean", "pos max",
              "ang mean", "ang max", "us mean", "us p50", "iters", "in lim");
  {
    Tally t;
    for (const TargetSet& s : sets) {
      Pose pose = rest_pose;
      t.Add(effectors, ours.Solve(s, &pose), tolerance);
    }
    t.Print(spec.name, "rest", "reach");
  }
  {
    Tally t;
    for (const TargetSet& s : sets) {
      dart.SetPose(rest_pose);
      t.Add(effectors, dart.Solve(s), tolerance);
    }
    t.Print(spec.name, "rest", "dart");
  }
  {
    Tally t;
    Pose pose = rest_pose;
    for (const TargetSet& s : frames) {
      t.Add(effectors, ours.Solve(s, &pose), tolerance);
    }
    t.Print(spec.name, "warm", "reach");
  }
  {
    Tally t;
    dart.SetPose(rest_pose);
    for (const TargetSet& s : frames) t.Add(effectors, dart.Solve(s), tolerance);
    t.Print(spec.name, "warm", "dart");
  }
}

int Main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; i += 2) {
    const char* flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) flag = "--help";
    if (!std::strcmp(flag, "--sets")) {
      config.sets = std::atoi(value);
    } else if (!std::strcmp(flag, "--frames")) {
      config.frames = std::atoi(value);
    } else if (!std::strcmp(flag, "--seed")) {
      config.seed = static_cast<unsigned>(std::atoi(value));
    } else if (!std::strcmp(flag, "--rigs")) {
      config.rigs = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (!std::strcmp(flag, "--our_iterations")) {
      config.our_iterations = std::atoi(value);
    } else if (!std::strcmp(flag, "--dart_iterations")) {
      config.dart_iterations = std::atoi(value);
    } else if (!std::strcmp(flag, "--dart_root_weight")) {
      config.dart_root_weight = std::atof(value);
    } else if (!std::strcmp(flag, "--dart_step")) {
      config.dart_step = std::atof(value);
    } else if (!std::strcmp(flag, "--dart_damping")) {
      config.dart_damping = std::atof(value);
    } else if (!std::strcmp(flag, "--dart_one_level")) {
      config.dart_one_level = std::atoi(value) != 0;
    } else if (!std::strcmp(flag, "--look_at")) {
      config.look_at = std::atoi(value) != 0;
    } else if (!std::strcmp(flag, "--dart_weld_unused")) {
      config.dart_weld_unused = std::atoi(value) != 0;
    } else if (!std::strcmp(flag, "--source_dir")) {
      config.source_dir = value;
    } else {
      std::fprintf(
          stderr,
          "usage: full_body_peer_bench [--sets N] [--frames N] [--seed S]\n"
          "         [--rigs humanoid,humanoid_limited,bcn] [--look_at 0|1]\n"
          "         [--our_iterations N] [--dart_iterations N] "
          "[--dart_step S]\n"
          "         [--dart_damping D] [--dart_root_weight W] "
          "[--dart_one_level 0|1]\n"
          "         [--dart_weld_unused 0|1] [--source_dir DIR]\n");
      return 2;
    }
  }
  std::printf(
      "full-body IK: reach SOLVER_FULL_BODY (reach::Solve, %s iterations) "
      "beside DART %s WholeBodyIK (GradientDescentSolver step %g, JacobianDLS "
      "damping %g, up to %d iterations, root weight %g%s)\n"
      "%d target sets from rest, %d warm-started frames, seed %u; pos: "
      "model units, ang: rad, us: microseconds per solve\n",
      config.our_iterations > 0 ? std::to_string(config.our_iterations).c_str()
                                : "default",
      DART_VERSION, config.dart_step, config.dart_damping,
      config.dart_iterations, config.dart_root_weight,
      config.dart_one_level ? ", one level" : "",
      config.sets, config.frames, config.seed);
  const std::vector<RigSpec> all = AllRigs();
  for (const std::string& name : config.rigs) {
    auto it = std::find_if(all.begin(), all.end(), [&](const RigSpec& r) {
      return name == r.name;
    });
    if (it == all.end()) {
      std::fprintf(stderr, "unknown rig '%s'\n", name.c_str());
      return 2;
    }
    RunRig(*it, config);
  }
  return 0;
}

}  // namespace
}  // namespace reach

int main(int argc, char** argv) { return reach::Main(argc, argv); }
