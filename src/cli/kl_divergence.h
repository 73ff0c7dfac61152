// KL divergence of next-token distributions between two runs of one model on one text (a base
// run and a tested one, e.g. a bf16 KV cache against a q8_0 one): llama.cpp's
// `llama-perplexity --kl-divergence` statistics, computed from both runs' logits in one process
// instead of a saved base file.
//
//   per scored position: KL(P_base || P_test) = sum_v P_base(v) (log P_base(v) - log P_test(v))
//                        over the whole vocabulary; top-1 agreement = same argmax; each run's
//                        nll of the text's next token (for the two perplexities)
//   positions: those of cli/perplexity.h's plan (the second half of each window)
//
// Pure: no engine, no model; the command (cmd_bench_kl_divergence.cc) feeds it logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cli/perplexity.h"

namespace vellum::cli {

struct TokenComparison {
  double kl = 0.0;        // KL(P_base || P_test), nats
  bool same_top1 = false;  // argmax of both logit rows is the same token
  double nll_base = 0.0;  // -log P_base(next_token)
  double nll_test = 0.0;  // -log P_test(next_token)
};

// Compares one position's logit rows (vocab each), log-softmax in double.
TokenComparison compare_next_token(std::span<const float> base_logits,
                                   std::span<const float> test_logits, int32_t next_token);

// Collects the comparisons of every scored position (keeps the KL values for the percentiles).
class KlDivergenceAccumulator {
 public:
  void add(const TokenComparison& comparison);

  int64_t count() const { return static_cast<int64_t>(kls_.size()); }
  double mean_kl() const;
  double kl_percentile(double percent) const;  // llama.cpp's 99.0% KLD: percent = 99
  double top1_agreement() const;               // fraction in [0, 1]
  const PerplexityAccumulator& base() const { return base_; }
  const PerplexityAccumulator& test() const { return test_; }

 private:
  std::vector<double> kls_;
  int64_t same_top1_ = 0;
  PerplexityAccumulator base_;
  PerplexityAccumulator test_;
};

}  // namespace vellum::cli
