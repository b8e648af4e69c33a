// Stopping rule shared by the iterative solvers.
#ifndef REACH_SOLVERS_STALL_GUARD_H_
#define REACH_SOLVERS_STALL_GUARD_H_

namespace reach {

// Says whether an iterative solver should run another iteration: not when
// the error is within tolerance, and not when the last `patience`
// iterations together improved it by less than a thousandth of the
// tolerance or 1e-7 of the error itself (the solver has stalled: a limit,
// or an unreachable target where the error levels off above zero).
class StallGuard {
 public:
  explicit StallGuard(double tolerance, int patience = 4)
      : tolerance_(tolerance), patience_(patience) {}

  bool KeepGoing(double error) {
    if (error <= tolerance_) return false;
    const double progress =
        1e-3 * tolerance_ > 1e-7 * error ? 1e-3 * tolerance_ : 1e-7 * error;
    if (error < best_ - progress) {
      best_ = error;
      stalled_ = 0;
      return true;
    }
    return ++stalled_ < patience_;
  }

 private:
  double tolerance_;
  int patience_;
  double best_ = 1e300;
  int stalled_ = 0;
};

}  // namespace reach

#endif  // REACH_SOLVERS_STALL_GUARD_H_
