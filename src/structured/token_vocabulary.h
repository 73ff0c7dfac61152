// TokenVocabulary: the bytes of every token, arranged as a trie for computing allowed-token masks,
// and mask_for_state(), which walks that trie through an Automaton: a subtree is skipped as soon
// as its prefix is dead, so the cost is the number of live trie nodes, each one cached transition.
//
// The trie is flattened in preorder: node i has a byte, a depth (1 = first byte of a token) and
// the index just past its subtree, and the tokens whose bytes end exactly there. Tokens with no
// bytes (control tokens such as BOS) are never allowed by a grammar; the end tokens (EOS and the
// other end-of-generation ids) are allowed exactly when the automaton accepts.
//
// Immutable after construction; shared by every grammar of one engine.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "structured/automaton.h"

namespace vellum::structured {

class TokenVocabulary {
 public:
  // token_bytes[id]: the raw bytes token `id` adds to the text. mask_size: the number of logits
  // (the model's rows may outnumber the tokenizer's tokens; the extra ids are never allowed).
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_token_ids,
                  int64_t mask_size);

  int64_t mask_size() const { return mask_size_; }
  size_t num_words() const { return static_cast<size_t>((mask_size_ + 63) / 64); }
  size_t num_trie_nodes() const { return bytes_.size(); }
  const std::string& token_bytes(int32_t id) const { return token_bytes_[static_cast<size_t>(id)]; }
  bool is_end_token(int32_t id) const;
  std::span<const int32_t> end_token_ids() const { return end_token_ids_; }
  int32_t num_tokens() const { return static_cast<int32_t>(token_bytes_.size()); }

  // Fills `mask` (num_words() words, bit id % 64 of word id / 64) with the tokens allowed in
  // `state`: those whose bytes the automaton can read from it, plus the end tokens when it
  // accepts. Returns false when an automaton limit cut the walk (the mask is then a subset).
  bool mask_for_state(Automaton& automaton, int32_t state, uint64_t* mask) const;

 private:
  std::vector<std::string> token_bytes_;
  std::vector<int32_t> end_token_ids_;  // sorted
  int64_t mask_size_;
  // The trie, in preorder.
  std::vector<uint8_t> bytes_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> skip_;         // index just past the subtree
  std::vector<uint32_t> token_begin_;  // tokens ending here: sorted_ids_[begin, end)
  std::vector<uint32_t> token_end_;
  std::vector<int32_t> sorted_ids_;  // token ids sorted by bytes
  size_t max_depth_ = 0;
};

}  // namespace vellum::structured
