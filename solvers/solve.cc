#include "solvers/solve.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/limits.h"
#include "solvers/two_bone.h"

namespace reach {
namespace {

std::string GoalField(int i, absl::string_view field) {
  return absl::StrCat("goals[", i, "].", field);
}

absl::Status ValidateOptions(int i, const SolveOptions& o,
                             const SolveLimits& limits) {
  if (o.max_iterations < 0 || o.max_iterations > limits.max_iterations) {
    return absl::InvalidArgumentError(absl::StrCat(
        GoalField(i, "options.max_iterations"), " = ", o.max_iterations,
        " is outside [0, ", limits.max_iterations, "]"));
  }
  if (o.max_restarts < 0 || o.max_restarts > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat(GoalField(i, "options.max_restarts"), " = ",
                     o.max_restarts, " is outside [0, 1000]"));
  }
  if (auto s = ValidateRange(o.time_budget_ms,
                             FieldName{"goals", i, "options.time_budget_ms"},
                             0.0, 60000.0);
      !s.ok()) {
    return s;
  }
  constexpr double kHuge = 1e300;
  if (auto s = ValidateRange(
          o.tolerance, FieldName{"goals", i, "options.tolerance"}, 0.0, kHuge);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateRange(
          o.orientation_tolerance_rad,
          FieldName{"goals", i, "options.orientation_tolerance_rad"}, 0.0,
          M_PI);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateRange(
          o.damping, FieldName{"goals", i, "options.damping"}, 0.0, 1e3);
      !s.ok()) {
    return s;
  }
  if (auto s = ValidateRange(o.max_step_rad,
                             FieldName{"goals", i, "options.max_step_rad"}, 0.0,
                             M_PI);
      !s.ok()) {
    return s;
  }
  if (auto s =
          ValidateRange(o.soft, FieldName{"goals", i, "options.soft"}, 0.0, 1.0,
                        /*hi_open=*/true);
      !s.ok()) {
    return s;
  }
  if (o.max_stretch != 0.0) {
    if (auto s = ValidateRange(o.max_stretch,
                               FieldName{"goals", i, "options.max_stretch"},
                               1.0, 10.0);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

// Number of chain joints (root..tip) a goal names, or an error.
absl::StatusOr<int> GoalChainLength(const Skeleton& skeleton, int i,
                                    const Goal& goal) {
  if (goal.chain >= 0) {
    if (goal.chain >= skeleton.num_chains()) {
      return absl::NotFoundError(absl::StrCat(
          GoalField(i, "chain"), " = ", goal.chain, ": the skeleton has ",
          skeleton.num_chains(), " chains"));
    }
    return static_cast<int>(skeleton.chain(goal.chain).joints.size());
  }
  if (goal.chain != -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        GoalField(i, "chain"), " = ", goal.chain,
        " is invalid: a chain index, or -1 with root_joint and tip_joint"));
  }
  for (auto [value, name] : {std::pair{goal.root_joint, "root_joint"},
                             std::pair{goal.tip_joint, "tip_joint"}}) {
    if (value < 0 || value >= skeleton.num_joints()) {
      return absl::NotFoundError(absl::StrCat(
          GoalField(i, name), " = ", value, ": the skeleton has joints 0..",
          skeleton.num_joints() - 1, " (and no chain was named)"));
    }
  }
  const int length = PathLength(skeleton, goal.root_joint, goal.tip_joint);
  if (length < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        GoalField(i, "root_joint"), " = ", goal.root_joint, " (\"",
        skeleton.joint(goal.root_joint).name,
        "\") is not a proper ancestor of tip_joint ", goal.tip_joint, " (\"",
        skeleton.joint(goal.tip_joint).name, "\")"));
  }
  if (length > kMaxChainJoints) {
    return absl::InvalidArgumentError(
        absl::StrCat("goals[", i, "]: the chain has ", length,
                     " joints; the limit is ", kMaxChainJoints));
  }
  return length;
}

bool IsFreeBall(const Joint& joint) {
  return joint.type == JointType::kBall && !joint.IsConstrained();
}

int DefaultMaxIterations(SolverKind kind) {
  switch (kind) {
    case SolverKind::kTwoBone:
      return 1;
    case SolverKind::kFabrik:
      return 128;
    case SolverKind::kCcd:
      return 256;
    case SolverKind::kJacobianTranspose:
    case SolverKind::kJacobianPinv:
    case SolverKind::kJacobianDls:
    case SolverKind::kAuto:
      return 128;
    case SolverKind::kGradientDescent:
      return 256;
  }
  return 128;
}

// Iterative solvers cannot leave a straight chain whose target lies on its
// line: every update (FABRIK's reaching, CCD's turns, J^T e) is zero by
// symmetry. Bends the first movable inner joint by kKick radians, towards
// the pole when there is one, before such a solve.
bool BreakSymmetry(const Skeleton& skeleton, absl::Span<const int> chain,
                   const Goal& goal, const Transform* chain_globals,
                   Pose* pose) {
  constexpr double kKick = 0.2;
  const int n = static_cast<int>(chain.size());
  if (n < 3) return false;
  const Eigen::Vector3d base = chain_globals[0].translation;
  const Eigen::Vector3d line = chain_globals[n - 1].translation - base;
  const double length = line.norm();
  if (length < 1e-12) return false;
  const Eigen::Vector3d u = line / length;
  // Squared distances from the line: no square root per joint.
  auto off_line_sq = [&](const Eigen::Vector3d& p) {
    const Eigen::Vector3d d = p - base;
    return (d - d.dot(u) * u).squaredNorm();
  };
  const double eps_sq = 1e-18 * length * length;
  for (int k = 1; k < n; ++k) {
    if (off_line_sq(chain_globals[k].translation) > eps_sq) return false;
  }
  if (off_line_sq(goal.target) > eps_sq) return false;
  Eigen::Vector3d side = u.unitOrthogonal();
  if (goal.pole && off_line_sq(*goal.pole) > eps_sq) {
    const Eigen::Vector3d d = *goal.pole - base;
    side = (d - d.dot(u) * u).normalized();
  }
  for (int k = 1; k + 1 < n; ++k) {
    const Joint& joint = skeleton.joint(chain[k]);
    Eigen::Quaterniond& local = pose->local[chain[k]].rotation;
    if (joint.type == JointType::kHinge) {
      const double angle = HingeAngle(joint, local);
      const double bent = ConstrainHingeAngle(joint, angle + kKick);
      const double other = ConstrainHingeAngle(joint, angle - kKick);
      local = HingeRotation(joint, bent != angle ? bent : other);
      return true;
    }
    if (joint.type == JointType::kBall) {
      // A turn about u x side (model space) swings the bones below towards
      // `side`; expressed in the joint's frame it multiplies on the right.
      const Eigen::Vector3d axis = u.cross(side);
      const Eigen::Quaterniond& g = chain_globals[k].rotation;
      local = ConstrainRotation(joint,
                                local * AxisAngle(g.conjugate() * axis, kKick));
      return true;
    }
  }
  return false;
}

// The model-space transform of joint `j` (-1: identity) in `pose`, computed
// lazily (see Workspace::globals): walks j's path up to its root, which is
// integer work, then recomputes top down only the transforms on it that
// are stale. A limb's parent costs the few transforms above it, not a pass
// over the whole skeleton.
Transform LazyGlobal(const Skeleton& skeleton, const Pose& pose, int j,
                     Workspace& ws) {
  if (j < 0) return Transform();
  if (ws.computed_at[j] > ws.last_move) return ws.globals[j];
  ws.ancestors.clear();
  for (int a = j; a >= 0; a = skeleton.joint(a).parent) {
    ws.ancestors.push_back(a);
  }
  for (int i = static_cast<int>(ws.ancestors.size()) - 1; i >= 0; --i) {
    const int a = ws.ancestors[i];
    const int parent = skeleton.joint(a).parent;
    const uint32_t at = ws.computed_at[a];
    if (at == 0 || ws.moved_at[a] > at ||
        (parent >= 0 && ws.computed_at[parent] > at)) {
      ws.globals[a] =
          parent < 0 ? pose.local[a] : ws.globals[parent] * pose.local[a];
      ws.computed_at[a] = ++ws.clock;
    }
  }
  return ws.globals[j];
}

// Whether two poses' local transforms are bitwise equal (so their forward
// kinematics are too). Transform has no padding.
bool SameLocals(absl::Span<const Transform> a, absl::Span<const Transform> b) {
  static_assert(sizeof(Transform) == 8 * sizeof(double));
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(Transform)) == 0;
}

// Starts the lazy model-space transforms of the start pose: from the
// skeleton's rest transforms, all current, when it is the rest pose (a
// request without a start pose); else none computed.
void StartGlobals(const Skeleton& skeleton, bool rest, Workspace& ws) {
  ws.Reserve(skeleton.num_joints());
  std::fill(ws.moved_at.begin(), ws.moved_at.end(), 0);
  ws.last_move = 0;
  if (rest) {
    std::copy(skeleton.rest_globals().begin(), skeleton.rest_globals().end(),
              ws.globals.begin());
    std::fill(ws.computed_at.begin(), ws.computed_at.end(), 1);
    ws.clock = 1;
  } else {
    std::fill(ws.computed_at.begin(), ws.computed_at.end(), 0);
    ws.clock = 0;
  }
}

}  // namespace

absl::string_view SolverName(SolverKind kind) {
  switch (kind) {
    case SolverKind::kAuto:
      return "auto";
    case SolverKind::kTwoBone:
      return "two_bone";
    case SolverKind::kFabrik:
      return "fabrik";
    case SolverKind::kCcd:
      return "ccd";
    case SolverKind::kJacobianTranspose:
      return "jacobian_transpose";
    case SolverKind::kJacobianPinv:
      return "jacobian_pinv";
    case SolverKind::kJacobianDls:
      return "jacobian_dls";
    case SolverKind::kGradientDescent:
      return "gradient_descent";
  }
  return "unknown";
}

int PathLength(const Skeleton& skeleton, int root, int tip) {
  if (root < 0 || tip < 0 || root >= skeleton.num_joints() ||
      tip >= skeleton.num_joints() || root == tip) {
    return -1;
  }
  int length = 1;
  int j = tip;
  for (; j > root; j = skeleton.joint(j).parent) {
    if (skeleton.joint(j).parent < 0) return -1;
    ++length;
  }
  // Parents have smaller indices, so the walk stops at or before root; it
  // is a path only if it stops at root.
  return j == root ? length : -1;
}

absl::Status ValidateGoals(const Skeleton& skeleton,
                           absl::Span<const Goal> goals,
                           const SolveLimits& limits) {
  if (static_cast<int>(goals.size()) > limits.max_goals) {
    return absl::InvalidArgumentError(absl::StrCat("goals has ", goals.size(),
                                                   " entries; the limit is ",
                                                   limits.max_goals));
  }
  for (int i = 0; i < static_cast<int>(goals.size()); ++i) {
    const Goal& goal = goals[i];
    const absl::StatusOr<int> length = GoalChainLength(skeleton, i, goal);
    if (!length.ok()) return length.status();
    const int solver = static_cast<int>(goal.solver);
    if (solver < 0 || solver >= kNumSolverKinds) {
      return absl::InvalidArgumentError(absl::StrCat(
          GoalField(i, "solver"), " = ", solver, " is not a known solver"));
    }
    if (goal.solver == SolverKind::kTwoBone && *length != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          GoalField(i, "solver"),
          " = two_bone needs a chain of 3 joints (2 bones); this chain has ",
          *length));
    }
    if (auto s = ValidateFinite(goal.target, FieldName{"goals", i, "target"});
        !s.ok()) {
      return s;
    }
    if (goal.target_orientation) {
      if (auto s = ValidateUnitQuaternion(
              *goal.target_orientation,
              FieldName{"goals", i, "target_orientation"});
          !s.ok()) {
        return s;
      }
    }
    if (goal.pole) {
      if (auto s = ValidateFinite(*goal.pole, FieldName{"goals", i, "pole"});
          !s.ok()) {
        return s;
      }
    }
    if (auto s = ValidateRange(goal.weight, FieldName{"goals", i, "weight"},
                               0.0, 1.0);
        !s.ok()) {
      return s;
    }
    if (auto s = ValidateOptions(i, goal.options, limits); !s.ok()) return s;
  }
  return absl::OkStatus();
}

SolverKind ResolveSolver(const Skeleton& skeleton, absl::Span<const int> chain,
                         const Goal& goal) {
  if (goal.solver != SolverKind::kAuto) return goal.solver;
  if (goal.target_orientation) return SolverKind::kJacobianDls;
  const int n = static_cast<int>(chain.size());
  if (n == 3 && IsFreeBall(skeleton.joint(chain[0]))) {
    const Joint& mid = skeleton.joint(chain[1]);
    if (IsFreeBall(mid) || mid.type == JointType::kHinge) {
      return SolverKind::kTwoBone;
    }
  }
  for (int k = 0; k + 1 < n; ++k) {
    if (!IsFreeBall(skeleton.joint(chain[k]))) return SolverKind::kJacobianDls;
  }
  return SolverKind::kFabrik;
}

namespace {

// The goal's tolerances with their defaults resolved (SolveOptions).
double PositionTolerance(const Goal& goal, double chain_length) {
  return goal.options.tolerance > 0.0 ? goal.options.tolerance
                                      : std::max(1e-5 * chain_length, 1e-12);
}
double OrientationTolerance(const Goal& goal) {
  return goal.options.orientation_tolerance_rad > 0.0
             ? goal.options.orientation_tolerance_rad
             : 1e-4;
}

// Solves one goal (validated) from the pose's current state and stamps
// its chain as moved.
void SolveGoal(const Skeleton& skeleton, const Goal& goal_in,
               const Deadline& deadline, Workspace& ws, Pose* pose,
               GoalResult* result_out) {
  // A copy with the orientation normalised (validation allows 1e-5).
  Goal goal = goal_in;
  if (goal.target_orientation) NormalizeRotation(&*goal.target_orientation);

  absl::Span<const int> chain;
  if (goal.chain >= 0) {
    chain = skeleton.chain(goal.chain).joints;
  } else {
    skeleton.PathBetween(goal.root_joint, goal.tip_joint, &ws.path);
    chain = ws.path;
  }
  const int n = static_cast<int>(chain.size());
  const SolverKind kind = ResolveSolver(skeleton, chain, goal);

  ChainProblem problem;
  problem.skeleton = &skeleton;
  problem.joints = chain;
  problem.goal = &goal;
  problem.deadline = deadline.WithBudget(goal.options.time_budget_ms);
  // The chain's model-space transforms, and its parent's, from the lazy
  // ones: current from an earlier goal or the rest pose cost nothing.
  LazyGlobal(skeleton, *pose, chain[n - 1], ws);
  const int chain_parent = skeleton.joint(chain[0]).parent;
  if (chain_parent >= 0) problem.parent_global = ws.globals[chain_parent];
  for (int k = 0; k < n; ++k) ws.chain_globals[k] = ws.globals[chain[k]];
  if (kind != SolverKind::kTwoBone &&
      BreakSymmetry(skeleton, chain, goal, ws.chain_globals.data(), pose)) {
    ComputeChainGlobals(problem, *pose, ws);
  }
  for (int k = 0; k + 1 < n; ++k) {
    ws.lengths[k] = (ws.chain_globals[k + 1].translation -
                     ws.chain_globals[k].translation)
                        .norm();
    problem.chain_length += ws.lengths[k];
  }
  problem.tolerance = PositionTolerance(goal, problem.chain_length);
  problem.orientation_tolerance_rad = OrientationTolerance(goal);
  problem.max_iterations = goal.options.max_iterations > 0
                               ? goal.options.max_iterations
                               : DefaultMaxIterations(kind);

  for (int k = 0; k < n; ++k) {
    ws.start_rotations[k] = pose->local[chain[k]].rotation;
  }
  GoalResult& result = *result_out;
  result = GoalResult();
  result.solver = kind;
  result.iterations = GetSolver(kind).Solve(problem, ws, *pose);

  if (goal.weight < 1.0) {
    // Partial weight: each joint moves that fraction of the way from its
    // start rotation, then back inside its limits.
    for (int k = 0; k < n; ++k) {
      Eigen::Quaterniond& q = pose->local[chain[k]].rotation;
      q = ConstrainRotation(skeleton.joint(chain[k]),
                            ws.start_rotations[k].slerp(goal.weight, q))
              .normalized();
    }
  }
  result.tolerance = problem.tolerance;
  result.orientation_tolerance_rad = problem.orientation_tolerance_rad;
  const uint32_t now = ++ws.clock;
  for (int j : chain) ws.moved_at[j] = now;
  ws.last_move = now;
}

// The goals from `first` on that the branch-free two-bone kernel solves
// together (SolveTwoBoneLimbs), so one call fills its SIMD lanes:
// consecutive TWO_BONE goals (after AUTO) at full weight for which
// TwoBoneFastPathApplies, none of whose start transforms depends on a
// joint that an earlier one of them turns (no tip descends from another
// goal's root or mid joint). Their results equal solving them one by one,
// bit for bit: same inputs, and the kernel's result does not depend on
// its lane. Returns how many goals it solved: 0 when fewer than two
// qualify.
size_t SolveTwoBoneGroup(const Skeleton& skeleton, absl::Span<const Goal> goals,
                         size_t first, const Deadline& deadline, Workspace& ws,
                         Pose* pose, absl::Span<GoalResult> results) {
  constexpr size_t kMaxGroup = kMaxTwoBoneGroup;
  std::array<std::array<int, 3>, kMaxGroup>& chains = ws.group_chains;
  size_t count = 0;
  for (; count < kMaxGroup && first + count < goals.size(); ++count) {
    const Goal& goal = goals[first + count];
    std::array<int, 3>& chain = chains[count];
    if (goal.chain >= 0) {
      const std::vector<int>& joints = skeleton.chain(goal.chain).joints;
      if (joints.size() != 3) break;
      std::copy(joints.begin(), joints.end(), chain.begin());
    } else {
      if (PathLength(skeleton, goal.root_joint, goal.tip_joint) != 3) break;
      chain = {goal.root_joint, skeleton.joint(goal.tip_joint).parent,
               goal.tip_joint};
    }
    if (!(goal.weight >= 1.0) ||
        ResolveSolver(skeleton, chain, goal) != SolverKind::kTwoBone ||
        !TwoBoneFastPathApplies(skeleton, chain, goal)) {
      break;
    }
    bool depends = false;
    for (int a = chain[2]; a >= 0 && !depends; a = skeleton.joint(a).parent) {
      for (size_t e = 0; e < count; ++e) {
        depends = depends || a == chains[e][0] || a == chains[e][1];
      }
    }
    if (depends) break;
  }
  if (count < 2) return 0;

  std::array<TwoBoneLimb, kMaxGroup>& limbs = ws.group_limbs;
  std::array<TwoBoneLimbResult, kMaxGroup>& solved = ws.group_results;
  for (size_t e = 0; e < count; ++e) {
    const Goal& goal = goals[first + e];
    const std::array<int, 3>& chain = chains[e];
    LazyGlobal(skeleton, *pose, chain[2], ws);
    FillTwoBoneLimb(skeleton, ws.globals, *pose, chain, goal, &limbs[e]);
  }
  SolveTwoBoneLimbs(absl::MakeConstSpan(limbs.data(), count),
                    absl::MakeSpan(solved.data(), count));
  for (size_t e = 0; e < count; ++e) {
    const Goal& goal = goals[first + e];
    const std::array<int, 3>& chain = chains[e];
    if (!solved[e].solved) {
      // The general path, from the same start: no other goal of the group
      // moved anything its chain depends on.
      SolveGoal(skeleton, goal, deadline, ws, pose, &results[e]);
      continue;
    }
    pose->local[chain[0]].rotation = solved[e].root_local;
    pose->local[chain[1]].rotation = solved[e].mid_local;
    const TwoBoneLimb& limb = limbs[e];
    double chain_length = 0.0;
    chain_length += (limb.mid.translation - limb.root.translation).norm();
    chain_length += (limb.tip.translation - limb.mid.translation).norm();
    GoalResult& result = results[e];
    result = GoalResult();
    result.solver = SolverKind::kTwoBone;
    result.iterations = 1;
    result.tolerance = PositionTolerance(goal, chain_length);
    result.orientation_tolerance_rad = OrientationTolerance(goal);
    const uint32_t now = ++ws.clock;
    for (int j : chain) ws.moved_at[j] = now;
    ws.last_move = now;
  }
  // The solved chains' model-space transforms, as LazyGlobal would compute
  // them (their parents are current: no member moved another's ancestors),
  // stamped after every move: measuring the goals then needs no walk.
  // (LazyGlobal's expression, written out: as a shared function GCC does
  // not inline it, which cost 5% of BM_HumanoidFourLimbs.)
  for (size_t e = 0; e < count; ++e) {
    if (!solved[e].solved) continue;
    const std::array<int, 3>& chain = chains[e];
    const int parent = skeleton.joint(chain[0]).parent;
    ws.globals[chain[0]] = parent < 0
                               ? pose->local[chain[0]]
                               : ws.globals[parent] * pose->local[chain[0]];
    ws.globals[chain[1]] = ws.globals[chain[0]] * pose->local[chain[1]];
    ws.globals[chain[2]] = ws.globals[chain[1]] * pose->local[chain[2]];
    for (int j : chain) ws.computed_at[j] = ++ws.clock;
  }
  return count;
}

}  // namespace

absl::Status Solve(const Skeleton& skeleton, absl::Span<const Goal> goals,
                   Workspace& ws, Pose* pose, absl::Span<GoalResult> results,
                   const SolveLimits& limits, const Deadline& deadline) {
  // The rest pose (bit for bit) was validated and normalised with the
  // skeleton.
  bool rest = SameLocals(pose->local, skeleton.rest_locals());
  if (!rest) {
    if (auto s = ValidatePose(skeleton, *pose); !s.ok()) return s;
  }
  if (auto s = ValidateGoals(skeleton, goals, limits); !s.ok()) return s;
  if (results.size() < goals.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("results holds ", results.size(), " entries for ",
                     goals.size(), " goals"));
  }
  if (!rest) {
    NormalizePose(pose);
    rest = SameLocals(pose->local, skeleton.rest_locals());
  }
  StartGlobals(skeleton, rest, ws);

  for (size_t i = 0; i < goals.size();) {
    const size_t group = SolveTwoBoneGroup(skeleton, goals, i, deadline, ws,
                                           pose, results.subspan(i));
    if (group > 0) {
      i += group;
      continue;
    }
    SolveGoal(skeleton, goals[i], deadline, ws, pose, &results[i]);
    ++i;
  }
  // Measure every goal on the returned pose (a later goal may have moved an
  // earlier goal's chain): forward kinematics of each tip's stale path only.
  for (size_t i = 0; i < goals.size(); ++i) {
    const Goal& goal = goals[i];
    GoalResult& result = results[i];
    const int tip_joint = goal.chain >= 0
                              ? skeleton.chain(goal.chain).joints.back()
                              : goal.tip_joint;
    const Transform tip = LazyGlobal(skeleton, *pose, tip_joint, ws);
    const Eigen::Vector3d miss = tip.translation - goal.target;
    result.position_error = miss.norm();
    // Past ~1e154 the squares overflow; the scaled norm does not.
    if (std::isinf(result.position_error)) {
      result.position_error = miss.stableNorm();
    }
    result.reached = result.position_error <= result.tolerance;
    if (goal.target_orientation) {
      result.orientation_error_rad =
          AngleBetween(tip.rotation, goal.target_orientation->normalized());
      result.reached = result.reached && result.orientation_error_rad <=
                                             result.orientation_tolerance_rad;
    }
  }
  return absl::OkStatus();
}

}  // namespace reach
