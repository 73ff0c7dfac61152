// bench serve's speculative decoding line from the server's /metrics (issue 36).
#include "benchserve/spec_metrics.h"

#include <gtest/gtest.h>

namespace vellum::benchserve {
namespace {

TEST(SpecMetrics, ParsesTheCountersUnderAnyPrefix) {
  const std::string exposition =
      "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
      "# TYPE vllm:spec_decode_num_drafts_total counter\n"
      "vllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"0\"} 10.0\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\",engine=\"0\"} 40.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\",engine=\"0\"} 25.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 9.0\n"
      "vllm:generation_tokens_total{model_name=\"m\",engine=\"0\"} 99.0\n";
  const auto counts = parse_spec_decode_counts(exposition);
  ASSERT_TRUE(counts.has_value());
  EXPECT_EQ(counts->num_drafts, 10.0);
  EXPECT_EQ(counts->num_draft_tokens, 40.0);
  EXPECT_EQ(counts->num_accepted_tokens, 25.0);
  EXPECT_FALSE(parse_spec_decode_counts("vellum:generation_tokens_total{a=\"b\"} 3.0\n"));
  const auto other = parse_spec_decode_counts("vellum:spec_decode_num_drafts_total 2\n");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->num_drafts, 2.0);
}

TEST(SpecMetrics, TheLineCoversTheRunOnly) {
  const SpecDecodeCounts before{10, 40, 25};
  const SpecDecodeCounts after{20, 80, 55};
  EXPECT_EQ(format_spec_decode_line(before, after),
            "Spec decode: draft acceptance rate 75.0 %, mean acceptance length 4.00 (10 drafts, "
            "40 draft tokens, 30 accepted; from the server's /metrics)\n");
}

}  // namespace
}  // namespace vellum::benchserve
