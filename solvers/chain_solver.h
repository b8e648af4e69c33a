// The one interface every solver implements, the problem it is handed and
// the caller-owned scratch memory it works in.
#ifndef REACH_SOLVERS_CHAIN_SOLVER_H_
#define REACH_SOLVERS_CHAIN_SOLVER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "solvers/deadline.h"
#include "solvers/full_body.h"
#include "solvers/goal.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"
#include "solvers/two_bone_limb.h"

namespace reach {

// Most degrees of freedom one chain can have (3 per ball joint).
inline constexpr int kMaxChainDof = 3 * kMaxChainJoints;
// Most two-bone goals Solve hands SolveTwoBoneLimbs at once.
inline constexpr int kMaxTwoBoneGroup = 8;

// Scratch memory for one solve, owned by the caller and reused across
// solves (one per thread). Chain-sized buffers have fixed capacity, so no
// solver allocates; only Reserve() (called by Solve before the first goal)
// may grow the skeleton-sized buffers.
struct Workspace {
  void Reserve(int num_joints);

  // Model-space transforms, computed lazily by Solve: globals[j] is current
  // when computed_at[j] is later than moved_at[j] (when a goal last turned
  // joint j) and than its parent's computed_at. Stamps come from `clock`.
  std::vector<Transform> globals;
  std::vector<uint32_t> computed_at;  // 0: never computed.
  std::vector<uint32_t> moved_at;     // 0: not moved.
  uint32_t clock = 0;
  // The stamp of the last goal that moved joints (0: none yet). A transform
  // computed after it is current without a walk up its path.
  uint32_t last_move = 0;
  std::vector<int> path;       // Ad hoc chain (root_joint..tip_joint).
  std::vector<int> ancestors;  // A joint's path up to its root.

  // Chain-sized scratch, indexed by position in the chain (0 = root).
  std::array<Transform, kMaxChainJoints> chain_globals;
  std::array<Eigen::Quaterniond, kMaxChainJoints> start_rotations;
  std::array<Eigen::Quaterniond, kMaxChainJoints> saved_rotations;
  std::array<Eigen::Vector3d, kMaxChainJoints> points;
  std::array<double, kMaxChainJoints> lengths;
  std::array<double, kMaxChainDof> dof_values;
  std::array<double, kMaxChainDof> dof_values_alt;
  std::array<Eigen::Quaterniond, kMaxChainJoints> best_rotations;
  std::array<double, kMaxChainDof> best_dof_values;
  // Solve's group of two-bone goals solved together.
  std::array<std::array<int, 3>, kMaxTwoBoneGroup> group_chains;
  std::array<TwoBoneLimb, kMaxTwoBoneGroup> group_limbs;
  std::array<TwoBoneLimbResult, kMaxTwoBoneGroup> group_results;
  // The full-body solver's scratch.
  FullBodyScratch full_body;
};

// A validated goal resolved against its skeleton: what a solver needs.
struct ChainProblem {
  const Skeleton* skeleton = nullptr;
  absl::Span<const int> joints;  // Root first, tip last; >= 2 joints.
  // Model-space transform of the chain root's parent (identity for a
  // skeleton root).
  Transform parent_global;
  const Goal* goal = nullptr;
  // Options with defaults resolved.
  double tolerance = 0.0;                  // Model units, > 0.
  double orientation_tolerance_rad = 0.0;  // > 0.
  int max_iterations = 0;                  // >= 1.
  double chain_length = 0.0;  // Sum of bone lengths in model space, >= 0.
  // When to stop: the earlier of the goal's time_budget_ms (from when its
  // solve started) and the deadline passed to Solve, with Solve's
  // cancellation flag. Default: none. Solvers pass it to their StallGuard;
  // RunWithRestarts checks it before every restart.
  Deadline deadline;
};

// A solver. Implementations are stateless and const, so one instance serves
// every thread; all scratch lives in the Workspace. On entry
// ws.chain_globals[0..n-1] hold the chain joints' model-space transforms in
// `pose` (the caller has them from its forward kinematics pass) and
// ws.lengths[0..n-2] the bone lengths between them (which sum to
// problem.chain_length). Solve writes
// the local rotations of the chain's joints in `pose` (and nothing else, except
// two-bone stretch, which writes the mid and tip translations) and returns
// the number of iterations it ran. Every solver but TWO_BONE leaves
// ws.chain_globals holding the model-space transforms of the pose it
// returns (to rounding: Solve's bend alignment reads them;
// tests/solvers/solver_edges_test.cc checks it). Errors and the reached
// flag are measured afterwards by the caller from forward kinematics.
class ChainSolver {
 public:
  virtual ~ChainSolver() = default;
  virtual int Solve(const ChainProblem& problem, Workspace& ws,
                    Pose& pose) const = 0;
};

// The solver for a concrete kind (not kAuto).
const ChainSolver& GetSolver(SolverKind kind);

// Shared helpers for solvers.

// chain_globals[k] = model-space transform of problem.joints[k] in `pose`.
void ComputeChainGlobals(const ChainProblem& problem, const Pose& pose,
                         Workspace& ws);

// Sets joint joints[k]'s local rotation so that its global rotation becomes
// `global_rotation` (given the parent's current global), projected onto the
// joint's limits. Returns the global rotation actually applied.
Eigen::Quaterniond SetGlobalRotation(const ChainProblem& problem, int k,
                                     const Eigen::Quaterniond& parent_rotation,
                                     const Eigen::Quaterniond& global_rotation,
                                     Pose& pose);

// The turn (model space) of a joint whose model-space transform is
// `joint_global` that swings point `from` towards point `to` about the
// joint: a ball joint's smallest rotation; a hinge's rotation about its
// axis by the angle between the two directions projected across it
// (identity when either projection vanishes); identity for a fixed joint.
// Limits are not applied here (SetGlobalRotation does that).
Eigen::Quaterniond TurnTowards(const Joint& joint,
                               const Transform& joint_global,
                               const Eigen::Vector3d& from,
                               const Eigen::Vector3d& to);

// Points the tip joint at the goal's target orientation, when it has one,
// within the tip joint's limits. chain_globals must be current up to the
// tip's parent.
void ApplyTipOrientation(const ChainProblem& problem, Workspace& ws,
                         Pose& pose);

}  // namespace reach

#endif  // REACH_SOLVERS_CHAIN_SOLVER_H_
