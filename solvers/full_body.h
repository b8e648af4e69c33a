// The full-body solver (SOLVER_FULL_BODY): every full-body goal of a
// request is one problem over the whole skeleton, solved simultaneously.
//
// Goals put effectors anywhere (hands, feet, head, pelvis, a mid-chain
// joint) with a target position and/or orientation, or a look-at (an axis
// of the effector that should point at a point). Each goal has an integer
// priority: levels are solved in order, each in the null space of the
// levels before it, so a goal never gives up accuracy for a goal of a later
// level; within a level, goals trade errors by weight. Two position goals
// whose targets lie further apart than the bones from the solver's root to
// their effectors can span are never both reached: from the start, the
// later one (within a level, the one that asked for more) is solved after
// its level, so a hand far out of reach never drags the reachable one of
// its level. When the solve
// stalls with a level of several goals unreached, the goal that asked for
// the most at the start is solved after the rest of its level (an
// unreachable foot does not drag the planted one); a single goal that a
// later level keeps from its target is solved alone, then protected.
//
// The method is prioritised damped least squares over the tree
// (Siciliano-Slotine task priority, Gauss-Newton steps): the degrees of
// freedom are the rotations of the joints on the paths from the solver's
// root to the effectors (three per ball joint, one per hinge) and the
// root's translation, each weighted by 1 - stiffness; steps are accepted
// Levenberg-Marquardt style. After a short step that converged fast, the
// next step reuses its factorisation with the new errors (a chord step);
// the Jacobian is filled only for the steps that need it. After every
// step the joints are projected onto their limits (a ball found strictly
// inside them is left as it is); when one was held at a limit the step is
// solved again without the column(s) that crossed it, so the others take
// up the motion.
// Once the goals are reached, poles turn a limb's bend about its
// root-effector line (which never moves the effector): a limb whose root
// and middle joint are balls by the least swing of the two, one with a
// hinge at either by rolling it about the line. Bone lengths never change: only
// rotations (and the root's translation) move.
//
// A solve from the rest pose (a new character, its straight knees and
// elbows able to settle into bends no step leaves) that leaves a goal
// within reach unreached tries once more with its resting hinges bent to
// the middle of their ranges, and keeps the better answer (priorities
// compared in order); max_iterations bounds each attempt.
//
// The result does not depend on the order of the goals (they are sorted by
// content first) and is deterministic: the same input gives bit-identical
// output on any thread.
#ifndef REACH_SOLVERS_FULL_BODY_H_
#define REACH_SOLVERS_FULL_BODY_H_

#include <array>
#include <vector>

#include <Eigen/Core>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "solvers/deadline.h"
#include "solvers/goal.h"
#include "solvers/limits.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {

// Scratch of the full-body solver, owned by the caller (inside Workspace)
// and reused: sized by the first solve on a skeleton and problem size,
// after which solving allocates nothing.
struct FullBodyScratch {
  std::vector<int> goal_order;  // Full-body goals of weight > 0, sorted.
  std::vector<int> effector;    // Per sorted goal: its effector joint.
  std::vector<int> goal_row;    // Per sorted goal: its first row (+ end).
  std::vector<int> goal_cols;   // Per sorted goal: its columns, ascending.
  std::vector<int> goal_col_start;
  std::vector<int> pair_cols;   // Per pair a <= b: the columns shared.
  std::vector<int> pair_col_start;
  // What the column lists above were made from (the goals' effectors in
  // order, each joint's parent, type and first column, the root): a solve
  // of the same problem shape (a stream's next frame) reuses them.
  std::vector<int> columns_key;
  std::vector<double> tolerance;              // Per goal of the request.
  std::vector<double> orientation_tolerance;  // Per goal of the request.
  // Per goal of the request: solved after the other goals of its priority
  // (the solve stalled with it the furthest from its target).
  std::vector<char> demoted;
  std::vector<double> goal_excess;  // Per sorted goal: weight * excess^2.
  std::vector<double> saved_goal_excess;
  std::vector<double> start_excess;  // Per goal of the request: at the start.
  std::vector<char> active;  // Per joint: on a root-effector path.
  std::vector<char> drives;  // Per joint: its rotation moves an effector.
  std::vector<int> active_joints;  // Ascending.
  std::vector<int> ancestors;      // Above the solver root.
  std::vector<int> dof_start;      // Per joint: first column, -1 if none.
  std::vector<int> dof_joint;      // Per column: its joint (-1: the root's
                                   // translation).
  std::vector<double> dof_weight;  // Per column: sqrt(1 - stiffness).
  std::vector<char> locked;        // Per column: held at a limit.
  std::vector<double> scale;       // Per column: dof_weight^2, 0 if locked.
  // Per joint; set for the limited ball joints that have columns.
  std::vector<BallBounds> ball_bounds;
  // Per joint: the cone and twist range its ball_bounds were made from
  // (NaN: none yet), so a later solve recomputes only what changed.
  std::vector<std::array<double, 3>> bounds_of;
  std::vector<Eigen::Vector3d> axis;  // Per column: model-space axis.
  std::vector<Eigen::Vector3d> saved_axis;
  std::vector<Transform> globals;  // Per joint (active ones current).
  std::vector<Transform> saved_locals;
  // Capacity only grows; blocks of it are used.
  Eigen::MatrixXd jacobian;  // Rows of every level, stacked.
  Eigen::MatrixXd saved_jacobian;
  Eigen::VectorXd saved_error;
  Eigen::MatrixXd gram;      // J W^2 J^T (W: the column weights).
  Eigen::MatrixXd cross;
  Eigen::MatrixXd small;
  Eigen::VectorXd error;
  Eigen::VectorXd coeffs;
  Eigen::VectorXd delta_coeffs;
  Eigen::VectorXd delta;
  Eigen::VectorXd rhs;
  Eigen::VectorXd step;
  // A solve's start pose, and when it makes a second attempt (bent
  // hinges), the first attempt's answer and each goal's excess after
  // either attempt (per goal of the request).
  std::vector<Transform> start_locals;
  // Per joint: inside a limb whose goal carries the caller's own pole
  // (the body model's anatomical hinges leave that limb a ball).
  std::vector<char> caller_pole;
  std::vector<Transform> first_locals;
  std::vector<double> first_excess;
  std::vector<double> second_excess;
  // Whose a goal of body_goals is (`soft`): the request's, or the body
  // model's (never demoted), either never keeping a solve going or, as a
  // planted foot's, keeping it going until reached.
  enum GoalKind : char {
    kRequestGoal = 0,
    kModelGoal = 1,
    kFirmModelGoal = 2,
  };
  // The body model's goals (BodyMode::kHuman): the request's, with
  // preferred bends where they give no pole, then the pelvis' own; their
  // results; and per goal of those, its GoalKind and the cone (radians)
  // its pole leaves free.
  std::vector<Goal> body_goals;
  std::vector<GoalResult> body_results;
  std::vector<char> soft;
  std::vector<double> pole_cone;
  std::vector<char> body_known;  // Scratch of AddBodyGoals.
  // Per joint: the stiffness this solve uses with the body model (the
  // model's, the clavicles' by how far their hands reach).
  std::vector<double> body_stiffness;
};

// Checks the full-body goals of `goals` (solver kFullBody) and `options`
// against the skeleton; errors name the field ("goals[2].aim_axis",
// "full_body.root_joint"). Goals of other solvers are not looked at, except
// that aim_axis and priority are refused on them.
absl::Status ValidateFullBody(const Skeleton& skeleton,
                              absl::Span<const Goal> goals,
                              const FullBodyOptions& options,
                              int max_iterations);

// Solves every goal of `goals` whose solver is kFullBody at once, on
// `pose` (validated and normalised; in, the start; out, the solution).
// Writes iterations, solver, tolerances of those goals' results (Solve
// measures the errors). Returns the iterations run.
int SolveFullBody(const Skeleton& skeleton, absl::Span<const Goal> goals,
                  const FullBodyOptions& options, const Deadline& deadline,
                  FullBodyScratch& scratch, Pose* pose,
                  absl::Span<GoalResult> results);

// A full-body goal's effector: its chain's tip, or tip_joint.
int EffectorOf(const Skeleton& skeleton, const Goal& goal);

// The first joint of the limb a goal's pole turns: the chain's root, or
// root_joint, or the effector's grandparent (-1 when it has none).
int LimbRootOf(const Skeleton& skeleton, const Goal& goal);

// The size full-body tolerances are relative to: the largest extent of the
// skeleton's rest pose along a model axis (a humanoid's height), at least
// 1e-9. Default position tolerance: 1e-5 of it.
double BodySize(const Skeleton& skeleton);

// A look-at goal's error: the angle in [0, pi] between `aim_axis` (in the
// effector's frame) turned to model space and the direction from the
// effector to `target`; 0 when the target is at the effector.
double AimError(const Transform& effector, const Eigen::Vector3d& aim_axis,
                const Eigen::Vector3d& target);

}  // namespace reach

#endif  // REACH_SOLVERS_FULL_BODY_H_
