#include "cli/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

#include "common/check.h"

namespace vellum::cli {

PerplexityPlan plan_perplexity(int64_t num_tokens, int64_t num_ctx, int64_t max_windows) {
  VELLUM_CHECK(num_ctx >= 3, ErrorCode::kInvalidArgument,
               "--ctx {} is too small: a window scores the tokens after its first half, so it "
               "needs at least 3 tokens (llama-perplexity's default is 512)",
               num_ctx);
  VELLUM_CHECK(num_tokens >= 2 * num_ctx, ErrorCode::kInvalidArgument,
               "the text tokenizes to only {} tokens; perplexity with --ctx {} needs at least {} "
               "(two windows, as llama-perplexity requires): use a longer text or a smaller --ctx",
               num_tokens, num_ctx, 2 * num_ctx);
  PerplexityPlan plan;
  plan.num_ctx = num_ctx;
  plan.num_windows = num_tokens / num_ctx;
  if (max_windows > 0) plan.num_windows = std::min(plan.num_windows, max_windows);
  plan.first_scored = num_ctx / 2;
  plan.num_scored_per_window = num_ctx - plan.first_scored - 1;
  return plan;
}

std::vector<int32_t> perplexity_window(std::span<const int32_t> tokens, const PerplexityPlan& plan,
                                       int64_t window_idx, std::optional<int32_t> bos_id) {
  VELLUM_CHECK(window_idx >= 0 && window_idx < plan.num_windows, ErrorCode::kInvalidArgument,
               "perplexity window {} is outside the plan's {} windows", window_idx,
               plan.num_windows);
  const auto begin = static_cast<size_t>(window_idx * plan.num_ctx);
  VELLUM_CHECK(begin + static_cast<size_t>(plan.num_ctx) <= tokens.size(),
               ErrorCode::kInvalidArgument,
               "perplexity window {} needs tokens up to {}, the text has {}", window_idx,
               begin + static_cast<size_t>(plan.num_ctx), tokens.size());
  std::vector<int32_t> window(tokens.begin() + static_cast<std::ptrdiff_t>(begin),
                              tokens.begin() + static_cast<std::ptrdiff_t>(begin + plan.num_ctx));
  if (bos_id) window.front() = *bos_id;
  return window;
}

void PerplexityAccumulator::add_nll(double nll) {
  sum_nll_ += nll;
  sum_nll2_ += nll * nll;
  ++count_;
}

void PerplexityAccumulator::add_window(std::span<const float> token_logprobs,
                                       const PerplexityPlan& plan) {
  VELLUM_CHECK(static_cast<int64_t>(token_logprobs.size()) == plan.num_ctx - 1,
               ErrorCode::kInvalidArgument,
               "a perplexity window of {} tokens has {} next-token logprobs, got {}", plan.num_ctx,
               plan.num_ctx - 1, token_logprobs.size());
  for (int64_t j = plan.first_scored; j < plan.num_ctx - 1; ++j) {
    add_nll(-static_cast<double>(token_logprobs[static_cast<size_t>(j)]));
  }
}

double PerplexityAccumulator::mean_nll() const {
  return count_ > 0 ? sum_nll_ / static_cast<double>(count_) : 0.0;
}

double PerplexityAccumulator::perplexity() const { return std::exp(mean_nll()); }

std::optional<double> PerplexityAccumulator::standard_error() const {
  if (count_ < 2) return std::nullopt;
  const double mean = mean_nll();
  const double variance = sum_nll2_ / static_cast<double>(count_) - mean * mean;
  if (!(variance > 0.0)) return std::nullopt;
  return std::sqrt(variance / static_cast<double>(count_ - 1)) * perplexity();
}

std::string format_running_perplexity(int64_t window_number, double perplexity) {
  return fmt::format("[{}]{:.4f},", window_number, perplexity);
}

std::string format_final_estimate(const PerplexityAccumulator& accumulator) {
  const std::optional<double> error = accumulator.standard_error();
  if (!error) {
    return fmt::format("Final estimate: PPL = {:.4f} (no standard error: the nll variance of {} "
                       "tokens is not positive)",
                       accumulator.perplexity(), accumulator.count());
  }
  return fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}", accumulator.perplexity(), *error);
}

PerplexityRun run_perplexity(LLMEngine& engine, std::span<const int32_t> tokens,
                             const PerplexityPlan& plan, std::optional<int32_t> bos_id,
                             const PerplexityProgressFn& on_window) {
  VELLUM_CHECK(!engine.has_unfinished_requests(), ErrorCode::kInvalidArgument,
               "perplexity needs an engine with no requests in flight");
  SamplingParams params;
  params.prompt_logprobs = 0;  // the prompt token's own logprob only
  params.max_tokens = 1;       // the engine samples one token per request; it is not used
  params.temperature = 0.0;
  params.ignore_eos = true;
  params.detokenize = false;
  params.output_kind = RequestOutputKind::kFinalOnly;

  const std::string id_prefix = "ppl-";
  PerplexityRun run;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t w = 0; w < plan.num_windows; ++w) {
    if (auto error = engine.add_request(id_prefix + std::to_string(w),
                                        perplexity_window(tokens, plan, w, bos_id), params)) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "perplexity window {} ({} tokens): {}", w + 1,
                   plan.num_ctx, *error);
    }
  }
  // Windows finish in any order; they are added to the sums in window order, as llama.cpp does.
  std::map<int64_t, std::vector<float>> finished;
  int64_t next_window = 0;
  while (engine.has_unfinished_requests()) {
    for (RequestOutput& out : engine.step()) {
      if (!out.finished) continue;
      const int64_t w = std::stoll(out.request_id.substr(id_prefix.size()));
      const bool failed = !out.outputs.empty() && out.outputs.front().finish_reason &&
                          (*out.outputs.front().finish_reason == "error" ||
                           *out.outputs.front().finish_reason == "abort");
      VELLUM_CHECK(!failed && out.prompt_logprobs.has_value(), ErrorCode::kInternal,
                   "perplexity window {} ended without prompt logprobs", w + 1);
      std::vector<float> logprobs;
      logprobs.reserve(out.prompt_logprobs->size());
      for (const TokenLogprobs& position : *out.prompt_logprobs) {
        logprobs.push_back(position.logprob);
      }
      finished.emplace(w, std::move(logprobs));
    }
    for (auto it = finished.find(next_window); it != finished.end();
         it = finished.find(next_window)) {
      run.accumulator.add_window(it->second, plan);
      run.running_perplexities.push_back(run.accumulator.perplexity());
      if (on_window) on_window(next_window, run.accumulator.perplexity());
      finished.erase(it);
      ++next_window;
    }
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.num_tokens_evaluated = plan.num_windows * plan.num_ctx;
  VELLUM_CHECK(next_window == plan.num_windows, ErrorCode::kInternal,
               "perplexity: {} of {} windows were scored", next_window, plan.num_windows);
  return run;
}

}  // namespace vellum::cli
