// The logits processors that run before greedy/random selection, in the order the sampler
// applies them (spec §4, vllm/v1/sample/sampler.py): allowed-token mask, bad words, min_tokens,
// logit bias, then penalties. Each works on one row of `vocab_size` fp32 logits in place.
// Token ids are assumed to be within [0, vocab_size) (the Sampler checks before calling).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace vellum::sampling {

// Structured outputs: every logit whose bit is clear in `mask` (bit id % 64 of word id / 64;
// ids past the mask count as clear) becomes -inf.
void apply_token_bitmask(float* row, int64_t vocab_size, std::span<const uint64_t> mask);

// Every logit whose id is not in `allowed_token_ids` becomes -inf. `saved` is scratch.
void apply_allowed_token_mask(float* row, int64_t vocab_size,
                              std::span<const int32_t> allowed_token_ids,
                              std::vector<float>* saved);

// vLLM's apply_bad_words: for each tokenized bad word, its last token becomes -inf when the
// output tokens end with the word's other tokens (a one-token word is always banned). Only the
// output tokens are matched, not the prompt.
void apply_bad_words(float* row, std::span<const std::vector<int32_t>> bad_words_token_ids,
                     std::span<const int32_t> output_token_ids);

// While fewer than `min_tokens` tokens have been generated, stop_token_ids, extra_stop_token_ids
// (e.g. the generation config's other EOS ids) and the EOS id (eos_token_id < 0: none) become
// -inf: vLLM's all_stop_token_ids, which includes EOS even with ignore_eos.
void apply_min_tokens(float* row, int64_t num_output_tokens, int64_t min_tokens,
                      std::span<const int32_t> stop_token_ids,
                      std::span<const int32_t> extra_stop_token_ids, int32_t eos_token_id);

void apply_logit_bias(float* row, const std::map<int32_t, float>& logit_bias);

struct PenaltyConfig {
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  bool active() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
  }
};

// Scratch for apply_penalties: counts stay all-zero between calls.
struct PenaltyWorkspace {
  std::vector<int32_t> output_counts;  // (vocab_size)
  std::vector<uint8_t> seen;           // (vocab_size) token in prompt or output
  std::vector<int32_t> touched;        // ids with seen != 0
};

// vllm/model_executor/layers/utils.py::apply_penalties, in its order:
//   tokens in prompt or output: l > 0 ? l / repetition : l * repetition;
//   then l -= frequency · count_in_output and l -= presence · [count_in_output > 0].
void apply_penalties(float* row, int64_t vocab_size, const PenaltyConfig& config,
                     std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, PenaltyWorkspace* ws);

}  // namespace vellum::sampling
