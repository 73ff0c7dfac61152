#include "engine/spec_decode/suffix_tree.h"

#include <algorithm>

#include "common/check.h"

namespace vellum::engine {

SuffixTree::SuffixTree(int max_depth) : max_depth_(max_depth), nodes_(1) {
  VELLUM_CHECK(max_depth >= 2, ErrorCode::kInvalidArgument,
               "suffix tree: max depth must be at least 2, got {}", max_depth);
}

int32_t SuffixTree::child(int32_t node, int32_t token) const {
  if (node == 0) {
    const auto it = root_.find(token);
    return it == root_.end() ? -1 : it->second;
  }
  for (const auto& [t, id] : nodes_[static_cast<size_t>(node)].children) {
    if (t == token) return id;
  }
  return -1;
}

int32_t SuffixTree::child_or_new(int32_t node, int32_t token) {
  if (const int32_t existing = child(node, token); existing >= 0) return existing;
  int32_t id;
  if (!free_.empty()) {
    id = free_.back();
    free_.pop_back();
    nodes_[static_cast<size_t>(id)] = Node{};
  } else {
    id = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
  }
  nodes_[static_cast<size_t>(id)].depth = nodes_[static_cast<size_t>(node)].depth + 1;
  if (node == 0) {
    root_.emplace(token, id);
  } else {
    nodes_[static_cast<size_t>(node)].children.emplace_back(token, id);
  }
  return id;
}

void SuffixTree::drop_child(int32_t node, int32_t token) {
  if (node == 0) {
    root_.erase(token);
    return;
  }
  auto& children = nodes_[static_cast<size_t>(node)].children;
  std::erase_if(children, [&](const auto& c) { return c.first == token; });
}

void SuffixTree::append(Cursor& cursor, std::span<const int32_t> tokens) {
  std::vector<int32_t> next;
  for (int32_t token : tokens) {
    // Every n-gram ending at the previous token grows by this one; a new 1-gram starts.
    next.clear();
    const int32_t unigram = child_or_new(0, token);
    ++nodes_[static_cast<size_t>(unigram)].count;
    next.push_back(unigram);
    for (int32_t node : cursor.open) {
      if (nodes_[static_cast<size_t>(node)].depth + 1 > max_depth_) continue;
      const int32_t grown = child_or_new(node, token);
      ++nodes_[static_cast<size_t>(grown)].count;
      if (nodes_[static_cast<size_t>(grown)].depth < max_depth_) next.push_back(grown);
    }
    cursor.open.swap(next);
    ++cursor.num_tokens;
  }
}

void SuffixTree::remove(std::span<const int32_t> tokens) {
  const size_t num_tokens = tokens.size();
  for (size_t start = 0; start < num_tokens; ++start) {
    const size_t end = std::min(num_tokens, start + static_cast<size_t>(max_depth_));
    int32_t parent = 0;
    for (size_t i = start; i < end; ++i) {
      const int32_t node = child(parent, tokens[i]);
      VELLUM_ASSERT(node >= 0);
      Node& n = nodes_[static_cast<size_t>(node)];
      if (--n.count == 0) {
        // A child never counts more than its parent, so the node's only descendants are the
        // rest of this window's path, each counted once (by this window): free them all.
        drop_child(parent, tokens[i]);
        free_.push_back(node);
        int32_t above = node;
        for (size_t j = i + 1; j < end; ++j) {
          const int32_t below = child(above, tokens[j]);
          if (below < 0) break;
          free_.push_back(below);
          nodes_[static_cast<size_t>(below)].count = 0;
          above = below;
        }
        break;
      }
      parent = node;
    }
  }
}

int32_t SuffixTree::find_tail(std::span<const int32_t> context, int length) const {
  if (length <= 0 || static_cast<size_t>(length) > context.size()) return -1;
  int32_t node = 0;
  for (size_t i = context.size() - static_cast<size_t>(length); i < context.size() && node >= 0;
       ++i) {
    node = child(node, context[i]);
  }
  return node;
}

std::pair<int32_t, int> SuffixTree::match(std::span<const int32_t> context) const {
  const int longest = static_cast<int>(
      std::min<size_t>(context.size(), static_cast<size_t>(max_depth_ - 1)));
  for (int len = longest; len >= 1; --len) {
    if (const int32_t node = find_tail(context, len); node >= 0) return {node, len};
  }
  return {-1, 0};
}

std::vector<int32_t> SuffixTree::draft(int32_t node, int max_tokens, double min_prob,
                                       double* score) const {
  std::vector<int32_t> tokens;
  double prob = 1.0;
  *score = 0.0;
  while (node > 0 && static_cast<int>(tokens.size()) < max_tokens) {
    const Node& n = nodes_[static_cast<size_t>(node)];
    const std::pair<int32_t, int32_t>* best = nullptr;
    for (const auto& c : n.children) {
      if (best == nullptr ||
          nodes_[static_cast<size_t>(c.second)].count > nodes_[static_cast<size_t>(best->second)].count) {
        best = &c;
      }
    }
    if (best == nullptr) break;
    prob *= static_cast<double>(nodes_[static_cast<size_t>(best->second)].count) /
            static_cast<double>(n.count);
    if (prob < min_prob) break;
    tokens.push_back(best->first);
    *score += prob;
    node = best->second;
  }
  return tokens;
}

}  // namespace vellum::engine
