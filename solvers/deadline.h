// When a solve must stop, whatever its iteration and restart counts say: a
// wall-clock deadline and a cancellation flag, both optional.
#ifndef REACH_SOLVERS_DEADLINE_H_
#define REACH_SOLVERS_DEADLINE_H_

#include <atomic>
#include <chrono>

namespace reach {

// A deadline on the steady clock and/or a flag another thread may raise.
// The default stops nothing. A solve that stops early keeps the best pose it
// has found (measured as usual, so `reached` says whether it got there).
// Checked cheaply: Expired() reads the clock only when there is a time
// limit, and the solvers call it every few iterations (StallGuard) and
// before every restart (RunWithRestarts).
struct Deadline {
  using Clock = std::chrono::steady_clock;

  // Stop at or after this instant. Clock::time_point::max(): no time limit.
  Clock::time_point at = Clock::time_point::max();
  // Stop once *cancelled is true (read with relaxed ordering: the solve
  // stops at its next check). nullptr: not cancellable. Must outlive the
  // solve.
  const std::atomic<bool>* cancelled = nullptr;

  bool has_time_limit() const { return at != Clock::time_point::max(); }
  bool IsSet() const { return has_time_limit() || cancelled != nullptr; }

  // Whether the solve must stop now.
  bool Expired() const {
    if (cancelled != nullptr && cancelled->load(std::memory_order_relaxed)) {
      return true;
    }
    return has_time_limit() && Clock::now() >= at;
  }

  // A deadline `ms` milliseconds from now; none when ms is NaN or more
  // than a year (the clock's range is not tested).
  static Deadline In(double ms) {
    Deadline d;
    constexpr double kYearMs = 365.0 * 24 * 3600 * 1e3;
    if (!(ms <= kYearMs)) return d;
    d.at = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double, std::milli>(ms));
    return d;
  }

  // This deadline, or `budget_ms` milliseconds from now when that comes
  // first (a goal's SolveOptions::time_budget_ms, validated to at most
  // 60000); the flag is kept. budget_ms <= 0: unchanged (no budget).
  Deadline WithBudget(double budget_ms) const {
    if (!(budget_ms > 0.0)) return *this;
    Deadline out = *this;
    const Clock::time_point end = In(budget_ms).at;
    if (end < out.at) out.at = end;
    return out;
  }
};

}  // namespace reach

#endif  // REACH_SOLVERS_DEADLINE_H_
