#include "wire/convert.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "solvers/limits.h"

namespace reach {
namespace {

// Unset limits on the wire mean unlimited: -inf / +inf, never a finite
// sentinel (KDL's numeric_limits::min() mistake).
double OrInf(bool has, double value, double inf) { return has ? value : inf; }

JointType FromProto(v1::JointType type) {
  switch (type) {
    case v1::JOINT_TYPE_HINGE:
      return JointType::kHinge;
    case v1::JOINT_TYPE_FIXED:
      return JointType::kFixed;
    case v1::JOINT_TYPE_UNSPECIFIED:
    case v1::JOINT_TYPE_BALL:
    case v1::JointType_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::JointType_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return JointType::kBall;
}

Transform FromProto(const v1::Transform& t) {
  Transform out;
  out.translation = reach::FromProto(t.translation());
  if (t.has_rotation()) out.rotation = reach::FromProto(t.rotation());
  if (t.scale() != 0.0) out.scale = t.scale();
  return out;
}

// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF) at the start of `s`, or 0.
size_t Utf8SequenceLength(absl::string_view s) {
  const auto byte = [&s](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // Range of the second byte.
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;  // Overlong.
    if (b0 == 0xED) hi = 0x9F;  // Surrogates.
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;  // Overlong.
    if (b0 == 0xF4) hi = 0x8F;  // Above U+10FFFF.
  } else {
    return 0;
  }
  if (s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (size_t i = 2; i < n; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return n;
}

}  // namespace

std::string ClientString(absl::string_view s, size_t max_bytes) {
  constexpr absl::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD.
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 32);
  size_t i = 0;
  while (i < s.size()) {
    size_t n = Utf8SequenceLength(s.substr(i));
    const bool control =
        n == 1 && (static_cast<unsigned char>(s[i]) < 0x20 || s[i] == 0x7F);
    const size_t written = n == 0 || control ? kReplacement.size() : n;
    if (out.size() + written > max_bytes) break;
    if (n == 0 || control) {
      out.append(kReplacement.data(), kReplacement.size());
      n = 1;
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  if (i < s.size()) {
    absl::StrAppend(&out, "\xE2\x80\xA6(", s.size(), " bytes)");  // "…".
  }
  return out;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl::StatusCode and grpc::StatusCode share the google.rpc.Code values.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void ToProto(const absl::Status& status, v1::Error* error) {
  error->set_code(static_cast<int>(status.code()));
  error->set_message(std::string(status.message()));
}

Eigen::Vector3d FromProto(const v1::Vec3& v) {
  return Eigen::Vector3d(v.x(), v.y(), v.z());
}

Eigen::Quaterniond FromProto(const v1::Quat& q) {
  return Eigen::Quaterniond(q.w(), q.x(), q.y(), q.z());
}

void ToProto(const Eigen::Vector3d& v, v1::Vec3* out) {
  out->set_x(v.x());
  out->set_y(v.y());
  out->set_z(v.z());
}

void ToProto(const Eigen::Quaterniond& q, v1::Quat* out) {
  out->set_w(q.w());
  out->set_x(q.x());
  out->set_y(q.y());
  out->set_z(q.z());
}

void ToProto(const Transform& t, v1::Transform* out) {
  ToProto(t.translation, out->mutable_translation());
  ToProto(t.rotation, out->mutable_rotation());
  out->set_scale(t.scale);
}

absl::Status FromProto(const v1::Skeleton& skeleton, SkeletonDef* def) {
  def->joints.clear();
  def->chains.clear();
  def->joints.reserve(skeleton.joints_size());
  for (int i = 0; i < skeleton.joints_size(); ++i) {
    const v1::Joint& in = skeleton.joints(i);
    if (!v1::JointType_IsValid(in.type())) {
      return absl::InvalidArgumentError(
          absl::StrCat("joints[", i, "].type: unknown joint type ", in.type()));
    }
    JointDef& out = def->joints.emplace_back();
    out.name = in.name();
    out.parent = in.parent();
    out.rest = FromProto(in.rest());
    out.type = FromProto(in.type());
    out.axis = FromProto(in.axis());
    out.min_angle_rad =
        OrInf(in.has_min_angle_rad(), in.min_angle_rad(), -kInf);
    out.max_angle_rad = OrInf(in.has_max_angle_rad(), in.max_angle_rad(), kInf);
    out.max_swing_rad = OrInf(in.has_max_swing_rad(), in.max_swing_rad(), kInf);
    out.stiffness = in.stiffness();  // Unset: 0, turns freely.
  }
  def->chains.reserve(skeleton.chains_size());
  for (const v1::Chain& in : skeleton.chains()) {
    def->chains.push_back(ChainDef{in.name(), in.root(), in.tip()});
  }
  return absl::OkStatus();
}

void ToProto(const SkeletonDef& def, v1::Skeleton* skeleton) {
  skeleton->clear_joints();
  skeleton->clear_chains();
  for (const JointDef& in : def.joints) {
    v1::Joint* out = skeleton->add_joints();
    out->set_name(in.name);
    out->set_parent(in.parent);
    ToProto(in.rest, out->mutable_rest());
    switch (in.type) {
      case JointType::kBall:
        out->set_type(v1::JOINT_TYPE_BALL);
        break;
      case JointType::kHinge:
        out->set_type(v1::JOINT_TYPE_HINGE);
        break;
      case JointType::kFixed:
        out->set_type(v1::JOINT_TYPE_FIXED);
        break;
    }
    if (!in.axis.isZero()) ToProto(in.axis, out->mutable_axis());
    if (std::isfinite(in.min_angle_rad))
      out->set_min_angle_rad(in.min_angle_rad);
    if (std::isfinite(in.max_angle_rad))
      out->set_max_angle_rad(in.max_angle_rad);
    if (std::isfinite(in.max_swing_rad))
      out->set_max_swing_rad(in.max_swing_rad);
    // Left unset at its default, so a skeleton without stiffness keeps the
    // bytes (and the content-hash id) it had before the field existed.
    if (in.stiffness != 0.0) out->set_stiffness(in.stiffness);
  }
  for (const ChainDef& in : def.chains) {
    v1::Chain* out = skeleton->add_chains();
    out->set_name(in.name);
    out->set_root(in.root);
    out->set_tip(in.tip);
  }
}

std::string ChainList(const Skeleton& skeleton, size_t max_bytes) {
  const int n = skeleton.num_chains();
  if (n == 0) return "(none)";
  std::string out;
  int listed = 0;
  for (; listed < n; ++listed) {
    // Names come from whoever registered the skeleton: sanitised, and each
    // cut short enough that a few always fit.
    const std::string name = ClientString(skeleton.chain(listed).name, 64);
    const size_t more = listed + 1 < n ? sizeof(", …(9999 more)") : 0;
    if (listed > 0 && out.size() + 2 + name.size() + more > max_bytes) break;
    if (listed > 0) out += ", ";
    out += name;
  }
  if (listed < n) {
    absl::StrAppend(&out, ", \xE2\x80\xA6(", n - listed, " more)");  // "…".
  }
  return out;
}

absl::Status NoChainError(const Skeleton& skeleton, absl::string_view chain,
                          int goal) {
  return absl::NotFoundError(absl::StrCat(
      FieldName{"goals", goal, "chain"}.ToString(), ": no chain \"",
      ClientString(chain), "\"; chains: ", ChainList(skeleton)));
}

absl::Status FromProto(
    const Skeleton& skeleton,
    const google::protobuf::RepeatedPtrField<v1::Goal>& goals,
    std::vector<Goal>* out) {
  out->resize(goals.size());
  for (int i = 0; i < goals.size(); ++i) {
    const v1::Goal& in = goals[i];
    Goal& goal = (*out)[i];
    goal = Goal();
    // A full-body goal names an effector (the chain's tip, or tip_joint);
    // its root_joint is optional. Any other goal names a chain.
    const bool full_body = in.solver() == v1::SOLVER_FULL_BODY;
    if (!in.chain().empty()) {
      goal.chain = skeleton.FindChain(in.chain());
      if (goal.chain < 0) return NoChainError(skeleton, in.chain(), i);
    } else if (full_body && in.tip_joint().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          FieldName{"goals", i, "tip_joint"}.ToString(),
          ": required: a SOLVER_FULL_BODY goal names its effector joint "
          "(or a chain, whose tip is the effector)"));
    } else if (!full_body &&
               (in.root_joint().empty() || in.tip_joint().empty())) {
      return absl::InvalidArgumentError(
          absl::StrCat(FieldName{"goals", i, "chain"}.ToString(),
                       ": required (or both root_joint and tip_joint)"));
    } else {
      if (!in.root_joint().empty()) {
        goal.root_joint = skeleton.FindJoint(in.root_joint());
        if (goal.root_joint < 0) {
          return absl::NotFoundError(absl::StrCat(
              FieldName{"goals", i, "root_joint"}.ToString(),
              ": no joint named '", ClientString(in.root_joint()), "'"));
        }
      }
      goal.tip_joint = skeleton.FindJoint(in.tip_joint());
      if (goal.tip_joint < 0) {
        return absl::NotFoundError(absl::StrCat(
            FieldName{"goals", i, "tip_joint"}.ToString(), ": no joint named '",
            ClientString(in.tip_joint()), "'"));
      }
    }
    if (!v1::Solver_IsValid(in.solver())) {
      return absl::InvalidArgumentError(
          absl::StrCat(FieldName{"goals", i, "solver"}.ToString(),
                       ": unknown solver ", in.solver()));
    }
    goal.solver = static_cast<SolverKind>(in.solver());
    if (!in.has_target()) {
      return absl::InvalidArgumentError(absl::StrCat(
          FieldName{"goals", i, "target"}.ToString(), ": required"));
    }
    goal.target = FromProto(in.target());
    if (in.has_target_orientation()) {
      goal.target_orientation = FromProto(in.target_orientation());
    }
    if (in.has_pole()) goal.pole = FromProto(in.pole());
    if (in.has_weight()) goal.weight = in.weight();
    const v1::SolveOptions& options = in.options();
    goal.options.max_iterations = options.max_iterations();
    goal.options.tolerance = options.tolerance();
    goal.options.orientation_tolerance_rad =
        options.orientation_tolerance_rad();
    goal.options.damping = options.damping();
    goal.options.max_step_rad = options.max_step_rad();
    goal.options.max_restarts = options.max_restarts();
    goal.options.soft = options.soft();
    goal.options.max_stretch = options.max_stretch();
    goal.options.time_budget_ms = options.time_budget_ms();
    // Full-body fields; reach::Solve refuses them on other solvers, naming
    // the field, and checks their ranges.
    if (in.has_aim_axis()) goal.aim_axis = FromProto(in.aim_axis());
    goal.priority = in.priority();
  }
  return absl::OkStatus();
}

absl::Status FromProto(const Skeleton& skeleton,
                       const v1::FullBodyOptions& options,
                       FullBodyOptions* out) {
  *out = FullBodyOptions();
  if (!options.root_joint().empty()) {
    out->root_joint = skeleton.FindJoint(options.root_joint());
    if (out->root_joint < 0) {
      return absl::NotFoundError(
          absl::StrCat("full_body.root_joint: no joint named '",
                       ClientString(options.root_joint()), "'"));
    }
  }
  // proto3 enums are open: any number arrives as is.
  if (!v1::RootMode_IsValid(options.root_mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.root_mode: unknown root mode ",
                     static_cast<int>(options.root_mode())));
  }
  switch (options.root_mode()) {
    case v1::ROOT_MODE_FREE:
      out->root_mode = RootMode::kFree;
      break;
    case v1::ROOT_MODE_PINNED:
      out->root_mode = RootMode::kPinned;
      break;
    case v1::ROOT_MODE_PRE_PULL:
      out->root_mode = RootMode::kPrePull;
      break;
    case v1::RootMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case v1::RootMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  if (!v1::BodyModel_IsValid(options.body())) {
    return absl::InvalidArgumentError(
        absl::StrCat("full_body.body: unknown body model ",
                     static_cast<int>(options.body())));
  }
  out->body = options.body() == v1::BODY_MODEL_NONE ? BodyMode::kNone
                                                    : BodyMode::kHuman;
  out->plant_feet = options.plant_feet();
  if (options.has_plant_height()) {
    if (!std::isfinite(options.plant_height())) {
      return absl::InvalidArgumentError(
          absl::StrCat("full_body.plant_height = ", options.plant_height(),
                       " is not finite"));
    }
    out->plant_height = options.plant_height();
  }
  out->root_translation_stiffness = options.root_translation_stiffness();
  out->max_iterations = options.max_iterations();
  out->time_budget_ms = options.time_budget_ms();
  return absl::OkStatus();
}

absl::Status FromProto(const Skeleton& skeleton, const v1::Pose& pose,
                       Pose* out, absl::string_view field) {
  const int n = skeleton.num_joints();
  if (pose.rotations_size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".rotations: has ", pose.rotations_size(),
                     " rotations; the skeleton has ", n, " joints"));
  }
  const std::string rotations_field = absl::StrCat(field, ".rotations");
  out->local.resize(n);
  for (int i = 0; i < n; ++i) {
    Transform& local = out->local[i];
    local = skeleton.joint(i).rest;
    local.rotation = FromProto(pose.rotations(i));
    absl::Status status = ValidateUnitQuaternion(
        local.rotation, FieldName{rotations_field, i, ""});
    if (!status.ok()) return status;
    NormalizeRotation(&local.rotation);
  }
  if (pose.has_root_translation()) {
    if (skeleton.joint(0).parent != -1) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".root_translation: joint 0 is not a root"));
    }
    const Eigen::Vector3d t = FromProto(pose.root_translation());
    if (!t.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".root_translation: not finite"));
    }
    out->local[0].translation = t;
  }
  return absl::OkStatus();
}

ReportedRotation ReportRotation(const Joint& joint,
                                const Eigen::Quaterniond& solved) {
  ReportedRotation out;
  if (joint.type != JointType::kHinge) {
    out.rotation = solved;
    return out;
  }
  out.hinge = true;
  out.angle_rad = HingeAngleWithinLimits(joint, solved);
  out.rotation = HingeRotation(joint, out.angle_rad);
  return out;
}

void ToProto(const Skeleton& skeleton, const Pose& start, const Pose& solved,
             absl::Span<const GoalResult> results,
             v1::SolveResponse* response) {
  const int n = static_cast<int>(solved.local.size());
  for (int i = 0; i < n; ++i) {
    const Transform& before = start.local[i];
    const Transform& after = solved.local[i];
    if (RotationChanged(before, after)) {
      response->add_rotated_joints(static_cast<uint32_t>(i));
      const ReportedRotation reported =
          ReportRotation(skeleton.joint(i), after.rotation);
      const Eigen::Quaterniond& q = reported.rotation;
      for (double v : {q.w(), q.x(), q.y(), q.z()}) {
        response->add_rotations(v);
      }
      if (reported.hinge) {
        response->add_hinge_joints(static_cast<uint32_t>(i));
        response->add_hinge_angles_rad(reported.angle_rad);
      }
    }
    if (TranslationChanged(before, after)) {
      response->add_translated_joints(static_cast<uint32_t>(i));
      const Eigen::Vector3d& t = after.translation;
      for (double v : {t.x(), t.y(), t.z()}) response->add_translations(v);
    }
  }
  for (const GoalResult& r : results) {
    v1::GoalResult* out = response->add_results();
    out->set_reached(r.reached);
    out->set_position_error(r.position_error);
    out->set_orientation_error_rad(r.orientation_error_rad);
    out->set_iterations(r.iterations);
    out->set_solver(static_cast<v1::Solver>(r.solver));
    out->set_tolerance(r.tolerance);
    out->set_orientation_tolerance_rad(r.orientation_tolerance_rad);
  }
}

Deadline FromGrpcDeadline(std::chrono::system_clock::time_point deadline) {
  Deadline out;
  const auto left = deadline - std::chrono::system_clock::now();
  // gRPC's "no deadline" is time_point::max(); a deadline a year or more
  // away is treated alike (and cannot overflow the steady clock).
  if (deadline == std::chrono::system_clock::time_point::max() ||
      left > std::chrono::hours(24 * 365)) {
    return out;
  }
  out.at = Deadline::Clock::now() +
           std::chrono::duration_cast<Deadline::Clock::duration>(left);
  return out;
}

void ToProto(absl::Span<const Transform> globals, v1::SolveResponse* response) {
  response->mutable_globals()->Reserve(static_cast<int>(globals.size()));
  for (const Transform& g : globals) ToProto(g, response->add_globals());
}

void ToProto(const Pose& pose, v1::Pose* out) {
  auto* rotations = out->mutable_rotations();
  rotations->Clear();
  rotations->Reserve(static_cast<int>(pose.local.size()));
  for (const Transform& local : pose.local) {
    ToProto(local.rotation, rotations->Add());
  }
  if (!pose.local.empty()) {
    ToProto(pose.local[0].translation, out->mutable_root_translation());
  }
}

absl::Status ApplyResponse(const v1::SolveResponse& response, Pose* pose) {
  const int rotated = response.rotated_joints_size();
  if (response.rotations_size() != 4 * rotated) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rotations: has ", response.rotations_size(), " numbers; expected 4 "
        "per rotated joint (", 4 * rotated, ")"));
  }
  const int translated = response.translated_joints_size();
  if (response.translations_size() != 3 * translated) {
    return absl::InvalidArgumentError(absl::StrCat(
        "translations: has ", response.translations_size(), " numbers; "
        "expected 3 per translated joint (", 3 * translated, ")"));
  }
  const auto check = [&](const char* field, int i,
                         uint32_t joint) -> absl::Status {
    if (joint < pose->local.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        field, "[", i, "]: ", joint, " is not below ", pose->local.size()));
  };
  for (int i = 0; i < rotated; ++i) {
    const uint32_t joint = response.rotated_joints(i);
    absl::Status status = check("rotated_joints", i, joint);
    if (!status.ok()) return status;
    const double* q = response.rotations().data() + 4 * i;
    pose->local[joint].rotation = Eigen::Quaterniond(q[0], q[1], q[2], q[3]);
  }
  for (int i = 0; i < translated; ++i) {
    const uint32_t joint = response.translated_joints(i);
    absl::Status status = check("translated_joints", i, joint);
    if (!status.ok()) return status;
    const double* t = response.translations().data() + 3 * i;
    pose->local[joint].translation = Eigen::Vector3d(t[0], t[1], t[2]);
  }
  return absl::OkStatus();
}

}  // namespace reach
