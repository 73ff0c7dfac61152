// make-model: writes a valid llama GGUF with seeded random weights, for tests and benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace vellum::model {

struct MakeModelOptions {
  // "tiny": hidden 128, 4 layers, 4 heads, 2 KV heads (head_dim 32), FFN 384, context 2048,
  //         untied output.weight; runs in milliseconds.
  // "llama-3.2-1b": Llama-3.2-1B's shapes (hidden 2048, 16 layers, 32/8 heads, head_dim 64,
  //         FFN 8192, context 131072, rope theta 500000, llama3 rope scaling with a rope_freqs
  //         tensor, tied embeddings).
  std::string shape = "tiny";
  std::string dtype = "f32";  // f32 | f16 | bf16 | q8_0: token_embd and the matrices; norms and
                              // rope_freqs are always f32
  uint64_t seed = 0;
  // Optional GGUF to copy every tokenizer.* key from (the vocabulary size follows it); when
  // empty, a small built-in SentencePiece vocabulary is used.
  std::filesystem::path vocab_from;
  std::filesystem::path output;
};

// Writes the model to options.output. Same options => byte-identical file. Throws
// vellum::Error: kInvalidArgument for an unknown shape or dtype, kIo / kInvalidModel for a bad
// vocab_from file or a write failure.
void make_model(const MakeModelOptions& options);

}  // namespace vellum::model
