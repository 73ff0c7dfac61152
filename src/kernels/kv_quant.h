// Quantized KV cache rows (KvType in kernels.h): the one quantizer every ISA's reshape_and_cache
// calls, so the cache holds the same bytes whichever path wrote it, and the scalar dequantizer the
// reference attention reads through.
//
// Compiled without ISA flags (kv_quant.cc): nothing here is inline, so no copy built with
// -mavx512f can be picked by the linker for an AVX2 caller.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace vellum::kernels {

// dst (kv_row_bytes(type, n) bytes) := src (n floats) in `type`, n a multiple of
// kv_block_elems(type). Q8_0 rounds as llama.cpp's quantize_row_q8_0_ref: d = max|x| / 127,
// q = round(x / d); Q4_0 as quantize_row_q4_0_ref: d = (the x of largest |x|) / -8,
// q = min(15, trunc(x / d + 8.5)); fp8: s = max|x| / (the format's largest finite value), each
// x / s rounded to nearest even (E5M2 through f16: a tie of the f16 value can round twice).
void quantize_kv_row(void* dst, const float* src, int64_t n, KvType type);

// out (n floats) := the row `row` of `type` (any KvType).
void dequantize_kv_row(float* out, const void* row, int64_t n, KvType type);

}  // namespace vellum::kernels
