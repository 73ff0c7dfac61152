// Log-probabilities of tokens under raw logits: the sampled token's (or the next prompt token's)
// logprob and rank, plus the top-k or an explicit list of ids. vLLM's default logprobs_mode
// (raw_logprobs): computed from the logits before any processor, penalty or temperature.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace vellum::sampling {

// Logprobs of several rows (sampled tokens or prompt positions), flattened.
// Row r owns entries [offsets[r], offsets[r + 1]): entry 0 is the row's token (the sampled token
// or the prompt token that follows the position), then the top-k tokens by descending logprob
// (ties: lower id first), or the requested logprob_token_ids in the order given.
// A row without requested logprobs has no entries and rank 0.
struct LogprobsLists {
  std::vector<int64_t> offsets;    // (num_rows + 1)
  std::vector<int32_t> token_ids;  // (offsets.back())
  std::vector<float> logprobs;     // (offsets.back())
  // (num_rows) rank of entry 0: the number of vocabulary entries whose logprob is >= its logprob
  // (vLLM's batched_count_greater_than), so 1 is the most likely token.
  std::vector<int64_t> ranks;

  int64_t num_rows() const { return ranks.size(); }
  int64_t row_size(int64_t r) const { return offsets[r + 1] - offsets[r]; }
  std::span<const int32_t> row_token_ids(int64_t r) const {
    return {token_ids.data() + offsets[r], static_cast<size_t>(row_size(r))};
  }
  std::span<const float> row_logprobs(int64_t r) const {
    return {logprobs.data() + offsets[r], static_cast<size_t>(row_size(r))};
  }
  // Sizes the lists from entries per row (0 = no logprobs for that row); keeps capacity.
  void resize(std::span<const int64_t> num_entries_per_row);
};

// Scratch reused across rows; no allocation in steady state.
struct LogprobsWorkspace {
  std::vector<std::pair<float, int32_t>> items;
};

// log(sum(exp(row))) computed max-shifted; -inf when every logit is -inf.
double log_sum_exp(const float* row, int64_t vocab_size);

// The `k` largest logits of a row, largest first, ties broken by lower id; writes k ids.
void top_k_ids(const float* row, int64_t vocab_size, int64_t k, int32_t* out_ids,
               LogprobsWorkspace* ws);

// Fills one row's entries of `out` (row_size(r) entries must already be allocated):
// entry 0 = token_id, then either `extra_ids` (when not empty) or the top (row_size - 1) ids.
void fill_row_logprobs(const float* raw_row, int64_t vocab_size, int32_t token_id,
                       std::span<const int32_t> extra_ids, int64_t r, LogprobsLists* out,
                       LogprobsWorkspace* ws);

// Prompt logprobs. logits: (num_positions, vocab_size) raw logits of prompt positions;
// target_token_ids[i] is the prompt token that follows position i. Each position gets
// 1 + num_top entries (num_top = -1: the whole vocabulary; 0: only the target).
void compute_prompt_logprobs(const float* logits, int64_t num_positions, int64_t vocab_size,
                             std::span<const int32_t> target_token_ids, int64_t num_top,
                             LogprobsLists* out);

}  // namespace vellum::sampling
