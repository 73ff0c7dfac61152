#include "benchserve/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>

#include "vellum/status.h"

namespace vellum::benchserve {
namespace {

struct GapStats {
  double mean = 0.0, cv = 0.0;  // coefficient of variation: std / mean
};

GapStats gap_stats(const std::vector<double>& times) {
  std::vector<double> gaps;
  double prev = 0.0;
  for (const double t : times) {
    gaps.push_back(t - prev);
    prev = t;
  }
  double mean = 0.0;
  for (const double g : gaps) mean += g;
  mean /= static_cast<double>(gaps.size());
  double var = 0.0;
  for (const double g : gaps) var += (g - mean) * (g - mean);
  var /= static_cast<double>(gaps.size());
  return {mean, std::sqrt(var) / mean};
}

TEST(ArrivalsTest, InfiniteRateSendsEverythingAtZero) {
  const auto times = arrival_times(100, INFINITY, 1.0, 0);
  ASSERT_EQ(times.size(), 100u);
  for (const double t : times) EXPECT_EQ(t, 0.0);
}

TEST(ArrivalsTest, PoissonGapsHaveMeanOneOverRate) {
  const int64_t n = 20000;
  const auto times = arrival_times(n, 50.0, 1.0, 0);
  ASSERT_EQ(times.size(), static_cast<size_t>(n));
  for (size_t i = 1; i < times.size(); ++i) ASSERT_GE(times[i], times[i - 1]);
  EXPECT_GT(times.front(), 0.0);
  EXPECT_NEAR(times.back(), static_cast<double>(n) / 50.0, 1e-9);  // rescaled like vLLM
  const GapStats s = gap_stats(times);
  EXPECT_NEAR(s.mean, 1.0 / 50.0, 1e-9);
  EXPECT_NEAR(s.cv, 1.0, 0.05);  // exponential gaps: std == mean
}

TEST(ArrivalsTest, BurstinessIsTheGammaShape) {
  // Gamma(shape k) gaps have CV 1/sqrt(k): burstier below 1, more regular above.
  EXPECT_NEAR(gap_stats(arrival_times(20000, 10.0, 4.0, 1)).cv, 0.5, 0.03);
  EXPECT_NEAR(gap_stats(arrival_times(20000, 10.0, 0.25, 2)).cv, 2.0, 0.15);
  const GapStats constant = gap_stats(arrival_times(100, 10.0, INFINITY, 3));
  EXPECT_NEAR(constant.mean, 0.1, 1e-12);
  EXPECT_NEAR(constant.cv, 0.0, 1e-9);
}

TEST(ArrivalsTest, SameSeedSameSchedule) {
  EXPECT_EQ(arrival_times(50, 5.0, 1.0, 7), arrival_times(50, 5.0, 1.0, 7));
  EXPECT_NE(arrival_times(50, 5.0, 1.0, 7), arrival_times(50, 5.0, 1.0, 8));
}

TEST(ArrivalsTest, RejectsNonPositiveRateOrBurstiness) {
  EXPECT_THROW(arrival_times(10, 0.0, 1.0, 0), Error);
  EXPECT_THROW(arrival_times(10, 1.0, 0.0, 0), Error);
}

}  // namespace
}  // namespace vellum::benchserve
