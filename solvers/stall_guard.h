// Stopping rule shared by the iterative solvers.
#ifndef REACH_SOLVERS_STALL_GUARD_H_
#define REACH_SOLVERS_STALL_GUARD_H_

#include "solvers/deadline.h"

namespace reach {

// Says whether an iterative solver should run another iteration: not when
// the error is within tolerance, not when the solve's deadline has passed
// or it was cancelled, and not when the last `patience` iterations together
// improved it by less than a thousandth of the tolerance or 1e-7 of the
// error itself (the solver has stalled: a limit, or an unreachable target
// where the error levels off above zero).
class StallGuard {
 public:
  // How often KeepGoing looks at the deadline: on its first call and every
  // kDeadlineEvery-th after (one clock read per 8 iterations; an iteration
  // of the cheapest solver on a short chain takes well under a microsecond,
  // the dearest tens of microseconds, so a budget overruns by a few
  // iterations at most).
  static constexpr int kDeadlineEvery = 8;

  // Without a deadline: stops on tolerance and stalls only.
  explicit StallGuard(double tolerance, int patience = 4)
      : tolerance_(tolerance), patience_(patience) {}
  // With the problem's deadline (ChainProblem::deadline), copied.
  StallGuard(const Deadline& deadline, double tolerance, int patience = 4)
      : tolerance_(tolerance),
        patience_(patience),
        deadline_(deadline),
        timed_(deadline.IsSet()) {}

  bool KeepGoing(double error) {
    if (error <= tolerance_) return false;
    if (timed_ && calls_++ % kDeadlineEvery == 0 && deadline_.Expired()) {
      return false;
    }
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
  Deadline deadline_;
  bool timed_ = false;
  unsigned calls_ = 0;
};

// Says when a linearly converging solver (FABRIK, CCD) has slowed down so
// much that its finishing pass (BendToReach, RefineTipPosition) will do
// better: when the error fell by less than the factor `ratio` over the
// last kWindow iterations (ratio 0.66: less than about 10% per iteration).
class SlowProgress {
 public:
  static constexpr int kWindow = 4;
  explicit SlowProgress(double ratio) : ratio_(ratio) {}

  // Records the error before an iteration; true when progress is slow.
  bool Slow(double error) {
    const bool slow = count_ >= kWindow && error > ratio_ * history_[next_];
    history_[next_] = error;
    next_ = next_ + 1 == kWindow ? 0 : next_ + 1;
    ++count_;
    return slow;
  }

 private:
  double ratio_;
  double history_[kWindow] = {};
  int next_ = 0;
  int count_ = 0;
};

}  // namespace reach

#endif  // REACH_SOLVERS_STALL_GUARD_H_
