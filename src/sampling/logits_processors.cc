#include "sampling/logits_processors.h"

#include <algorithm>
#include <limits>

namespace vellum::sampling {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

void apply_token_bitmask(float* row, int64_t vocab_size, std::span<const uint64_t> mask) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t covered = std::min<int64_t>(vocab_size, static_cast<int64_t>(mask.size()) * 64);
  for (int64_t w = 0; w * 64 < covered; ++w) {
    const uint64_t bits = mask[static_cast<size_t>(w)];
    if (bits == ~uint64_t{0}) continue;
    const int64_t end = std::min<int64_t>(covered, (w + 1) * 64);
    for (int64_t i = w * 64; i < end; ++i) {
      if (((bits >> (i - w * 64)) & 1) == 0) row[i] = neg_inf;
    }
  }
  for (int64_t i = covered; i < vocab_size; ++i) row[i] = neg_inf;
}

void apply_allowed_token_mask(float* row, int64_t vocab_size,
                              std::span<const int32_t> allowed_token_ids,
                              std::vector<float>* saved) {
  saved->resize(allowed_token_ids.size());
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) (*saved)[i] = row[allowed_token_ids[i]];
  std::fill(row, row + vocab_size, kNegInf);
  for (size_t i = 0; i < allowed_token_ids.size(); ++i) row[allowed_token_ids[i]] = (*saved)[i];
}

void apply_bad_words(float* row, std::span<const std::vector<int32_t>> bad_words_token_ids,
                     std::span<const int32_t> output_token_ids) {
  for (const auto& word : bad_words_token_ids) {
    if (word.empty() || word.size() > output_token_ids.size() + 1) continue;
    const size_t prefix_length = word.size() - 1;
    const auto actual = output_token_ids.last(prefix_length);
    if (std::equal(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(prefix_length),
                   actual.begin())) {
      row[word.back()] = kNegInf;
    }
  }
}

void apply_min_tokens(float* row, int64_t num_output_tokens, int64_t min_tokens,
                      std::span<const int32_t> stop_token_ids,
                      std::span<const int32_t> extra_stop_token_ids, int32_t eos_token_id) {
  if (num_output_tokens >= min_tokens) return;
  for (int32_t id : stop_token_ids) row[id] = kNegInf;
  for (int32_t id : extra_stop_token_ids) row[id] = kNegInf;
  if (eos_token_id >= 0) row[eos_token_id] = kNegInf;
}

void apply_logit_bias(float* row, const std::map<int32_t, float>& logit_bias) {
  for (const auto& [token_id, bias] : logit_bias) row[token_id] += bias;
}

void apply_penalties(float* row, int64_t vocab_size, const PenaltyConfig& config,
                     std::span<const int32_t> prompt_token_ids,
                     std::span<const int32_t> output_token_ids, PenaltyWorkspace* ws) {
  if (static_cast<int64_t>(ws->output_counts.size()) != vocab_size) {
    ws->output_counts.assign(vocab_size, 0);
    ws->seen.assign(vocab_size, 0);
  }
  ws->touched.clear();
  for (int32_t id : output_token_ids) {
    ++ws->output_counts[id];
    if (ws->seen[id] == 0) {
      ws->seen[id] = 1;
      ws->touched.push_back(id);
    }
  }
  const bool repetition = config.repetition_penalty != 1.0f;
  if (repetition) {
    for (int32_t id : prompt_token_ids) {
      if (ws->seen[id] == 0) {
        ws->seen[id] = 1;
        ws->touched.push_back(id);
      }
    }
  }
  for (int32_t id : ws->touched) {
    float logit = row[id];
    if (repetition) {
      logit = logit > 0.0f ? logit / config.repetition_penalty : logit * config.repetition_penalty;
    }
    const int32_t count = ws->output_counts[id];
    logit -= config.frequency_penalty * static_cast<float>(count);
    logit -= config.presence_penalty * (count > 0 ? 1.0f : 0.0f);
    row[id] = logit;
    ws->output_counts[id] = 0;
    ws->seen[id] = 0;
  }
}

}  // namespace vellum::sampling
