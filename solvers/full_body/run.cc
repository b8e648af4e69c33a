// FullBodySolve::Run (problem.h), the Levenberg-Marquardt iteration over
// the prioritised steps, and SolveFullBody (full_body.h): the body
// model's goals, the solve, and a second attempt from a rest pose.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "solvers/full_body/problem.h"

namespace reach {
namespace full_body_internal {
namespace {

// Damping of every level's least-squares step (rows in body sizes and
// radians, so dimensionless): small enough that a well-conditioned level
// converges by ~1e-3 per iteration, large enough that a singular one
// (straight knees, out-of-reach targets) takes bounded steps.
constexpr double kDamping = 0.03;
constexpr double kMinDamping = 0.003;
constexpr double kMaxDamping = 10.0;
// Iterations between checks for a stalled solve, and the share of the
// merit those iterations must remove.
constexpr int kStallWindow = 8;
constexpr double kStallProgress = 0.5;
// Chord steps: after a full step whose largest joint rotation (radians) or
// root move (body sizes) was below kChordStep and which cut the merit to
// below kChordProgress of what it was (Gauss-Newton's fast regime, where
// the Jacobian barely changes), the next step, one only, reuses its
// factorisation. (Measured on solver_bench's warm-started humanoid: p50
// 23.1 -> 18.9 us; a second chord step in a row, or a longer or slower
// step before one, cost more iterations than they saved.)
constexpr double kChordStep = 0.05;
constexpr double kChordProgress = 0.01;

}  // namespace

void FullBodySolve::SaveLocals(std::vector<Transform>& to) const {
  for (int j : s_.active_joints) to[j] = pose_.local[j];
}
void FullBodySolve::RestoreLocals(const std::vector<Transform>& from) {
  for (int j : s_.active_joints) pose_.local[j] = from[j];
}

int FullBodySolve::Run(const Deadline& deadline, int max_iterations) {
  if (options_.root_mode == RootMode::kPrePull && translates_) {
    // Move the root by the weighted mean displacement its position goals
    // ask of their effectors.
    ForwardKinematics();
    Vector3d sum = Vector3d::Zero();
    double weights = 0.0;
    for (size_t k = 0; k < s_.goal_order.size(); ++k) {
      const Goal& goal = goals_[s_.goal_order[k]];
      if (goal.aim_axis) continue;
      sum +=
          goal.weight * (goal.target - s_.globals[s_.effector[k]].translation);
      weights += goal.weight;
    }
    if (weights > 0.0) pose_.local[root_].translation += sum / weights;
  }
  // Both leave the model-space transforms current.
  Unstraighten();
  if (num_poles_ > 0) ApplyPoles();
  // Levenberg-Marquardt on the prioritised step: a step that leaves the
  // goals worse (levels compared in priority order) is undone and the
  // damping raised; one that helps is kept and the damping lowered.
  double damping = kDamping;
  bool reached = Evaluate();
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    s_.start_excess[s_.goal_order[k]] = s_.goal_excess[k];
  }
  if (DemoteOutOfReach()) reached = Evaluate();
  Levels current = level_excess_;
  int iterations = 0;
  relax_pending_ = true;
  int pole_rounds = num_poles_ > 0 ? 2 : 0;
  // The merit and iteration at the last stall check (or restart).
  double check_merit = Merit(current);
  int check_iteration = 0;
  // Whether the last full step's factorisation (Factor) can serve a chord
  // step (the problem and locks it was made with still hold, and it has
  // not served one yet), and whether the last step was short and
  // converging fast.
  bool factored = false;
  bool chord_ok = false;
  // After a stall changed the problem: the goals' rows again.
  auto restart = [&] {
    factored = false;
    reached = Evaluate();
    current = level_excess_;
    damping = kDamping;
    check_merit = Merit(current);
    check_iteration = iterations;
  };
  for (;;) {
    if (reached && pole_rounds > 0) {
      // Converged: face the poles, and converge again if that cost a goal
      // (an orientation the limits would not turn back).
      --pole_rounds;
      if (ApplyPoles()) {
        factored = false;
        reached = Evaluate();
        current = level_excess_;
        damping = kDamping;
      } else {
        pole_rounds = 0;  // Every bend faces its pole: nothing changed.
      }
    }
    if (reached && posture_rounds_ > 0 && 2 * iterations < max_iterations &&
        PostureError() > kFoldedPosture) {
      // Converged from the rest pose with the trunk folded: the posture's
      // rounds (a solve from rest takes a long path, and the trunk ends
      // wherever the first steps bent it: Boxing's hands to the floor
      // folded its spine 102 degrees, 75 after four rounds), each followed
      // by converging again if it cost a goal.
      --posture_rounds_;
      ++iterations;
      if (ApplyPosture(kPostureGain, kDamping)) {
        factored = false;
        reached = Evaluate();
        current = level_excess_;
        damping = kDamping;
      } else {
        posture_rounds_ = 0;
      }
    }
    if (reached || iterations >= max_iterations) break;
    if (iterations % 4 == 3 && deadline.Expired()) break;
    ++iterations;
    SaveLocals(s_.saved_locals);
    // After a short step, the factorisation it was solved with serves this
    // pose's errors too (a chord step: the Jacobian barely changed), unless
    // a joint reaches a new limit.
    bool full = !(factored && chord_ok);
    if (!full) {
      factored = false;
      SolveLevels();
      if (ApplyStep()) {
        RestoreLocals(s_.saved_locals);
        full = true;
      }
    }
    if (full) {
      std::fill(s_.locked.begin(), s_.locked.end(), 0);
      ComputeStep(damping);
      factored = true;
      if (ApplyStep()) {
        // Joints hit their limits: the step again without them, so the
        // others take up the motion (the transforms are still the
        // start's). Should that step lock more, the factorisation no
        // longer matches the locks: no chord step from it.
        RestoreLocals(s_.saved_locals);
        ComputeStep(damping);
        factored = !ApplyStep();
      }
    }
    const double moved = s_.step.head(cols_).lpNorm<Eigen::Infinity>();
    ForwardKinematics();
    SaveEvaluation();
    bool now_reached = Evaluate();
    if (!now_reached && protected_levels_ > 0 && restoring_ < 0 &&
        !Better(level_excess_, current) &&
        Merit(level_excess_, protected_levels_) <
            Merit(current, protected_levels_)) {
      // The later levels gained and a protected level lost: the curvature
      // of its goals along a step in their null space. One step for it
      // and the levels before it alone, from here, takes it back.
      int lost = 0;
      while (lost < protected_levels_ &&
             !(level_excess_[lost] > current[lost])) {
        ++lost;
      }
      if (lost < protected_levels_) {
        const int active = active_levels_;
        active_levels_ = lost + 1;
        std::fill(s_.locked.begin(), s_.locked.end(), 0);
        ComputeStep(kDamping);
        factored = false;
        ApplyStep();
        active_levels_ = active;
        ForwardKinematics();
        now_reached = Evaluate();
      }
    }
    if (now_reached || Better(level_excess_, current) ||
        (restoring_ >= 0 && Merit(level_excess_) == 0.0)) {
      relax_pending_ = false;
      chord_ok = moved < kChordStep &&
                 Merit(level_excess_) < kChordProgress * Merit(current);
      current = level_excess_;
      reached = now_reached;
      damping = std::max(kMinDamping, 0.5 * damping);
      if (restoring_ >= 0 && current[restoring_] == 0.0 &&
          ++restored_steps_ > 2) {
        // Restored, and two more steps taken it well inside its
        // tolerance (a later level's next steps may move it a little):
        // every level again.
        OnStall(current);
        restart();
        continue;
      }
    } else {
      RestoreLocals(s_.saved_locals);
      ForwardKinematics();
      RestoreEvaluation();
      factored = false;
      // A chord step that did not help says the factorisation is stale,
      // not that the damping is too low: a full step next.
      if (!full) continue;
      damping *= 4.0;
      if (damping > kMaxDamping) {
        if (!focus_ && NearlyReached()) {
          // No step helps, with the goals outside their tolerances just
          // outside: a step for every goal's whole error, most of it the
          // goals already reached closing in on their targets, can cost a
          // goal outside its last hair (a 54-joint rig's pelvis point
          // ended at 1.004 times its tolerance after 27 iterations). From
          // here the reached goals hold still and the steps serve the
          // others.
          focus_ = true;
          restart();
          continue;
        }
        // No step helps: converged, unless the problem can change.
        if (!OnStall(current)) break;
        restart();
        continue;
      }
    }
    if (moved < 1e-12) {
      // Nothing moves (the goals' joints held at their limits): converged,
      // unless the problem can change (a restoration ends).
      if (!OnStall(current)) break;
      restart();
      continue;
    }
    if (iterations - check_iteration >= kStallWindow) {
      const double merit = Merit(current);
      if (merit > kStallProgress * check_merit && OnStall(current)) {
        restart();
      } else {
        check_merit = merit;
        check_iteration = iterations;
      }
    }
  }
  // Reached: the request's goals (a planted foot's goal, which keeps the
  // solve going, is the model's: left short, it makes no second attempt).
  reached_ = reached || RequestsReached();
  return std::max(iterations, 1);
}

void FullBodySolve::ExcessByGoal(std::vector<double>& to) {
  ForwardKinematics();
  Evaluate();
  to.assign(goals_.size(), 0.0);
  for (size_t k = 0; k < s_.goal_order.size(); ++k) {
    to[s_.goal_order[k]] = s_.goal_excess[k];
  }
}

}  // namespace full_body_internal

namespace {

using full_body_internal::FullBodySolve;
using full_body_internal::IsFullBody;

// An attempt's iterations when FullBodyOptions::max_iterations is 0.
constexpr int kDefaultIterations = 64;

// Whether every joint below a root is at its rest rotation in `locals`
// (a new character, wherever its roots are), to about 3e-6 rad.
bool AtRest(const Skeleton& skeleton, const std::vector<Transform>& locals) {
  for (int j = 0; j < skeleton.num_joints(); ++j) {
    if (skeleton.joint(j).parent >= 0 &&
        !(std::abs(locals[j].rotation.dot(skeleton.joint(j).rest.rotation)) >=
          1.0 - 1e-12)) {
      return false;
    }
  }
  return true;
}

// Whether `b` (each goal's excess, by goal of the request) is better than
// `a`: the lowest priority whose goals differ decides, by how many of them
// are unreached, then by their summed excess (by more than 1e-6 of it, so
// that rounding, or the order the sums run in, never decides); NaN is
// worse than anything.
bool BetterByPriority(absl::Span<const Goal> goals,
                      const std::vector<double>& a,
                      const std::vector<double>& b) {
  int last = std::numeric_limits<int>::min();
  for (;;) {
    int next = std::numeric_limits<int>::max();
    bool found = false;
    for (size_t i = 0; i < goals.size(); ++i) {
      if (IsFullBody(goals[i]) && goals[i].priority > last &&
          goals[i].priority <= next) {
        next = goals[i].priority;
        found = true;
      }
    }
    if (!found) return false;
    int ua = 0, ub = 0;
    double sa = 0.0, sb = 0.0;
    for (size_t i = 0; i < goals.size(); ++i) {
      if (!IsFullBody(goals[i]) || goals[i].priority != next) continue;
      ua += !(a[i] == 0.0);
      ub += !(b[i] == 0.0);
      sa += a[i];
      sb += b[i];
    }
    if (ub != ua) return ub < ua;
    if (std::isnan(sa) || std::isnan(sb)) {
      return std::isnan(sa) && !std::isnan(sb);
    }
    if (sb < sa * (1.0 - 1e-6)) return true;
    if (sb > sa * (1.0 + 1e-6)) return false;
    last = next;
  }
}

}  // namespace

int SolveFullBody(const Skeleton& skeleton, absl::Span<const Goal> request,
                  const FullBodyOptions& options, const Deadline& deadline,
                  FullBodyScratch& scratch, Pose* pose,
                  absl::Span<GoalResult> request_results) {
  const Deadline budget = deadline.WithBudget(options.time_budget_ms);
  const int max_iterations =
      options.max_iterations > 0 ? options.max_iterations : kDefaultIterations;
  int iterations = 0;
  // The body model (BodyMode::kHuman on a humanoid): the request's goals
  // with preferred bends, then the pelvis' goals (AddBodyGoals), solved in
  // place of the request's.
  const BodyModel& body = skeleton.body_model();
  const BodyModel* model =
      options.body == BodyMode::kHuman && body.human ? &body : nullptr;
  absl::Span<const Goal> goals = request;
  absl::Span<GoalResult> results = request_results;
  scratch.soft.assign(request.size(), FullBodyScratch::kRequestGoal);
  scratch.pole_cone.assign(request.size(), 0.0);
  // A new character (every joint below a root at rest; a stream's frame
  // almost never is, and the check stops at its first joint off rest). The
  // body model moves only the top root, so this holds after it too.
  const bool from_rest = AtRest(skeleton, pose->local);
  if (model != nullptr) {
    scratch.body_goals.assign(request.begin(), request.end());
    scratch.body_stiffness.assign(body.stiffness.begin(), body.stiffness.end());
    if (options.root_joint < 0 && options.root_mode != RootMode::kPinned) {
      AddBodyGoals(skeleton, body, options, from_rest, scratch.globals,
                   scratch.body_known, scratch.body_goals, scratch.soft,
                   scratch.pole_cone, scratch.body_stiffness, pose);
    }
    scratch.body_results.resize(scratch.body_goals.size());
    goals = scratch.body_goals;
    results = absl::MakeSpan(scratch.body_results);
  }
  {
    // The start, for another attempt from it (a posture fallback needs
    // one only where the body model has a posture).
    if (from_rest || (model != nullptr && !model->relax.empty())) {
      scratch.start_locals = pose->local;
    }
    FullBodySolve solve(skeleton, goals, options, scratch, pose, model);
    if (from_rest) solve.SetPostureRounds(kPostureRounds);
    if (solve.Setup(results)) {
      iterations = solve.Run(budget, max_iterations);
      bool reached = solve.Reached();
      // Another attempt at the same goals from the pose as it is when
      // called (`configure` sets it up), after keeping the answer so far
      // (keep): the better answer stays, priorities compared in order.
      auto keep = [&] {
        solve.ExcessByGoal(scratch.first_excess);
        scratch.first_locals = pose->local;
      };
      auto attempt = [&](auto&& configure) {
        FullBodySolve again(skeleton, goals, options, scratch, pose, model);
        configure(again);
        bool better = false;
        if (again.Setup(results)) {
          iterations += again.Run(budget, max_iterations);
          again.ExcessByGoal(scratch.second_excess);
          better = BetterByPriority(goals, scratch.first_excess,
                                    scratch.second_excess);
          if (better) reached = again.Reached();
        }
        if (!better) pose->local = scratch.first_locals;
      };
      // The posture (BodyModel::relax) turns joints in the goals' null
      // space, which holds to first order only: rarely, what is left lets
      // a goal stall (a pelvis point of BCN's gameplay stream at 2.2 times
      // its tolerance). A solve it leaves unreached is made again from the
      // same start without it.
      if (!reached && solve.Postured() && !budget.Expired()) {
        keep();
        pose->local = scratch.start_locals;
        attempt([](FullBodySolve& plain) { plain.DisablePosture(); });
      }
      // A new character's straight limbs can settle into bends no step
      // leaves (a knee at its range's end with the foot far off): when a
      // solve from the rest pose leaves a goal within reach unreached, a
      // second attempt starts from it with every resting hinge (knees,
      // elbows) bent to the middle of its range. On the DART peer
      // benchmark's full-range poses of the limited humanoid this took the
      // solves from rest that reach every goal from 86.5% to 98.0%. Any
      // other start (a stream's frames) never makes one.
      if (from_rest && !reached && !budget.Expired()) {
        keep();
        if (!solve.BendRestingHinges(scratch.start_locals)) {
          pose->local = scratch.first_locals;
        } else {
          attempt([](FullBodySolve& again) {
            again.SetPostureRounds(kPostureRounds);
          });
        }
      }
    }
  }
  if (model != nullptr) {
    for (size_t i = 0; i < request.size(); ++i) {
      if (IsFullBody(request[i])) request_results[i] = scratch.body_results[i];
    }
  }
  for (size_t i = 0; i < request.size(); ++i) {
    if (IsFullBody(request[i])) request_results[i].iterations = iterations;
  }
  return iterations;
}

}  // namespace reach
