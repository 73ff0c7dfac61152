// SamplingParams: how one request is sampled, with vLLM's field names, defaults and validation
// messages (vllm/sampling_params.py; spec/kv-cache-and-scheduler.md §4).
//
// A plain value type of the public API: no internal includes. The usual life of one:
//   1. The server or user fills the fields (the server clamps logit_bias to [-100, 100] and turns
//      a single `stop` string into a one-element list).
//   2. `validate()` checks every rule that needs nothing but the parameters, and
//      `validate_for_model(limits)` the rules that need the vocabulary size and `max_logprobs`.
//      Each returns the first failure as {param, message} with vLLM's message text, so the server
//      can answer HTTP 400 with `"param": param`.
//   3. `normalize()` applies what vLLM's `__post_init__` does (temperature raised to 0.01, seed
//      -1 → none, greedy forces top_p/top_k/min_p off, duplicates removed, bias clamped).
//   4. The engine tokenizes `bad_words` into `bad_words_token_ids` (see
//      src/sampling/bad_words.h) and hands the params to the sampler.
//
// Fields vLLM types dynamically ("n must be an int", "top_k must be an integer", "stop_token_ids
// must contain only integers") are enforced here by the C++ types; JSON parsing at the server
// reports those.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vellum {

// Below this temperature a request is greedy (vLLM's _SAMPLING_EPS).
inline constexpr double kSamplingEps = 1e-5;
// Temperatures in (0, kMinRandomTemperature) are raised to it (vLLM's _MAX_TEMP).
inline constexpr double kMinRandomTemperature = 1e-2;
// VLLM_MAX_N_SEQUENCES default.
inline constexpr int64_t kMaxNumSequences = 16384;
// vLLM's MAX_LOGPROB_TOKEN_IDS.
inline constexpr int64_t kMaxLogprobTokenIds = 128;
// ModelConfig.max_logprobs default.
inline constexpr int64_t kDefaultMaxLogprobs = 20;

enum class RequestOutputKind {
  kCumulative,  // every output carries everything generated so far
  kDelta,       // every output carries only what is new (the server uses this when streaming)
  kFinalOnly,   // one output when the request finishes
};

enum class SamplingType { kGreedy, kRandom, kRandomSeed };

// {max_pattern_size, min_pattern_size, min_count}; max_pattern_size == 0 disables detection.
struct RepetitionDetectionParams {
  int64_t max_pattern_size = 0;
  int64_t min_pattern_size = 0;
  int64_t min_count = 0;
};

// Constrained decoding (vLLM's StructuredOutputsParams): the output must match exactly one of
// these constraints. The sampler masks every token that would leave it, and allows the end of
// generation (EOS) exactly when the output is complete. See README "Structured outputs".
struct StructuredOutputsParams {
  std::optional<std::string> json;                 // a JSON Schema, as JSON text
  std::optional<std::string> regex;                // a regular expression the whole output matches
  std::optional<std::vector<std::string>> choice;  // the output is one of these strings
  std::optional<std::string> grammar;              // a GBNF grammar (start rule `root`)
  bool json_object = false;                        // any JSON object
  // JSON kinds: no free whitespace; ", " and ": " separate members.
  bool disable_any_whitespace = false;
  // A reasoning model's end-of-reasoning marker (the server's --reasoning-parser sets it to the
  // ids of "</think>"; vLLM's reasoner): the constraint applies only after the first occurrence
  // in the output, or from the first token when the prompt already holds one. Empty: from the
  // first token.
  std::vector<int32_t> reasoning_end_token_ids;

  // How many of json, regex, choice, grammar and json_object are set (valid: exactly 1).
  int num_constraints() const {
    return static_cast<int>(json.has_value()) + static_cast<int>(regex.has_value()) +
           static_cast<int>(choice.has_value()) + static_cast<int>(grammar.has_value()) +
           static_cast<int>(json_object);
  }
};

// A failed validation: `param` names the offending field (the server's `"param"`), `message` is
// vLLM's text.
struct SamplingParamError {
  std::string param;
  std::string message;
};

// What `validate_for_model` needs from the model.
struct SamplingModelLimits {
  int64_t vocab_size = 0;
  int64_t max_logprobs = kDefaultMaxLogprobs;  // -1 means the vocabulary size
};

struct SamplingParams {
  int64_t n = 1;  // number of outputs (V1 fans out n child requests); beam width with beam search
  double presence_penalty = 0.0;    // [-2, 2]; logit -= p * [token occurs in the output]
  double frequency_penalty = 0.0;   // [-2, 2]; logit -= f * (occurrences in the output)
  double repetition_penalty = 1.0;  // > 0; tokens in prompt or output: l > 0 ? l / r : l * r
  double temperature = 1.0;         // >= 0; below kSamplingEps means greedy
  double top_p = 1.0;               // (0, 1]
  int64_t top_k = 0;                // 0 or -1 disables
  double min_p = 0.0;               // [0, 1]
  std::optional<int64_t> seed;      // -1 is treated as none
  std::vector<std::string> stop;    // stop strings (the engine's output processor checks them)
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int64_t> max_tokens = 16;  // none: up to the model length
  int64_t min_tokens = 0;
  std::optional<int64_t> logprobs;                        // -1: the whole vocabulary
  std::optional<int64_t> prompt_logprobs;                 // -1: the whole vocabulary
  std::optional<std::vector<int32_t>> logprob_token_ids;  // score exactly these ids
  bool detokenize = true;                                 // engine-only
  bool skip_special_tokens = true;
  bool spaces_between_special_tokens = true;
  bool include_stop_str_in_output = false;
  RequestOutputKind output_kind = RequestOutputKind::kCumulative;
  std::map<int32_t, float> logit_bias;  // token id -> bias added to its logit; empty: none
  std::optional<std::vector<int32_t>> allowed_token_ids;  // when set, all others are masked
  std::vector<std::string> bad_words;
  // Filled by the engine from `bad_words` with the tokenizer (build_bad_words_token_ids in
  // src/sampling/bad_words.h); the sampler reads only this.
  std::vector<std::vector<int32_t>> bad_words_token_ids;
  std::optional<RepetitionDetectionParams> repetition_detection;
  std::optional<int64_t> truncate_prompt_tokens;  // API only: -1 = max_model_len, else keep last k
  // Beam search (API only in vLLM, routed to its own path): n is the beam width.
  bool use_beam_search = false;
  double length_penalty = 1.0;
  // Constrained decoding; none: unconstrained. The engine compiles it when the request is added
  // (a bad schema or grammar is an add_request error naming the problem).
  std::optional<StructuredOutputsParams> structured_outputs;

  // The temperature the sampler uses: vLLM raises values in (0, 0.01) to 0.01 before anything
  // else, so only 0 (or a value that fails validation) is greedy.
  double effective_temperature() const {
    return (temperature > 0.0 && temperature < kMinRandomTemperature) ? kMinRandomTemperature
                                                                      : temperature;
  }
  bool is_greedy() const { return effective_temperature() < kSamplingEps; }
  SamplingType sampling_type() const;
  // Characters of text to hold back while streaming so a stop string can still be cut:
  // max(len(stop)) - 1 when stop strings are set and not included in the output, else 0.
  int64_t output_text_buffer_length() const;

  // The rules of vLLM's _verify_args and _verify_greedy_sampling; nullopt when valid.
  std::optional<SamplingParamError> validate() const;
  // The rules of vLLM's verify() that need the model: max_logprobs, logit_bias, stop_token_ids,
  // allowed_token_ids, logprob_token_ids and bad_words_token_ids against the vocabulary.
  std::optional<SamplingParamError> validate_for_model(const SamplingModelLimits& limits) const;
  // vLLM's __post_init__ transformations (see the top of this file). Idempotent.
  void normalize();
  // The params of child `index` of an n > 1 request (vLLM's ParentRequest): n = 1 and, when
  // seeded, seed + index so that the children differ but stay reproducible.
  SamplingParams child_params(int64_t index) const;
};

}  // namespace vellum
