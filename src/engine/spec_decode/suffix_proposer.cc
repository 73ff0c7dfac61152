#include "engine/spec_decode/suffix_proposer.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace vellum::engine {

SuffixProposer::SuffixProposer(const SpeculativeConfig& config)
    : config_(config), global_(config.suffix_max_tree_depth) {}

std::vector<int32_t> SuffixProposer::best_draft(const SuffixTree& tree,
                                                std::span<const int32_t> tokens, int max_drafts,
                                                double* score) const {
  // As Arctic does, every match length is tried: a long match leaves little depth to draft
  // from (match + draft <= max depth), a short one is less sure; the best expected number of
  // accepted tokens wins (the longer match on ties).
  *score = 0.0;
  std::vector<int32_t> best;
  for (int match_len = 1; match_len < tree.max_depth(); ++match_len) {
    const int32_t node = tree.find_tail(tokens, match_len);
    if (node < 0) break;  // no longer tail occurs either
    const int limit = std::min(
        max_drafts, static_cast<int>(std::floor(config_.suffix_max_spec_factor * match_len)));
    if (limit <= 0) continue;
    double candidate_score = 0.0;
    std::vector<int32_t> candidate =
        tree.draft(node, limit, config_.suffix_min_token_prob, &candidate_score);
    if (!candidate.empty() && candidate_score >= *score) {
      *score = candidate_score;
      best = std::move(candidate);
    }
  }
  return best;
}

std::vector<int32_t> SuffixProposer::propose(std::string_view request_id,
                                             std::span<const int32_t> tokens, int max_drafts) {
  auto it = local_.find(std::string(request_id));
  if (it == local_.end()) {
    it = local_.emplace(std::string(request_id), Local{SuffixTree(config_.suffix_max_tree_depth), {}})
             .first;
  }
  Local& local = it->second;
  // The context before the last token is indexed, so the tail is matched against earlier
  // occurrences only (the last token's own n-grams have no continuation yet).
  const auto num_indexed = static_cast<size_t>(local.cursor.num_tokens);
  if (tokens.size() > num_indexed + 1) {
    local.tree.append(local.cursor, tokens.subspan(num_indexed, tokens.size() - 1 - num_indexed));
  }
  double local_score = 0.0;
  double global_score = 0.0;
  std::vector<int32_t> local_draft = best_draft(local.tree, tokens, max_drafts, &local_score);
  std::vector<int32_t> global_draft = best_draft(global_, tokens, max_drafts, &global_score);
  return global_score > local_score ? global_draft : local_draft;
}

void SuffixProposer::on_request_finished(std::string_view request_id,
                                         std::span<const int32_t> output_tokens) {
  local_.erase(std::string(request_id));
  if (config_.suffix_max_cached_requests == 0 || output_tokens.empty()) return;
  SuffixTree::Cursor cursor;
  global_.append(cursor, output_tokens);
  cached_outputs_.emplace_back(output_tokens.begin(), output_tokens.end());
  while (static_cast<int>(cached_outputs_.size()) > config_.suffix_max_cached_requests) {
    global_.remove(cached_outputs_.front());
    cached_outputs_.pop_front();
  }
}

void SuffixProposer::retain_only(std::span<const std::string> running_ids) {
  if (local_.size() <= running_ids.size()) return;
  const std::unordered_set<std::string_view> keep(running_ids.begin(), running_ids.end());
  std::erase_if(local_, [&](const auto& kv) { return !keep.contains(kv.first); });
}

}  // namespace vellum::engine
