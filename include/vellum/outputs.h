// What the engine returns for a request (vLLM's RequestOutput / CompletionOutput).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vellum {

// Logprob of one position: the chosen token's and the top-k alternatives (token id, logprob).
struct TokenLogprobs {
  int32_t token_id = 0;
  float logprob = 0.0f;
  int32_t rank = 0;                                  // 1 = the most likely token
  std::vector<std::pair<int32_t, float>> top;        // sorted by logprob, descending
};

struct CompletionOutput {
  int32_t index = 0;                       // child index for n > 1
  std::string text;                        // cumulative, or the delta for RequestOutputKind::kDelta
  std::vector<int32_t> token_ids;          // same convention as text
  double cumulative_logprob = 0.0;
  std::optional<std::vector<TokenLogprobs>> logprobs;
  std::optional<std::string> finish_reason;  // "stop" | "length" | "abort" | "error"
  // The stop string or token id that ended the request, if any.
  std::optional<std::string> stop_reason_text;
  std::optional<int32_t> stop_reason_token;
  bool finished() const { return finish_reason.has_value(); }
};

struct RequestMetrics {
  double arrival_time = 0.0;          // seconds, monotonic clock
  double first_scheduled_time = 0.0;
  double first_token_time = 0.0;
  double last_token_time = 0.0;
  double finished_time = 0.0;
  // Gaps between consecutive steps that produced tokens for this request (seconds), for
  // inter-token latency histograms. TTFT = first_token_time - arrival_time, end-to-end =
  // finished_time - arrival_time.
  std::vector<double> inter_token_latencies;
  // Tokens generated so far over all of the request's outputs (n > 1 children counted), whatever
  // the output kind; for generation-token metrics.
  int64_t num_generation_tokens = 0;
};

struct RequestOutput {
  std::string request_id;
  std::string prompt;                       // empty when the prompt was given as token ids
  std::vector<int32_t> prompt_token_ids;
  std::optional<std::vector<TokenLogprobs>> prompt_logprobs;
  std::vector<CompletionOutput> outputs;
  bool finished = false;
  int64_t num_cached_tokens = 0;            // prompt tokens served from the prefix cache
  RequestMetrics metrics;
};

}  // namespace vellum
