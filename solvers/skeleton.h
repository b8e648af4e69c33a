// The skeleton model: joints in parent-before-child order with rest
// transforms, joint types and limits, and named chains.
//
// A Skeleton is built once from a SkeletonDef by Skeleton::Create, which
// validates everything and precomputes what solvers need (chain joint lists,
// twist axes). It is immutable afterwards and safe to share between threads.
#ifndef REACH_SOLVERS_SKELETON_H_
#define REACH_SOLVERS_SKELETON_H_

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "solvers/transform.h"

namespace reach {

struct BodyModel;  // solvers/full_body/body_model.h

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Longest chain (joints from root to tip, both included) a goal may name. It
// bounds the fixed-size scratch matrices of the Jacobian solvers.
inline constexpr int kMaxChainJoints = 64;

// How far from the root's origin forward kinematics may ever put a joint,
// in skeleton units, whatever the rotations: the sum of rest translation
// lengths along the path, each times its parents' accumulated scale.
// Skeleton::Create refuses more, so squared distances (solvers square
// lengths throughout) stay far from overflow.
inline constexpr double kMaxSkeletonExtent = 1e15;

enum class JointType {
  kBall,   // 3 rotational DOF; optional swing cone and twist range.
  kHinge,  // 1 DOF about `axis`; optional angle range.
  kFixed,  // Never rotates away from its rest rotation.
};

// One joint as the caller describes it.
//
// Angles are measured from the rest rotation: a joint whose local rotation
// equals `rest.rotation` is at angle 0, swing 0, twist 0.
struct JointDef {
  std::string name;  // Non-empty, unique within the skeleton.
  // Index of the parent joint, or -1 for a root. Must be smaller than this
  // joint's own index (parents come before children), which also rules out
  // cycles.
  int parent = -1;
  // Rest local transform, relative to the parent joint's frame (model space
  // for a root). rotation: unit quaternion; scale: finite, > 0.
  Transform rest;
  JointType type = JointType::kBall;
  // Unit axis in the joint's own frame (the frame after `rest.rotation`).
  // Hinge: the rotation axis; required (non-zero), normalised on Create.
  // Ball: the twist axis of the limits; zero (the default) means "towards
  // the first child with a non-zero rest translation", +X when there is
  // none. Ignored for fixed.
  Eigen::Vector3d axis = Eigen::Vector3d::Zero();
  // Hinge: angle range in radians, within [-2pi, 2pi].
  // Ball: twist range about `axis` in radians, within [-pi, pi].
  // -inf / +inf (the defaults) mean unlimited; min must not exceed max.
  double min_angle_rad = -kInf;
  double max_angle_rad = kInf;
  // Ball only: half-angle in radians of the cone the joint's twist axis may
  // swing within, in [0, pi]; +inf (the default) means unlimited.
  double max_swing_rad = kInf;
  // How much the full-body solver (SOLVER_FULL_BODY) resists turning this
  // joint, in [0, 1]: 0 (the default) turns freely, 1 never turns; between,
  // the joint's steps are weighted by 1 - stiffness (a stiff joint turns
  // only as much as the goals need). For the solver's root it weights the
  // root's rotation; its translation has its own weight
  // (FullBodyOptions::root_translation_stiffness). Chain solvers ignore it.
  double stiffness = 0.0;
};

// A named chain: the path of joints from `root` down to `tip`. `root` must be
// a proper ancestor of `tip`.
struct ChainDef {
  std::string name;  // Non-empty, unique within the skeleton.
  std::string root;  // Joint name.
  std::string tip;   // Joint name: the end effector.
};

struct SkeletonDef {
  std::vector<JointDef> joints;  // Parent-before-child order.
  std::vector<ChainDef> chains;
};

// Size limits enforced by Skeleton::Create.
struct SkeletonLimits {
  int max_joints = 1024;
  int max_chains = 256;
  int max_chain_joints = kMaxChainJoints;  // At most kMaxChainJoints.
};

// A validated joint. Same fields as JointDef with defaults resolved.
struct Joint {
  std::string name;
  int parent = -1;
  Transform rest;
  JointType type = JointType::kBall;
  Eigen::Vector3d axis = Eigen::Vector3d::UnitX();  // Unit.
  double min_angle_rad = -kInf;
  double max_angle_rad = kInf;
  double max_swing_rad = kInf;
  double stiffness = 0.0;  // In [0, 1].

  // True when the joint constrains rotation beyond its type (a fixed joint,
  // a hinge, or a ball with a finite swing or twist bound).
  bool IsConstrained() const {
    return type != JointType::kBall || IsLimited();
  }
  // True when the joint has a finite angle, twist or swing bound.
  bool IsLimited() const {
    return std::isfinite(min_angle_rad) || std::isfinite(max_angle_rad) ||
           std::isfinite(max_swing_rad);
  }
};

struct Chain {
  std::string name;
  std::vector<int>
      joints;  // Root first, tip last; each the parent of the next.
};

class Skeleton {
 public:
  // Validates `def` and builds the skeleton. Errors are InvalidArgument and
  // name the offending field with its index, e.g. "joints[3].parent".
  static absl::StatusOr<Skeleton> Create(SkeletonDef def,
                                         const SkeletonLimits& limits = {});

  int num_joints() const { return static_cast<int>(joints_.size()); }
  const Joint& joint(int i) const { return joints_[i]; }
  absl::Span<const Joint> joints() const { return joints_; }

  int num_chains() const { return static_cast<int>(chains_.size()); }
  const Chain& chain(int i) const { return chains_[i]; }

  // Index of the joint / chain with that name, or -1.
  int FindJoint(absl::string_view name) const;
  int FindChain(absl::string_view name) const;

  // Writes the path root..tip into `out` (cleared first). Returns false when
  // `root` is not a proper ancestor of `tip`. `out` keeps its capacity, so a
  // reserved vector is reused without allocating.
  bool PathBetween(int root, int tip, std::vector<int>* out) const;

  // The rest pose's local transforms with their rotations normalised (as
  // NormalizePose leaves them), and its model-space transforms, computed
  // once: Solve starts from these when the start pose is the rest pose.
  absl::Span<const Transform> rest_locals() const { return rest_locals_; }
  absl::Span<const Transform> rest_globals() const { return rest_globals_; }

  // What the skeleton says about how its body moves, when it is a
  // humanoid (solvers/full_body/body_model.h), derived once by Create.
  const BodyModel& body_model() const { return *body_model_; }

 private:
  std::vector<Joint> joints_;
  std::vector<Transform> rest_locals_;
  std::vector<Transform> rest_globals_;
  std::vector<Chain> chains_;
  absl::flat_hash_map<std::string, int> joint_index_;
  absl::flat_hash_map<std::string, int> chain_index_;
  std::shared_ptr<const BodyModel> body_model_;
};

// Names a field in an error message, e.g. "goals[2].target". Formatted only
// when an error is reported, so validating a valid request allocates
// nothing.
struct FieldName {
  absl::string_view list;  // "joints", "goals", "pose.local".
  int index;
  absl::string_view field;  // "rest.rotation", "options.tolerance"; may be
                            // empty ("pose.rotations[3]").
  std::string ToString() const;
};

// How far from unit length a quaternion may be (it is then normalised).
inline constexpr double kUnitTolerance = 1e-5;

// The errors of the checks below, built out of line: the checks are inline
// so validating a valid request costs a few comparisons per field.
absl::Status UnitQuaternionError(const Eigen::Quaterniond& q,
                                 const FieldName& field);
absl::Status NotFiniteError(const Eigen::Vector3d& v, const FieldName& field);
absl::Status RangeError(double value, const FieldName& field, double lo,
                        double hi, bool hi_open);

// Whether a quaternion whose squared norm is `norm_sq` is within
// kUnitTolerance of unit length: |norm - 1| <= 1e-5, compared on the square
// to skip the square root (NaN fails the comparisons too).
inline bool IsNearUnit(double norm_sq) {
  constexpr double kLo = (1.0 - kUnitTolerance) * (1.0 - kUnitTolerance);
  constexpr double kHi = (1.0 + kUnitTolerance) * (1.0 + kUnitTolerance);
  return (norm_sq >= kLo) & (norm_sq <= kHi);
}

// Checks that `q` is finite and within 1e-5 of unit length.
inline absl::Status ValidateUnitQuaternion(const Eigen::Quaterniond& q,
                                           const FieldName& field) {
  if (IsNearUnit(q.squaredNorm())) return absl::OkStatus();
  return UnitQuaternionError(q, field);
}

// Rescales a quaternion that passed ValidateUnitQuaternion to unit length
// (a no-op, without a square root, when it already is to 1e-15).
inline void NormalizeRotation(Eigen::Quaterniond* q) {
  if (std::abs(q->squaredNorm() - 1.0) > 1e-15) q->normalize();
}

// Checks that every component of `v` is finite.
inline absl::Status ValidateFinite(const Eigen::Vector3d& v,
                                   const FieldName& field) {
  if (v.allFinite()) return absl::OkStatus();
  return NotFiniteError(v, field);
}

// Checks lo <= value <= hi (value < hi when hi_open) and that value is
// finite.
inline absl::Status ValidateRange(double value, const FieldName& field,
                                  double lo, double hi, bool hi_open = false) {
  if (value >= lo && (hi_open ? value < hi : value <= hi) &&
      std::isfinite(value)) {
    return absl::OkStatus();
  }
  return RangeError(value, field, lo, hi, hi_open);
}

}  // namespace reach

#endif  // REACH_SOLVERS_SKELETON_H_
