#include "engine/spec_decode/ngram_proposer.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::engine {

std::vector<int32_t> ngram_lookup(std::span<const int32_t> tokens, int min_n, int max_n,
                                  int max_drafts) {
  const int64_t num_tokens = static_cast<int64_t>(tokens.size());
  // For each earlier end position, the length of the match between the suffix ending there and
  // the request's own suffix; the most recent longest match (>= min_n) wins. Scanning from the
  // end finds the most recent one first, and the scan stops at the first max_n match.
  int64_t best_end = -1;  // exclusive end of the matched earlier n-gram
  int best_len = 0;
  for (int64_t end = num_tokens - 1; end >= min_n; --end) {
    int len = 0;
    while (len < max_n && end - 1 - len >= 0 &&
           tokens[static_cast<size_t>(end - 1 - len)] ==
               tokens[static_cast<size_t>(num_tokens - 1 - len)]) {
      ++len;
    }
    if (len > best_len && len >= min_n) {
      best_len = len;
      best_end = end;
      if (len == max_n) break;
    }
  }
  if (best_end < 0) return {};
  const int64_t num_drafts = std::min<int64_t>(max_drafts, num_tokens - best_end);
  return std::vector<int32_t>(tokens.begin() + best_end, tokens.begin() + best_end + num_drafts);
}

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  VELLUM_CHECK(min_n >= 1 && min_n <= max_n, ErrorCode::kInvalidArgument,
               "n-gram proposer: need 1 <= prompt_lookup_min ({}) <= prompt_lookup_max ({})",
               min_n, max_n);
}

std::vector<int32_t> NgramProposer::propose(std::string_view, std::span<const int32_t> tokens,
                                            int max_drafts) {
  return ngram_lookup(tokens, min_n_, max_n_, max_drafts);
}

}  // namespace vellum::engine
