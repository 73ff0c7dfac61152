// NgramProposer: prompt lookup decoding (vLLM's "ngram" method). The last n tokens of the
// request, for the largest n in [min_n, max_n] that occurred earlier in the same request, are
// matched at their most recent earlier occurrence; the tokens that followed it there are the
// proposal. Costs O(context * max_n) per request and step, no state between steps.
#pragma once

#include "engine/spec_decode/proposer.h"

namespace vellum::engine {

class NgramProposer final : public Proposer {
 public:
  // 1 <= min_n <= max_n.
  NgramProposer(int min_n, int max_n);

  std::vector<int32_t> propose(std::string_view request_id, std::span<const int32_t> tokens,
                               int max_drafts) override;

 private:
  int min_n_;
  int max_n_;
};

// The proposal of prompt lookup over `tokens` (exposed for tests).
std::vector<int32_t> ngram_lookup(std::span<const int32_t> tokens, int min_n, int max_n,
                                  int max_drafts);

}  // namespace vellum::engine
