// SolveTally: solve metrics added up per worker, recorded in one go, must
// land in the same buckets, sums and counters as observing each value.
#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "prometheus/histogram.h"
#include "server/metrics.h"
#include "server/solve_tally.h"

namespace reach {
namespace {

// The metric of `family` whose `solver` label (if any) is `solver`.
const prometheus::ClientMetric* Find(
    const std::vector<prometheus::MetricFamily>& families,
    const std::string& family, const std::string& solver,
    const std::string& outcome = "") {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != family) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      bool match = true;
      for (const prometheus::ClientMetric::Label& l : m.label) {
        if (l.name == "solver" && l.value != solver) match = false;
        if (l.name == "outcome" && l.value != outcome) match = false;
      }
      if (match) return &m;
    }
  }
  return nullptr;
}

void ExpectSameHistogram(const prometheus::ClientMetric::Histogram& got,
                         const prometheus::ClientMetric::Histogram& want) {
  EXPECT_EQ(got.sample_count, want.sample_count);
  EXPECT_DOUBLE_EQ(got.sample_sum, want.sample_sum);
  ASSERT_EQ(got.bucket.size(), want.bucket.size());
  for (size_t i = 0; i < got.bucket.size(); ++i) {
    EXPECT_EQ(got.bucket[i].cumulative_count, want.bucket[i].cumulative_count)
        << "bucket " << i << " (le " << want.bucket[i].upper_bound << ")";
  }
}

TEST(SolveTallyTest, RecordMatchesObservingEveryValue) {
  Metrics metrics;
  SolveTally tally;
  prometheus::Histogram iterations(IterationBuckets());
  prometheus::Histogram errors(PositionErrorBuckets());
  prometheus::Histogram durations(SolveDurationBuckets());
  // Values on boundaries, between them, past the last, zero and NaN.
  const std::vector<int> its = {1, 2, 3, 4, 17, 100000000, 0};
  const std::vector<double> errs = {
      1e-9, 2e-9, 0.0, 1e3, 1e9, std::numeric_limits<double>::quiet_NaN(),
      5e-5};
  for (size_t i = 0; i < its.size(); ++i) {
    tally.GoalDone(SolverKind::kFabrik, i % 3 != 0, its[i], errs[i]);
    iterations.Observe(its[i]);
    errors.Observe(errs[i]);
  }
  for (double seconds : {250e-9, 1e-6, 3e-3, 100.0}) {
    tally.SolveDone(static_cast<int>(SolverKind::kFabrik),
                    absl::Seconds(seconds));
    durations.Observe(seconds);
  }
  // A single observation takes the plain Observe path.
  tally.SolveDone(kMixedSolverLabel, absl::Microseconds(3));
  metrics.Record(tally);

  const auto families = metrics.registry()->Collect();
  const auto* got = Find(families, "reach_solve_iterations", "fabrik");
  ASSERT_NE(got, nullptr);
  ExpectSameHistogram(got->histogram, iterations.Collect().histogram);
  got = Find(families, "reach_solve_duration_seconds", "fabrik");
  ASSERT_NE(got, nullptr);
  ExpectSameHistogram(got->histogram, durations.Collect().histogram);
  got = Find(families, "reach_solve_position_error", "");
  ASSERT_NE(got, nullptr);
  const auto want_errors = errors.Collect().histogram;
  EXPECT_EQ(got->histogram.sample_count, want_errors.sample_count);
  EXPECT_TRUE(std::isnan(got->histogram.sample_sum));  // NaN sums to NaN.
  for (size_t i = 0; i < want_errors.bucket.size(); ++i) {
    EXPECT_EQ(got->histogram.bucket[i].cumulative_count,
              want_errors.bucket[i].cumulative_count);
  }
  got = Find(families, "reach_solve_duration_seconds", "mixed");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->histogram.sample_count, 1u);
  EXPECT_DOUBLE_EQ(got->histogram.sample_sum, 3e-6);
  got = Find(families, "reach_goals_total", "fabrik", "reached");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->counter.value, 4);
  got = Find(families, "reach_goals_total", "fabrik", "unreached");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->counter.value, 3);

  // Record cleared the tally: recording it again adds nothing.
  metrics.Record(tally);
  const auto again = metrics.registry()->Collect();
  EXPECT_EQ(Find(again, "reach_solve_iterations", "fabrik")
                ->histogram.sample_count,
            its.size());
  EXPECT_EQ(Find(again, "reach_goals_total", "fabrik", "reached")
                ->counter.value,
            4);
}

}  // namespace
}  // namespace reach
