// GGML tensor element types as stored in GGUF files, with their block layout.
//
// Every type id GGML has ever assigned and still reads from GGUF is listed, so the reader can
// compute the byte size of any tensor, including types Vellum cannot compute with yet.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vellum::gguf {

// Ids are GGML's `enum ggml_type` values; they are written to disk and must never change.
// Ids 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4 ...) and 36-38 (IQ4_NL_4_4 ...) were removed from GGML
// and are rejected as unknown.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// True when `id` is a GGML type this reader knows the block layout of.
bool is_known_type(uint32_t id);

// "F32", "Q8_0", ...; for an unknown id "unknown" (or the old name of a removed type, e.g.
// "Q4_0_4_4 (removed)").
const char* ggml_type_name(GgmlType type);

// Elements per block: 1 for plain types, 32 for Q8_0/Q4_0/..., 256 for the K and IQ types.
// 0 for an unknown type.
int64_t ggml_block_size(GgmlType type);

// Bytes per block (for plain types: bytes per element). 0 for an unknown type.
size_t ggml_type_size(GgmlType type);

}  // namespace vellum::gguf
