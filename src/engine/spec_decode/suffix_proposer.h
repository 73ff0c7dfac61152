// SuffixProposer: suffix decoding (Arctic Inference, vLLM's "suffix" method). Drafts come from
// two suffix trees: one per running request over its prompt and output, grown as it generates,
// and one over the outputs of the last suffix_max_cached_requests finished requests. A tail of
// the request's tokens found in a tree is followed along its most frequent continuation while
// the estimated probability stays >= suffix_min_token_prob, for at most
// suffix_max_spec_factor * (match length) tokens; over every tail length and both trees, the
// draft with the highest score (expected accepted tokens) wins.
#pragma once

#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/spec_decode/proposer.h"
#include "engine/spec_decode/speculative_config.h"
#include "engine/spec_decode/suffix_tree.h"

namespace vellum::engine {

class SuffixProposer final : public Proposer {
 public:
  explicit SuffixProposer(const SpeculativeConfig& config);

  std::vector<int32_t> propose(std::string_view request_id, std::span<const int32_t> tokens,
                               int max_drafts) override;
  void on_request_finished(std::string_view request_id,
                           std::span<const int32_t> output_tokens) override;
  void retain_only(std::span<const std::string> running_ids) override;

 private:
  struct Local {
    SuffixTree tree;
    SuffixTree::Cursor cursor;
  };
  std::vector<int32_t> best_draft(const SuffixTree& tree, std::span<const int32_t> tokens,
                                  int max_drafts, double* score) const;

  SpeculativeConfig config_;
  std::unordered_map<std::string, Local> local_;  // by running request id
  SuffixTree global_;                             // outputs of recent finished requests
  std::deque<std::vector<int32_t>> cached_outputs_;  // oldest first, as indexed in global_
};

}  // namespace vellum::engine
