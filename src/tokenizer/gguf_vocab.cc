#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <cctype>

#include "common/check.h"
#include "gguf/gguf.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace vellum::tokenizer {

namespace {

// A special token id from metadata. Absent keeps `current`; 0xFFFFFFFF / -1 (what converters
// write for "none") clears it; any other value outside the vocabulary is an error.
void read_special_id(const gguf::GgufFile& file, const char* key, int32_t num_tokens,
                     int32_t& current) {
  const auto value = file.get_int(key);
  if (!value) return;
  if (*value == -1 || *value == 0xFFFFFFFFLL) {
    current = kNoToken;
    return;
  }
  VELLUM_CHECK(*value >= 0 && *value < num_tokens, ErrorCode::kInvalidModel,
               "GGUF '{}': {} is not a token id (the vocabulary has {} tokens); fix the "
               "metadata",
               key, *value, num_tokens);
  current = static_cast<int32_t>(*value);
}

}  // namespace

Vocab vocab_from_gguf(const gguf::GgufFile& file) {
  Vocab vocab;
  const auto model = file.get_string("tokenizer.ggml.model");
  VELLUM_CHECK(model.has_value(), ErrorCode::kInvalidModel,
               "GGUF file '{}' has no tokenizer (key tokenizer.ggml.model is missing)",
               file.path().string());
  const auto* tokens = file.find_string_array("tokenizer.ggml.tokens");
  VELLUM_CHECK(tokens != nullptr, ErrorCode::kInvalidModel,
               "GGUF file '{}' has no token list (tokenizer.ggml.tokens)", file.path().string());
  vocab.tokens = *tokens;
  const auto num_tokens = vocab.num_tokens();

  if (*model == "llama") {
    vocab.type = VocabType::kSpm;
    vocab.bos_id = 1;
    vocab.eos_id = 2;
    vocab.unk_id = 0;
    vocab.add_space_prefix = true;
    vocab.escape_spaces = true;
    vocab.add_bos = true;
    vocab.add_eos = false;
  } else if (*model == "gpt2") {
    vocab.type = VocabType::kBpe;
    vocab.byte_level = true;
    vocab.escape_spaces = false;
    vocab.add_space_prefix = false;
    vocab.bos_id = 11;
    vocab.eos_id = 11;
    const auto pre = file.get_string("tokenizer.ggml.pre");
    vocab.pre = pre.value_or("default");
    const auto config = pre_tokenizer_config(vocab.pre);
    VELLUM_CHECK(config.has_value(), ErrorCode::kUnsupported,
                 "GGUF file '{}': pre-tokenizer '{}' (tokenizer.ggml.pre) is not supported; "
                 "supported: {}",
                 file.path().string(), vocab.pre, supported_pre_tokenizers());
    vocab.pre_regexes = config->regexes;
    vocab.ignore_merges = config->ignore_merges;
    vocab.add_bos = config->add_bos;

    const auto* merges = file.find_string_array("tokenizer.ggml.merges");
    VELLUM_CHECK(merges != nullptr, ErrorCode::kInvalidModel,
                 "GGUF file '{}' is a BPE vocabulary without merges (tokenizer.ggml.merges)",
                 file.path().string());
    vocab.merges.reserve(merges->size());
    for (size_t rank = 0; rank < merges->size(); ++rank) {
      const std::string& merge = (*merges)[rank];
      // The separator is the first space after the first byte (a part may start with ' ').
      const size_t space = merge.find(' ', 1);
      VELLUM_CHECK(space != std::string::npos, ErrorCode::kInvalidModel,
                   "GGUF file '{}': merge {} ('{}') has no space between its two parts",
                   file.path().string(), rank, merge);
      vocab.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
    }
  } else {
    VELLUM_THROW(ErrorCode::kUnsupported,
                 "GGUF file '{}': tokenizer model '{}' is not supported (supported: llama "
                 "(SentencePiece), gpt2 (byte-level BPE))",
                 file.path().string(), *model);
  }

  if (file.find("tokenizer.ggml.scores") != nullptr) {
    vocab.scores = file.get_float_array("tokenizer.ggml.scores");
  }
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    const auto types = file.get_int_array("tokenizer.ggml.token_type");
    VELLUM_CHECK(types.size() == vocab.tokens.size(), ErrorCode::kInvalidModel,
                 "GGUF file '{}': {} token types for {} tokens", file.path().string(),
                 types.size(), vocab.tokens.size());
    vocab.attrs.resize(types.size());
    std::transform(types.begin(), types.end(), vocab.attrs.begin(), attr_from_token_type);
  } else {
    vocab.attrs.assign(vocab.tokens.size(), kAttrNormal);
  }

  read_special_id(file, "tokenizer.ggml.bos_token_id", num_tokens, vocab.bos_id);
  read_special_id(file, "tokenizer.ggml.eos_token_id", num_tokens, vocab.eos_id);
  read_special_id(file, "tokenizer.ggml.eot_token_id", num_tokens, vocab.eot_id);
  read_special_id(file, "tokenizer.ggml.eom_token_id", num_tokens, vocab.eom_id);
  read_special_id(file, "tokenizer.ggml.unknown_token_id", num_tokens, vocab.unk_id);
  read_special_id(file, "tokenizer.ggml.seperator_token_id", num_tokens, vocab.sep_id);
  read_special_id(file, "tokenizer.ggml.padding_token_id", num_tokens, vocab.pad_id);
  read_special_id(file, "tokenizer.ggml.fim_pad_token_id", num_tokens, vocab.fim_pad_id);
  read_special_id(file, "tokenizer.ggml.fim_rep_token_id", num_tokens, vocab.fim_rep_id);
  read_special_id(file, "tokenizer.ggml.fim_sep_token_id", num_tokens, vocab.fim_sep_id);
  if (const auto v = file.get_bool("tokenizer.ggml.add_bos_token")) vocab.add_bos = *v;
  if (const auto v = file.get_bool("tokenizer.ggml.add_eos_token")) vocab.add_eos = *v;
  if (const auto v = file.get_bool("tokenizer.ggml.add_space_prefix")) {
    vocab.add_space_prefix = *v;
  }
  vocab.chat_template = file.get_string("tokenizer.chat_template");

  // Phi-3 GGUFs lack the rstrip flags of their special tokens; llama.cpp sets them by name.
  std::string name = file.get_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  vocab.phi3_special_rstrip =
      name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
  return vocab;
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::GgufFile& file) {
  return from_vocab(vocab_from_gguf(file));
}

}  // namespace vellum::tokenizer
