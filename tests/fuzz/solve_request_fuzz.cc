// Fuzz target: a skeleton and a solve request through the service's own
// path, in process: Registry::Register (FromProto, Skeleton::Create), then
// SolveOne (goals and options converted and validated, reach::Solve with
// every solver kind including SOLVER_FULL_BODY, ToProto), with a worker's
// reused SolveScratch.
//
// Input: a first byte 0xFF makes the rest a serialized reach.v1.SolveRequest,
// solved against the fixture rig whose id it names (else fixture
// sequence % 4). Any other input drives BuildSkeleton and BuildRequest
// (fuzz_support.h), which keep most skeletons and requests valid so that
// most executions reach the solvers.
//
// Bounds, so an execution stays around a millisecond: skeletons of at most
// 16 joints, at most 6 goals (SolveLimits: 8 goals, 1000 iterations), most
// goals at most 32 iterations and 2 restarts, full-body at most 16
// iterations, and a 5 ms deadline on every solve.
//
// Checked on every answer: an error is INVALID_ARGUMENT or NOT_FOUND with a
// message and leaves only the sequence in the response. A success has one
// result per goal, each naming the solver that ran, with `reached` agreeing
// with the errors and tolerances; consistent joint lists (increasing,
// in range, four / three / one numbers each, hinges among the rotated
// joints, hinge angles within their limits exactly); AppendSolvedItem (the
// batch path) writes the very bytes the response serializes to. When every
// number in the skeleton and request is moderate (AllModerate): the numbers
// are finite, rotations unit, the position errors agree with an
// independent forward-kinematics pass over the pose the response
// describes, and with full weights from a start pose within the limits,
// every joint the solve turned is within its limits. A request with
// latest_wins set (which SolveOne ignores) is solved again warm-started
// from its first solution, as a stream's next frame would be.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/batch_wire.h"
#include "wire/convert.h"
#include "server/registry.h"
#include "server/skeleton_store.h"
#include "server/solve_call.h"
#include "solvers/limits.h"
#include "solvers/pose.h"
#include "tests/fuzz/fuzz_support.h"

namespace reach::fuzz {
namespace {

constexpr int kMaxJoints = 16;
constexpr int kMaxGoals = 6;
constexpr double kDeadlineMs = 5.0;
constexpr SolveLimits kLimits{/*max_goals=*/8, /*max_iterations=*/1000};

struct Fixtures {
  std::unique_ptr<Registry> registry;
  std::vector<std::shared_ptr<const RegisteredSkeleton>> skeletons;
};

const Fixtures& GetFixtures() {
  static const Fixtures* const fixtures = [] {
    auto* out = new Fixtures;
    absl::StatusOr<std::unique_ptr<Registry>> registry =
        Registry::Create(NewMemoryStore(), SkeletonLimits{});
    REACH_FUZZ_CHECK(registry.ok(), registry.status().ToString());
    out->registry = *std::move(registry);
    for (const v1::Skeleton& skeleton : FixtureSkeletons()) {
      absl::StatusOr<RegisterResult> result =
          out->registry->Register(skeleton);
      REACH_FUZZ_CHECK(result.ok(), result.status().ToString());
      out->skeletons.push_back(out->registry->Find(result->id));
    }
    return out;
  }();
  return *fixtures;
}

// The scratch a solver-pool worker keeps from call to call.
SolveScratch& Scratch() {
  static SolveScratch* const scratch = new SolveScratch;
  return *scratch;
}

std::string Where(int i) { return absl::StrCat("results[", i, "]"); }

// Joint lists of a response: strictly increasing indices below n.
void CheckIndices(const google::protobuf::RepeatedField<uint32_t>& joints,
                  int n, const char* field) {
  for (int i = 0; i < joints.size(); ++i) {
    REACH_FUZZ_CHECK(static_cast<int>(joints[i]) < n,
                     absl::StrCat(field, "[", i, "] = ", joints[i]));
    REACH_FUZZ_CHECK(i == 0 || joints[i - 1] < joints[i],
                     absl::StrCat(field, " not increasing at ", i));
  }
}

bool StartWithinLimits(const Skeleton& skeleton, const Pose& start) {
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    if (!WithinLimits(skeleton.joint(j), start.local[j].rotation, 1e-9)) {
      return false;
    }
  }
  return true;
}

void CheckSolved(const RegisteredSkeleton& /*registered*/,
                 const LoadedSkeleton& loaded, const v1::SolveRequest& request,
                 const v1::SolveResponse& response, SolveScratch& scratch) {
  const Skeleton& skeleton = loaded.skeleton;
  const int n = skeleton.num_joints();
  v1::Skeleton definition;
  REACH_FUZZ_CHECK(definition.ParseFromString(loaded.definition_bytes),
                   "stored definition does not parse");
  const bool moderate = AllModerate(definition) && AllModerate(request);

  REACH_FUZZ_CHECK(response.sequence() == request.sequence(), "sequence");
  REACH_FUZZ_CHECK(response.results_size() == request.goals_size(),
                   absl::StrCat(response.results_size(), " results for ",
                                request.goals_size(), " goals"));
  for (int i = 0; i < response.results_size(); ++i) {
    const v1::GoalResult& r = response.results(i);
    REACH_FUZZ_CHECK(r.solver() >= v1::SOLVER_TWO_BONE &&
                         r.solver() <= v1::SOLVER_FULL_BODY,
                     absl::StrCat(Where(i), ".solver = ", r.solver()));
    REACH_FUZZ_CHECK(r.iterations() >= 0, Where(i));
    REACH_FUZZ_CHECK(!(r.position_error() < 0.0), Where(i));
    REACH_FUZZ_CHECK(!(r.orientation_error_rad() < 0.0), Where(i));
    REACH_FUZZ_CHECK(
        !r.reached() || (r.position_error() <= r.tolerance() &&
                         r.orientation_error_rad() <=
                             r.orientation_tolerance_rad()),
        absl::StrCat(Where(i), " reached with error ", r.position_error(),
                     " / ", r.orientation_error_rad(), " beyond tolerance ",
                     r.tolerance(), " / ", r.orientation_tolerance_rad()));
    if (moderate) {
      REACH_FUZZ_CHECK(std::isfinite(r.position_error()) &&
                           std::isfinite(r.orientation_error_rad()) &&
                           std::isfinite(r.tolerance()) &&
                           std::isfinite(r.orientation_tolerance_rad()),
                       absl::StrCat(Where(i), ": ", r.ShortDebugString()));
    }
  }

  REACH_FUZZ_CHECK(response.rotations_size() == 4 * response.rotated_joints_size(),
                   "rotations per rotated joint");
  REACH_FUZZ_CHECK(
      response.translations_size() == 3 * response.translated_joints_size(),
      "translations per translated joint");
  REACH_FUZZ_CHECK(
      response.hinge_angles_rad_size() == response.hinge_joints_size(),
      "one angle per hinge");
  CheckIndices(response.rotated_joints(), n, "rotated_joints");
  CheckIndices(response.translated_joints(), n, "translated_joints");
  CheckIndices(response.hinge_joints(), n, "hinge_joints");
  int rotated = 0;
  for (int h = 0; h < response.hinge_joints_size(); ++h) {
    const int j = static_cast<int>(response.hinge_joints(h));
    while (rotated < response.rotated_joints_size() &&
           static_cast<int>(response.rotated_joints(rotated)) < j) {
      ++rotated;
    }
    REACH_FUZZ_CHECK(rotated < response.rotated_joints_size() &&
                         static_cast<int>(response.rotated_joints(rotated)) == j,
                     absl::StrCat("hinge ", j, " is not a rotated joint"));
    const Joint& joint = skeleton.joint(j);
    REACH_FUZZ_CHECK(joint.type == JointType::kHinge,
                     absl::StrCat("hinge_joints lists joint ", j));
    const double angle = response.hinge_angles_rad(h);
    REACH_FUZZ_CHECK(joint.min_angle_rad <= angle && angle <= joint.max_angle_rad,
                     absl::StrCat("joint ", j, " angle ", angle, " outside [",
                                  joint.min_angle_rad, ", ",
                                  joint.max_angle_rad, "]"));
  }
  REACH_FUZZ_CHECK(response.globals_size() == (request.return_globals() ? n : 0),
                   absl::StrCat(response.globals_size(), " globals"));
  REACH_FUZZ_CHECK(!response.has_error() && !response.skipped(), "error set");

  // The batch path writes a solved item straight from the solve: it must be
  // the response's own bytes (without globals, which batches write through
  // SolveOne).
  {
    v1::SolveResponse without_globals = response;
    without_globals.clear_globals();
    std::string expected;
    AppendBatchItem(without_globals, &expected);
    std::string written;
    AppendSolvedItem(skeleton, request.sequence(), scratch.start, scratch.pose,
                     scratch.results, &scratch.changed_joints, &written);
    REACH_FUZZ_CHECK(written == expected, "AppendSolvedItem differs from ToProto");
  }

  if (!moderate) return;
  for (double v : response.rotations()) {
    REACH_FUZZ_CHECK(std::isfinite(v), "rotation not finite");
  }
  for (double v : response.translations()) {
    REACH_FUZZ_CHECK(std::isfinite(v), "translation not finite");
  }
  for (int i = 0; i < response.rotated_joints_size(); ++i) {
    const double* q = response.rotations().data() + 4 * i;
    const double norm =
        std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    REACH_FUZZ_CHECK(std::abs(norm - 1.0) < 1e-9,
                     absl::StrCat("rotation of joint ",
                                  response.rotated_joints(i), " has norm ",
                                  norm));
  }

  // Independent forward kinematics of the pose the response describes.
  Pose pose = scratch.start;
  const absl::Status applied = ApplyResponse(response, &pose);
  REACH_FUZZ_CHECK(applied.ok(), applied.ToString());
  std::vector<Transform> globals(n);
  ComputeGlobals(skeleton, pose, absl::MakeSpan(globals));
  for (int i = 0; i < request.goals_size(); ++i) {
    const Goal& goal = scratch.goals[i];
    if (goal.aim_axis) continue;
    const int tip = goal.chain >= 0 ? skeleton.chain(goal.chain).joints.back()
                                    : goal.tip_joint;
    const Eigen::Vector3d& at = globals[tip].translation;
    const double error = (at - goal.target).norm();
    const double reported = response.results(i).position_error();
    REACH_FUZZ_CHECK(
        std::abs(error - reported) <=
            1e-9 * (1.0 + at.norm() + goal.target.norm()),
        absl::StrCat(Where(i), ": forward kinematics puts the tip ", error,
                     " from the target; reported ", reported));
  }
  for (int j = 0; j < static_cast<int>(request.return_globals() ? n : 0); ++j) {
    const Eigen::Vector3d at = FromProto(response.globals(j).translation());
    REACH_FUZZ_CHECK((at - globals[j].translation).norm() <=
                         1e-9 * (1.0 + at.norm()),
                     absl::StrCat("globals[", j, "]"));
  }

  bool full_weights = true;
  for (const v1::Goal& goal : request.goals()) {
    full_weights = full_weights && (!goal.has_weight() || goal.weight() == 1.0);
  }
  if (full_weights && StartWithinLimits(skeleton, scratch.start)) {
    for (int j : response.rotated_joints()) {
      REACH_FUZZ_CHECK(
          WithinLimits(skeleton.joint(j), pose.local[j].rotation, 1e-6),
          absl::StrCat("joint ", j, " turned outside its limits"));
    }
  }
}

void SolveAndCheck(const Registry& registry,
                   const RegisteredSkeleton& registered,
                   const v1::SolveRequest& request, const Pose* warm_start) {
  SolveScratch& scratch = Scratch();
  const std::shared_ptr<const LoadedSkeleton> loaded =
      registry.Load(registered.id);
  REACH_FUZZ_CHECK(loaded != nullptr, "registered but not loaded");
  v1::SolveResponse response;
  const absl::Status status =
      SolveOne(*loaded, request, warm_start, kLimits,
               Deadline::In(kDeadlineMs), scratch, &response);
  if (Verbose()) {
    const std::string outcome =
        status.ok() ? absl::StrCat("ok, ", request.goals_size(), " goals")
                    : status.ToString();
    std::fprintf(stderr, "solve: %s\n", outcome.c_str());
    if (status.ok()) {
      std::fprintf(stderr, "response: %s\n",
                   response.ShortDebugString().c_str());
    }
  }
  if (!status.ok()) {
    REACH_FUZZ_CHECK(status.code() == absl::StatusCode::kInvalidArgument ||
                         status.code() == absl::StatusCode::kNotFound,
                     status.ToString());
    REACH_FUZZ_CHECK(!status.message().empty(), "empty error message");
    v1::SolveResponse only_sequence;
    only_sequence.set_sequence(request.sequence());
    REACH_FUZZ_CHECK(
        response.SerializeAsString() == only_sequence.SerializeAsString(),
        absl::StrCat("a failed solve wrote ", response.ShortDebugString()));
    return;
  }
  CheckSolved(registered, *loaded, request, response, scratch);
  if (request.latest_wins() && warm_start == nullptr) {
    const Pose first = scratch.pose;
    SolveAndCheck(registry, registered, request, &first);
  }
}

void RawRequest(const uint8_t* data, size_t size) {
  v1::SolveRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  const Fixtures& fixtures = GetFixtures();
  std::shared_ptr<const RegisteredSkeleton> skeleton =
      fixtures.registry->Find(request.skeleton_id());
  if (skeleton == nullptr) {
    skeleton =
        fixtures.skeletons[request.sequence() % fixtures.skeletons.size()];
  }
  SolveAndCheck(*fixtures.registry, *skeleton, request, nullptr);
}

void StructuredRequest(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const v1::Skeleton definition = BuildSkeleton(in, kMaxJoints);
  absl::StatusOr<std::unique_ptr<Registry>> registry =
      Registry::Create(NewMemoryStore(), SkeletonLimits{});
  REACH_FUZZ_CHECK(registry.ok(), registry.status().ToString());
  const absl::StatusOr<RegisterResult> registered =
      (*registry)->Register(definition);
  if (!registered.ok()) {
    if (Verbose()) {
      std::fprintf(stderr, "register: %s\n",
                   registered.status().ToString().c_str());
    }
    REACH_FUZZ_CHECK(
        registered.status().code() == absl::StatusCode::kInvalidArgument,
        registered.status().ToString());
    return;
  }
  v1::SolveRequest request = BuildRequest(in, definition, kMaxGoals);
  request.set_skeleton_id(registered->id);
  if (Verbose()) {
    std::fprintf(stderr, "skeleton: %s\nrequest: %s\n",
                 definition.ShortDebugString().c_str(),
                 request.ShortDebugString().c_str());
  }
  SolveAndCheck(**registry, *(*registry)->Find(registered->id), request,
                nullptr);
}

}  // namespace
}  // namespace reach::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  reach::fuzz::QuietProtobufLogs();
  reach::fuzz::GetFixtures();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 0xFF) {
    reach::fuzz::RawRequest(data + 1, size - 1);
  } else {
    reach::fuzz::StructuredRequest(data, size);
  }
  return 0;
}
