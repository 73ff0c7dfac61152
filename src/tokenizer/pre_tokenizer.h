// Byte-level BPE pre-tokenizers selected by GGUF `tokenizer.ggml.pre`: the split regexes and the
// flags llama.cpp attaches to each name.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::tokenizer {

struct PreTokenizerConfig {
  std::vector<std::string> regexes;  // applied in order, see RegexSplitter
  bool ignore_merges = false;        // a word that is a token is emitted whole
  bool add_bos = false;              // default for add_bos before the metadata key overrides it
};

// The configuration for a pre-tokenizer name; nullopt when the name is not supported.
// "default" (also used when the key is absent) is llama.cpp's fallback set.
std::optional<PreTokenizerConfig> pre_tokenizer_config(std::string_view name);

// The names accepted by pre_tokenizer_config(), for error messages.
std::string supported_pre_tokenizers();

// GPT-2's split regex (HF ByteLevel pre-tokenizer with use_regex=true).
extern const char* const kGpt2Regex;

}  // namespace vellum::tokenizer
