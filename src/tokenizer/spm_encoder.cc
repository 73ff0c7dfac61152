#include "tokenizer/spm_encoder.h"

#include <queue>
#include <string>

#include "common/check.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  uint32_t offset;  // into the text
  uint32_t length;  // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t length;  // bytes of left + right when queued; a mismatch later means it is stale

  // Highest score first; among equal scores the leftmost pair.
  bool operator<(const Bigram& other) const {
    return score < other.score || (score == other.score && left > other.left);
  }
};

}  // namespace

SpmEncoder::SpmEncoder(const Vocab& vocab, const TokenIndex& index)
    : vocab_(vocab), index_(index) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const std::string hex = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    int32_t id = index.find(hex);
    if (id == kNoToken) id = index.find(std::string(1, static_cast<char>(b)));
    if (id != kNoToken) {
      byte_ids_[b] = id;
      continue;
    }
    VELLUM_CHECK(vocab.unk_id != kNoToken, ErrorCode::kInvalidModel,
                 "SentencePiece vocabulary has no byte-fallback token {} and no unknown token; "
                 "it cannot encode arbitrary text",
                 hex);
    byte_ids_[b] = vocab.unk_id;
  }
  split_at_spaces_ = true;
  for (const std::string& token : vocab.tokens) {
    // A U+2581 at byte offset > 0 right after a character that is not U+2581.
    for (size_t pos = token.find(kSpmSpace, 1); pos != std::string::npos;
         pos = token.find(kSpmSpace, pos + 1)) {
      const bool after_space = pos >= kSpmSpace.size() &&
                               token.compare(pos - kSpmSpace.size(), kSpmSpace.size(), kSpmSpace) == 0;
      if (!after_space) {
        split_at_spaces_ = false;
        break;
      }
    }
    if (!split_at_spaces_) break;
  }
}

void SpmEncoder::encode(std::string_view text, std::vector<int32_t>& out) const {
  if (!split_at_spaces_) {
    encode_chunk(text, out);
    return;
  }
  // Chunk boundaries: before each U+2581 whose preceding character is not U+2581.
  size_t chunk_begin = 0;
  size_t pos = text.find(kSpmSpace, 1);
  while (pos != std::string_view::npos) {
    const bool after_space =
        pos >= kSpmSpace.size() && text.substr(pos - kSpmSpace.size(), kSpmSpace.size()) == kSpmSpace;
    if (!after_space && pos > chunk_begin) {
      encode_chunk(text.substr(chunk_begin, pos - chunk_begin), out);
      chunk_begin = pos;
    }
    pos = text.find(kSpmSpace, pos + kSpmSpace.size());
  }
  encode_chunk(text.substr(chunk_begin), out);
}

void SpmEncoder::encode_chunk(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t length =
        std::min(utf8_len_from_lead(static_cast<uint8_t>(text[offset])), text.size() - offset);
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offset + length == text.size() ? -1 : index + 1,
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(length)});
    offset += length;
  }

  std::priority_queue<Bigram> queue;
  const auto try_add_bigram = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t length = symbols[left].length + symbols[right].length;
    const int32_t id = index_.find(text.substr(symbols[left].offset, length));
    if (id == kNoToken) return;
    const float score = vocab_.scores.empty() ? 0.0f : vocab_.scores[id];
    queue.push({score, left, right, length});
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
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add_bigram(left.prev, bigram.left);
    try_add_bigram(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].offset, symbols[i].length);
    const int32_t id = index_.find(piece);
    if (id != kNoToken) {
      out.push_back(id);
      continue;
    }
    for (const char c : piece) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
  }
}

}  // namespace vellum::tokenizer
