// SentencePiece-style encoding as llama.cpp does it (llm_tokenizer_spm): start from UTF-8
// characters, repeatedly merge the adjacent pair whose concatenation is the vocabulary token
// with the highest score (ties: leftmost), then emit each remaining symbol as its token or,
// when it is not one, as <0xXX> byte tokens.
//
// O(n log n) in the text length (a priority queue of candidate pairs). Thread-safety: immutable
// after construction.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace vellum::tokenizer {

class SpmEncoder {
 public:
  // Throws vellum::Error (kInvalidModel) when a byte has neither a <0xXX> token nor a
  // single-byte token and the vocabulary has no unknown token to stand in.
  SpmEncoder(const Vocab& vocab, const TokenIndex& index);

  // `text` is already escaped (' ' -> U+2581) and prefixed as the caller wants.
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  // Encodes one chunk: the whole merge procedure runs within it.
  void encode_chunk(std::string_view text, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::array<int32_t, 256> byte_ids_{};  // byte-fallback token per byte value
  // No token contains U+2581 right after another character (true of SentencePiece vocabularies
  // trained with whitespace splitting). Then no merge can cross the boundary before a U+2581
  // that follows a non-U+2581 character, and each word can be encoded on its own: the same
  // result as one pass over the whole text (merges in different words never interact), but
  // with small queues instead of one the size of the text.
  bool split_at_spaces_ = false;
};

}  // namespace vellum::tokenizer
