#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "common/check.h"
#include "tokenizer/bpe_encoder.h"
#include "tokenizer/decode_stream.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/spm_encoder.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {

namespace {

// ' ' -> U+2581 (SentencePiece's visible space).
void append_escaped(std::string_view text, std::string& out) {
  for (const char c : text) {
    if (c == ' ') {
      out.append(kSpmSpace);
    } else {
      out.push_back(c);
    }
  }
}

// U+2581 -> ' '.
std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out.push_back(' ');
      i += kSpmSpace.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// Byte-level alphabet -> raw bytes. A character outside the alphabet is kept as llama.cpp's
// llama_decode_text keeps it: "[UNK_BYTE_0x<hex>" + the token text + "]".
std::string decode_byte_level(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t start = offset;
    const uint32_t cpt = next_codepoint(text, offset);
    const int byte = unicode_to_byte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (size_t k = start; k < offset; ++k) {
      out += fmt::format("{:02x}", static_cast<uint8_t>(text[k]));
    }
    out.append(text);
    out += "]";
  }
  return out;
}

// The byte of a "<0xXX>" token.
std::optional<uint8_t> parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text.back() != '>') return std::nullopt;
  int value = 0;
  for (const char c : text.substr(3, 2)) {
    value <<= 4;
    if (c >= '0' && c <= '9') {
      value |= c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value |= c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value |= c - 'a' + 10;
    } else {
      return std::nullopt;
    }
  }
  return static_cast<uint8_t>(value);
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  finalize_vocab(vocab);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(vocab)));
}

Tokenizer::Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {
  token_index_ = TokenIndex(vocab_.tokens);
  const bool spm_style = vocab_.type == VocabType::kSpm || !vocab_.byte_level;
  pieces_.resize(vocab_.tokens.size());
  for (int32_t id = 0; id < vocab_.num_tokens(); ++id) {
    const std::string& text = vocab_.tokens[id];
    const uint32_t attr = vocab_.attrs[id];
    std::string& piece = pieces_[id];
    if (attr & (kAttrControl | kAttrUnknown | kAttrUserDefined)) {
      piece = text;
    } else if (attr & kAttrNormal) {
      piece = spm_style ? unescape_spaces(text) : decode_byte_level(text);
    } else if ((attr & kAttrByte) && spm_style) {
      const auto byte = parse_byte_token(text);
      VELLUM_CHECK(byte.has_value(), ErrorCode::kInvalidModel,
                   "vocabulary: byte token {} has text '{}', expected <0xXX>", id, text);
      piece.assign(1, static_cast<char>(*byte));
    }
    // Unused, undefined (and byte tokens of byte-level vocabularies) decode to nothing, as in
    // llama.cpp.
  }
  partitioner_ = std::make_unique<SpecialPartitioner>(vocab_);
  if (vocab_.type == VocabType::kSpm) {
    spm_ = std::make_unique<SpmEncoder>(vocab_, token_index_);
  } else {
    bpe_ = std::make_unique<BpeEncoder>(vocab_, token_index_);
  }
}

Tokenizer::~Tokenizer() = default;

void Tokenizer::check_id(int32_t id) const {
  VELLUM_CHECK(id >= 0 && id < vocab_size(), ErrorCode::kInvalidArgument,
               "token id {} is out of range: the vocabulary has {} tokens", id, vocab_size());
}

void Tokenizer::encode_text(std::string_view text, bool after_special, bool at_start,
                            std::vector<int32_t>& out) const {
  const bool spm_style = vocab_.type == VocabType::kSpm || !vocab_.byte_level;
  if (!spm_style) {
    bpe_->encode(text, out);
    return;
  }
  std::string escaped;
  escaped.reserve(text.size() + text.size() / 4 + 3);
  const bool prefix = vocab_.add_space_prefix &&
                      (vocab_.space_prefix_first_only ? at_start : after_special);
  if (prefix) escaped.append(vocab_.escape_spaces ? kSpmSpace : std::string_view(" "));
  if (vocab_.escape_spaces) {
    append_escaped(text, escaped);
  } else {
    escaped.append(text);
  }
  if (spm_) {
    spm_->encode(escaped, out);
  } else {
    bpe_->encode(escaped, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_special && vocab_.add_bos) out.push_back(vocab_.bos_id);
  // SPM: the text at the start and after each special token gets the space prefix.
  bool after_special = true;
  bool at_start = true;
  for (const Fragment& fragment : partitioner_->partition(text, options.parse_special)) {
    if (fragment.token_id != kNoToken) {
      out.push_back(fragment.token_id);
      after_special = true;
    } else {
      encode_text(fragment.text, after_special, at_start, out);
      after_special = false;
    }
    at_start = false;
  }
  if (options.add_special && vocab_.add_eos) out.push_back(vocab_.eos_id);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string out;
  DecodeStream stream(*this, options, /*at_sequence_start=*/true);
  for (const int32_t id : ids) stream.push(id, out);
  stream.finish(out);
  return out;
}

std::string Tokenizer::token_to_piece(int32_t id) const {
  check_id(id);
  if (is_special(id)) return {};
  return pieces_[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  check_id(id);
  return vocab_.tokens[id];
}

std::optional<int32_t> Tokenizer::token_id(std::string_view text) const {
  const int32_t id = token_index_.find(text);
  if (id == kNoToken) return std::nullopt;
  return id;
}

std::optional<int32_t> Tokenizer::bos_id() const {
  if (vocab_.bos_id == kNoToken) return std::nullopt;
  return vocab_.bos_id;
}

std::optional<int32_t> Tokenizer::eos_id() const {
  if (vocab_.eos_id == kNoToken) return std::nullopt;
  return vocab_.eos_id;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::binary_search(vocab_.eog_ids.begin(), vocab_.eog_ids.end(), id);
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && (vocab_.attrs[id] & (kAttrControl | kAttrUnknown)) != 0;
}

}  // namespace vellum::tokenizer
