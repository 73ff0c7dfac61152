// Vocab from a Hugging Face tokenizer.json (+ tokenizer_config.json and generation_config.json
// next to it), so that a safetensors model directory can be served without conversion.
//
// Supported: model "BPE" with a ByteLevel pre-tokenizer (GPT-2, Llama 3, Qwen2, DeepSeek, ...:
// Split regexes with behavior "Isolated", Digits, Punctuation, ByteLevel) or Metaspace
// (SentencePiece-derived BPE: Metaspace pre-tokenizer or the Prepend/Replace normalizers, byte
// fallback). Added tokens with their special/lstrip/rstrip flags. BOS/EOS and add_bos/add_eos
// from tokenizer_config.json or the TemplateProcessing post-processor; chat_template from
// tokenizer_config.json or chat_template.jinja; extra end-of-generation ids from
// generation_config.json.
//
// Not applied: a Unicode NFC/NFKC normalizer (llama.cpp ignores it as well, and GGUF files
// converted from these models behave the same). Anything else unsupported is an error that
// names the component.
#pragma once

#include <filesystem>

#include "tokenizer/vocab.h"

namespace vellum::tokenizer {

// `dir_or_file`: a directory holding tokenizer.json, or the tokenizer.json path itself.
// Throws vellum::Error (kIo, kInvalidModel, kUnsupported) naming the file and the problem.
Vocab vocab_from_hf_json(const std::filesystem::path& dir_or_file);

}  // namespace vellum::tokenizer
