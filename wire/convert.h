// The one place where wire messages (reach.v1) meet solver types. Every
// FromProto validates what the solver library does not (presence, enum
// ranges, counts) and names the field in its error; every ToProto writes
// into a message the caller owns so buffers are reused.
#ifndef REACH_WIRE_CONVERT_H_
#define REACH_WIRE_CONVERT_H_

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/status.h"
#include "reach/v1/ik_service.pb.h"
#include "solvers/deadline.h"
#include "solvers/full_body.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// A string the client sent (a skeleton id, a chain, joint or method name),
// fit for an error message or a log line: at most `max_bytes` of it, cut on a
// code-point boundary, with "…(N bytes)" appended when cut; bytes that are not
// UTF-8 and control characters become U+FFFD, so the result is valid UTF-8 on
// one line. Every message that echoes a client string goes through this, so an
// error stays short (a long one would reach the client as RESOURCE_EXHAUSTED
// instead) and a log line stays a line.
inline constexpr size_t kMaxClientStringBytes = 200;
std::string ClientString(absl::string_view s,
                         size_t max_bytes = kMaxClientStringBytes);

// The skeleton's chain names in order, comma-separated, for an error that
// refuses a chain: sanitised as ClientString, and cut after as many as fit
// in about `max_bytes`, with "…(N more)" ("(none)" without chains).
inline constexpr size_t kMaxChainListBytes = 400;
std::string ChainList(const Skeleton& skeleton,
                      size_t max_bytes = kMaxChainListBytes);

// NOT_FOUND for goals[goal].chain naming no chain of `skeleton`:
// 'goals[0].chain: no chain "x"; chains: l_arm, r_arm, ...'.
absl::Status NoChainError(const Skeleton& skeleton, absl::string_view chain,
                          int goal);

// absl::Status -> grpc::Status, code for code.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Fills an in-band error (stream frames, batch items).
void ToProto(const absl::Status& status, v1::Error* error);

// The wire skeleton as a solver definition. Unset rotations are identity and
// unset scales 1; unset limits are unlimited. Validation of the hierarchy
// itself is Skeleton::Create's job.
absl::Status FromProto(const v1::Skeleton& skeleton, SkeletonDef* def);

// A solver definition on the wire (the inverse of the above): for tools and
// tests that build skeletons in code. Infinite limits are left unset.
void ToProto(const SkeletonDef& def, v1::Skeleton* skeleton);

// The request's goals, names resolved against `skeleton`. `goals` is
// overwritten; its capacity is reused. Unknown chains and joints are
// NotFound; a missing target or an unknown solver value InvalidArgument,
// both naming "goals[i].field". A SOLVER_FULL_BODY goal without a chain
// needs tip_joint (its effector; root_joint optional), any other goal a
// chain or both joints. Ranges (and aim_axis / priority on goals of other
// solvers) are checked later by reach::Solve.
absl::Status FromProto(const Skeleton& skeleton,
                       const google::protobuf::RepeatedPtrField<v1::Goal>& goals,
                       std::vector<Goal>* out);

// A request's full-body options, the root joint's name resolved: unknown
// is NotFound naming "full_body.root_joint", an unknown root_mode value
// InvalidArgument naming "full_body.root_mode". Ranges are checked later by
// reach::Solve. `out` is overwritten.
absl::Status FromProto(const Skeleton& skeleton,
                       const v1::FullBodyOptions& options,
                       FullBodyOptions* out);

// A pose (by default a request's start pose): one rotation per joint
// (errors name "FIELD.rotations[i]"); translations and scales from the rest
// pose, except joint 0's translation when root_translation is set.
absl::Status FromProto(const Skeleton& skeleton, const v1::Pose& pose,
                       Pose* out, absl::string_view field = "start_pose");

// Whether a solve changed a joint's rotation / translation: any bit of it
// differs from the start pose's (a solver that leaves a joint alone leaves
// its bits alone).
inline bool RotationChanged(const Transform& start, const Transform& solved) {
  return std::memcmp(start.rotation.coeffs().data(),
                     solved.rotation.coeffs().data(), 4 * sizeof(double)) != 0;
}
inline bool TranslationChanged(const Transform& start,
                               const Transform& solved) {
  return std::memcmp(start.translation.data(), solved.translation.data(),
                     3 * sizeof(double)) != 0;
}

// How a response reports a joint's solved local rotation: for a hinge, its
// angle within its limits (HingeAngleWithinLimits: min <= angle <= max
// exactly) and the rotation regenerated from that angle (HingeRotation), so
// the two agree; any other joint's rotation as solved.
struct ReportedRotation {
  Eigen::Quaterniond rotation;
  bool hinge = false;
  double angle_rad = 0.0;  // Hinges only: radians from rest about the axis.
};
ReportedRotation ReportRotation(const Joint& joint,
                                const Eigen::Quaterniond& solved);

// Writes into `response` every joint of `solved` (a pose of `skeleton`) that
// differs from `start` (rotation, and translation only when it changed), the
// angles of the rotated hinges (ReportRotation) and one result per goal.
void ToProto(const Skeleton& skeleton, const Pose& start, const Pose& solved,
             absl::Span<const GoalResult> results, v1::SolveResponse* response);

// A call's deadline (grpc::ServerContext::deadline(), on the system clock)
// as a solve's Deadline on the steady clock: the time left, from now. No
// deadline (time_point::max(), gRPC's infinite future) or one a year or more
// away: none. No cancellation flag.
Deadline FromGrpcDeadline(std::chrono::system_clock::time_point deadline);

// Model-space transforms of every joint.
void ToProto(absl::Span<const Transform> globals, v1::SolveResponse* response);

// A pose as a start pose (the inverse of FromProto above): every rotation,
// and joint 0's translation as root_translation. Other translations and
// scales are not carried (the server takes them from the rest pose).
void ToProto(const Pose& pose, v1::Pose* out);

// Applies a response's rotated and translated joints to `pose` (the
// request's start pose). Array lengths that do not match, or a joint index
// outside the pose, are InvalidArgument naming the field and index.
absl::Status ApplyResponse(const v1::SolveResponse& response, Pose* pose);

void ToProto(const Eigen::Vector3d& v, v1::Vec3* out);
void ToProto(const Eigen::Quaterniond& q, v1::Quat* out);
void ToProto(const Transform& t, v1::Transform* out);
Eigen::Vector3d FromProto(const v1::Vec3& v);
Eigen::Quaterniond FromProto(const v1::Quat& q);

}  // namespace reach

#endif  // REACH_WIRE_CONVERT_H_
