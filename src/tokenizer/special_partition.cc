#include "tokenizer/special_partition.h"

#include <algorithm>

namespace vellum::tokenizer {

namespace {

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

SpecialPartitioner::SpecialPartitioner(const Vocab& vocab)
    : vocab_(vocab), rank_of_(vocab.tokens.size(), -1) {
  for (int32_t id = 0; id < vocab.num_tokens(); ++id) {
    if (vocab.attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) {
      candidates_.push_back(id);
    }
  }
  std::stable_sort(candidates_.begin(), candidates_.end(), [&](int32_t a, int32_t b) {
    return vocab.tokens[a].size() > vocab.tokens[b].size();
  });
  trie_.emplace_back();
  for (size_t rank = 0; rank < candidates_.size(); ++rank) {
    const int32_t id = candidates_[rank];
    rank_of_[id] = static_cast<int32_t>(rank);
    int32_t node = 0;
    for (const char c : vocab.tokens[id]) {
      const auto byte = static_cast<uint8_t>(c);
      auto& children = trie_[node].children;
      const auto it = std::find_if(children.begin(), children.end(),
                                   [&](const auto& child) { return child.first == byte; });
      if (it != children.end()) {
        node = it->second;
      } else {
        const auto next = static_cast<int32_t>(trie_.size());
        trie_[node].children.emplace_back(byte, next);
        trie_.emplace_back();
        node = next;
      }
    }
    // Two candidates with the same text: the later id is the one text lookup finds.
    trie_[node].token_id = id;
  }
}

void SpecialPartitioner::find_occurring(std::string_view text, std::vector<char>& occurs) const {
  // Root children by first byte, so that most positions cost one table lookup.
  int32_t root_child[256];
  std::fill(std::begin(root_child), std::end(root_child), -1);
  for (const auto& [byte, node] : trie_[0].children) root_child[byte] = node;

  for (size_t start = 0; start < text.size(); ++start) {
    int32_t node = root_child[static_cast<uint8_t>(text[start])];
    size_t pos = start + 1;
    while (node >= 0) {
      if (trie_[node].token_id != kNoToken) occurs[rank_of_[trie_[node].token_id]] = 1;
      if (pos == text.size()) break;
      const auto byte = static_cast<uint8_t>(text[pos++]);
      int32_t next = -1;
      for (const auto& [b, child] : trie_[node].children) {
        if (b == byte) {
          next = child;
          break;
        }
      }
      node = next;
    }
  }
}

std::vector<Fragment> SpecialPartitioner::partition(std::string_view text,
                                                    bool parse_special) const {
  std::vector<Fragment> fragments;
  if (text.empty()) return fragments;
  fragments.push_back({kNoToken, text});
  if (candidates_.empty()) return fragments;

  std::vector<char> occurs(candidates_.size(), 0);
  find_occurring(text, occurs);

  std::vector<Fragment> next;
  for (size_t rank = 0; rank < candidates_.size(); ++rank) {
    if (!occurs[rank]) continue;
    const int32_t id = candidates_[rank];
    const uint32_t attr = vocab_.attrs[id];
    if (!parse_special && (attr & (kAttrControl | kAttrUnknown))) continue;
    const std::string_view special = vocab_.tokens[id];

    next.clear();
    for (const auto& fragment : fragments) {
      if (fragment.token_id != kNoToken) {
        next.push_back(fragment);
        continue;
      }
      std::string_view rest = fragment.text;
      while (!rest.empty()) {
        const size_t match = rest.find(special);
        if (match == std::string_view::npos) {
          next.push_back({kNoToken, rest});
          break;
        }
        std::string_view left = rest.substr(0, match);
        if (attr & kAttrLstrip) {
          while (!left.empty() && is_ascii_space(left.back())) left.remove_suffix(1);
        }
        if (!left.empty()) next.push_back({kNoToken, left});
        next.push_back({id, {}});
        rest = rest.substr(match + special.size());
        if (attr & kAttrRstrip) {
          while (!rest.empty() && is_ascii_space(rest.front())) rest.remove_prefix(1);
        }
      }
    }
    fragments.swap(next);
  }
  return fragments;
}

}  // namespace vellum::tokenizer
