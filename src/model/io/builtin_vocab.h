// A small built-in SentencePiece-style vocabulary for generated models that are not given one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_writer.h"

namespace vellum::model {

// Sets the tokenizer.* metadata of a llama (SentencePiece, `tokenizer.ggml.model = "llama"`)
// vocabulary on `writer`: <unk>=0, <s>=1, </s>=2, the 256 byte tokens <0x00>..<0xFF> (type 6),
// single printable ASCII characters, and pieces of a few hundred common English words with the
// U+2581 word prefix, each with all its prefixes so SentencePiece merges can reach it. Scores
// favour shorter pieces, so merging builds words left to right. Any text tokenizes: characters
// outside the vocabulary fall back to byte tokens. Returns the vocabulary size.
//
// chat_family (one of builtin_chat_families(), or empty for none) adds that family's turn tokens
// as control tokens after the pieces and its chat template (tokenizer.chat_template), so that
// chat requests and end-of-turn stops work as with the real models of the family.
int64_t add_builtin_vocab(gguf::GgufWriter& writer, std::string_view chat_family = {});

// The chat families add_builtin_vocab knows: llama3, chatml (Qwen), gemma, phi3, mistral.
std::vector<std::string> builtin_chat_families();

}  // namespace vellum::model
