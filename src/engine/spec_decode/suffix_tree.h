// SuffixTree: counts of every n-gram (n <= max_depth) of some token sequences, as a trie whose
// node at path (a1..an) counts the occurrences of that n-gram (Arctic Inference's suffix tree,
// which suffix decoding drafts from). Appending a token updates max_depth nodes (the n-grams
// ending at it), so a request's tree grows with its output at O(max_depth) per token.
//
// Thread-safety: none; engine core thread only.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vellum::engine {

class SuffixTree {
 public:
  explicit SuffixTree(int max_depth);

  // A sequence being indexed token by token: the nodes of the n-grams ending at its last token.
  struct Cursor {
    std::vector<int32_t> open;  // node ids, shallowest first (depths 1..max_depth-1)
    int64_t num_tokens = 0;     // tokens indexed so far
  };
  // Indexes `tokens` after those the cursor has seen.
  void append(Cursor& cursor, std::span<const int32_t> tokens);
  // Un-indexes a whole sequence that was appended with one cursor (counts drop, empty nodes go).
  void remove(std::span<const int32_t> tokens);

  // The deepest node matching the longest tail of `context` (at most max_depth - 1 tokens, so
  // at least one token can follow); {-1, 0} when even the last token never occurred.
  std::pair<int32_t, int> match(std::span<const int32_t> context) const;
  // The node of the n-gram formed by the last `length` tokens of `context`; -1 if it never
  // occurred (nor does any longer tail, then).
  int32_t find_tail(std::span<const int32_t> context, int length) const;
  int max_depth() const { return max_depth_; }

  // The greedy path below `node`: each step the most frequent child, while the product of
  // child/parent frequencies stays >= min_prob; at most max_tokens. `score` gets the sum of
  // those products (the expected number of accepted tokens).
  std::vector<int32_t> draft(int32_t node, int max_tokens, double min_prob, double* score) const;

  int64_t num_nodes() const { return static_cast<int64_t>(nodes_.size() - free_.size()); }

 private:
  struct Node {
    int64_t count = 0;
    int32_t depth = 0;
    std::vector<std::pair<int32_t, int32_t>> children;  // (token, node id); root's are in root_
  };
  int32_t child(int32_t node, int32_t token) const;
  int32_t child_or_new(int32_t node, int32_t token);
  void drop_child(int32_t node, int32_t token);

  int max_depth_;
  std::vector<Node> nodes_;                       // node 0 is the root
  std::unordered_map<int32_t, int32_t> root_;     // the root's children, by token
  std::vector<int32_t> free_;                     // ids of removed nodes, reused first
};

}  // namespace vellum::engine
