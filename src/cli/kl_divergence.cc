#include "cli/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/check.h"

namespace vellum::cli {
namespace {

// log(sum_v exp(logits[v])), in double.
double log_sum_exp(std::span<const float> logits) {
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  return max_logit + std::log(sum);
}

}  // namespace

TokenComparison compare_next_token(std::span<const float> base_logits,
                                   std::span<const float> test_logits, int32_t next_token) {
  VELLUM_CHECK(base_logits.size() == test_logits.size() && !base_logits.empty() &&
                   next_token >= 0 && static_cast<size_t>(next_token) < base_logits.size(),
               ErrorCode::kInvalidArgument,
               "KL divergence needs two logit rows of one vocabulary and a token inside it");
  const double base_lse = log_sum_exp(base_logits);
  const double test_lse = log_sum_exp(test_logits);
  TokenComparison out;
  for (size_t v = 0; v < base_logits.size(); ++v) {
    const double log_p_base = base_logits[v] - base_lse;
    const double log_p_test = test_logits[v] - test_lse;
    out.kl += std::exp(log_p_base) * (log_p_base - log_p_test);
  }
  const auto argmax = [](std::span<const float> row) {
    return std::max_element(row.begin(), row.end()) - row.begin();
  };
  out.same_top1 = argmax(base_logits) == argmax(test_logits);
  const auto token = static_cast<size_t>(next_token);
  out.nll_base = base_lse - base_logits[token];
  out.nll_test = test_lse - test_logits[token];
  return out;
}

void KlDivergenceAccumulator::add(const TokenComparison& comparison) {
  kls_.push_back(comparison.kl);
  if (comparison.same_top1) ++same_top1_;
  base_.add_nll(comparison.nll_base);
  test_.add_nll(comparison.nll_test);
}

double KlDivergenceAccumulator::mean_kl() const {
  if (kls_.empty()) return 0.0;
  return std::accumulate(kls_.begin(), kls_.end(), 0.0) / static_cast<double>(kls_.size());
}

double KlDivergenceAccumulator::kl_percentile(double percent) const {
  if (kls_.empty()) return 0.0;
  std::vector<double> sorted = kls_;
  std::sort(sorted.begin(), sorted.end());
  // Linear interpolation between the closest ranks (llama.cpp's percentile of its KLD values).
  const double rank = percent / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double KlDivergenceAccumulator::top1_agreement() const {
  return kls_.empty() ? 0.0 : static_cast<double>(same_top1_) / static_cast<double>(kls_.size());
}

}  // namespace vellum::cli
