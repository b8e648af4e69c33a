// Solve metrics added up on one worker, recorded into Metrics in one go.
#ifndef REACH_SERVER_SOLVE_TALLY_H_
#define REACH_SERVER_SOLVE_TALLY_H_

#include <array>
#include <vector>

#include "absl/time/time.h"
#include "solvers/goal.h"

namespace reach {

// Solver label values: the solvers that run (AUTO is always resolved), plus
// "mixed" for a request whose goals ran on different solvers.
inline constexpr int kNumSolverLabels = kNumSolverKinds + 1;
inline constexpr int kMixedSolverLabel = kNumSolverKinds;

// Histogram boundaries start, start*factor, ... (count of them).
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// Bucket boundaries of the solve histograms (Metrics and SolveTally).
const std::vector<double>& SolveDurationBuckets();  // Seconds.
const std::vector<double>& IterationBuckets();
const std::vector<double>& PositionErrorBuckets();  // Model units.

// The solve metrics of one worker's work, added up without locks and
// recorded into Metrics in one go (Metrics::Record). Each Observe on a
// prometheus-cpp histogram takes its mutex; two workers recording every goal
// of a 1000-character SolveBatch fight over it, recording per chunk does
// not. Reused: Record clears it, and it allocates nothing after
// construction.
class SolveTally {
 public:
  SolveTally();

  // One reach::Solve call; `solver_label` is a SolverKind or
  // kMixedSolverLabel.
  void SolveDone(int solver_label, absl::Duration elapsed);
  // One goal of it.
  void GoalDone(SolverKind solver, bool reached, int iterations,
                double position_error);

 private:
  friend class Metrics;
  // One histogram's observations: counts per bucket as prometheus-cpp
  // buckets them, their sum, and the value itself while there is only one
  // (recorded with a plain Observe, which is cheaper then).
  struct Histogram {
    const std::vector<double>* bounds = nullptr;
    std::vector<double> counts;  // bounds->size() + 1: the last is +Inf.
    double sum = 0.0;
    double single = 0.0;
    int observations = 0;

    void Bind(const std::vector<double>& boundaries);
    void Add(double value);
    void Clear();
  };
  struct PerSolver {
    Histogram duration, iterations;
    double reached = 0.0, unreached = 0.0;
    bool touched = false;
  };
  std::array<PerSolver, kNumSolverLabels> solvers_;
  Histogram position_error_;
};

}  // namespace reach

#endif  // REACH_SERVER_SOLVE_TALLY_H_
