// FullBodySolve (problem.h): how levels of goals compare (Better, Merit)
// and how the problem changes when a solve stalls or two goals cannot
// both be reached (a goal demoted after its level, a level restored).

#include "solvers/full_body/problem.h"

#include <algorithm>
#include <utility>

namespace reach {
namespace full_body_internal {

bool FullBodySolve::DemoteOutOfReach() {
  const int m = static_cast<int>(s_.goal_order.size());
  if (m < 2) return false;
  // Each goal's reach from the root (its bones' lengths), in
  // saved_goal_excess (free until a step saves the evaluation).
  const std::vector<double>& depth = skeleton_.body_model().reach;
  std::vector<double>& reach = s_.saved_goal_excess;
  for (int k = 0; k < m; ++k) reach[k] = depth[s_.effector[k]] - depth[root_];
  bool any = false;
  for (int a = 0; a < m; ++a) {
    const Goal& ga = goals_[s_.goal_order[a]];
    if (ga.aim_axis || s_.demoted[s_.goal_order[a]]) continue;
    for (int b = a + 1; b < m; ++b) {
      const Goal& gb = goals_[s_.goal_order[b]];
      if (gb.aim_axis || s_.demoted[s_.goal_order[b]]) continue;
      if (!((ga.target - gb.target).norm() >
            reach[a] + reach[b] + s_.tolerance[s_.goal_order[a]] +
                s_.tolerance[s_.goal_order[b]])) {
        continue;
      }
      // Sorted by priority: a's is at most b's. Within a level, the one
      // that asked for more at the start (as OnStall decides).
      int later = b;
      if (ga.priority == gb.priority &&
          s_.start_excess[s_.goal_order[a]] >
              s_.start_excess[s_.goal_order[b]]) {
        later = a;
      }
      if (s_.soft[s_.goal_order[later]] != FullBodyScratch::kRequestGoal) {
        continue;
      }
      s_.demoted[s_.goal_order[later]] = 1;
      any = true;
      if (later == a) break;
    }
  }
  if (any) {
    Arrange();
    PairColumns();
  }
  return any;
}

bool FullBodySolve::Better(const Levels& a, const Levels& b) const {
  // The protected levels compare strictly in order: a step never costs
  // them anything.
  int level = 0;
  for (; level < protected_levels_ && level < active_levels_; ++level) {
    if (a[level] > b[level] * (1.0 + 1e-12)) return false;
    if (a[level] < b[level] * (1.0 - 1e-12)) return true;
  }
  // Then a merit that weighs each priority's squared excess 100 times the
  // next one's: a step may cost an earlier level a little while a later
  // one gains much more (the nonlinearity of a long step); the next step,
  // solved for the earlier level first, gives it back.
  return Merit(a, level) < Merit(b, level) * (1.0 - 1e-12);
}

double FullBodySolve::Merit(const Levels& excess, int level) const {
  double merit = 0.0;
  for (; level < active_levels_; ++level) {
    merit += level_weight_[level] * excess[level];
  }
  return merit;
}

bool FullBodySolve::OnStall(const Levels& excess) {
  if (restoring_ >= 0) {
    // The restored level got as close as it can: every level again, that
    // one and those before it protected.
    protected_levels_ = std::max(protected_levels_, restoring_ + 1);
    restoring_ = -1;
    active_levels_ = num_levels_;
    return true;
  }
  const int m = static_cast<int>(s_.goal_order.size());
  for (int level = 0; level < num_levels_; ++level) {
    if (!(excess[level] > 0.0)) continue;
    // A level of several goals: within a level goals share their errors,
    // so one that cannot be reached with the others (a foot far below the
    // floor) drags them (the planted foot) along. The goal that asked for
    // the most (the largest weighted excess at the start, then now) is
    // demoted: solved after the rest of its level, in their null space.
    // Goals already at their targets stay there, as a stream's answer
    // stays near the last.
    int begin = 0;
    while (s_.goal_row[begin] < level_start_[level]) ++begin;
    // The body model's own goals come last and never change the problem.
    if (s_.soft[s_.goal_order[begin]] != FullBodyScratch::kRequestGoal) break;
    int end = begin;
    while (end < m && s_.goal_row[end] < level_start_[level + 1]) ++end;
    if (end - begin >= 2 && !s_.demoted[s_.goal_order[begin]]) {
      auto asked = [&](int k) {
        return std::make_pair(s_.start_excess[s_.goal_order[k]],
                              s_.goal_excess[k]);
      };
      int worst = begin;
      for (int k = begin + 1; k < end; ++k) {
        if (asked(k) > asked(worst)) worst = k;
      }
      s_.demoted[s_.goal_order[worst]] = 1;
      const int levels_before = num_levels_;
      Arrange();
      PairColumns();
      // A new sub-level after this one shifts the protected ones.
      if (num_levels_ > levels_before && protected_levels_ > level) {
        ++protected_levels_;
      }
      return true;
    }
    // A level a later one keeps from its target (the second-order effect
    // of the later levels' steps): solve it alone until it gets there or
    // stalls, then keep it where it is. Once protected, a level that is
    // still unreached cannot be helped: look at the next.
    if (level + 1 < num_levels_ && protected_levels_ <= level) {
      restoring_ = level;
      restored_steps_ = 0;
      active_levels_ = level + 1;
      return true;
    }
  }
  return false;
}

}  // namespace full_body_internal
}  // namespace reach
