// Quantization of f32 values into GGML's block formats (kernels/quant_types.h), for
// `vellum make-model`.
//
// Goal: valid blocks, byte for byte the layout GGUF readers expect, with an error close to
// llama-quantize's without an importance matrix. Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 follow GGML's
// reference quantizers (quantize_row_*_ref) exactly; the K types and IQ4_* use a search of their
// own (a least-squares fit of each sub-block's scale, and min where the type has one, over a few
// candidate grids; then the sub-block scales quantized against the super-block's f16 scale and
// the values re-quantized with the scales as stored), so they are close to, not bit-identical
// with, llama.cpp's. Non-goal: importance-matrix weighting.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace vellum::model {

// Types quantize_row can encode: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_NL, IQ4_XS (what the kernels run).
bool is_quantizable(gguf::GgmlType type);

// Encodes x[0, n) as `type` into `out`: n / ggml_block_size(type) blocks of
// ggml_type_size(type) bytes each, packed (out needs no alignment). n must be a multiple of the
// block size (32, or 256 for the K types and IQ4_XS). Deterministic and thread-safe.
// Throws vellum::Error (kInvalidArgument) for a type outside is_quantizable() or a ragged n.
void quantize_row(gguf::GgmlType type, const float* x, int64_t n, void* out);

}  // namespace vellum::model
