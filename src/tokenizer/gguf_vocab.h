// Vocab from GGUF `tokenizer.ggml.*` metadata, with llama.cpp's defaults for what is absent.
#pragma once

#include "tokenizer/vocab.h"

namespace vellum::gguf {
class GgufFile;
}

namespace vellum::tokenizer {

// Reads the vocabulary; throws vellum::Error (kInvalidModel, kUnsupported) naming the key and
// the problem. The result still needs finalize_vocab() (Tokenizer::from_vocab does it).
Vocab vocab_from_gguf(const gguf::GgufFile& file);

}  // namespace vellum::tokenizer
