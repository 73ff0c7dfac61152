// make-model: writes a valid GGUF (llama and the other decoder architectures) with seeded random
// weights, for tests and benchmarks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace vellum::model {

struct MakeModelOptions {
  // "tiny": hidden 128, 4 layers, 4 heads, 2 KV heads (head_dim 32), FFN 384, context 2048,
  //         untied output.weight; runs in milliseconds. Its rows (128, 384) are not multiples
  //         of 256, so the K types fall back to 32-element types as llama-quantize does.
  // "tiny-k": hidden 256, 8 layers, 4 heads, 1 KV head (head_dim 64), FFN 768, context 2048,
  //         tied embeddings: every row a multiple of 256, for the K types and their mixes.
  // "llama-3.2-1b": Llama-3.2-1B's shapes (hidden 2048, 16 layers, 32/8 heads, head_dim 64,
  //         FFN 8192, context 131072, rope theta 500000, llama3 rope scaling with a rope_freqs
  //         tensor, tied embeddings).
  // Family shapes (real models' sizes, random weights): "qwen2.5-0.5b", "qwen3-0.6b",
  //         "gemma-3-1b" (sliding window 512, pattern 6), "phi-3-mini-8l" (Phi-3-mini at 8 of
  //         its 32 layers), "moe-8x-top2" (qwen3moe, 8 experts of width 1024, 2 used).
  // "tiny-<arch>" for llama3, qwen2, qwen3, gemma2, gemma3, phi3, mixtral, qwen3moe: tiny models
  //         of each architecture (hidden 128) for tests that must always run.
  // With the built-in vocabulary every shape carries its family's chat template and turn tokens
  // (model/io/builtin_vocab.h): llama3 (llama-3.2-1b, tiny-llama3), chatml (Qwen shapes), gemma,
  // phi3, and mistral's [INST] format for the other llama shapes.
  std::string shape = "tiny";
  // Weight types (model/io/quant_mix.h): a pure type for every matrix -- f32 f16 bf16 q8_0
  // q4_0 q4_1 q5_0 q5_1 q3_k q4_k q5_k q6_k iq4_nl iq4_xs -- or one of llama.cpp's mixes:
  // q2_k q3_k_m q4_k_m q5_k_m. Quantized from the same seeded f32 values whatever the type.
  // Norms and rope_freqs are always f32.
  std::string dtype = "f32";
  uint64_t seed = 0;
  // Optional GGUF to copy every tokenizer.* key from (the vocabulary size follows it); when
  // empty, a small built-in SentencePiece vocabulary is used.
  std::filesystem::path vocab_from;
  std::filesystem::path output;
};

// The accepted MakeModelOptions::shape (in table order) and ::dtype values.
std::vector<std::string> make_model_shapes();
std::vector<std::string> make_model_dtypes();

// Writes the model to options.output. Same options => byte-identical file. Throws
// vellum::Error: kInvalidArgument for an unknown shape or dtype, kIo / kInvalidModel for a bad
// vocab_from file or a write failure.
void make_model(const MakeModelOptions& options);

}  // namespace vellum::model
