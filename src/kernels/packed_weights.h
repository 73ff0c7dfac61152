// The private layout of PackedLinear's weights, shared by its scalar and ISA backends.
//
// The layout does not depend on the ISA, so a PackedLinear packed under one ISA runs under any
// other (tests switch ISAs with cpu::set_isa_override).
//   kF32 / kF16 / kBF16: rows, (n_out, n_in) row-major (row_bytes each). Every quantized type
//          is repacked into 16-row panels for the int8 kernels:
//   kQ8_0: panels of 16 output rows (n_out rounded up to 16; the padding rows hold zero
//          weights), the VNNI layout: in each panel, for each group of 4 inputs (a "quad"), the
//          16 rows' 4 codes side by side, 64 bytes, so one 512-bit load feeds one vpdpbusd for
//          16 outputs against one broadcast group of 4 activation codes, and each int32 lane
//          sums a whole 32-block of one output. Codes are w_q + 128 (unsigned: VNNI's
//          unsigned x signed dot takes the weights as the unsigned side; see
//          gemm_panels_avx512.cc). Scales: per panel and 32-block, the 16 rows' f16 scales.
//            code(j, k)  = data[(j / 16) * 16 * n_in + (k / 4) * 64 + (j % 16) * 4 + k % 4]
//            scale(j, b) = scales[((j / 16) * (n_in / 32) + b) * 16 + j % 16]
//          A panel is one contiguous stream of 16 * n_in bytes (decode reads it front to back).
//   kQ4_K: the same 16-row panels with 4-bit codes: for each group of 8 inputs, 64 bytes whose
//          byte (j % 16) * 4 + i holds code(j, 8t + i) in its low and code(j, 8t + 4 + i) in its
//          high nibble (one load and a mask / shift give two quads). Per panel and 256-block
//          (kQ4KPanelScaleBytes): d[16], dmin[16] (f16), then the 6-bit sub-block scales sc[8][16]
//          (one byte each) and the mins mn[2][16][4]: for sub-blocks 4h..4h + 3, the 16 rows' 4
//          mins side by side (a row's 4 bytes meet one vpdpbusd lane; q4k_mn_index):
//          w = d * sc * code - dmin * mn.
//   kQ5_K: as Q4_K with a fifth bit: per 32-block, the four nibble vectors and then one vector
//          whose byte (j % 16) * 4 + i holds in bit 2t the fifth bit of nibble vector t's low
//          code and in bit 2t + 1 that of its high code (320 bytes per 32-block and panel).
//   kQ4_0 / kQ4_1 / kIQ4_NL / kQ5_0 / kQ5_1: Q4_K's nibble panels (Q5_0 / Q5_1 with Q5_K's
//          fifth-bit vector); per panel and 32-block the 16 rows' f16 d (Q4_1, Q5_1: then their f16
//          m): w = d * (code - 8), d * code + m, d * kIq4nlValues[code], d * (code - 16), resp.
//          d * code + m.
//   kIQ4_XS: IQ4_NL's nibble panels (codes index kIq4nlValues); per panel and 256-block
//          (kIq4XsPanelScaleBytes): d[16] (f16), then the signed sub-block scales sc[8][16]
//          (6-bit scale - 32, one byte each): w = d * sc * kIq4nlValues[code].
//   kQ6_K: 16-row panels of 6-bit codes (0..63, w = d * sc * (code - 32)): per 32-block, four
//          64-byte vectors of low nibbles arranged as Q4_K's, then two vectors of the high bits:
//          vector h, byte (j % 16) * 4 + i holds the top 2 bits of the codes of nibble vectors
//          2h (bits 0-1 low nibble's code, 2-3 high nibble's) and 2h + 1 (bits 4-5, 6-7).
//          Per panel and 256-block (kQ6KPanelScaleBytes): d[16] (f16), then the signed scales
//          of the 16-input sub-blocks, sc[16][16].
//   kQ3_K / kQ2_K: 16-row panels of 2-bit codes: per 32-block, two 64-byte vectors, vector h
//          for inputs 16h..16h + 15, whose byte (j % 16) * 4 + i holds in bits 2s, 2s + 1 the
//          code of input 16h + 4s + i (one load and four shift / masks give four quads); Q3_K
//          adds a vector whose bit 4h + s of the same byte is that input's third bit (192 bytes
//          per 32-block; Q2_K 128). Q3_K: code 0..7, w = d * sc * (code - 4), with Q6_K's
//          scales (d[16], signed sc[16][16]: 6-bit scale - 32). Q2_K: code 0..3, per panel and
//          256-block (kQ2KPanelScaleBytes) d[16], dmin[16] (f16), then GGML's scale bytes
//          s[16][16] (scale in the low, min in the high nibble): w = d * (s & 15) * code -
//          dmin * (s >> 4).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/aligned_buffer.h"
#include "kernels/kernels.h"

namespace vellum::kernels::detail {

// Panel height of every panel layout (rows of W, i.e. outputs, per panel).
inline constexpr int64_t kQ8Panel = 16;
// Bytes of Q4_K scales per panel and 256-block, and their offsets.
inline constexpr int64_t kQ4KPanelScaleBytes = 320;
inline constexpr int64_t kQ4KDminOffset = 32;
inline constexpr int64_t kQ4KScOffset = 64;
inline constexpr int64_t kQ4KMnOffset = 192;
// Offset of the min of sub-block `sub` (0..7) of panel row `lane` in a Q4_K / Q5_K panel's scales.
inline constexpr int64_t q4k_mn_index(int64_t sub, int64_t lane) {
  return kQ4KMnOffset + (sub / 4) * 64 + lane * 4 + sub % 4;
}
// IQ4_XS: bytes of scales per panel and 256-block, and the offset of sc.
inline constexpr int64_t kIq4XsPanelScaleBytes = 160;
inline constexpr int64_t kIq4XsScOffset = 32;
// Q6_K (and Q3_K, which shares its scale layout): bytes per panel and 32-block of codes; scales
// per panel and 256-block.
inline constexpr int64_t kQ6KPanelBlockBytes = 384;
inline constexpr int64_t kQ3KPanelBlockBytes = 192;
inline constexpr int64_t kQ2KPanelBlockBytes = 128;
inline constexpr int64_t kQ6KPanelScaleBytes = 288;
inline constexpr int64_t kQ6KScOffset = 32;
// Q2_K: bytes of scales per panel and 256-block, and the offsets of dmin and the scale bytes.
inline constexpr int64_t kQ2KPanelScaleBytes = 320;
inline constexpr int64_t kQ2KDminOffset = 32;
inline constexpr int64_t kQ2KScOffset = 64;

struct PackedWeights {
  WeightType type = WeightType::kF32;
  int64_t n_out = 0;
  int64_t n_in = 0;
  size_t row_bytes = 0;  // bytes of one GGML row of this type (kQ8_0: n_in codes)
  AlignedBuffer data;    // rows, or panels (see above)
  AlignedBuffer scales;  // the panel layouts' scales (above)

  // kQ8_0 panels.
  int64_t q8_num_panels() const { return (n_out + kQ8Panel - 1) / kQ8Panel; }
  const uint8_t* q8_panel(int64_t p) const { return data.as<uint8_t>() + p * kQ8Panel * n_in; }
  const uint16_t* q8_panel_scales(int64_t p) const {
    return scales.as<uint16_t>() + p * kQ8Panel * (n_in / 32);
  }
  uint8_t q8_code(int64_t j, int64_t k) const {
    return q8_panel(j / kQ8Panel)[(k / 4) * 64 + (j % kQ8Panel) * 4 + k % 4];
  }
  uint16_t q8_scale(int64_t j, int64_t block) const {
    return q8_panel_scales(j / kQ8Panel)[block * kQ8Panel + j % kQ8Panel];
  }

  // The nibble panels of kQ4_K, kQ5_K, kIQ4_XS, kQ4_0, kQ4_1, kIQ4_NL, kQ5_0 and kQ5_1
  // (q8_num_panels() of them), and the bytes of one panel's 32-block (Q5_*: with the fifth-bit
  // vector).
  int64_t nibble_block_bytes() const {
    return type == WeightType::kQ5_K || type == WeightType::kQ5_0 || type == WeightType::kQ5_1
               ? 320
               : 256;
  }
  const uint8_t* nibble_panel(int64_t p) const {
    return data.as<uint8_t>() + p * (n_in / 32) * nibble_block_bytes();
  }
  // kQ4_0 / kQ4_1 / kIQ4_NL / kQ5_0 / kQ5_1: d[16] (and Q4_1's, Q5_1's m[16]) of panel p,
  // 32-block `block`.
  const uint16_t* q4_panel_scales(int64_t p, int64_t block) const {
    const int64_t per_block =
        type == WeightType::kQ4_1 || type == WeightType::kQ5_1 ? 2 * kQ8Panel : kQ8Panel;
    return scales.as<uint16_t>() + (p * (n_in / 32) + block) * per_block;
  }
  float q4_weight(int64_t j, int64_t k) const;
  // kQ4_K / kQ5_K / kIQ4_XS: the scales of panel p, 256-block `block`.
  const uint8_t* q4k_panel_scales(int64_t p, int64_t block) const {
    const int64_t bytes =
        type == WeightType::kIQ4_XS ? kIq4XsPanelScaleBytes : kQ4KPanelScaleBytes;
    return scales.as<uint8_t>() + (p * (n_in / 256) + block) * bytes;
  }
  // Weight (j, k) as GGML's dequantization computes it (Q4_K, Q5_K, IQ4_XS).
  float q4k_weight(int64_t j, int64_t k) const;

  // kQ6_K, kQ3_K and kQ2_K panels of 16-input sub-blocks (q8_num_panels() of them).
  int64_t k16_block_bytes() const {
    return type == WeightType::kQ6_K   ? kQ6KPanelBlockBytes
           : type == WeightType::kQ3_K ? kQ3KPanelBlockBytes
                                       : kQ2KPanelBlockBytes;
  }
  const uint8_t* k16_panel(int64_t p) const {
    return data.as<uint8_t>() + p * (n_in / 32) * k16_block_bytes();
  }
  const uint8_t* k16_panel_scales(int64_t p, int64_t block) const {
    const int64_t bytes = type == WeightType::kQ2_K ? kQ2KPanelScaleBytes : kQ6KPanelScaleBytes;
    return scales.as<uint8_t>() + (p * (n_in / 256) + block) * bytes;
  }
  float k16_weight(int64_t j, int64_t k) const;
};

// Activations quantized for the panel kernels (AVX-512 and AVX2), per row of n_in values (a
// multiple of 32): xq int8 codes (n_in), and per 32-block the sum of the block's codes (int32;
// for the Q8_0 weights' +128 offset and the Q4_K mins), d_x (f32), and the sum of the block's
// first 16 codes (int32; the 16-input sub-blocks of Q2_K, Q3_K and Q6_K), then per 256-block
// 16 bytes of sum_quads. d_x is one scale per activation_group(type) values (each 32-block
// stores its group's).
// Values per activation scale for the panel kernels of `type`: 256 for the K-quants and IQ4_XS
// (GGML's Q8_K: the kernels sum a whole 256-block's scaled sub-block dots in int32 and apply
// d_w · d_x once), 32 for Q8_0 and the legacy types (GGML's Q8_0).
inline int64_t activation_group(WeightType type) {
  switch (type) {
    case WeightType::kQ2_K:
    case WeightType::kQ3_K:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K:
    case WeightType::kQ6_K:
    case WeightType::kIQ4_XS: return 256;
    default: return 32;
  }
}

struct Q8Activations {
  int64_t n_in;
  uint8_t* base;
  static size_t row_bytes(int64_t n_in) {
    return static_cast<size_t>(n_in + 3 * n_in / 8 + n_in / 256 * 16);
  }
  static size_t scratch_bytes(int64_t m, int64_t n_in) {
    return static_cast<size_t>(m) * row_bytes(n_in) + 64;
  }
  uint8_t* row(int64_t r) const { return base + static_cast<size_t>(r) * row_bytes(n_in); }
  int8_t* xq(int64_t r) const { return reinterpret_cast<int8_t*>(row(r)); }
  int32_t* sum(int64_t r) const { return reinterpret_cast<int32_t*>(row(r) + n_in); }
  float* xd(int64_t r) const { return reinterpret_cast<float*>(row(r) + n_in + n_in / 8); }
  int32_t* sum_lo(int64_t r) const {
    return reinterpret_cast<int32_t*>(row(r) + n_in + n_in / 4);
  }
  // Activations quantized per 256 (activation_group): per 256-block, the 8 sub-blocks' code sums
  // s = 128 · hi + lo (lo 0..127, hi -32..31: |s| <= 4064) as signed bytes, four per dword:
  // lo of sub-blocks 0-3, of 4-7, then hi of 0-3, of 4-7. The Q4_K / Q5_K kernels' mins term
  // multiplies them with the panel's 4 mins per row in one vpmaddubsw / vpdpbusd each.
  uint32_t* sum_quads(int64_t r) const {
    return reinterpret_cast<uint32_t*>(row(r) + n_in + 3 * n_in / 8);
  }
};

// Whether the panel kernels of `type` read sum_quads (the types with mins per sub-block).
inline bool uses_sum_quads(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ5_K;
}
// Fills q.sum_quads(r) from q.sum(r) (rows quantized per 256).
void pack_sum_quads(const Q8Activations& q, int64_t r);

// y (m, n_out) = x (m, n_in) · Wᵀ on the packed layout, scalar code (Isa::kScalar, and
// the types that have no kernel for the selected ISA).
void gemm_scalar(float* y, const float* x, int64_t m, const PackedWeights& w);

}  // namespace vellum::kernels::detail
