// Perplexity of a model on a text, computed the way llama.cpp's llama-perplexity computes it
// (tools/perplexity/perplexity.cpp, its default path without --ppl-stride), so that the two
// programs' figures can be compared number for number:
//
//   tokens   = the whole text tokenized with the model's special tokens (BOS where it adds one)
//   windows  = tokens / num_ctx of them; window w is tokens [w * num_ctx, (w + 1) * num_ctx) with
//              its first token replaced by BOS when the model adds BOS (tokens past the last whole
//              window are not used)
//   scored   = the logits of positions first = num_ctx / 2 .. num_ctx - 2 of each window, each
//              predicting the window's next token: num_ctx - first - 1 tokens per window
//   PPL      = exp(mean nll), the nll summed in double; its standard error is llama.cpp's
//              sqrt((mean(nll^2) - mean(nll)^2) / (count - 1)) * PPL
//
// Goals: the same windows, the same scored positions and the same printed figures as
// llama-perplexity. Non-goals: its --ppl-stride, KL-divergence, HellaSwag and other modes.
//
// The pure parts (plan, windows, accumulation) take no engine; run_perplexity drives an LLMEngine
// through its public API: each window is a token-id prompt with prompt_logprobs = 0 (vLLM's
// semantics: entry j is the logprob of prompt token j + 1), one generated token that is dropped.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vellum/engine.h"

namespace vellum::cli {

struct PerplexityPlan {
  int64_t num_ctx = 0;             // tokens per window
  int64_t num_windows = 0;         // windows evaluated
  int64_t first_scored = 0;        // num_ctx / 2: the first position whose logits are scored
  int64_t num_scored_per_window = 0;  // num_ctx - first_scored - 1
};

// The windows of a text of num_tokens tokens, at most max_windows of them (<= 0: all). Throws
// vellum::Error (kInvalidArgument) naming the fix when num_ctx < 3 or the text is shorter than
// two windows (llama-perplexity's minimum: 2 * num_ctx tokens).
PerplexityPlan plan_perplexity(int64_t num_tokens, int64_t num_ctx, int64_t max_windows);

// Window `window_idx` of `tokens` as the model sees it: (num_ctx) ids, the first one replaced by
// bos_id when set.
std::vector<int32_t> perplexity_window(std::span<const int32_t> tokens, const PerplexityPlan& plan,
                                       int64_t window_idx, std::optional<int32_t> bos_id);

// Sums of the negative log-likelihoods of scored tokens, in double, in the order added.
class PerplexityAccumulator {
 public:
  void add_nll(double nll);
  // token_logprobs[j] = log P(window token j + 1 | window tokens 0..j) for j in [0, num_ctx - 1)
  // (vLLM's prompt_logprobs without its leading None); adds the plan's scored positions.
  void add_window(std::span<const float> token_logprobs, const PerplexityPlan& plan);

  int64_t count() const { return count_; }
  double mean_nll() const;
  double perplexity() const;  // exp(mean_nll())
  // llama.cpp's standard error of the PPL; nullopt while count < 2 or the variance is not
  // positive (llama.cpp then prints "Unexpected negative standard deviation").
  std::optional<double> standard_error() const;

 private:
  double sum_nll_ = 0.0;
  double sum_nll2_ = 0.0;
  int64_t count_ = 0;
};

// llama-perplexity's running value after window number `window_number` (1-based): "[3]18.2345,".
std::string format_running_perplexity(int64_t window_number, double perplexity);
// "Final estimate: PPL = 18.3645 +/- 0.86398" (llama-perplexity's line and precision).
std::string format_final_estimate(const PerplexityAccumulator& accumulator);

struct PerplexityRun {
  PerplexityAccumulator accumulator;
  std::vector<double> running_perplexities;  // after each window, in window order
  double seconds = 0.0;                      // from the first request to the last output
  int64_t num_tokens_evaluated = 0;          // num_windows * num_ctx
};

// Called in window order as soon as window `window_idx` (0-based) and all before it are scored.
using PerplexityProgressFn = std::function<void(int64_t window_idx, double running_perplexity)>;

// Scores the plan's windows of `tokens` on `engine` (which must have nothing else running):
// every window is queued at once, the engine schedules them (windows share no prefix, and
// prompt_logprobs requests never read the prefix cache). Throws vellum::Error when the engine
// rejects a window (e.g. num_ctx not below its max_model_len) or a request fails.
PerplexityRun run_perplexity(LLMEngine& engine, std::span<const int32_t> tokens,
                             const PerplexityPlan& plan, std::optional<int32_t> bos_id,
                             const PerplexityProgressFn& on_window = {});

}  // namespace vellum::cli
