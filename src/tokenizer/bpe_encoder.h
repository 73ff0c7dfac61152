// Ranked-merge BPE as llama.cpp does it (llm_tokenizer_bpe): pre-tokenize with the vocabulary's
// regexes, then within each word repeatedly merge the adjacent pair with the lowest merge rank
// (ties: leftmost) until no ranked pair remains.
//
// Byte-level vocabularies (GPT-2 alphabet) start from one symbol per byte; Metaspace
// vocabularies from one symbol per UTF-8 character, with <0xXX> byte fallback or <unk> for
// characters outside the vocabulary.
//
// O(n log n) per word. Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex_splitter.h"
#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace vellum::tokenizer {

class BpeEncoder {
 public:
  // Resolves every merge to token ids. Throws vellum::Error (kInvalidModel) naming the merge
  // when a part or the merged text is not in the vocabulary.
  BpeEncoder(const Vocab& vocab, const TokenIndex& index);

  // Encodes one fragment of raw text (no special tokens in it). Metaspace vocabularies expect
  // the text already escaped (' ' -> U+2581).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

 private:
  struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t offset;   // into the word
    uint32_t length;   // bytes; 0 once merged into its left neighbour
    int32_t token_id;  // kNoToken when the symbol is not a token
  };
  // One slot of the open-addressing merge table; rank -1 marks an empty slot.
  struct MergeSlot {
    uint64_t key;  // (left id << 32) | right id
    int32_t rank;
    int32_t result_id;
  };

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // The slot of `key`, or nullptr.
  const MergeSlot* find_merge(uint64_t key) const;
  // `symbols` and `encoded` are scratch buffers reused across words.
  void encode_word(std::string_view word, std::vector<Symbol>& symbols, std::string& encoded,
                   std::vector<int32_t>& out) const;
  void merge_symbols(std::vector<Symbol>& symbols) const;
  void emit_unknown(std::string_view word, const Symbol& symbol, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::unique_ptr<RegexSplitter> splitter_;
  std::vector<MergeSlot> merge_slots_;  // power-of-two size, load factor <= 1/2
  uint64_t merge_mask_ = 0;
  std::array<int32_t, 256> byte_ids_{};  // byte-level: token of each byte's character;
                                          // Metaspace: <0xXX> token (kNoToken if absent)
};

}  // namespace vellum::tokenizer
