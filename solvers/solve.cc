#include "solvers/solve.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "solvers/bend_plane.h"
#include "solvers/full_body.h"
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

// The joints of a validated goal's chain, root first: the named chain's,
// or the path root_joint..tip_joint written into `path` (no allocation).
absl::Span<const int> GoalChain(const Skeleton& skeleton, const Goal& goal,
                                std::array<int, kMaxChainJoints>* path) {
  if (goal.chain >= 0) return skeleton.chain(goal.chain).joints;
  const int n = PathLength(skeleton, goal.root_joint, goal.tip_joint);
  int j = goal.tip_joint;
  for (int k = n - 1; k >= 0; --k, j = skeleton.joint(j).parent) {
    (*path)[k] = j;
  }
  return absl::MakeConstSpan(path->data(), n);
}

// Options that only some solvers apply are refused for the others, never
// dropped in silence: damping (JACOBIAN_DLS), max_step_rad (CCD, the
// Jacobian family, gradient descent), max_restarts (the Jacobian family,
// gradient descent), max_stretch (TWO_BONE). `kind` is the solver that
// will run (AUTO resolved).
absl::Status ValidateOptionsApply(int i, const Goal& goal, SolverKind kind) {
  const SolveOptions& o = goal.options;
  const bool jacobian = kind == SolverKind::kJacobianTranspose ||
                        kind == SolverKind::kJacobianPinv ||
                        kind == SolverKind::kJacobianDls ||
                        kind == SolverKind::kGradientDescent;
  auto refuse = [&](absl::string_view field, double value,
                    absl::string_view solvers) {
    return absl::InvalidArgumentError(absl::StrCat(
        GoalField(i, field), " = ", value, " applies to ", solvers,
        " only; this goal's solver is ", SolverName(kind),
        goal.solver == SolverKind::kAuto ? " (chosen by AUTO)" : ""));
  };
  if (o.damping != 0.0 && kind != SolverKind::kJacobianDls) {
    return refuse("options.damping", o.damping, "JACOBIAN_DLS");
  }
  if (o.max_step_rad != 0.0 && !jacobian && kind != SolverKind::kCcd) {
    return refuse("options.max_step_rad", o.max_step_rad,
                  "CCD, the Jacobian solvers and GRADIENT_DESCENT");
  }
  if (o.max_restarts != 0 && !jacobian) {
    return refuse("options.max_restarts", o.max_restarts,
                  "the Jacobian solvers and GRADIENT_DESCENT");
  }
  if (o.max_stretch > 1.0 && kind != SolverKind::kTwoBone) {
    return refuse("options.max_stretch", o.max_stretch, "TWO_BONE");
  }
  return absl::OkStatus();
}

// Every solver but TWO_BONE honours a pole by turning the solved chain
// about its root-tip line (bend_plane.h): a root that is not a ball joint
// cannot turn so, nor may the chain turn when the goal's orientation
// target cannot be restored at a tip that is not an unconstrained ball.
// Such a pole is refused, naming the field, rather than ignored. The
// solver is resolved only when the chain is such a one.
absl::Status ValidatePoleApplies(const Skeleton& skeleton, int i,
                                 const Goal& goal) {
  if (!goal.pole) return absl::OkStatus();
  const Joint& root = skeleton.joint(
      goal.chain >= 0 ? skeleton.chain(goal.chain).joints.front()
                      : goal.root_joint);
  const Joint& tip = skeleton.joint(goal.chain >= 0
                                        ? skeleton.chain(goal.chain).joints.back()
                                        : goal.tip_joint);
  const bool root_turns = root.type == JointType::kBall;
  const bool tip_turns_back = !goal.target_orientation ||
                              (tip.type == JointType::kBall &&
                               !tip.IsConstrained());
  if (root_turns && tip_turns_back) return absl::OkStatus();
  std::array<int, kMaxChainJoints> path;
  const absl::Span<const int> chain = GoalChain(skeleton, goal, &path);
  const SolverKind kind = ResolveSolver(skeleton, chain, goal);
  if (kind == SolverKind::kTwoBone || chain.size() < 3) {
    return absl::OkStatus();
  }
  if (!root_turns) {
    return absl::InvalidArgumentError(absl::StrCat(
        GoalField(i, "pole"), ": solver ", SolverName(kind),
        " turns the chain about its root to face a pole, and root joint \"",
        root.name, "\" is not a ball joint"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      GoalField(i, "pole"), ": with a target_orientation, solver ",
      SolverName(kind),
      " faces a pole only when the tip joint can be turned back to the "
      "orientation, and tip joint \"",
      tip.name, "\" is not an unconstrained ball joint"));
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
    case SolverKind::kFullBody:
      return 64;  // FullBodyOptions::max_iterations; never a chain's.
  }
  return 128;
}

// The goal's iteration cap for `kind`, its default resolved.
int MaxIterations(const Goal& goal, SolverKind kind) {
  return goal.options.max_iterations > 0 ? goal.options.max_iterations
                                         : DefaultMaxIterations(kind);
}

// `point` when it lies within `radius` of `origin`, else the point at
// `radius` from `origin` in its direction, computed without overflow (both
// finite). A chain reaching for a target 1e300 away points at it exactly
// as at one 1e6 chain lengths away, and no solver's arithmetic overflows.
Eigen::Vector3d BringNear(const Eigen::Vector3d& point,
                          const Eigen::Vector3d& origin, double radius) {
  if ((point - origin).squaredNorm() <= radius * radius) return point;
  // Scaled first: the difference or its square may overflow.
  const double s = 1.0 / std::max(point.cwiseAbs().maxCoeff(),
                                  origin.cwiseAbs().maxCoeff());
  const Eigen::Vector3d direction = (point * s - origin * s).normalized();
  return origin + radius * direction;
}

// Soft IK for every solver (TWO_BONE has its own, after Harris, "Soft
// IK"): past (1 - soft) of the chain's length the distance to the target
// eases exponentially towards full extension, so the chain never snaps
// straight. Returns the target the solver aims at.
Eigen::Vector3d SoftTarget(const Eigen::Vector3d& target,
                           const Eigen::Vector3d& root, double length,
                           double soft) {
  const Eigen::Vector3d offset = target - root;
  const double d = offset.norm();
  const double ease_start = (1.0 - soft) * length;
  const double ease_span = soft * length;
  if (!(soft > 0.0) || !(length > 0.0) || d <= ease_start) return target;
  const double eased =
      ease_start + ease_span * (1.0 - std::exp(-(d - ease_start) / ease_span));
  return root + offset * (eased / d);
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
    case SolverKind::kFullBody:
      return "full_body";
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
                           const SolveLimits& limits,
                           const FullBodyOptions& full_body) {
  if (static_cast<int>(goals.size()) > limits.max_goals) {
    return absl::InvalidArgumentError(absl::StrCat("goals has ", goals.size(),
                                                   " entries; the limit is ",
                                                   limits.max_goals));
  }
  for (int i = 0; i < static_cast<int>(goals.size()); ++i) {
    const Goal& goal = goals[i];
    const int solver = static_cast<int>(goal.solver);
    const bool full_body_goal = goal.solver == SolverKind::kFullBody;
    if (!full_body_goal) {
      // A full-body goal names an effector, not a chain (ValidateFullBody).
      const absl::StatusOr<int> length = GoalChainLength(skeleton, i, goal);
      if (!length.ok()) return length.status();
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
    if (full_body_goal) continue;
    const SolveOptions& o = goal.options;
    if (o.damping != 0.0 || o.max_step_rad != 0.0 || o.max_restarts != 0 ||
        o.max_stretch > 1.0) {
      std::array<int, kMaxChainJoints> path;
      const SolverKind kind =
          ResolveSolver(skeleton, GoalChain(skeleton, goal, &path), goal);
      if (auto s = ValidateOptionsApply(i, goal, kind); !s.ok()) return s;
    }
    if (auto s = ValidatePoleApplies(skeleton, i, goal); !s.ok()) return s;
  }
  return ValidateFullBody(skeleton, goals, full_body, limits.max_iterations);
}

SolverKind ResolveSolver(const Skeleton& skeleton, absl::Span<const int> chain,
                         const Goal& goal) {
  if (goal.solver != SolverKind::kAuto) return goal.solver;
  if (goal.target_orientation) return SolverKind::kJacobianDls;
  const int n = static_cast<int>(chain.size());
  if (n == 3 && skeleton.joint(chain[0]).type == JointType::kBall) {
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

// Runs solver `kind` on `problem` (ws.chain_globals current for the
// start): TWO_BONE as it is; every other solver with soft IK, shaping for
// reach first and its bend aligned afterwards (bend_plane.h). May change
// `goal`'s target (soft IK; problem.goal points to `goal`); returns the
// iterations.
int RunChainSolver(SolverKind kind, const ChainProblem& problem, Goal& goal,
                   Workspace& ws, Pose& pose) {
  if (kind == SolverKind::kTwoBone) {
    return GetSolver(kind).Solve(problem, ws, pose);
  }
  goal.target = SoftTarget(goal.target, ws.chain_globals[0].translation,
                           problem.chain_length, goal.options.soft);
  const BendReference bend = ComputeBendReference(problem, ws, pose);
  // Shaping counts as an iteration: it may leave the solver nothing to do.
  const int shaped = ShapeForReach(problem, bend, ws, pose) ? 1 : 0;
  const int iterations = GetSolver(kind).Solve(problem, ws, pose) + shaped;
  if (bend.source != BendReference::Source::kNone) {
    // The bend faces the pole, or stays on the start's side (the solver
    // left ws.chain_globals current).
    AlignBend(problem, bend, ws, pose);
  }
  return iterations;
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

  // A start outside the limits (a client's pose, a transfer's) is brought
  // into them first, joint by joint, so every solver steps from a pose the
  // limits allow and none returns outside them: the joints the solver
  // turns (all but the tip; the tip too when it is given an orientation).
  const int turned = goal.target_orientation ? n : n - 1;
  for (int k = 0; k < turned; ++k) {
    if (ProjectIntoLimits(skeleton.joint(chain[k]),
                          &pose->local[chain[k]].rotation)) {
      ws.moved_at[chain[k]] = ++ws.clock;
      ws.last_move = ws.clock;
    }
  }

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
  for (int k = 0; k < n; ++k) {
    ws.chain_globals[k] = ws.globals[chain[k]];
    ws.start_rotations[k] = pose->local[chain[k]].rotation;
  }
  for (int k = 0; k + 1 < n; ++k) {
    ws.lengths[k] = (ws.chain_globals[k + 1].translation -
                     ws.chain_globals[k].translation)
                        .norm();
    problem.chain_length += ws.lengths[k];
  }
  problem.tolerance = PositionTolerance(goal, problem.chain_length);
  problem.orientation_tolerance_rad = OrientationTolerance(goal);
  problem.max_iterations = MaxIterations(goal, kind);

  // Far targets and poles only give directions: brought within 1e6 chain
  // lengths, so no solver's squares overflow (measured against the
  // original target all the same).
  const Eigen::Vector3d root = ws.chain_globals[0].translation;
  const double near = 1e6 * std::max(problem.chain_length, 1e-3);
  goal.target = BringNear(goal.target, root, near);
  if (goal.pole) goal.pole = BringNear(*goal.pole, root, near);

  GoalResult& result = *result_out;
  result = GoalResult();
  result.solver = kind;
  // A goal already met, with no pole to turn the bend to, leaves its chain
  // as it found it (bit for bit): nothing to solve.
  const Transform& tip = ws.chain_globals[n - 1];
  const bool met =
      !goal.pole && (tip.translation - goal.target).norm() <= problem.tolerance &&
      (!goal.target_orientation ||
       AngleBetween(tip.rotation, *goal.target_orientation) <=
           problem.orientation_tolerance_rad);
  result.iterations = met ? 0 : RunChainSolver(kind, problem, goal, ws, *pose);
  if (kind == SolverKind::kTwoBone && goal_in.solver == SolverKind::kAuto &&
      skeleton.joint(chain[0]).IsConstrained()) {
    // AUTO sent a limb with a limited root to TWO_BONE, which turns the
    // solved limb about the root-target line to fit the root's limits.
    // When no turn fits (it misses by more than the target's distance
    // beyond reach), JACOBIAN_DLS, which honours limits and the pole,
    // solves it from the start pose too, and the nearer result stands.
    ComputeChainGlobals(problem, *pose, ws);
    const double miss =
        (ws.chain_globals[n - 1].translation - goal.target).norm();
    const double beyond =
        std::max(0.0, (goal.target - root).norm() - problem.chain_length);
    if (!(goal.options.soft > 0.0) && miss > beyond + problem.tolerance) {
      std::array<Eigen::Quaterniond, 3> two_bone;
      for (int k = 0; k < 3; ++k) {
        two_bone[k] = pose->local[chain[k]].rotation;
        pose->local[chain[k]].rotation = ws.start_rotations[k];
      }
      ComputeChainGlobals(problem, *pose, ws);
      problem.max_iterations = MaxIterations(goal, SolverKind::kJacobianDls);
      const int iterations = RunChainSolver(SolverKind::kJacobianDls, problem,
                                            goal, ws, *pose);
      ComputeChainGlobals(problem, *pose, ws);
      if ((ws.chain_globals[n - 1].translation - goal.target).norm() < miss) {
        result.solver = SolverKind::kJacobianDls;
        result.iterations += iterations;
      } else {
        for (int k = 0; k < 3; ++k) {
          pose->local[chain[k]].rotation = two_bone[k];
        }
      }
    }
  }

  if (!(goal.weight > 0.0)) {
    // Weight 0 asks for nothing: the chain keeps its start, bit for bit.
    for (int k = 0; k < n; ++k) {
      pose->local[chain[k]].rotation = ws.start_rotations[k];
    }
  } else if (goal.weight < 1.0) {
    // Partial weight: each joint moves that fraction of the way from its
    // start rotation, then back inside its limits.
    for (int k = 0; k < n; ++k) {
      Eigen::Quaterniond& q = pose->local[chain[k]].rotation;
      q = ConstrainRotation(skeleton.joint(chain[k]),
                            ws.start_rotations[k].slerp(goal.weight, q))
              .normalized();
    }
  }
  // A rotation that moved only in its last bits (a goal already met,
  // renormalised) is the start's: the response then reports no change.
  for (int k = 0; k < n; ++k) {
    Eigen::Quaterniond& q = pose->local[chain[k]].rotation;
    if ((q.coeffs() - ws.start_rotations[k].coeffs()).cwiseAbs().maxCoeff() <=
        1e-15) {
      q = ws.start_rotations[k];
    }
  }
  result.tolerance = problem.tolerance;
  result.orientation_tolerance_rad = problem.orientation_tolerance_rad;
  const uint32_t now = ++ws.clock;
  for (int j : chain) ws.moved_at[j] = now;
  ws.last_move = now;
  // The chain's model-space transforms in the returned pose, as LazyGlobal
  // computes them (the same products from the same parent transform, so
  // bit for bit), stamped after the move: measuring the goal, or a later
  // goal below this chain, needs no walk up its path.
  ComputeChainGlobals(problem, *pose, ws);
  for (int k = 0; k < n; ++k) {
    ws.globals[chain[k]] = ws.chain_globals[k];
    ws.computed_at[chain[k]] = ++ws.clock;
  }
}

// The goals from `first` on that the branch-free two-bone kernel solves
// together (SolveTwoBoneLimbs), so one call fills its SIMD lanes:
// consecutive TWO_BONE goals (after AUTO) at full weight for which
// TwoBoneFastPathApplies, none of whose start transforms depends on a
// joint that an earlier one of them turns (no tip descends from another
// goal's root or mid joint). Their results equal solving them one by one,
// bit for bit: same inputs, and the kernel's result does not depend on
// its lane. A single goal takes this path too: it skips the general
// path's set-up, which cost a two-bone Solve more than the kernel. As
// there, a goal already met with no pole leaves its chain as it found it.
// Returns how many goals it solved: 0 when none qualifies.
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
    for (int a = count > 0 ? chain[2] : -1; a >= 0 && !depends;
         a = skeleton.joint(a).parent) {
      for (size_t e = 0; e < count; ++e) {
        depends = depends || a == chains[e][0] || a == chains[e][1];
      }
    }
    if (depends) break;
  }
  if (count == 0) return 0;

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
    const TwoBoneLimb& limb = limbs[e];
    double chain_length = 0.0;
    chain_length += (limb.mid.translation - limb.root.translation).norm();
    chain_length += (limb.tip.translation - limb.mid.translation).norm();
    GoalResult& result = results[e];
    result = GoalResult();
    result.solver = SolverKind::kTwoBone;
    result.tolerance = PositionTolerance(goal, chain_length);
    result.orientation_tolerance_rad = OrientationTolerance(goal);
    if (!goal.pole && (limb.tip.translation - goal.target).squaredNorm() <=
                          result.tolerance * result.tolerance) {
      solved[e].solved = false;  // Nothing moved: no transforms to stamp.
      continue;
    }
    result.iterations = 1;
    pose->local[chain[0]].rotation = solved[e].root_local;
    pose->local[chain[1]].rotation = solved[e].mid_local;
    const uint32_t now = ++ws.clock;
    for (int j : chain) ws.moved_at[j] = now;
    ws.last_move = now;
  }
  // The solved chains' model-space transforms, as LazyGlobal would compute
  // them, stamped after every move: measuring the goals then needs no walk.
  // Only chains whose parents are current: no earlier member turns a later
  // one's ancestors, but a later member may turn an earlier one's (an arm,
  // then the spine it hangs from); those are left to LazyGlobal.
  // (LazyGlobal's expression, written out: as a shared function GCC does
  // not inline it, which cost 5% of BM_HumanoidFourLimbs.)
  for (size_t e = 0; e < count; ++e) {
    if (!solved[e].solved) continue;
    const std::array<int, 3>& chain = chains[e];
    bool carried = false;
    for (int a = skeleton.joint(chain[0]).parent; a >= 0 && !carried;
         a = skeleton.joint(a).parent) {
      for (size_t later = e + 1; later < count; ++later) {
        carried = carried || a == chains[later][0] || a == chains[later][1];
      }
    }
    if (carried) continue;
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
                   const SolveLimits& limits, const Deadline& deadline,
                   const FullBodyOptions& full_body) {
  // The rest pose (bit for bit) was validated and normalised with the
  // skeleton.
  bool rest = SameLocals(pose->local, skeleton.rest_locals());
  if (!rest) {
    if (auto s = ValidatePose(skeleton, *pose); !s.ok()) return s;
  }
  if (auto s = ValidateGoals(skeleton, goals, limits, full_body); !s.ok()) {
    return s;
  }
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

  bool full_body_solved = false;
  for (size_t i = 0; i < goals.size();) {
    if (goals[i].solver == SolverKind::kFullBody) {
      // Every full-body goal at once, where the first of them stands.
      if (!full_body_solved) {
        SolveFullBody(skeleton, goals, full_body, deadline, ws.full_body, pose,
                      results);
        full_body_solved = true;
        // Every transform is stale: the problem may turn any joint.
        const uint32_t now = ++ws.clock;
        std::fill(ws.moved_at.begin(), ws.moved_at.end(), now);
        ws.last_move = now;
      }
      ++i;
      continue;
    }
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
    if (goal.aim_axis) {
      result.position_error = 0.0;
      result.orientation_error_rad =
          AimError(tip, *goal.aim_axis, goal.target);
      result.reached =
          result.orientation_error_rad <= result.orientation_tolerance_rad;
      continue;
    }
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
