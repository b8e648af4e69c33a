#include "solvers/skeleton.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "solvers/full_body/body_model.h"

namespace reach {
namespace {

constexpr double kTwoPi = 2.0 * M_PI;

std::string JointField(int i, absl::string_view field) {
  return absl::StrCat("joints[", i, "].", field);
}

// `unlimited` is the one infinity that means "no bound" for this field
// (-inf for a minimum, +inf for a maximum); the other is an error.
absl::Status ValidateAngle(double value, absl::string_view field, double lo,
                           double hi, double unlimited) {
  if (std::isnan(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is NaN"));
  }
  if (value == unlimited) return absl::OkStatus();
  if (value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " = ", value, " is outside [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateJointLimits(int i, const JointDef& def) {
  const bool hinge = def.type == JointType::kHinge;
  const double range = hinge ? kTwoPi : M_PI;
  const std::string min_field = JointField(i, "min_angle_rad");
  const std::string max_field = JointField(i, "max_angle_rad");
  if (auto s =
          ValidateAngle(def.min_angle_rad, min_field, -range, range, -kInf);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateAngle(def.max_angle_rad, max_field, -range, range, kInf);
      !s.ok()) {
    return s;
  }
  if (def.min_angle_rad > def.max_angle_rad) {
    return absl::InvalidArgumentError(
        absl::StrCat(min_field, " = ", def.min_angle_rad, " exceeds ",
                     max_field, " = ", def.max_angle_rad));
  }
  return ValidateAngle(def.max_swing_rad, JointField(i, "max_swing_rad"), 0.0,
                       M_PI, kInf);
}

}  // namespace

std::string FieldName::ToString() const {
  if (field.empty()) return absl::StrCat(list, "[", index, "]");
  return absl::StrCat(list, "[", index, "].", field);
}

absl::Status NotFiniteError(const Eigen::Vector3d& v, const FieldName& field) {
  return absl::InvalidArgumentError(absl::StrCat(field.ToString(), " = (", v.x(),
                                                 ", ", v.y(), ", ", v.z(),
                                                 ") is not finite"));
}

absl::Status UnitQuaternionError(const Eigen::Quaterniond& q,
                                 const FieldName& field) {
  const double norm_sq = q.squaredNorm();
  if (!std::isfinite(norm_sq)) {
    return absl::InvalidArgumentError(
        absl::StrCat(field.ToString(), " has a non-finite component"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field.ToString(), " has length ", std::sqrt(norm_sq),
                   "; a rotation must be a unit quaternion"));
}

absl::Status RangeError(double value, const FieldName& field, double lo,
                        double hi, bool hi_open) {
  return absl::InvalidArgumentError(
      absl::StrCat(field.ToString(), " = ", value, " is outside [", lo, ", ",
                   hi, hi_open ? ")" : "]"));
}

absl::StatusOr<Skeleton> Skeleton::Create(SkeletonDef def,
                                          const SkeletonLimits& limits) {
  const int n = static_cast<int>(def.joints.size());
  if (n == 0) {
    return absl::InvalidArgumentError("joints is empty; a skeleton needs one");
  }
  if (n > limits.max_joints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "joints has ", n, " entries; the limit is ", limits.max_joints));
  }
  if (static_cast<int>(def.chains.size()) > limits.max_chains) {
    return absl::InvalidArgumentError(
        absl::StrCat("chains has ", def.chains.size(),
                     " entries; the limit is ", limits.max_chains));
  }

  Skeleton skeleton;
  skeleton.joints_.resize(n);
  skeleton.joint_index_.reserve(n);
  for (int i = 0; i < n; ++i) {
    JointDef& d = def.joints[i];
    Joint& j = skeleton.joints_[i];
    if (d.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(JointField(i, "name"), " is empty"));
    }
    if (!skeleton.joint_index_.emplace(d.name, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          JointField(i, "name"), " \"", d.name, "\" repeats joints[",
          skeleton.joint_index_[d.name], "]"));
    }
    if (d.parent == i) {
      return absl::InvalidArgumentError(
          absl::StrCat(JointField(i, "parent"), " = ", i,
                       " makes the joint its own parent"));
    }
    if (d.parent < -1 || d.parent >= i) {
      return absl::InvalidArgumentError(absl::StrCat(
          JointField(i, "parent"), " = ", d.parent,
          " is invalid: a parent is -1 (root) or an earlier joint (0..", i - 1,
          ")"));
    }
    if (auto s = ValidateFinite(d.rest.translation,
                                {"joints", i, "rest.translation"});
        !s.ok()) {
      return s;
    }
    if (auto s = ValidateUnitQuaternion(d.rest.rotation,
                                        {"joints", i, "rest.rotation"});
        !s.ok()) {
      return s;
    }
    j.rest.rotation = d.rest.rotation;
    NormalizeRotation(&j.rest.rotation);
    if (!std::isfinite(d.rest.scale) || d.rest.scale <= 0.0) {
      return absl::InvalidArgumentError(
          absl::StrCat(JointField(i, "rest.scale"), " = ", d.rest.scale,
                       " must be finite and > 0"));
    }
    if (auto s = ValidateFinite(d.axis, {"joints", i, "axis"}); !s.ok()) {
      return s;
    }
    if (d.type == JointType::kHinge && d.axis.norm() < 1e-9) {
      return absl::InvalidArgumentError(absl::StrCat(
          JointField(i, "axis"), " is zero; a hinge needs a rotation axis"));
    }
    if (auto s = ValidateJointLimits(i, d); !s.ok()) return s;
    if (auto s = ValidateRange(d.stiffness, {"joints", i, "stiffness"}, 0.0,
                               1.0);
        !s.ok()) {
      return s;
    }
    j.name = std::move(d.name);
    j.parent = d.parent;
    j.rest.translation = d.rest.translation;
    j.rest.scale = d.rest.scale;
    j.type = d.type;
    j.min_angle_rad = d.min_angle_rad;
    j.max_angle_rad = d.max_angle_rad;
    j.max_swing_rad = d.type == JointType::kBall ? d.max_swing_rad : kInf;
    j.stiffness = d.stiffness;
    if (d.axis.norm() >= 1e-9) j.axis = d.axis.normalized();
  }
  // The farthest forward kinematics can put each joint, and the scale its
  // children's translations are multiplied by.
  {
    std::vector<double> extent(n), scale(n);
    for (int i = 0; i < n; ++i) {
      const Joint& j = skeleton.joints_[i];
      const double parent_extent = j.parent < 0 ? 0.0 : extent[j.parent];
      const double parent_scale = j.parent < 0 ? 1.0 : scale[j.parent];
      extent[i] = parent_extent + parent_scale * j.rest.translation.norm();
      scale[i] = parent_scale * j.rest.scale;
      if (!(extent[i] <= kMaxSkeletonExtent) ||
          !(scale[i] * kMaxSkeletonExtent <= 1e300)) {
        return absl::InvalidArgumentError(absl::StrCat(
            JointField(i, "rest"),
            ": its rest translations and scales would put the joint up to ",
            extent[i], " units from the root (scale ", scale[i],
            "); the limit is ", kMaxSkeletonExtent));
      }
    }
  }
  // Ball twist axes left at zero point at the first child with a non-zero
  // rest translation (the bone the joint drives), +X for a leaf.
  std::vector<bool> axis_given(n);
  for (int i = 0; i < n; ++i) axis_given[i] = def.joints[i].axis.norm() >= 1e-9;
  for (int i = n - 1; i >= 0; --i) {
    const int p = skeleton.joints_[i].parent;
    if (p < 0 || axis_given[p] ||
        skeleton.joints_[p].type != JointType::kBall) {
      continue;
    }
    const Eigen::Vector3d& t = skeleton.joints_[i].rest.translation;
    if (t.norm() > 1e-12) skeleton.joints_[p].axis = t.normalized();
  }

  skeleton.chains_.resize(def.chains.size());
  for (int c = 0; c < static_cast<int>(def.chains.size()); ++c) {
    ChainDef& d = def.chains[c];
    const std::string field = absl::StrCat("chains[", c, "]");
    if (d.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name is empty"));
    }
    if (!skeleton.chain_index_.emplace(d.name, c).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name \"", d.name, "\" repeats chains[",
                       skeleton.chain_index_[d.name], "]"));
    }
    const int root = skeleton.FindJoint(d.root);
    if (root < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".root \"", d.root, "\" is not a joint of this skeleton"));
    }
    const int tip = skeleton.FindJoint(d.tip);
    if (tip < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".tip \"", d.tip, "\" is not a joint of this skeleton"));
    }
    Chain& chain = skeleton.chains_[c];
    if (!skeleton.PathBetween(root, tip, &chain.joints)) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".root \"", d.root,
                       "\" is not an ancestor of tip \"", d.tip, "\""));
    }
    const int max_chain = std::min(limits.max_chain_joints, kMaxChainJoints);
    if (static_cast<int>(chain.joints.size()) > max_chain) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " \"", d.name, "\" has ", chain.joints.size(),
                       " joints; the limit is ", max_chain));
    }
    chain.name = std::move(d.name);
  }
  skeleton.rest_locals_.resize(n);
  skeleton.rest_globals_.resize(n);
  for (int i = 0; i < n; ++i) {
    Transform& local = skeleton.rest_locals_[i];
    local = skeleton.joints_[i].rest;
    NormalizeRotation(&local.rotation);
    const int parent = skeleton.joints_[i].parent;
    skeleton.rest_globals_[i] =
        parent < 0 ? local : skeleton.rest_globals_[parent] * local;
  }
  skeleton.body_model_ =
      std::make_shared<const BodyModel>(BuildBodyModel(skeleton));
  return skeleton;
}

int Skeleton::FindJoint(absl::string_view name) const {
  auto it = joint_index_.find(name);
  return it == joint_index_.end() ? -1 : it->second;
}

int Skeleton::FindChain(absl::string_view name) const {
  auto it = chain_index_.find(name);
  return it == chain_index_.end() ? -1 : it->second;
}

bool Skeleton::PathBetween(int root, int tip, std::vector<int>* out) const {
  out->clear();
  if (root < 0 || tip < 0 || root >= num_joints() || tip >= num_joints() ||
      root == tip) {
    return false;
  }
  for (int j = tip; j >= 0; j = joints_[j].parent) {
    out->push_back(j);
    if (j == root) {
      std::reverse(out->begin(), out->end());
      return true;
    }
    if (j < root) break;  // Parents have smaller indices: root was passed.
  }
  out->clear();
  return false;
}

}  // namespace reach
