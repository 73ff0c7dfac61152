#include <immintrin.h>

#include <cmath>

#include "common/half.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/vec_math.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/kv_quant.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx512 {

namespace {

// One row of rms_norm: outr (may be xr) = xr / rms(xr) * weight.
void rms_norm_row(float* outr, const float* xr, const float* weight, int64_t dim, float eps) {
  // Two accumulators hide the FMA latency; sums of squares of hidden states fit f32 well.
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    const __m512 a = _mm512_loadu_ps(xr + i);
    const __m512 b = _mm512_loadu_ps(xr + i + 16);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
    acc1 = _mm512_fmadd_ps(b, b, acc1);
  }
  for (; i < dim; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(tail_mask(dim - i), xr + i);
    acc0 = _mm512_fmadd_ps(a, a, acc0);
  }
  const float ss = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  const __m512 inv =
      _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
  for (i = 0; i < dim; i += 16) {
    const __mmask16 m = tail_mask(dim - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), inv);
    _mm512_mask_storeu_ps(outr + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
  }
}

}  // namespace

void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps) {
  threads::parallel_for(n_rows, n_rows > 1 && n_rows * dim >= kMinParallelElems, [&](int64_t r) {
    rms_norm_row(out + r * dim, x + r * dim, weight, dim, eps);
  });
}

// Each row's sum and norm while the row is in L1; an add is exact per element, so this equals
// add_inplace then rms_norm bit for bit.
void add_rms_norm(float* x, const float* delta, float* out, const float* weight, int64_t n_rows,
                  int64_t dim, float eps) {
  threads::parallel_for(n_rows, n_rows > 1 && n_rows * dim >= kMinParallelElems, [&](int64_t r) {
    float* xr = x + r * dim;
    const float* dr = delta + r * dim;
    for (int64_t i = 0; i < dim; ++i) xr[i] += dr[i];
    rms_norm_row(out + r * dim, xr, weight, dim, eps);
  });
}

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  threads::parallel_for((n + 15) / 16, n >= kMinParallelElems, [&](int64_t vec) {
    const int64_t i = vec * 16;
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, u));
  });
}

// 0.5 g (1 + tanh(u)) = g · sigmoid(2u): one exp and no cancellation for negative g.
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  threads::parallel_for((n + 15) / 16, n >= kMinParallelElems, [&](int64_t vec) {
    const int64_t i = vec * 16;
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 g3 = _mm512_mul_ps(_mm512_mul_ps(g, g), g);
    const __m512 arg = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                     _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), g3, g));
    const __m512 e = exp_ps(_mm512_mul_ps(_mm512_set1_ps(-2.0f), arg));
    const __m512 gelu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(gelu, u));
  });
}

void add_inplace(float* x, const float* y, int64_t n) {
  threads::parallel_for((n + 15) / 16, n >= 4 * kMinParallelElems, [&](int64_t vec) {
    const int64_t i = vec * 16;
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(
        x + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
  });
}

void convert_f32_to_bf16(uint16_t* out, const float* x, int64_t n) {
  threads::parallel_for((n + 15) / 16, n >= (int64_t{1} << 18), [&](int64_t vec) {
    const int64_t i = vec * 16;
    const __mmask16 m = tail_mask(n - i);
    _mm256_mask_storeu_epi16(out + i, m, to_bf16(_mm512_maskz_loadu_ps(m, x + i)));
  });
}

void convert_rows_to_bf16(uint16_t* out, const InputRows& x, int64_t m) {
  const int64_t n_in = x.n_in();
  if (!x.produced()) return convert_f32_to_bf16(out, x.matrix(m), m * n_in);
  // Each row produced into this thread's buffer and rounded while it is in L1.
  threads::parallel_for(m, m * n_in >= kMinParallelElems, [&](int64_t r) {
    const float* row = x.row(r);
    uint16_t* dst = out + r * n_in;
    for (int64_t i = 0; i < n_in; i += 16) {
      const __mmask16 mask = tail_mask(n_in - i);
      _mm256_mask_storeu_epi16(dst + i, mask, to_bf16(_mm512_maskz_loadu_ps(mask, row + i)));
    }
  });
}

namespace {

void dequantize_row(float* out, const void* row, WeightType type, int64_t dim) {
  switch (type) {
    case WeightType::kF32:
      ref::dequantize_row(out, row, type, dim);  // a memcpy
      return;
    case WeightType::kF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < dim; i += 16) {
        const __mmask16 m = tail_mask(dim - i);
        _mm512_mask_storeu_ps(out + i, m, load_f16(h + i, m));
      }
      return;
    }
    case WeightType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < dim; i += 16) {
        const __mmask16 m = tail_mask(dim - i);
        _mm512_mask_storeu_ps(out + i, m, load_bf16(h + i, m));
      }
      return;
    }
    case WeightType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(row);
      for (int64_t b = 0; b < dim / kQ8_0BlockSize; ++b) {
        const __m512 d = _mm512_set1_ps(fp16_to_float(blocks[b].d));
        for (int half = 0; half < 2; ++half) {
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].qs + half * 16));
          _mm512_storeu_ps(out + b * 32 + half * 16,
                           _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
        }
      }
      return;
    }
    default:  // the other quantized types: the reference (embedding lookups are a few rows)
      ref::dequantize_row(out, row, type, dim);
      return;
  }
}

void store_row(void* dst, const float* src, int64_t n, KvType type) {
  if (kv_type_is_quantized(type)) {  // one quantizer for every ISA: the same cache bytes
    quantize_kv_row(dst, src, n, type);
    return;
  }
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    switch (type) {
      case KvType::kF32: _mm512_mask_storeu_ps(static_cast<float*>(dst) + i, m, v); break;
      case KvType::kF16: _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m, to_f16(v)); break;
      case KvType::kBF16: _mm256_mask_storeu_epi16(static_cast<uint16_t*>(dst) + i, m, to_bf16(v)); break;
      default: break;  // quantized: above
    }
  }
}

}  // namespace

void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids) {
  const size_t row_bytes = weight_row_bytes(type, dim);
  const bool parallel = num_ids * dim >= 4 * kMinParallelElems;
  threads::parallel_for(num_ids, parallel, [&](int64_t t) {
    const auto* row = static_cast<const uint8_t*>(table) + static_cast<size_t>(ids[t]) * row_bytes;
    dequantize_row(out + t * dim, row, type, dim);
  });
}

void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type) {
  const size_t k_row_bytes = kv_row_bytes(k_type, head_dim);
  const size_t v_row_bytes = kv_row_bytes(v_type, head_dim);
  const bool parallel = num_tokens * num_kv_heads * head_dim >= 4 * kMinParallelElems;
  threads::parallel_for(num_tokens, parallel, [&](int64_t t) {
    const int64_t slot = slot_mapping[t];
    if (slot < 0) return;  // padding token
    const int64_t block_id = slot / block_size;
    const int64_t offset = slot % block_size;
    for (int64_t h = 0; h < num_kv_heads; ++h) {
      // Row (block_id, h, offset) of the (num_blocks, num_kv_heads, block_size) rows.
      const auto row = static_cast<size_t>((block_id * num_kv_heads + h) * block_size + offset);
      store_row(static_cast<uint8_t*>(k_cache) + row * k_row_bytes,
                k + t * k_stride + h * head_dim, head_dim, k_type);
      store_row(static_cast<uint8_t*>(v_cache) + row * v_row_bytes,
                v + t * v_stride + h * head_dim, head_dim, v_type);
    }
  });
}

}  // namespace vellum::kernels::avx512
