// Splits text around special-token texts before encoding (llama.cpp's tokenizer_st_partition).
//
// Candidates are control, user-defined and unknown tokens, longest text first (ties: lower id).
// Each candidate in turn splits every remaining text fragment at each of its occurrences, so
// a longer token wins over a shorter one it contains. User-defined tokens are always split out;
// control and unknown tokens only with parse_special. Tokens with the lstrip/rstrip attribute
// eat the ASCII whitespace next to them.
//
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.h"

namespace vellum::tokenizer {

struct Fragment {
  int32_t token_id = kNoToken;  // a special token, or kNoToken for raw text
  std::string_view text;        // raw text (views the input); empty for a token
};

class SpecialPartitioner {
 public:
  explicit SpecialPartitioner(const Vocab& vocab);

  // Fragments of `text` in order. An empty text gives no fragments.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 private:
  struct TrieNode {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node index)
    int32_t token_id = kNoToken;  // candidate whose text ends here
  };
  // Marks in `occurs` (indexed by rank in candidates_) every candidate found in `text`.
  void find_occurring(std::string_view text, std::vector<char>& occurs) const;

  const Vocab& vocab_;
  std::vector<int32_t> candidates_;   // token ids, longest text first
  std::vector<int32_t> rank_of_;      // [num_tokens] index in candidates_, or -1
  std::vector<TrieNode> trie_;        // node 0 is the root
};

}  // namespace vellum::tokenizer
