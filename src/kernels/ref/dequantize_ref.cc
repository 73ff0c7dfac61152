// The reference dequantization of every weight type, written to follow GGML's definitions
// (ggml-quants.c, dequantize_row_*) operation for operation, so that the floats come out
// bit-identical to what gguf-py and llama.cpp produce.
#include <array>
#include <cstring>

#include "common/check.h"
#include "common/half.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {

void q3_k_scales(const uint8_t packed[kKScaleBytes], int8_t out[16]) {
  constexpr uint32_t kmask1 = 0x03030303;
  constexpr uint32_t kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, kKScaleBytes);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(out, aux, 16);
}

namespace {

constexpr std::array<WeightTypeInfo, kNumWeightTypes> kTypeInfo = {{
    {WeightType::kF32, "F32", 1, 4, false},
    {WeightType::kF16, "F16", 1, 2, false},
    {WeightType::kBF16, "BF16", 1, 2, false},
    {WeightType::kQ8_0, "Q8_0", kQK, sizeof(BlockQ8_0), true},
    {WeightType::kQ4_0, "Q4_0", kQK, sizeof(BlockQ4_0), true},
    {WeightType::kQ4_1, "Q4_1", kQK, sizeof(BlockQ4_1), true},
    {WeightType::kQ5_0, "Q5_0", kQK, sizeof(BlockQ5_0), true},
    {WeightType::kQ5_1, "Q5_1", kQK, sizeof(BlockQ5_1), true},
    {WeightType::kQ2_K, "Q2_K", kQK_K, sizeof(BlockQ2_K), true},
    {WeightType::kQ3_K, "Q3_K", kQK_K, sizeof(BlockQ3_K), true},
    {WeightType::kQ4_K, "Q4_K", kQK_K, sizeof(BlockQ4_K), true},
    {WeightType::kQ5_K, "Q5_K", kQK_K, sizeof(BlockQ5_K), true},
    {WeightType::kQ6_K, "Q6_K", kQK_K, sizeof(BlockQ6_K), true},
    {WeightType::kIQ4_NL, "IQ4_NL", kQK, sizeof(BlockIQ4_NL), true},
    {WeightType::kIQ4_XS, "IQ4_XS", kQK_K, sizeof(BlockIQ4_XS), true},
}};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kTypeInfo.size(); ++i) {
    if (static_cast<size_t>(kTypeInfo[i].type) != i) return false;
  }
  return true;
}
static_assert(table_in_enum_order());

void dequant_q4_0(float* y, const BlockQ4_0* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[i * kQK + j] = static_cast<float>(x0) * d;
      y[i * kQK + j + kQK / 2] = static_cast<float>(x1) * d;
    }
  }
}

void dequant_q4_1(float* y, const BlockQ4_1* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    const float m = fp16_to_float(x[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[i * kQK + j] = static_cast<float>(x0) * d + m;
      y[i * kQK + j + kQK / 2] = static_cast<float>(x1) * d + m;
    }
  }
}

void dequant_q5_0(float* y, const BlockQ5_0* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      const int x0 = ((x[i].qs[j] & 0x0F) | xh0) - 16;
      const int x1 = ((x[i].qs[j] >> 4) | xh1) - 16;
      y[i * kQK + j] = static_cast<float>(x0) * d;
      y[i * kQK + j + kQK / 2] = static_cast<float>(x1) * d;
    }
  }
}

void dequant_q5_1(float* y, const BlockQ5_1* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    const float m = fp16_to_float(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQK / 2; ++j) {
      const int xh0 = static_cast<int>(((qh >> j) << 4) & 0x10);
      const int xh1 = static_cast<int>((qh >> (j + 12)) & 0x10);
      const int x0 = (x[i].qs[j] & 0x0F) | xh0;
      const int x1 = (x[i].qs[j] >> 4) | xh1;
      y[i * kQK + j] = static_cast<float>(x0) * d + m;
      y[i * kQK + j + kQK / 2] = static_cast<float>(x1) * d + m;
    }
  }
}

void dequant_q8_0(float* y, const BlockQ8_0* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    for (int j = 0; j < kQK; ++j) y[i * kQK + j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

void dequant_q2_k(float* y, const BlockQ2_K* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    const float min = fp16_to_float(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * static_cast<float>(sc & 0xF);
        float ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * static_cast<float>(sc & 0xF);
        ml = min * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * static_cast<float>((q[l + 16] >> shift) & 3) - ml;
        }
        shift += 2;
      }
      q += 32;
    }
  }
}

void dequant_q3_k(float* y, const BlockQ3_K* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = fp16_to_float(x[i].d);
    int8_t scales[16];
    q3_k_scales(x[i].scales, scales);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQK_K; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
        dl = d_all * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int v = ((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
        shift += 2;
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

void dequant_q4_k(float* y, const BlockQ4_K* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = fp16_to_float(x[i].d);
    const float min = fp16_to_float(x[i].dmin);
    int is = 0;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      k4_scale_min(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = min * static_cast<float>(m);
      k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = min * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void dequant_q5_k(float* y, const BlockQ5_K* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = fp16_to_float(x[i].d);
    const float min = fp16_to_float(x[i].dmin);
    int is = 0;
    uint8_t u1 = 1;
    uint8_t u2 = 2;
    for (int j = 0; j < kQK_K; j += 64) {
      uint8_t sc, m;
      k4_scale_min(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * static_cast<float>(sc);
      const float m1 = min * static_cast<float>(m);
      k4_scale_min(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * static_cast<float>(sc);
      const float m2 = min * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      }
      ql += 32;
      is += 2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

void dequant_q6_k(float* y, const BlockQ6_K* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n = 0; n < kQK_K; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequant_iq4_nl(float* y, const BlockIQ4_NL* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_float(x[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[i * kQK + j] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] & 0xF]);
      y[i * kQK + j + kQK / 2] = d * static_cast<float>(kIq4nlValues[x[i].qs[j] >> 4]);
    }
  }
}

void dequant_iq4_xs(float* y, const BlockIQ4_XS* x, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* qs = x[i].qs;
    const float d = fp16_to_float(x[i].d);
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                     (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0xF]);
        y[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
      }
      y += 32;
      qs += 16;
    }
  }
}

}  // namespace

const WeightTypeInfo& weight_type_info(WeightType type) {
  const auto i = static_cast<size_t>(type);
  VELLUM_ASSERT(i < kTypeInfo.size());
  return kTypeInfo[i];
}

const char* supported_weight_types_list() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
         "IQ4_XS";
}

namespace ref {

void dequantize_row(float* out, const void* row, WeightType type, int64_t n) {
  const int64_t nb = n / weight_type_info(type).block_elems;
  switch (type) {
    case WeightType::kF32:
      std::memcpy(out, row, static_cast<size_t>(n) * sizeof(float));
      return;
    case WeightType::kF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = fp16_to_float(h[i]);
      return;
    }
    case WeightType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(row);
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(h[i]);
      return;
    }
    case WeightType::kQ8_0: return dequant_q8_0(out, static_cast<const BlockQ8_0*>(row), nb);
    case WeightType::kQ4_0: return dequant_q4_0(out, static_cast<const BlockQ4_0*>(row), nb);
    case WeightType::kQ4_1: return dequant_q4_1(out, static_cast<const BlockQ4_1*>(row), nb);
    case WeightType::kQ5_0: return dequant_q5_0(out, static_cast<const BlockQ5_0*>(row), nb);
    case WeightType::kQ5_1: return dequant_q5_1(out, static_cast<const BlockQ5_1*>(row), nb);
    case WeightType::kQ2_K: return dequant_q2_k(out, static_cast<const BlockQ2_K*>(row), nb);
    case WeightType::kQ3_K: return dequant_q3_k(out, static_cast<const BlockQ3_K*>(row), nb);
    case WeightType::kQ4_K: return dequant_q4_k(out, static_cast<const BlockQ4_K*>(row), nb);
    case WeightType::kQ5_K: return dequant_q5_k(out, static_cast<const BlockQ5_K*>(row), nb);
    case WeightType::kQ6_K: return dequant_q6_k(out, static_cast<const BlockQ6_K*>(row), nb);
    case WeightType::kIQ4_NL: return dequant_iq4_nl(out, static_cast<const BlockIQ4_NL*>(row), nb);
    case WeightType::kIQ4_XS: return dequant_iq4_xs(out, static_cast<const BlockIQ4_XS*>(row), nb);
  }
}

}  // namespace ref
}  // namespace vellum::kernels
