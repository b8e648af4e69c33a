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

}  // namespace reach

#endif  // REACH_SOLVERS_STALL_GUARD_H_
