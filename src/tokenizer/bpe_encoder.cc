#include "tokenizer/bpe_encoder.h"

#include <algorithm>
#include <queue>

#include "common/check.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

namespace {

struct Bigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t length;  // bytes of left + right when queued; a mismatch later means it is stale

  // Lowest rank first; among equal ranks the leftmost pair.
  bool operator<(const Bigram& other) const {
    return rank > other.rank || (rank == other.rank && left > other.left);
  }
};

}  // namespace

namespace {

uint64_t mix(uint64_t key) {
  key ^= key >> 31;
  key *= 0x9e3779b97f4a7c15ULL;
  key ^= key >> 29;
  return key;
}

}  // namespace

BpeEncoder::BpeEncoder(const Vocab& vocab, const TokenIndex& index)
    : vocab_(vocab),
      index_(index),
      splitter_(std::make_unique<RegexSplitter>(vocab.pre_regexes)) {
  VELLUM_CHECK(vocab.num_tokens() <= (1 << kIdBits) &&
                   vocab.merges.size() < (size_t{1} << kRankBits),
               ErrorCode::kUnsupported,
               "BPE vocabulary too large: {} tokens and {} merges (at most {} and {})",
               vocab.num_tokens(), vocab.merges.size(), 1 << kIdBits, (1 << kRankBits) - 1);
  size_t num_slots = 16;
  while (num_slots * 7 < vocab.merges.size() * 10) num_slots *= 2;
  merge_slots_.assign(num_slots, kEmptySlot);
  merge_mask_ = num_slots - 1;
  merge_results_.resize(vocab.merges.size());
  std::string joined;
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const auto& [left, right] = vocab.merges[rank];
    const int32_t left_id = index.find(left);
    const int32_t right_id = index.find(right);
    VELLUM_CHECK(left_id != kNoToken && right_id != kNoToken, ErrorCode::kInvalidModel,
                 "BPE merge {} ('{} {}') uses a part that is not in the vocabulary; the "
                 "vocabulary is corrupt",
                 rank, left, right);
    joined.assign(left).append(right);
    const int32_t result_id = index.find(joined);
    VELLUM_CHECK(result_id != kNoToken, ErrorCode::kInvalidModel,
                 "BPE merge {} ('{} {}') produces '{}', which is not in the vocabulary; the "
                 "vocabulary is corrupt",
                 rank, left, right, joined);
    merge_results_[rank] = result_id;
    const uint64_t key = pair_key(left_id, right_id);
    for (uint64_t slot = mix(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      uint64_t& entry = merge_slots_[slot];
      if (entry == kEmptySlot) {
        entry = (key << kRankBits) | rank;
        break;
      }
      if ((entry >> kRankBits) == key) break;  // a repeated pair keeps its first (best) rank
    }
  }
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    byte_ids_[b] = vocab.byte_level
                       ? index.find(byte_to_unicode()[b])
                       : index.find(std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'});
  }
}

int32_t BpeEncoder::find_merge(uint64_t key) const {
  for (uint64_t slot = mix(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const uint64_t entry = merge_slots_[slot];
    if (entry == kEmptySlot) return -1;
    if ((entry >> kRankBits) == key) {
      return static_cast<int32_t>(entry & ((uint64_t{1} << kRankBits) - 1));
    }
  }
}

void BpeEncoder::merge_symbols(std::vector<Symbol>& symbols) const {
  std::priority_queue<Bigram> queue;
  const auto try_add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t left_id = symbols[left].token_id;
    const int32_t right_id = symbols[right].token_id;
    if (left_id == kNoToken || right_id == kNoToken) return;
    const int32_t rank = find_merge(pair_key(left_id, right_id));
    if (rank < 0) return;
    queue.push({rank, left, right, symbols[left].length + symbols[right].length});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add_bigram(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
      continue;
    }
    left.token_id = merge_results_[bigram.rank];
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }
}

void BpeEncoder::emit_unknown(std::string_view word, const Symbol& symbol,
                              std::vector<int32_t>& out) const {
  const std::string_view text = word.substr(symbol.offset, symbol.length);
  if (vocab_.byte_level) {
    // llama.cpp looks up each byte of the symbol's (byte-level) text as a one-character
    // token; only ASCII bytes can match. Others are dropped.
    std::string encoded;
    for (const char c : text) encoded += byte_to_unicode()[static_cast<uint8_t>(c)];
    for (const char c : encoded) {
      const int32_t id = index_.find(std::string_view(&c, 1));
      if (id != kNoToken) out.push_back(id);
    }
    return;
  }
  if (vocab_.byte_fallback) {
    bool all_bytes = true;
    for (const char c : text) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (const char c : text) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
      return;
    }
  }
  VELLUM_CHECK(vocab_.unk_id != kNoToken, ErrorCode::kInvalidArgument,
               "text contains '{}', which this vocabulary cannot encode (no byte fallback and "
               "no unknown token)",
               text);
  // HF fuse_unk: consecutive unknowns become one.
  if (out.empty() || out.back() != vocab_.unk_id) out.push_back(vocab_.unk_id);
}

void BpeEncoder::encode_word(std::string_view word, std::vector<Symbol>& symbols,
                             std::string& encoded, std::vector<int32_t>& out) const {
  symbols.clear();
  if (vocab_.byte_level) {
    if (vocab_.ignore_merges) {
      encoded.clear();
      for (const char c : word) encoded += byte_to_unicode()[static_cast<uint8_t>(c)];
      const int32_t id = index_.find(encoded);
      if (id != kNoToken) {
        out.push_back(id);
        return;
      }
    }
    for (size_t i = 0; i < word.size(); ++i) {
      const auto index = static_cast<int32_t>(symbols.size());
      symbols.push_back({index - 1, i + 1 == word.size() ? -1 : index + 1,
                         static_cast<uint32_t>(i), 1, byte_ids_[static_cast<uint8_t>(word[i])]});
    }
  } else {
    if (vocab_.ignore_merges) {
      const int32_t id = index_.find(word);
      if (id != kNoToken) {
        out.push_back(id);
        return;
      }
    }
    for (size_t offset = 0; offset < word.size();) {
      const size_t length =
          std::min(utf8_len_from_lead(static_cast<uint8_t>(word[offset])), word.size() - offset);
      const auto index = static_cast<int32_t>(symbols.size());
      symbols.push_back({index - 1, offset + length == word.size() ? -1 : index + 1,
                         static_cast<uint32_t>(offset), static_cast<uint32_t>(length),
                         index_.find(word.substr(offset, length))});
      offset += length;
    }
  }
  if (symbols.size() > 1) merge_symbols(symbols);
  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    if (symbols[i].token_id != kNoToken) {
      out.push_back(symbols[i].token_id);
    } else {
      emit_unknown(word, symbols[i], out);
    }
  }
}

void BpeEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  // The regexes need valid UTF-8; like llama.cpp, ill-formed bytes become U+FFFD.
  std::string sanitized;
  if (!is_valid_utf8(text)) {
    sanitized = sanitize_utf8(text);
    text = sanitized;
  }
  std::vector<Symbol> symbols;
  std::string encoded;
  for (const std::string_view word : splitter_->split(text)) {
    encode_word(word, symbols, encoded, out);
  }
}

}  // namespace vellum::tokenizer
