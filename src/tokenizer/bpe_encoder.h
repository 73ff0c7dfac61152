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
  // The merge table packs a pair and its rank into one 64-bit slot, (left id, right id, rank)
  // in 21 + 21 + 22 bits, so that a 280k-merge table is 4 MiB instead of 16: lookups of
  // adjacent pairs dominate encoding time and are cache misses. All ones marks an empty slot.
  static constexpr int kIdBits = 21;
  static constexpr int kRankBits = 22;
  static constexpr uint64_t kEmptySlot = ~uint64_t{0};

  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(left) << kIdBits) | static_cast<uint64_t>(right);
  }
  // The rank of the pair `key`, or -1.
  int32_t find_merge(uint64_t key) const;
  // `symbols` and `encoded` are scratch buffers reused across words.
  void encode_word(std::string_view word, std::vector<Symbol>& symbols, std::string& encoded,
                   std::vector<int32_t>& out) const;
  void merge_symbols(std::vector<Symbol>& symbols) const;
  void emit_unknown(std::string_view word, const Symbol& symbol, std::vector<int32_t>& out) const;

  const Vocab& vocab_;
  const TokenIndex& index_;
  std::unique_ptr<RegexSplitter> splitter_;
  std::vector<uint64_t> merge_slots_;  // power-of-two size, load factor <= 0.7
  uint64_t merge_mask_ = 0;
  std::vector<int32_t> merge_results_;  // [num_merges] merged token id by rank
  std::array<int32_t, 256> byte_ids_{};  // byte-level: token of each byte's character;
                                          // Metaspace: <0xXX> token (kNoToken if absent)
};

}  // namespace vellum::tokenizer
