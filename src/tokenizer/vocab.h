// Vocab: everything a tokenizer needs, as plain data, whichever file it came from (GGUF
// metadata or a Hugging Face tokenizer.json). Loaders fill it; finalize_vocab() checks it and
// derives what llama.cpp derives at load (EOT/EOG tokens, forced control attributes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vellum::tokenizer {

inline constexpr int32_t kNoToken = -1;

enum class VocabType {
  kSpm,  // SentencePiece-style: merges chosen by token score, <0xXX> byte fallback (GGUF "llama")
  kBpe,  // ranked merges (GGUF "gpt2", HF "BPE")
};

// GGUF `tokenizer.ggml.token_type` values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// Per-token attribute bits (llama.cpp's llama_token_attr).
enum TokenAttr : uint32_t {
  kAttrUndefined = 0,
  kAttrUnknown = 1u << 0,
  kAttrUnused = 1u << 1,
  kAttrNormal = 1u << 2,
  kAttrControl = 1u << 3,
  kAttrUserDefined = 1u << 4,
  kAttrByte = 1u << 5,
  kAttrNormalized = 1u << 6,
  kAttrLstrip = 1u << 7,  // eat whitespace to the left of the token when splitting it out
  kAttrRstrip = 1u << 8,  // eat whitespace to the right
  kAttrSingleWord = 1u << 9,
};

uint32_t attr_from_token_type(int32_t token_type);

struct Vocab {
  VocabType type = VocabType::kSpm;
  // Pre-tokenizer name (GGUF `tokenizer.ggml.pre`, or "hf" for tokenizer.json).
  std::string pre = "default";
  // BPE only: regexes applied in order; each one splits every piece of text into its matches and
  // the gaps between them (HF `Split` with behavior "Isolated"), matched within that piece only.
  std::vector<std::string> pre_regexes;
  // BPE only: token texts use GPT-2's byte-to-unicode alphabet (GGUF gpt2, HF ByteLevel). When
  // false (HF Metaspace BPE), token texts are raw text with ' ' written as U+2581.
  bool byte_level = true;
  // BPE, not byte-level: a character missing from the vocabulary becomes its <0xXX> tokens.
  bool byte_fallback = false;
  // BPE: a pre-tokenized word that is itself a token is emitted whole (Llama 3, tekken).
  bool ignore_merges = false;
  // SPM / Metaspace: ' ' is written as U+2581 before encoding.
  bool escape_spaces = true;
  // SPM / Metaspace: a space is prepended to the text at the start and after every special
  // token, and decode() drops one leading space of the output.
  bool add_space_prefix = false;
  // With add_space_prefix: only the text at the very start gets the space (HF Metaspace
  // prepend_scheme "first"), not text after a special token.
  bool space_prefix_first_only = false;
  bool add_bos = false;
  bool add_eos = false;

  std::vector<std::string> tokens;           // [num_tokens] token texts, as stored
  std::vector<float> scores;                 // [num_tokens] SPM scores; empty when absent
  std::vector<uint32_t> attrs;               // [num_tokens] TokenAttr bits
  std::vector<std::pair<std::string, std::string>> merges;  // BPE, by rank (index 0 first)

  int32_t bos_id = kNoToken;
  int32_t eos_id = kNoToken;
  int32_t eot_id = kNoToken;
  int32_t eom_id = kNoToken;
  int32_t unk_id = kNoToken;
  int32_t sep_id = kNoToken;
  int32_t pad_id = kNoToken;
  int32_t fim_pad_id = kNoToken;
  int32_t fim_rep_id = kNoToken;
  int32_t fim_sep_id = kNoToken;
  // Extra end-of-generation ids from the model's own config (HF generation_config eos list).
  std::vector<int32_t> extra_eog_ids;

  // Filled by finalize_vocab(): sorted, unique.
  std::vector<int32_t> eog_ids;

  std::optional<std::string> chat_template;

  // Phi-3 (general.name contains "phi-3" or "phi3"): finalize_vocab() gives the special tokens
  // the rstrip attribute its GGUF files lack, after the end-of-generation tokens are marked, as
  // llama.cpp does by model name.
  bool phi3_special_rstrip = false;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
};

// Checks a loaded vocabulary and throws vellum::Error (kInvalidModel) naming the problem:
// array sizes, special ids in range, token texts valid UTF-8, BPE merges present. (Each merge
// is checked when the BPE encoder resolves it; SPM byte fallback when the SPM encoder is built.)
// Then detects EOT/EOM/FIM tokens by their text where the metadata did not name them, builds
// eog_ids and marks those tokens as control tokens, as llama.cpp does.
void finalize_vocab(Vocab& vocab);

}  // namespace vellum::tokenizer
