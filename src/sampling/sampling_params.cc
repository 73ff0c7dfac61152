// SamplingParams validation and normalization with vLLM's messages (vllm/sampling_params.py).
#include "vellum/sampling_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_set>

#include "common/logging.h"
#include "sampling/python_repr.h"

namespace vellum {
namespace {

SamplingParamError error(std::string param, std::string message) {
  return SamplingParamError{std::move(param), std::move(message)};
}

// Ids outside [0, vocab_size), in order of appearance.
template <typename Range, typename Project>
std::vector<int64_t> out_of_vocab(const Range& ids, int64_t vocab_size, Project project) {
  std::vector<int64_t> bad;
  for (const auto& item : ids) {
    const int64_t id = project(item);
    if (id < 0 || id >= vocab_size) bad.push_back(id);
  }
  return bad;
}

constexpr auto kIdentity = [](int32_t id) { return static_cast<int64_t>(id); };

template <typename T>
void remove_duplicates_keep_order(std::vector<T>* values) {
  std::set<T> seen;
  std::vector<T> unique;
  unique.reserve(values->size());
  for (auto& v : *values) {
    if (seen.insert(v).second) unique.push_back(v);
  }
  *values = std::move(unique);
}

}  // namespace

SamplingType SamplingParams::sampling_type() const {
  if (is_greedy()) return SamplingType::kGreedy;
  if (seed.has_value() && *seed != -1) return SamplingType::kRandomSeed;
  return SamplingType::kRandom;
}

int64_t SamplingParams::output_text_buffer_length() const {
  if (stop.empty() || include_stop_str_in_output) return 0;
  size_t longest = 0;
  for (const auto& s : stop) longest = std::max(longest, s.size());
  return static_cast<int64_t>(longest) - 1;
}

std::optional<SamplingParamError> SamplingParams::validate() const {
  using sampling::py_float;
  if (structured_outputs.has_value()) {
    const int k = structured_outputs->num_constraints();
    if (k == 0) {
      return error("structured_outputs",
                   "You must use one kind of structured outputs constraint but none are "
                   "specified: set one of json, regex, choice, grammar or json_object.");
    }
    if (k > 1) {
      return error("structured_outputs",
                   "You can only use one kind of structured outputs constraint but multiple are "
                   "specified: set only one of json, regex, choice, grammar or json_object.");
    }
    if (structured_outputs->choice.has_value() && structured_outputs->choice->empty()) {
      return error("structured_outputs", "choice must be a non-empty list of strings.");
    }
  }
  if (n < 1) return error("n", fmt::format("n must be at least 1, got {}.", n));
  if (n > kMaxNumSequences) {
    return error("n", fmt::format("n must be at most {}, got {}. To increase this limit, set the "
                                  "VLLM_MAX_N_SEQUENCES environment variable.",
                                  kMaxNumSequences, n));
  }
  if (!(-2.0 <= presence_penalty && presence_penalty <= 2.0)) {
    return error("presence_penalty", fmt::format("presence_penalty must be in [-2, 2], got {}.",
                                                 py_float(presence_penalty)));
  }
  if (!(-2.0 <= frequency_penalty && frequency_penalty <= 2.0)) {
    return error("frequency_penalty", fmt::format("frequency_penalty must be in [-2, 2], got {}.",
                                                  py_float(frequency_penalty)));
  }
  if (!std::isfinite(repetition_penalty)) {
    return error("repetition_penalty",
                 fmt::format("repetition_penalty must be a finite number, got {}.",
                             py_float(repetition_penalty)));
  }
  if (repetition_penalty <= 0.0) {
    return error("repetition_penalty",
                 fmt::format("repetition_penalty must be greater than zero, got {}.",
                             py_float(repetition_penalty)));
  }
  const double temp = effective_temperature();
  if (!std::isfinite(temp)) {
    return error("temperature",
                 fmt::format("temperature must be a finite number, got {}.", py_float(temp)));
  }
  if (temp < 0.0) {
    return error("temperature",
                 fmt::format("temperature must be non-negative, got {}.", py_float(temp)));
  }
  if (!(0.0 < top_p && top_p <= 1.0)) {
    return error("top_p", fmt::format("top_p must be in (0, 1], got {}.", py_float(top_p)));
  }
  if (top_k < -1) {
    return error("top_k", fmt::format("top_k must be 0 (disable), or at least 1, got {}.", top_k));
  }
  if (!(0.0 <= min_p && min_p <= 1.0)) {
    return error("min_p", fmt::format("min_p must be in [0, 1], got {}.", py_float(min_p)));
  }
  if (max_tokens.has_value() && *max_tokens < 1) {
    return error("max_tokens", fmt::format("max_tokens must be at least 1, got {}.", *max_tokens));
  }
  if (min_tokens < 0) {
    return error("min_tokens",
                 fmt::format("min_tokens must be greater than or equal to 0, got {}.", min_tokens));
  }
  if (max_tokens.has_value() && min_tokens > *max_tokens) {
    return error("min_tokens",
                 fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}.",
                             *max_tokens, min_tokens));
  }
  if (logprobs.has_value() && *logprobs != -1 && *logprobs < 0) {
    return error("logprobs",
                 fmt::format("logprobs must be non-negative or -1, got {}.", *logprobs));
  }
  if (prompt_logprobs.has_value() && *prompt_logprobs != -1 && *prompt_logprobs < 0) {
    return error(
        "prompt_logprobs",
        fmt::format("prompt_logprobs must be non-negative or -1, got {}.", *prompt_logprobs));
  }
  if (truncate_prompt_tokens.has_value() &&
      (*truncate_prompt_tokens == 0 || *truncate_prompt_tokens < -1)) {
    return error("truncate_prompt_tokens",
                 fmt::format("truncate_prompt_tokens must be an integer >= 1 or -1, got {}",
                             *truncate_prompt_tokens));
  }
  if (std::any_of(stop.begin(), stop.end(), [](const std::string& s) { return s.empty(); })) {
    return error("stop", "stop cannot contain an empty string.");
  }
  if (!stop.empty() && !detokenize) {
    return error("stop",
                 "stop strings are only supported when detokenize is True. Set detokenize=True "
                 "to use stop.");
  }
  if (std::any_of(bad_words.begin(), bad_words.end(),
                  [](const std::string& s) { return s.empty(); })) {
    return error("bad_words",
                 fmt::format("bad_words cannot contain an empty string. Got bad_words={}",
                             sampling::py_list(bad_words)));
  }
  if (repetition_detection.has_value()) {
    const auto& rd = *repetition_detection;
    if (rd.max_pattern_size < 0 || rd.min_pattern_size < 0 ||
        rd.min_pattern_size > rd.max_pattern_size) {
      return error("repetition_detection",
                   "max_pattern_size, min_pattern_size must be >=0, with min_pattern_size <= "
                   "max_pattern_size. Set both to 0 to disable repetitive pattern detection.");
    }
    if (rd.max_pattern_size > 0 && rd.min_count < 2) {
      return error("repetition_detection",
                   "min_count must be >= 2 to detect repetitive patterns in engine output. If you "
                   "do not wish to detect repetitive patterns, set max_pattern_size to 0.");
    }
  }
  // Beam search is routed to its own path in vLLM (BeamSearchParams), where n is the width.
  if (is_greedy() && n > 1 && !use_beam_search) {
    return error("n", fmt::format("n must be 1 when using greedy sampling, got {}.", n));
  }
  return std::nullopt;
}

std::optional<SamplingParamError> SamplingParams::validate_for_model(
    const SamplingModelLimits& limits) const {
  const int64_t vocab_size = limits.vocab_size;
  const int64_t max_logprobs = limits.max_logprobs == -1 ? vocab_size : limits.max_logprobs;
  using sampling::py_list;

  if (logprobs.has_value() && *logprobs != 0) {
    const int64_t num = *logprobs == -1 ? vocab_size : *logprobs;
    if (num > max_logprobs) {
      return error("logprobs",
                   fmt::format("Requested sample logprobs of {}, which is greater than max "
                               "allowed: {}",
                               num, max_logprobs));
    }
  }
  if (logprob_token_ids.has_value()) {
    const auto num = static_cast<int64_t>(logprob_token_ids->size());
    if (num > kMaxLogprobTokenIds) {
      return error("logprob_token_ids",
                   fmt::format("Requested logprob_token_ids of length {}, which is greater than "
                               "max allowed: {}",
                               num, kMaxLogprobTokenIds));
    }
    const auto bad = out_of_vocab(*logprob_token_ids, vocab_size, kIdentity);
    if (!bad.empty()) {
      return error("logprob_token_ids",
                   fmt::format("token_id(s) {} in logprob_token_ids contain out-of-vocab token "
                               "ids. Vocabulary size: {}",
                               py_list(bad), vocab_size));
    }
    if (logprobs.has_value() && *logprobs != num) {
      return error("logprob_token_ids",
                   fmt::format("When both logprobs and logprob_token_ids are set, logprobs must "
                               "equal len(logprob_token_ids). Got logprobs={}, "
                               "len(logprob_token_ids)={}.",
                               *logprobs, num));
    }
  }
  if (prompt_logprobs.has_value() && *prompt_logprobs != 0) {
    const int64_t num = *prompt_logprobs == -1 ? vocab_size : *prompt_logprobs;
    if (num > max_logprobs) {
      return error("prompt_logprobs",
                   fmt::format("Requested prompt logprobs of {}, which is greater than max "
                               "allowed: {}",
                               num, max_logprobs));
    }
  }
  if (!logit_bias.empty()) {
    const auto bad = out_of_vocab(logit_bias, vocab_size,
                                  [](const auto& kv) { return static_cast<int64_t>(kv.first); });
    if (!bad.empty()) {
      return error("logit_bias",
                   fmt::format("token_id(s) {} in logit_bias contain out-of-vocab token ids. "
                               "Vocabulary size: {}",
                               py_list(bad), vocab_size));
    }
  }
  if (!stop_token_ids.empty()) {
    const auto bad = out_of_vocab(stop_token_ids, vocab_size, kIdentity);
    if (!bad.empty()) {
      return error("stop_token_ids",
                   fmt::format("token_id(s) {} in stop_token_ids contain out-of-vocab token ids. "
                               "Vocabulary size: {}",
                               py_list(bad), vocab_size));
    }
  }
  if (allowed_token_ids.has_value()) {
    if (allowed_token_ids->empty()) {
      return error("allowed_token_ids", "allowed_token_ids is not None and empty!");
    }
    if (!out_of_vocab(*allowed_token_ids, vocab_size, kIdentity).empty()) {
      return error("allowed_token_ids", "allowed_token_ids contains out-of-vocab token id!");
    }
  }
  std::vector<int64_t> bad_word_ids;
  for (const auto& word : bad_words_token_ids) {
    const auto bad = out_of_vocab(word, vocab_size, kIdentity);
    bad_word_ids.insert(bad_word_ids.end(), bad.begin(), bad.end());
  }
  if (!bad_word_ids.empty()) {
    return error("bad_words",
                 fmt::format("The model vocabulary size is {}, but the following tokens were "
                             "specified as bad: {}. All token id values should be integers "
                             "satisfying: 0 <= token_id <= {}.",
                             vocab_size, py_list(bad_word_ids), vocab_size - 1));
  }
  return std::nullopt;
}

void SamplingParams::normalize() {
  if (temperature > 0.0 && temperature < kMinRandomTemperature) {
    VELLUM_LOG_WARN(
        "temperature {} is less than {}, which may cause numerical errors nan or inf in tensors. "
        "We have maxed it out to {}.",
        temperature, kMinRandomTemperature, kMinRandomTemperature);
    temperature = kMinRandomTemperature;
  }
  if (seed.has_value() && *seed == -1) seed.reset();
  remove_duplicates_keep_order(&stop_token_ids);
  remove_duplicates_keep_order(&bad_words);
  for (auto& [token_id, bias] : logit_bias) bias = std::clamp(bias, -100.0f, 100.0f);
  if (is_greedy()) {
    top_p = 1.0;
    top_k = 0;
    min_p = 0.0;
  }
}

SamplingParams SamplingParams::child_params(int64_t index) const {
  SamplingParams child = *this;
  child.n = 1;
  if (seed.has_value() && *seed != -1) child.seed = *seed + index;
  return child;
}

}  // namespace vellum
