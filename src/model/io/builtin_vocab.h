// A small built-in SentencePiece-style vocabulary for generated models that are not given one.
#pragma once

#include <cstdint>

#include "gguf/gguf_writer.h"

namespace vellum::model {

// Sets the tokenizer.* metadata of a llama (SentencePiece, `tokenizer.ggml.model = "llama"`)
// vocabulary on `writer`: <unk>=0, <s>=1, </s>=2, the 256 byte tokens <0x00>..<0xFF> (type 6),
// single printable ASCII characters, and pieces of a few hundred common English words with the
// U+2581 word prefix, each with all its prefixes so SentencePiece merges can reach it. Scores
// favour shorter pieces, so merging builds words left to right. Any text tokenizes: characters
// outside the vocabulary fall back to byte tokens. Returns the vocabulary size.
int64_t add_builtin_vocab(gguf::GgufWriter& writer);

}  // namespace vellum::model
