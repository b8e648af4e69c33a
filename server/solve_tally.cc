#include "server/solve_tally.h"

#include <algorithm>

namespace reach {

std::vector<double> ExponentialBuckets(double start, double factor,
                                       int count) {
  std::vector<double> out;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) out.push_back(b);
  return out;
}

// Solve duration: 250 ns .. ~4 s.
const std::vector<double>& SolveDurationBuckets() {
  static const auto* buckets =
      new std::vector<double>(ExponentialBuckets(250e-9, 2.0, 24));
  return *buckets;
}
const std::vector<double>& IterationBuckets() {
  static const auto* buckets =
      new std::vector<double>(ExponentialBuckets(1.0, 2.0, 18));
  return *buckets;
}
const std::vector<double>& PositionErrorBuckets() {
  static const auto* buckets =
      new std::vector<double>(ExponentialBuckets(1e-9, 10.0, 12));
  return *buckets;
}

void SolveTally::Histogram::Bind(const std::vector<double>& boundaries) {
  bounds = &boundaries;
  counts.assign(boundaries.size() + 1, 0.0);
}

void SolveTally::Histogram::Add(double value) {
  // The bucket prometheus::Histogram::Observe picks: the first boundary not
  // below the value (NaN lands in the first, as there).
  const auto bucket = std::lower_bound(bounds->begin(), bounds->end(), value);
  counts[bucket - bounds->begin()] += 1.0;
  sum += value;
  single = value;
  ++observations;
}

void SolveTally::Histogram::Clear() {
  if (observations == 0) return;
  std::fill(counts.begin(), counts.end(), 0.0);
  sum = 0.0;
  observations = 0;
}

SolveTally::SolveTally() {
  for (PerSolver& s : solvers_) {
    s.duration.Bind(SolveDurationBuckets());
    s.iterations.Bind(IterationBuckets());
  }
  position_error_.Bind(PositionErrorBuckets());
}

void SolveTally::SolveDone(int solver_label, absl::Duration elapsed) {
  PerSolver& s = solvers_[solver_label];
  s.duration.Add(absl::ToDoubleSeconds(elapsed));
  s.touched = true;
}

void SolveTally::GoalDone(SolverKind solver, bool reached, int iterations,
                          double position_error) {
  PerSolver& s = solvers_[static_cast<int>(solver)];
  (reached ? s.reached : s.unreached) += 1.0;
  s.iterations.Add(iterations);
  s.touched = true;
  position_error_.Add(position_error);
}

}  // namespace reach
