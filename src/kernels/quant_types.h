// GGML's quantized block layouts, byte for byte as GGUF stores them, and the table of weight types
// the kernels run (block size, bytes per block, name).
//
// Every block starts with its scale(s) or ends with them exactly as ggml-common.h defines; the
// static_asserts pin the sizes. Dequantization semantics: kernels/ref/dequantize_ref.cc.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/half.h"  // BlockQ8_0
#include "kernels/kernels.h"

namespace vellum::kernels {

inline constexpr int kQK = 32;     // elements per block of the legacy types (Q4_0 ... Q8_0, IQ4_NL)
inline constexpr int kQK_K = 256;  // elements per super-block of the K types and IQ4_XS
inline constexpr int kKScaleBytes = 12;

// Q4_0: w = d * (q - 8), q 4-bit. qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// Q4_1: w = d * q + m.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
// Q5_0: w = d * (q - 16), q = nibble | (bit j of qh) << 4.
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// Q5_1: w = d * q + m.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
// Q2_K: 16 sub-blocks of 16; scales[i] = scale (low 4 bits) | min (high 4 bits);
// w = d * scale * q - dmin * min, q 2-bit.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16 with 6-bit scales packed in 12 bytes; w = d * (scale - 32) * (q - 4)
// where q = 2 low bits from qs | high bit from hmask (a set bit means +4 is NOT subtracted).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;
};
// Q4_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes;
// w = d * scale * q - dmin * min, q 4-bit.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
// Q5_K: as Q4_K with a fifth bit per weight in qh.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; w = d * scale * (q - 32), q 6-bit.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
// IQ4_NL: w = d * kIq4nlValues[q], q 4-bit, laid out as Q4_0.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
// IQ4_XS: 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l, high 2 in scales_h);
// w = d * (scale - 32) * kIq4nlValues[q].
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);

// The non-linear 4-bit codebook of IQ4_NL and IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void k4_scale_min(int j, const uint8_t* q, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *min = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q3_K: the 16 6-bit scales (still offset by 32) from the 12 packed bytes.
void q3_k_scales(const uint8_t packed[kKScaleBytes], int8_t out[16]);

struct WeightTypeInfo {
  WeightType type;
  const char* name;      // GGML's name: "Q4_K"
  int block_elems;       // 1 for the float types
  size_t block_bytes;    // bytes per block (per element for the float types)
  bool quantized;
};

// Every WeightType, in enum order.
const WeightTypeInfo& weight_type_info(WeightType type);
// "F32, F16, BF16, Q4_0, ..." for error messages.
const char* supported_weight_types_list();

}  // namespace vellum::kernels
