#include "structured/token_vocabulary.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace vellum::structured {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes,
                                 std::vector<int32_t> end_token_ids, int64_t mask_size)
    : token_bytes_(std::move(token_bytes)),
      end_token_ids_(std::move(end_token_ids)),
      mask_size_(mask_size) {
  VELLUM_CHECK(mask_size_ >= static_cast<int64_t>(token_bytes_.size()),
               ErrorCode::kInvalidArgument,
               "token mask of {} entries is smaller than the vocabulary of {} tokens", mask_size_,
               token_bytes_.size());
  std::sort(end_token_ids_.begin(), end_token_ids_.end());
  end_token_ids_.erase(std::unique(end_token_ids_.begin(), end_token_ids_.end()),
                       end_token_ids_.end());
  for (int32_t id : end_token_ids_) {
    VELLUM_CHECK(id >= 0 && id < mask_size_, ErrorCode::kInvalidArgument,
                 "end token id {} is outside the vocabulary of {}", id, mask_size_);
  }
  for (int32_t id = 0; id < num_tokens(); ++id) {
    if (!token_bytes_[static_cast<size_t>(id)].empty() && !is_end_token(id)) {
      sorted_ids_.push_back(id);
    }
  }
  std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t a, int32_t b) {
    const std::string& x = token_bytes_[static_cast<size_t>(a)];
    const std::string& y = token_bytes_[static_cast<size_t>(b)];
    return x != y ? x < y : a < b;
  });
  // path[d]: the node at depth d + 1 on the current token's path.
  std::vector<uint32_t> path;
  const std::string* prev = nullptr;
  for (size_t k = 0; k < sorted_ids_.size(); ++k) {
    const std::string& s = token_bytes_[static_cast<size_t>(sorted_ids_[k])];
    size_t common = 0;
    if (prev != nullptr) {
      const size_t limit = std::min(prev->size(), s.size());
      while (common < limit && (*prev)[common] == s[common]) ++common;
    }
    // Close the nodes deeper than the shared prefix: their subtrees end here.
    for (size_t d = common; d < path.size(); ++d) skip_[path[d]] = static_cast<uint32_t>(bytes_.size());
    path.resize(common);
    for (size_t d = common; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(bytes_.size()));
      bytes_.push_back(static_cast<uint8_t>(s[d]));
      VELLUM_CHECK(d + 1 <= UINT16_MAX, ErrorCode::kInvalidArgument,
                   "token {} is longer than {} bytes", sorted_ids_[k], UINT16_MAX);
      depth_.push_back(static_cast<uint16_t>(d + 1));
      skip_.push_back(0);
      token_begin_.push_back(static_cast<uint32_t>(k));
      token_end_.push_back(static_cast<uint32_t>(k));
    }
    const uint32_t node = path[s.size() - 1];
    if (token_end_[node] == token_begin_[node]) token_begin_[node] = static_cast<uint32_t>(k);
    token_end_[node] = static_cast<uint32_t>(k + 1);
    max_depth_ = std::max(max_depth_, s.size());
    prev = &s;
  }
  for (uint32_t node : path) skip_[node] = static_cast<uint32_t>(bytes_.size());
}

bool TokenVocabulary::is_end_token(int32_t id) const {
  return std::binary_search(end_token_ids_.begin(), end_token_ids_.end(), id);
}

bool TokenVocabulary::mask_for_state(Automaton& automaton, int32_t state, uint64_t* mask) const {
  std::memset(mask, 0, num_words() * sizeof(uint64_t));
  const uint64_t hits_before = automaton.num_limit_hits();
  // states[d]: the automaton state after the first d bytes of the current path.
  std::vector<int32_t> states(max_depth_ + 1, Automaton::kDead);
  states[0] = state;
  const size_t n = bytes_.size();
  size_t i = 0;
  while (i < n) {
    const uint16_t d = depth_[i];
    const int32_t next = automaton.step(states[d - 1], bytes_[i]);
    if (next == Automaton::kDead) {
      i = skip_[i];
      continue;
    }
    states[d] = next;
    for (uint32_t k = token_begin_[i]; k < token_end_[i]; ++k) {
      const int32_t id = sorted_ids_[k];
      mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
  if (automaton.accepting(state)) {
    for (int32_t id : end_token_ids_) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
  return automaton.num_limit_hits() == hits_before;
}

}  // namespace vellum::structured
