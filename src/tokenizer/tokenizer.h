// Tokenizer: text <-> token ids for SentencePiece-style and byte-level BPE vocabularies, loaded
// from GGUF metadata or a Hugging Face tokenizer.json. Encoding follows llama.cpp exactly
// (llama_tokenize); decoding follows vLLM/HF conventions (skip_special_tokens,
// spaces_between_special_tokens) and always returns valid UTF-8.
//
// Thread-safety: immutable after construction; every const method may be called concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/token_index.h"
#include "tokenizer/vocab.h"

namespace vellum::gguf {
class GgufFile;
}

namespace vellum::tokenizer {

class BpeEncoder;
class SpmEncoder;
class SpecialPartitioner;

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS where the vocabulary asks for them
  bool parse_special = false;  // text such as "<|eot_id|>" becomes that control token
};

// Decoding concatenates the tokens' bytes (SentencePiece "▁" as ' ', byte tokens as their byte,
// byte-level BPE through GPT-2's alphabet), drops one leading space for SentencePiece-style
// vocabularies at the start of a sequence (as HF's Strip decoder does), and replaces ill-formed
// UTF-8 with U+FFFD. HF's clean_up_tokenization_spaces is not applied: vLLM's streamed text does
// not apply it either, and it would make decoding lossy.
struct DecodeOptions {
  bool skip_special_tokens = true;  // drop control and unknown tokens (BOS, EOS, <|eot_id|>...)
  // When special tokens are kept: put one space between a special token and its neighbours
  // (HF's slow-tokenizer convention, which vLLM follows).
  bool spaces_between_special_tokens = true;
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.* metadata. Throws vellum::Error (kInvalidModel / kUnsupported) that
  // names the problem when the vocabulary is malformed or of an unsupported kind.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::GgufFile& file);
  // `dir_or_file`: a model directory holding tokenizer.json (and optionally
  // tokenizer_config.json), or the path of a tokenizer.json itself.
  static std::unique_ptr<Tokenizer> from_hf_json(const std::filesystem::path& dir_or_file);
  // From an already-filled vocabulary (checked and finalized here).
  static std::unique_ptr<Tokenizer> from_vocab(Vocab vocab);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options = {}) const;

  // Text of `ids`; ill-formed UTF-8 (a sequence cut in the middle) becomes U+FFFD. Throws
  // vellum::Error (kInvalidArgument) for an id outside [0, vocab_size()).
  std::string decode(std::span<const int32_t> ids, const DecodeOptions& options = {}) const;

  // The raw bytes of one token as llama.cpp's llama_token_to_piece(lstrip=0, special=false)
  // gives them: empty for control and unknown tokens, possibly a partial UTF-8 sequence.
  std::string token_to_piece(int32_t id) const;
  // The token's text as stored in the vocabulary (byte-level alphabet for BPE).
  const std::string& token_text(int32_t id) const;
  std::optional<int32_t> token_id(std::string_view text) const;

  int32_t vocab_size() const { return vocab_.num_tokens(); }
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  // End-of-generation ids (EOS, EOT, <|eot_id|>, <|im_end|>, <|end|>, ...), sorted.
  std::vector<int32_t> eog_ids() const { return vocab_.eog_ids; }
  bool is_eog(int32_t id) const;
  bool add_bos() const { return vocab_.add_bos; }
  bool add_eos() const { return vocab_.add_eos; }
  std::optional<std::string> chat_template() const { return vocab_.chat_template; }
  // Control and unknown tokens: what skip_special_tokens removes.
  bool is_special(int32_t id) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  friend class DecodeStream;
  explicit Tokenizer(Vocab vocab);

  // Raw bytes a token contributes to decoded text (control tokens: their text).
  const std::string& piece(int32_t id) const { return pieces_[id]; }
  void check_id(int32_t id) const;
  void encode_text(std::string_view text, bool after_special, bool at_start,
                   std::vector<int32_t>& out) const;

  Vocab vocab_;
  TokenIndex token_index_;           // views vocab_.tokens
  std::vector<std::string> pieces_;  // [num_tokens]
  std::unique_ptr<SpecialPartitioner> partitioner_;
  std::unique_ptr<SpmEncoder> spm_;  // SPM vocabularies
  std::unique_ptr<BpeEncoder> bpe_;  // BPE vocabularies
};

}  // namespace vellum::tokenizer
