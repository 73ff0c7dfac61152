// Elementwise kernels, embedding lookup and KV-cache writes on AVX2 + FMA + F16C.
// Rows and tokens are independent, so large calls split them over the OpenMP threads.
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx2/vec_math.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/kv_quant.h"
#include "kernels/threads.h"

namespace vellum::kernels::avx2 {

namespace {

// One row of rms_norm: outr (may be xr) = xr / rms(xr) * weight.
void rms_norm_row(float* outr, const float* xr, const float* weight, int64_t dim, float eps) {
  // Four accumulators hide the FMA latency (4 cycles, 2 ports).
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= dim; i += 32) {
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const __m256 a = _mm256_loadu_ps(xr + i + 8 * u);
      acc[u] = _mm256_fmadd_ps(a, a, acc[u]);
    }
  }
  for (; i < dim; i += 8) {
    const __m256 a = load_f32(xr + i, dim - i);
    acc[0] = _mm256_fmadd_ps(a, a, acc[0]);
  }
  const float ss =
      reduce_add(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  const __m256 inv = _mm256_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(dim) + eps));
  for (i = 0; i + 8 <= dim; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), inv);
    _mm256_storeu_ps(outr + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
  }
  if (i < dim) {
    const __m256 v = _mm256_mul_ps(load_f32(xr + i, dim - i), inv);
    store_f32(outr + i, _mm256_mul_ps(v, load_f32(weight + i, dim - i)), dim - i);
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

namespace {

// out[i] = f(gate[i]) * up[i] over 8-lane chunks, the last one masked.
template <class F>
void gated(float* out, const float* gate, const float* up, int64_t n, const F& f) {
  threads::parallel_for((n + 7) / 8, n >= kMinParallelElems, [&](int64_t vec) {
    const int64_t i = vec * 8;
    if (i + 8 <= n) {
      _mm256_storeu_ps(out + i,
                       _mm256_mul_ps(f(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    } else {
      store_f32(out + i, _mm256_mul_ps(f(load_f32(gate + i, n - i)), load_f32(up + i, n - i)),
                n - i);
    }
  });
}

}  // namespace

void silu_mul(float* out, const float* gate, const float* up, int64_t n) {
  gated(out, gate, up, n, [](__m256 g) {
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  });
}

// 0.5 g (1 + tanh(u)) = g · sigmoid(2u): one exp and no cancellation for negative g.
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n) {
  gated(out, gate, up, n, [](__m256 g) {
    const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
    const __m256 u = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f),
                                   _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
    const __m256 e = exp_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f), u));
    return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
  });
}

void add_inplace(float* x, const float* y, int64_t n) {
  threads::parallel_for((n + 7) / 8, n >= 4 * kMinParallelElems, [&](int64_t vec) {
    const int64_t i = vec * 8;
    if (i + 8 <= n) {
      _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    } else {
      store_f32(x + i, _mm256_add_ps(load_f32(x + i, n - i), load_f32(y + i, n - i)), n - i);
    }
  });
}

namespace {

void dequantize_row(float* out, const void* row, WeightType type, int64_t dim) {
  switch (type) {
    case WeightType::kF32:
      std::memcpy(out, row, static_cast<size_t>(dim) * sizeof(float));
      return;
    case WeightType::kF16:
    case WeightType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      const bool f16 = type == WeightType::kF16;
      int64_t i = 0;
      for (; i + 8 <= dim; i += 8) {
        _mm256_storeu_ps(out + i, f16 ? load_f16(h + i) : load_bf16(h + i));
      }
      if (i < dim) {
        store_f32(out + i, f16 ? load_f16(h + i, dim - i) : load_bf16(h + i, dim - i), dim - i);
      }
      return;
    }
    case WeightType::kQ8_0: {
      const auto* blocks = static_cast<const BlockQ8_0*>(row);
      for (int64_t b = 0; b < dim / kQ8_0BlockSize; ++b) {
        const __m256 d = _mm256_set1_ps(fp16_to_float(blocks[b].d));
        for (int part = 0; part < 4; ++part) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blocks[b].qs + part * 8));
          _mm256_storeu_ps(out + b * 32 + part * 8,
                           _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
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
  for (int64_t i = 0; i < n; i += 8) {
    const int64_t left = n - i;
    const __m256 v = left >= 8 ? _mm256_loadu_ps(src + i) : load_f32(src + i, left);
    switch (type) {
      case KvType::kF32:
        if (left >= 8) {
          _mm256_storeu_ps(static_cast<float*>(dst) + i, v);
        } else {
          store_f32(static_cast<float*>(dst) + i, v, left);
        }
        break;
      case KvType::kF16: store_u16(static_cast<uint16_t*>(dst) + i, to_f16(v), left); break;
      case KvType::kBF16: store_u16(static_cast<uint16_t*>(dst) + i, to_bf16(v), left); break;
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

}  // namespace vellum::kernels::avx2
