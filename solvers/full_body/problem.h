// Internal to the full-body solver (solvers/full_body.h is its API): what
// the files of solvers/full_body/ share. The solve of one request's goals
// is the class FullBodySolve; its members are defined by concept:
//
//   problem.cc     validation, the goals' order, rows, levels and columns
//                  (Setup, Arrange, PairColumns) and the public helpers
//   evaluate.cc    forward kinematics, the goals' errors and the Jacobian
//   steps.cc       the prioritised step: Gram matrices, their factors
//                  (cholesky.h), the levels' solves, applying a step
//   priorities.cc  comparing levels (Better, Merit) and changing the
//                  problem when a solve stalls (OnStall, DemoteOutOfReach)
//   poles.cc       bends: poles, straight limbs, a rest pose's hinges
//   run.cc         the iteration loop and SolveFullBody
//
// Nothing outside solvers/full_body/ includes this header.
#ifndef REACH_SOLVERS_FULL_BODY_PROBLEM_H_
#define REACH_SOLVERS_FULL_BODY_PROBLEM_H_

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <algorithm>
#include <array>
#include <vector>

#include "absl/types/span.h"
#include "solvers/deadline.h"
#include "solvers/full_body.h"
#include "solvers/full_body/body_model.h"
#include "solvers/goal.h"
#include "solvers/limits.h"
#include "solvers/pose.h"
#include "solvers/skeleton.h"

namespace reach {
namespace full_body_internal {

using Eigen::Quaterniond;
using Eigen::Vector3d;

// Levels of the problem: each priority, then its demoted goals.
inline constexpr int kMaxLevels = 2 * (kMaxPriority + 1);
using Levels = std::array<double, kMaxLevels>;

inline bool IsFullBody(const Goal& goal) {
  return goal.solver == SolverKind::kFullBody;
}

// Rows a goal adds: position 3, orientation 3, look-at 2.
inline constexpr int kMaxGoalRows = 6;
inline int RowsOf(const Goal& goal) {
  if (goal.aim_axis) return 2;
  return 3 + (goal.target_orientation ? 3 : 0);
}

// `local` (a joint's local rotation, whose parent's model-space rotation
// is `parent`) turned in model space by the rotation vector `turn` about the
// joint: parent^-1 exp(turn) parent local. (steps.cc)
Quaterniond TurnedLocal(const Quaterniond& parent, const Vector3d& turn,
                        const Quaterniond& local);

// The solve of one request's full-body goals.
class FullBodySolve {
 public:
  // `model`: the body model in use, or null.
  FullBodySolve(const Skeleton& skeleton, absl::Span<const Goal> goals,
                const FullBodyOptions& options, FullBodyScratch& s, Pose* pose,
                const BodyModel* model)
      : skeleton_(skeleton),
        goals_(goals),
        options_(options),
        s_(s),
        pose_(*pose),
        model_(model),
        places_body_(model != nullptr && options.root_joint < 0 &&
                     options.root_mode != RootMode::kPinned),
        body_(BodySize(skeleton)) {}

  // Sets up the problem; false when there is nothing to solve.
  bool Setup(absl::Span<GoalResult> results);
  // Runs the solve from the pose; returns the iterations.
  int Run(const Deadline& deadline, int max_iterations);
  // Before Run: posture rounds after convergence (a solve from rest).
  void SetPostureRounds(int rounds) { posture_rounds_ = rounds; }
  // Before Run: no posture steps (BodyModel::relax) at all.
  void DisablePosture() { posture_ = false; }
  // After Run: whether a posture step was taken.
  bool Postured() const { return postured_; }
  // After Run: whether every goal of the request was reached.
  bool Reached() const { return reached_; }
  // After Run: each goal's excess of the pose as it is, by goal of the
  // request (0 for the others), in `to`.
  void ExcessByGoal(std::vector<double>& to);
  // After ExcessByGoal, with `start` the rest pose Run started from (a
  // new character's): when an unreached goal (not a look-at) is within
  // reach, sets the pose to `start` with every hinge that turns for a goal
  // and has a range with two ends (its straight knees and elbows) to the
  // middle of its range; returns whether there was one.
  bool BendRestingHinges(const std::vector<Transform>& start);

 private:
  // Sorts the goals (priority, demoted, content) into rows and levels.
  void Arrange();
  // The columns each goal and each pair of goals can be non-zero in.
  void PairColumns();
  // What the solve does when it stops progressing with levels unreached
  // (`excess`): returns whether it changed the problem (then the goals
  // must be evaluated again).
  bool OnStall(const Levels& excess);
  void ForwardKinematics();
  // The error rows and each goal's and level's excess (level_excess_) of
  // the current pose; returns whether every goal is reached. The
  // Jacobian is filled when a step needs it (Factor).
  bool Evaluate();
  // Whether every goal of the request (not the body model's) is within its
  // tolerances at the last evaluation.
  bool RequestsReached() const;
  void FillJacobian();
  void ComputeAxes();
  // Rotational columns of joint j (0 when it has none).
  int DofCount(int j) const {
    if (s_.dof_start[j] < 0) return 0;
    return skeleton_.joint(j).type == JointType::kBall ? 3 : 1;
  }
  // The prioritised step (in s_.step, model units / radians): Factor, then
  // SolveLevels.
  void ComputeStep(double damping) {
    Factor(damping);
    SolveLevels();
  }
  // Sets the columns' squared weights (locked ones to 0) and factors the
  // levels' Gram matrices J W^2 J^T; SolveLevels takes the step for the
  // current errors. A factorisation serves later errors too (a chord
  // step).
  void Factor(double damping);
  void SolveLevels();
  // The first accepted step of every solve (relax_pending_) carries
  // kRelaxGain of the posture's step; a warm solve's also holds the
  // posture's joints where the goals do not need them (steps.cc).
  void Relax();
  // The posture's step (toward BodyModel::relax_to, `gain` of the way, in
  // the goals' null space) in s_.delta, from the current factorisation;
  // false when no joint relaxes. With `hold`, each posture joint's turn in
  // s_.step (the step about to be taken) is taken back too.
  bool PostureDelta(double gain, bool hold);
  // After convergence: factors at the pose and takes the posture's step.
  bool ApplyPosture(double gain, double damping);
  // The posture joints' summed angle from their natural rotations.
  double PostureError() const;
  double MaxFraction() const;
  // Turns each pole limb's bend about its root-effector line to face its
  // pole; returns whether it turned any.
  bool ApplyPoles();
  // The inner joint nearest the middle of the limb root..effector.
  int MiddleJoint(int effector, int root) const {
    int count = 0;
    for (int j = skeleton_.joint(effector).parent; j != root;
         j = skeleton_.joint(j).parent) {
      ++count;
    }
    int mid = skeleton_.joint(effector).parent;
    for (int k = 0; k < count / 2; ++k) mid = skeleton_.joint(mid).parent;
    return mid;
  }
  // Applies s_.step to the pose, projecting onto limits; returns whether a
  // joint that has columns was clamped (and flags it in s_.locked).
  bool ApplyStep();
  // An anatomical hinge `j` bent backwards past straight
  // (BodyModel::hinge_straight) is set straight, its swing kept; returns
  // by how much it was past, radians (0: it was not).
  double StraightenHinge(int j, Quaterniond& local) const;
  // Whether limited ball joint j's `local` is strictly inside its limits
  // (false for other joints).
  bool InsideBallLimits(int j, const Quaterniond& local) const {
    const Joint& joint = skeleton_.joint(j);
    return joint.type == JointType::kBall &&
           StrictlyInside(joint, s_.ball_bounds[j], local);
  }
  void Unstraighten();
  // Two position goals whose targets are further apart than the bones
  // from the solver's root to their effectors can span, whatever the
  // pose, cannot both be reached: the later one, or within a level the
  // one further from its target, is solved after its level from the
  // start (not only after a stall: a far hand dragged a reachable one of
  // its level for the whole of the iterations).
  // Returns whether it demoted any (then the goals must be evaluated
  // again). After the start's Evaluate.
  bool DemoteOutOfReach();
  void SaveLocals(std::vector<Transform>& to) const;
  // The Jacobian, errors and axes of the pose before a trial step, kept
  // so an undone step needs no second evaluation (the Jacobian's buffers
  // trade places: the next Factor at the trial's pose fills the other
  // one).
  void SaveEvaluation() {
    std::swap(s_.jacobian, s_.saved_jacobian);
    std::swap(jacobian_current_, saved_jacobian_current_);
    factor_current_ = false;
    s_.saved_error.head(rows_) = s_.error.head(rows_);
    std::copy(s_.axis.begin(), s_.axis.end(), s_.saved_axis.begin());
    std::copy(s_.goal_excess.begin(), s_.goal_excess.end(),
              s_.saved_goal_excess.begin());
    saved_excess_ = level_excess_;
  }
  void RestoreEvaluation() {
    std::swap(s_.jacobian, s_.saved_jacobian);
    std::swap(jacobian_current_, saved_jacobian_current_);
    factor_current_ = false;
    s_.error.head(rows_) = s_.saved_error.head(rows_);
    std::copy(s_.saved_axis.begin(), s_.saved_axis.end(), s_.axis.begin());
    std::copy(s_.saved_goal_excess.begin(), s_.saved_goal_excess.end(),
              s_.goal_excess.begin());
    level_excess_ = saved_excess_;
  }
  void RestoreLocals(const std::vector<Transform>& from);
  bool Better(const Levels& a, const Levels& b) const;
  // The weighted sum of the active levels' excess from `level` on.
  double Merit(const Levels& excess, int level = 0) const;

  const Skeleton& skeleton_;
  absl::Span<const Goal> goals_;
  const FullBodyOptions& options_;
  FullBodyScratch& s_;
  Pose& pose_;
  const BodyModel* model_;
  // Whether the body model places the body (its root free): then its
  // anatomical hinges hold (BodyModel::hinge_axis) and its posture pulls
  // (BodyModel::relax). With the root pinned the caller places the body,
  // and a retarget's transferred knees and elbows carry the source's own
  // turns, hinges or not.
  const bool places_body_;
  // Joint `j` is an anatomical hinge in this solve.
  bool Hinged(int j) const {
    return places_body_ && !model_->hinge_axis[j].isZero() &&
           !s_.caller_pole[j];
  }
  const double body_;
  int root_ = -1;
  Transform root_parent_;
  bool translates_ = false;
  int rows_ = 0;
  int cols_ = 0;
  int num_levels_ = 0;
  std::array<int, kMaxLevels + 1> level_start_{};  // Rows, + end.
  Levels level_excess_{};
  Levels saved_excess_{};
  // Each level's weight in the merit: 1e-2 per priority present, a
  // priority's demoted goals 1e-1 of its others.
  Levels level_weight_{};
  // Levels the step is solved for (fewer while an earlier level is being
  // restored: restoring_, else -1), and the leading levels whose excess a
  // step may not increase (after a restoration).
  int active_levels_ = 0;
  int restoring_ = -1;
  int restored_steps_ = 0;  // Steps the restored level has been reached.
  int protected_levels_ = 0;
  int num_poles_ = 0;  // Goals with a pole.
  // Set when no step helped while every goal outside its tolerance was
  // within one tolerance more of it: the goals inside their tolerances
  // then ask for no motion (zero error rows), so the steps go to the
  // goals outside alone.
  bool focus_ = false;
  bool relax_pending_ = false;
  // Posture rounds left after convergence (a solve from the rest pose).
  int posture_rounds_ = 0;
  bool posture_ = true;
  bool postured_ = false;
  bool reached_ = false;  // Run's outcome.
  // Whether some goal is outside its tolerance, and every such goal within
  // twice its tolerances (position and orientation, each its own).
  bool NearlyReached() const;
  // Whether s_.jacobian (s_.saved_jacobian) holds the current (saved)
  // pose's Jacobian and axes.
  bool jacobian_current_ = false;
  bool saved_jacobian_current_ = false;
  // The storage of the Jacobian the last Factor used (the buffers trade
  // places, their storage does not move) and its column stride.
  const double* factored_jacobian_ = nullptr;
  Eigen::Index factored_stride_ = 0;
  // Whether s_.gram, s_.cross and s_.small hold the last Factor's Gram
  // matrix and factors of the Jacobian still in s_.jacobian (no fill, new
  // arrangement or buffer swap since), and the damping and active levels
  // it was made with: a Factor again with other locks (a step retaken
  // without the joints it clamped) then redoes only what those columns
  // change.
  bool factor_current_ = false;
  double factored_damping_ = 0.0;
  int factored_levels_ = 0;
};

}  // namespace full_body_internal
}  // namespace reach

#endif  // REACH_SOLVERS_FULL_BODY_PROBLEM_H_
