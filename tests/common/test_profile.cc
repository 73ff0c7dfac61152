// The step profiler of `vellum bench ... --profile`: regions count only while it is enabled, and
// the table shows each phase's share, time per step and calls per step, plus what is unaccounted.
#include <gtest/gtest.h>

#include <thread>

#include "common/profile.h"

namespace vellum::profile {
namespace {

TEST(Profile, RegionsCountOnlyWhileEnabled) {
  set_enabled(false);
  const Totals before = totals();
  { Scope s(Phase::kAttention); }
  EXPECT_EQ((totals() - before).calls[static_cast<size_t>(Phase::kAttention)], 0);

  set_enabled(true);
  {
    Scope s(Phase::kAttention);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  { Scope s(Phase::kSampling); }
  set_enabled(false);
  const Totals d = totals() - before;
  EXPECT_EQ(d.calls[static_cast<size_t>(Phase::kAttention)], 1);
  EXPECT_EQ(d.calls[static_cast<size_t>(Phase::kSampling)], 1);
  EXPECT_GE(d.seconds[static_cast<size_t>(Phase::kAttention)], 0.002);
  EXPECT_EQ(d.calls[static_cast<size_t>(Phase::kGemmFfn)], 0);
  Totals sum;
  sum += d;
  sum += d;
  EXPECT_DOUBLE_EQ(sum.sum_seconds(), 2 * d.sum_seconds());
}

TEST(Profile, TableHasSharesPerStepAndTheRest) {
  Totals t;
  t.seconds[static_cast<size_t>(Phase::kGemmFfn)] = 0.6;
  t.calls[static_cast<size_t>(Phase::kGemmFfn)] = 20;
  t.seconds[static_cast<size_t>(Phase::kAttention)] = 0.2;
  t.calls[static_cast<size_t>(Phase::kAttention)] = 10;
  const std::string table = format_table(t, 1.0, 10);
  EXPECT_NE(table.find("GEMM feed-forward                  60.0%     60.000         2.0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("attention                          20.0%     20.000         1.0"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("other (not in a phase)             20.0%     20.000"), std::string::npos)
      << table;
  EXPECT_EQ(table.find("sampling"), std::string::npos) << "phases never entered are left out";
}

}  // namespace
}  // namespace vellum::profile
