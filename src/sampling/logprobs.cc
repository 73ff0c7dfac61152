#include "sampling/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "sampling/vec_math.h"

namespace vellum::sampling {
namespace {

// Up to this k the top-k is kept in a small sorted array during one pass over the row; larger k
// (e.g. logprobs = -1) uses partial_sort over all (value, id) pairs.
constexpr int64_t kInsertionTopK = 64;

bool ranks_before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

}  // namespace

void LogprobsLists::resize(std::span<const int64_t> num_entries_per_row) {
  const size_t num_rows = num_entries_per_row.size();
  offsets.resize(num_rows + 1);
  offsets[0] = 0;
  for (size_t r = 0; r < num_rows; ++r) offsets[r + 1] = offsets[r] + num_entries_per_row[r];
  token_ids.resize(offsets.back());
  logprobs.resize(offsets.back());
  ranks.assign(num_rows, 0);
}

double log_sum_exp(const float* row, int64_t vocab_size) {
  const float max_logit = row_max(row, vocab_size);
  if (max_logit == -std::numeric_limits<float>::infinity()) return max_logit;
  return static_cast<double>(max_logit) + std::log(row_sum_exp(row, vocab_size, max_logit));
}

void top_k_ids(const float* row, int64_t vocab_size, int64_t k, int32_t* out_ids,
               LogprobsWorkspace* ws) {
  k = std::min(k, vocab_size);
  if (k <= 0) return;
  auto& items = ws->items;
  items.clear();
  if (k <= kInsertionTopK) {
    // items stays sorted (ranks_before); an element enters only if it beats the current k-th,
    // so equal later ids never displace earlier ones. Once k items are in, whole blocks whose
    // (vectorized) max does not beat the k-th are skipped.
    constexpr int64_t kBlock = 128;
    for (int64_t begin = 0; begin < vocab_size; begin += kBlock) {
      const int64_t end = std::min(vocab_size, begin + kBlock);
      if (static_cast<int64_t>(items.size()) == k &&
          !(row_max(row + begin, end - begin) > items.back().first)) {
        continue;
      }
      for (int64_t i = begin; i < end; ++i) {
        const float v = row[i];
        if (static_cast<int64_t>(items.size()) == k && !(v > items.back().first)) continue;
        const std::pair<float, int32_t> item{v, static_cast<int32_t>(i)};
        if (static_cast<int64_t>(items.size()) == k) items.pop_back();
        items.insert(std::upper_bound(items.begin(), items.end(), item, ranks_before), item);
      }
    }
  } else {
    items.resize(vocab_size);
    for (int64_t i = 0; i < vocab_size; ++i) items[i] = {row[i], static_cast<int32_t>(i)};
    std::partial_sort(items.begin(), items.begin() + k, items.end(), ranks_before);
  }
  for (int64_t j = 0; j < k; ++j) out_ids[j] = items[j].second;
}

void fill_row_logprobs(const float* raw_row, int64_t vocab_size, int32_t token_id,
                       std::span<const int32_t> extra_ids, int64_t r, LogprobsLists* out,
                       LogprobsWorkspace* ws) {
  const int64_t begin = out->offsets[r];
  const int64_t count = out->row_size(r);
  if (count == 0) return;
  const double lse = log_sum_exp(raw_row, vocab_size);
  int32_t* ids = out->token_ids.data() + begin;
  ids[0] = token_id;
  if (!extra_ids.empty()) {
    std::copy(extra_ids.begin(), extra_ids.end(), ids + 1);
  } else {
    top_k_ids(raw_row, vocab_size, count - 1, ids + 1, ws);
  }
  for (int64_t j = 0; j < count; ++j) {
    out->logprobs[begin + j] = static_cast<float>(static_cast<double>(raw_row[ids[j]]) - lse);
  }
  const float token_logit = raw_row[token_id];
  out->ranks[r] = row_count_at_least(raw_row, vocab_size, token_logit);
}

void compute_prompt_logprobs(const float* logits, int64_t num_positions, int64_t vocab_size,
                             std::span<const int32_t> target_token_ids, int64_t num_top,
                             LogprobsLists* out) {
  VELLUM_CHECK(static_cast<int64_t>(target_token_ids.size()) == num_positions,
               ErrorCode::kInvalidArgument,
               "prompt logprobs: {} target token ids for {} logits rows; pass one per row",
               target_token_ids.size(), num_positions);
  VELLUM_CHECK(num_top >= -1, ErrorCode::kInvalidArgument,
               "prompt logprobs: num_top must be -1 or >= 0, got {}", num_top);
  for (int32_t id : target_token_ids) {
    VELLUM_CHECK(id >= 0 && id < vocab_size, ErrorCode::kInvalidArgument,
                 "prompt logprobs: token id {} is outside the vocabulary of {}", id, vocab_size);
  }
  const int64_t top = num_top == -1 ? vocab_size : std::min(num_top, vocab_size);
  std::vector<int64_t> sizes(num_positions, 1 + top);
  out->resize(sizes);
  LogprobsWorkspace ws;
  for (int64_t p = 0; p < num_positions; ++p) {
    fill_row_logprobs(logits + p * vocab_size, vocab_size, target_token_ids[p], {}, p, out, &ws);
  }
}

}  // namespace vellum::sampling
