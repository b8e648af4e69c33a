// What a solve is asked to do (goals, options, the solver choice) and what
// it reports per goal.
#ifndef REACH_SOLVERS_GOAL_H_
#define REACH_SOLVERS_GOAL_H_

#include <limits>
#include <optional>

#include "absl/strings/string_view.h"
#include "solvers/transform.h"

namespace reach {

// The solver a goal asks for. The numbering matches the wire enum
// (reach.v1.Solver) so conversion is a range check.
enum class SolverKind : int {
  kAuto = 0,  // Chosen per goal; see ResolveSolver in solve.h.
  kTwoBone = 1,
  kFabrik = 2,
  kCcd = 3,
  kJacobianTranspose = 4,
  kJacobianPinv = 5,
  kJacobianDls = 6,
  kGradientDescent = 7,
  // Every goal of a request that asks for it is one problem over the whole
  // skeleton (solvers/full_body.h); never chosen by AUTO.
  kFullBody = 8,
};
inline constexpr int kNumSolverKinds = 9;

// Lower-case name, e.g. "two_bone", used for metric labels and messages.
absl::string_view SolverName(SolverKind kind);

// Solver options. Zero means "the default" for every field, so a message
// that leaves a field unset gets the documented default.
struct SolveOptions {
  // Iteration cap of the iterative solvers, >= 0, at most 100000.
  // 0: FABRIK 128, CCD 256, Jacobian family 128, gradient descent 256.
  int max_iterations = 0;
  // Position tolerance in model units: a goal is reached when the tip lies
  // within it of the target. >= 0; 0: 1e-5 x the chain's length.
  double tolerance = 0.0;
  // Orientation tolerance in radians when the goal has a target
  // orientation. >= 0; 0: 1e-4 rad.
  double orientation_tolerance_rad = 0.0;
  // JACOBIAN_DLS: initial damping factor lambda (dimensionless; positions
  // are measured in chain lengths internally). >= 0; 0: 0.05. The damping
  // adapts per step (Levenberg-Marquardt): it shrinks after a step that
  // lowers the error and grows after one that does not.
  double damping = 0.0;
  // CCD and the Jacobian family: the largest rotation one joint may make in
  // one step, radians (per-step damping). >= 0; 0: CCD unlimited, Jacobian
  // family 0.5 rad.
  double max_step_rad = 0.0;
  // Jacobian family and GRADIENT_DESCENT: when an attempt ends unreached,
  // start again from a pseudo-random configuration within the joint limits,
  // up to this many times, and keep the best result (TRAC-IK-style random
  // restarts, counted; time_budget_ms times them instead). Deterministic:
  // the sequence derives from the goal's target. In [0, 1000]; 0: no
  // restarts. Each attempt gets max_iterations; `iterations` reports them
  // all.
  int max_restarts = 0;
  // Wall-clock budget of this goal's solve in milliseconds, counted from
  // when Solve starts the goal (goals are solved in order, each with its
  // own budget; a deadline passed to Solve bounds them all). In
  // [0, 60000]; 0: none. With a budget:
  // - every iterative solver (FABRIK, CCD, the Jacobian family, gradient
  //   descent) stops when it runs out, looking at the clock every 8
  //   iterations, and keeps what it has;
  // - the Jacobian family and GRADIENT_DESCENT restart (as for
  //   max_restarts) while the goal is unreached and time remains, however
  //   many restarts that takes: the budget, not max_restarts, bounds them
  //   (max_restarts is ignored), as TRAC-IK's timed restarts. An
  //   unreachable goal therefore uses its whole budget;
  // - the result is the best attempt's, `reached` false when time ran out
  //   first, `iterations` the sum over the attempts.
  // TWO_BONE is analytic and ignores it. Not deterministic across machines
  // when the budget ends the solve (how far it got depends on the clock).
  double time_budget_ms = 0.0;
  // TWO_BONE soft IK: the fraction of the chain's length over which the
  // chain eases into full extension instead of snapping straight.
  // In [0, 1); 0: off. With soft 0.1 the chain starts easing at 90% of its
  // length and never quite straightens.
  double soft = 0.0;
  // TWO_BONE stretch: the bones may lengthen up to this factor to reach a
  // target beyond the chain. 0 or 1: off; otherwise in (1, 10].
  double max_stretch = 0.0;
};

// Most priority levels a full-body goal may name: priorities lie in
// [0, kMaxPriority].
inline constexpr int kMaxPriority = 15;

// One end-effector goal. All positions are in model space (the frame the
// skeleton's root transforms live in).
struct Goal {
  // The chain: an index into the skeleton's chains, or, when chain is -1,
  // the path from root_joint down to tip_joint (joint indices).
  int chain = -1;
  int root_joint = -1;
  int tip_joint = -1;
  SolverKind solver = SolverKind::kAuto;
  Eigen::Vector3d target = Eigen::Vector3d::Zero();  // Model space; finite.
  // Desired global rotation of the tip joint; unit quaternion.
  std::optional<Eigen::Quaterniond> target_orientation;
  // Model-space point the chain's bend (knee, elbow) should face; finite.
  std::optional<Eigen::Vector3d> pole;
  // How far to move from the start pose towards the solution, in [0, 1]:
  // each chain joint's rotation is slerped from start to solved.
  // SOLVER_FULL_BODY: the goal's weight among the goals of its priority
  // level (their errors are traded in proportion); 0 leaves the goal out.
  double weight = 1.0;
  SolveOptions options;

  // SOLVER_FULL_BODY only (refused, naming the field, for other solvers).
  //
  // The effector is the chain's tip, or tip_joint when no chain is named;
  // the chain (or root_joint..tip_joint when root_joint is set) is the limb
  // whose bend the pole turns; with neither, the pole turns the effector's
  // grandparent..effector (a knee or an elbow).
  //
  // Look-at: when set, the effector should turn so this axis (in the
  // effector joint's own frame; non-zero, normalised) points at `target`,
  // which is then a point to aim at, not a place to go. No
  // target_orientation with it.
  std::optional<Eigen::Vector3d> aim_axis;
  // Priority level, in [0, kMaxPriority]: lower levels are satisfied first,
  // and a goal never gives up accuracy for a goal of a later level.
  int priority = 0;
};

// How the full-body solver treats its root joint (the pelvis).
enum class RootMode : int {
  // Translates and rotates, weighted by its stiffness, as the goals need.
  kFree = 0,
  // Stays where the start pose has it.
  kPinned = 1,
  // First moved by the weighted mean displacement its position goals ask
  // of their effectors (UE's pre-pull), then free.
  kPrePull = 2,
};

// What the full-body solver fills in that the goals leave open.
enum class BodyMode : int {
  // The default: on a humanoid skeleton (solvers/full_body/body_model.h),
  // the body moves like a person: pelvis helper joints never turn, the
  // spine, neck and clavicles are stiffer than hips and knees, knees bend
  // forward and elbows back when no pole is given, and the pelvis is placed
  // and turned from the head, hands and feet (lowered, knees bent, before
  // the spine folds). Other skeletons solve as with kNone.
  kHuman = 0,
  // The goals alone: every joint as the skeleton gives it.
  kNone = 1,
};

// Options of the full-body problem (one per request).
struct FullBodyOptions {
  // The solver's root: the joints it turns are those on the paths from it
  // to the effectors (every effector must be it or below it). -1: the
  // skeleton root above the effectors. A root with a parent (e.g. the
  // spine, for the upper body only) rotates but cannot translate.
  int root_joint = -1;
  RootMode root_mode = RootMode::kFree;
  // In [0, 1]: how much the root resists translating (its rotation uses
  // its joint's stiffness). Weighted like a joint's stiffness.
  double root_translation_stiffness = 0.0;
  // Iteration cap, in [0, SolveLimits::max_iterations]; 0: 64. It bounds
  // each attempt: a solve from the rest pose that leaves a goal within
  // reach unreached, with time left, makes a second from bent knees and
  // elbows (solvers/full_body.h), so at most twice this in all.
  int max_iterations = 0;
  // Wall-clock budget in milliseconds, [0, 60000]; 0: none (the deadline
  // passed to Solve still bounds it).
  double time_budget_ms = 0.0;
  // How the body between the goals moves (above).
  BodyMode body = BodyMode::kHuman;
  // Sparse trackers (head and hands, maybe a pelvis or feet): with the body
  // model, a foot no goal places stays planted where the start pose (a
  // stream's previous answer) has it, after every requested goal, until
  // the body leaves it; then it steps after the body, one foot at a time
  // (docs/full-body.md).
  bool plant_feet = false;
  // With plant_feet: the floor, as the height along the body's up axis
  // (the model axis nearest the feet-to-head direction) of a standing
  // foot's joint (a session's calibration: where the feet stood). A foot
  // no goal places that is above it (after a jump, or crept up) steps
  // down to it, and steps land on it. NaN (the default): no floor; the
  // lower foot stands for it, and feet carried up stay up.
  double plant_height = std::numeric_limits<double>::quiet_NaN();
};

// Outcome of one goal. Errors are measured by forward kinematics of the
// returned pose (after every goal of the solve), whatever the solver
// believed.
struct GoalResult {
  bool reached = false;                   // Within both tolerances.
  double position_error = 0.0;            // |tip - target|, model units.
  double orientation_error_rad = 0.0;     // 0 without a target orientation.
  int iterations = 0;                     // 1 for the analytic solver.
  SolverKind solver = SolverKind::kAuto;  // The solver that ran.
  double tolerance = 0.0;  // Position tolerance applied (default resolved).
  double orientation_tolerance_rad = 0.0;  // Likewise for orientation.
  // Look-at goals (aim_axis) report position_error 0 and, in
  // orientation_error_rad, the angle between the aimed axis and the
  // direction from the effector to the target.
};

}  // namespace reach

#endif  // REACH_SOLVERS_GOAL_H_
