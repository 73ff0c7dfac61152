// ref::dequantize_row against blocks built byte by byte, one test per weight type, with the
// expected floats worked out on paper from GGML's format (ggml-common.h block layouts,
// ggml-quants.c dequantize_row_* semantics). The scales are powers of two and the quants small
// integers, so every expected value is exact in binary floating point and the checks compare
// for equality: dequantization is specified exactly, a wrong bit (nibble order, scale packing,
// hmask sense) moves the value by at least one quantization step.
//
// Positions checked: element 0, the first element of the high-nibble half, an element in
// several sub-blocks (the ones with the awkward scale packing: K-quant sub-blocks 4..7, Q3_K's
// sub-blocks 8..15), and the last element of the block.
#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "common/half.h"
#include "kernels/kernels.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

// f16 bit patterns of the scales used below.
constexpr uint16_t kHalfOne = 0x3C00;      // 1.0
constexpr uint16_t kHalfHalf = 0x3800;     // 0.5
constexpr uint16_t kHalfQuarter = 0x3400;  // 0.25
constexpr uint16_t kHalfMinusOne = 0xBC00; // -1.0

// Dequantizes `num_blocks` blocks of type `type` held in `blocks`.
template <typename Block>
std::vector<float> dequantize(WeightType type, const Block* blocks, int num_blocks) {
  const int64_t n = weight_type_info(type).block_elems * num_blocks;
  EXPECT_EQ(sizeof(Block), weight_type_info(type).block_bytes);
  std::vector<float> out(static_cast<size_t>(n), -12345.0f);
  ref::dequantize_row(out.data(), blocks, type, n);
  return out;
}

TEST(Dequantize, FloatTypes) {
  const float f32[3] = {1.5f, -0.0f, 3.0e-8f};
  std::vector<float> out(3);
  ref::dequantize_row(out.data(), f32, WeightType::kF32, 3);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[2], 3.0e-8f);

  const uint16_t f16[3] = {kHalfHalf, 0xC500 /* -5.0 */, 0x0001 /* smallest subnormal */};
  ref::dequantize_row(out.data(), f16, WeightType::kF16, 3);
  EXPECT_EQ(out[0], 0.5f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(out[2], 0x1p-24f);

  const uint16_t bf16[3] = {0x3F80 /* 1.0 */, 0xC0A0 /* -5.0 */, 0x3F81 /* 1 + 2^-7 */};
  ref::dequantize_row(out.data(), bf16, WeightType::kBF16, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(out[2], 1.0f + 0x1p-7f);
}

// Q4_0: w = d * (nibble - 8); byte j holds element j (low nibble) and j + 16 (high nibble).
TEST(Dequantize, Q4_0) {
  BlockQ4_0 b[2];
  std::memset(b[0].qs, 0x88, sizeof(b[0].qs));  // every nibble 8: weight 0
  std::memset(b[1].qs, 0x88, sizeof(b[1].qs));
  b[0].d = kHalfHalf;
  b[0].qs[0] = 0x9F;   // element 0: 15 - 8 = 7; element 16: 9 - 8 = 1
  b[0].qs[1] = 0x08;   // element 1: 0; element 17: 0 - 8 = -8
  b[0].qs[15] = 0x3C;  // element 15: 12 - 8 = 4; element 31: 3 - 8 = -5
  b[1].d = kHalfMinusOne;
  b[1].qs[0] = 0x10;  // element 32: (0 - 8) * -1; element 48: (1 - 8) * -1
  const std::vector<float> y = dequantize(WeightType::kQ4_0, b, 2);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], 0.5f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[17], -4.0f);
  EXPECT_EQ(y[15], 2.0f);
  EXPECT_EQ(y[31], -2.5f);
  EXPECT_EQ(y[32], 8.0f);
  EXPECT_EQ(y[48], 7.0f);
  EXPECT_EQ(y[63], 0.0f);
}

// Q4_1: w = d * nibble + m.
TEST(Dequantize, Q4_1) {
  BlockQ4_1 b;
  std::memset(b.qs, 0, sizeof(b.qs));
  b.d = kHalfHalf;
  b.m = kHalfMinusOne;
  b.qs[0] = 0xF0;   // element 0: 0 * 0.5 - 1; element 16: 15 * 0.5 - 1
  b.qs[15] = 0x21;  // element 15: 1 * 0.5 - 1; element 31: 2 * 0.5 - 1
  const std::vector<float> y = dequantize(WeightType::kQ4_1, &b, 1);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[16], 6.5f);
  EXPECT_EQ(y[15], -0.5f);
  EXPECT_EQ(y[31], 0.0f);
  EXPECT_EQ(y[5], -1.0f);
}

// Q5_0: w = d * ((nibble | bit_e(qh) << 4) - 16); qh is a little-endian uint32 whose bit e is
// the fifth bit of element e (0..31).
TEST(Dequantize, Q5_0) {
  BlockQ5_0 b;
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.qh, 0, sizeof(b.qh));
  b.d = kHalfHalf;
  b.qh[0] = 0x01;   // bit 0: element 0
  b.qh[2] = 0x01;   // bit 16: element 16
  b.qh[3] = 0x80;   // bit 31: element 31
  b.qs[0] = 0x3A;   // element 0: 10 | 16 = 26 -> 10; element 16: 3 | 16 = 19 -> 3
  b.qs[15] = 0xF5;  // element 15: 5 -> -11; element 31: 15 | 16 = 31 -> 15
  const std::vector<float> y = dequantize(WeightType::kQ5_0, &b, 1);
  EXPECT_EQ(y[0], 5.0f);
  EXPECT_EQ(y[16], 1.5f);
  EXPECT_EQ(y[1], -8.0f);  // 0 - 16
  EXPECT_EQ(y[17], -8.0f);
  EXPECT_EQ(y[15], -5.5f);
  EXPECT_EQ(y[31], 7.5f);
}

// Q5_1: w = d * (nibble | bit_e(qh) << 4) + m.
TEST(Dequantize, Q5_1) {
  BlockQ5_1 b;
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.qh, 0, sizeof(b.qh));
  b.d = kHalfOne;
  b.m = kHalfHalf;
  b.qh[1] = 0x02;   // bit 9: element 9
  b.qh[3] = 0x80;   // bit 31: element 31
  b.qs[9] = 0x4F;   // element 9: 15 | 16 = 31; element 25: 4 (bit 25 clear)
  b.qs[15] = 0xE0;  // element 15: 0; element 31: 14 | 16 = 30
  const std::vector<float> y = dequantize(WeightType::kQ5_1, &b, 1);
  EXPECT_EQ(y[0], 0.5f);
  EXPECT_EQ(y[9], 31.5f);
  EXPECT_EQ(y[25], 4.5f);
  EXPECT_EQ(y[15], 0.5f);
  EXPECT_EQ(y[31], 30.5f);
}

// Q8_0: w = d * q, q int8.
TEST(Dequantize, Q8_0) {
  BlockQ8_0 b;
  std::memset(b.qs, 0, sizeof(b.qs));
  b.d = kHalfQuarter;
  b.qs[0] = -128;
  b.qs[5] = 3;
  b.qs[31] = 127;
  const std::vector<float> y = dequantize(WeightType::kQ8_0, &b, 1);
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[5], 0.75f);
  EXPECT_EQ(y[6], 0.0f);
  EXPECT_EQ(y[31], 31.75f);
}

// Q2_K: element e of the super-block lies in half h = e / 128, group j = (e % 128) / 32 (bit
// shift 2j), part p = (e % 32) / 16 and lane l = e % 16: its 2 bits are bits 2j..2j+1 of
// qs[32h + 16p + l], its sub-block is 8h + 2j + p, whose byte scales[] holds the 4-bit scale
// (low) and min (high); w = d * scale * q - dmin * min.
TEST(Dequantize, Q2_K) {
  BlockQ2_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  b.scales[0] = 0x21;   // sub-block 0 (elements 0..15): scale 1, min 2 -> -1.0 offset
  b.scales[1] = 0x03;   // sub-block 1 (16..31): scale 3, min 0
  b.scales[2] = 0xF4;   // sub-block 2 (32..47): scale 4, min 15 -> -7.5 offset
  b.scales[8] = 0x52;   // sub-block 8 (128..143): scale 2, min 5 -> -2.5 offset
  b.scales[15] = 0x1F;  // sub-block 15 (240..255): scale 15, min 1 -> -0.5 offset
  b.qs[0] = 0x0B;       // bits 0-1 = 3 (element 0), bits 2-3 = 2 (element 32)
  b.qs[16] = 0x02;      // bits 0-1 = 2 (element 16)
  b.qs[32] = 0x01;      // bits 0-1 = 1 (element 128)
  b.qs[63] = 0xC0;      // bits 6-7 = 3 (element 255)
  const std::vector<float> y = dequantize(WeightType::kQ2_K, &b, 1);
  EXPECT_EQ(y[0], 2.0f);     // 1 * 3 - 1
  EXPECT_EQ(y[1], -1.0f);    // 1 * 0 - 1
  EXPECT_EQ(y[16], 6.0f);    // 3 * 2 - 0
  EXPECT_EQ(y[32], 0.5f);    // 4 * 2 - 7.5
  EXPECT_EQ(y[128], -0.5f);  // 2 * 1 - 2.5
  EXPECT_EQ(y[255], 44.5f);  // 15 * 3 - 0.5
  EXPECT_EQ(y[254], -0.5f);  // 15 * 0 - 0.5
}

// Q3_K: same element -> (qs byte, shift, sub-block) map as Q2_K; the third bit of element e is
// bit (4h + j) of hmask[16p + l], and a CLEAR bit subtracts 4. The 16 scales are 6-bit values
// offset by 32: scale s has its low 4 bits in byte s % 8 (low nibble for s < 8, high for s >= 8)
// and its high 2 bits in byte 8 + s % 4 at bit 2 * (s / 4). w = d * (scale - 32) * q.
TEST(Dequantize, Q3_K) {
  BlockQ3_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfHalf;
  // scale 0 = 33 = 0b10'0001, scale 1 = 31 = 0b01'1111, scale 2 = 40 = 0b10'1000,
  // scale 15 = 63 = 0b11'1111; every other scale 0 (i.e. -32).
  b.scales[0] = 0x01;
  b.scales[1] = 0x0F;
  b.scales[2] = 0x08;
  b.scales[7] = 0xF0;   // high nibble: low 4 bits of scale 15
  b.scales[8] = 0x02;   // bits 0-1: high bits of scale 0
  b.scales[9] = 0x01;   // bits 0-1: high bits of scale 1
  b.scales[10] = 0x02;  // bits 0-1: high bits of scale 2
  b.scales[11] = 0xC0;  // bits 6-7: high bits of scale 15

  int8_t unpacked[16];
  q3_k_scales(b.scales, unpacked);
  const int8_t expected_scales[16] = {33, 31, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 63};
  for (int s = 0; s < 16; ++s) EXPECT_EQ(unpacked[s], expected_scales[s]) << "scale " << s;

  b.qs[0] = 0x07;     // element 0: bits 0-1 = 3; element 32: bits 2-3 = 1
  b.hmask[0] = 0x01;  // element 0: bit 0 set (no -4); element 32 (bit 1), 128 (bit 4) clear
  b.qs[16] = 0x02;    // element 16: 2; element 48: bits 2-3 = 0
  b.hmask[16] = 0x01; // element 16: set; element 48: clear
  b.qs[32] = 0x03;    // element 128: 3
  b.qs[63] = 0x80;    // element 255: bits 6-7 = 2
  b.hmask[31] = 0x80; // element 255: bit 7 set
  const std::vector<float> y = dequantize(WeightType::kQ3_K, &b, 1);
  EXPECT_EQ(y[0], 1.5f);      // 0.5 * 1 * 3
  EXPECT_EQ(y[1], -2.0f);     // 0.5 * 1 * (0 - 4)
  EXPECT_EQ(y[16], -1.0f);    // 0.5 * -1 * 2
  EXPECT_EQ(y[32], -12.0f);   // 0.5 * 8 * (1 - 4)
  EXPECT_EQ(y[48], 64.0f);    // 0.5 * -32 * (0 - 4)
  EXPECT_EQ(y[128], 16.0f);   // 0.5 * -32 * (3 - 4)
  EXPECT_EQ(y[255], 31.0f);   // 0.5 * 31 * 2
  EXPECT_EQ(y[254], -62.0f);  // 0.5 * 31 * (0 - 4)
}

// The 12-byte scale/min packing of Q4_K and Q5_K: sub-blocks 0..3 hold scale and min in the low
// 6 bits of bytes 0..3 and 4..7; sub-blocks 4..7 hold their low 4 bits in the nibbles of bytes
// 8..11 (scale low, min high) and their high 2 bits in the top bits of bytes 0..3 (scale) and
// 4..7 (min). Chosen: sub-block 0 scale 2 / min 4, sub-block 1 scale 63 / min 0, sub-block 4
// scale 37 = 0b10'0101 / min 49 = 0b11'0001, sub-block 7 scale 1 / min 63; the rest 0 / 0.
void fill_k4_scales(uint8_t scales[kKScaleBytes]) {
  std::memset(scales, 0, kKScaleBytes);
  scales[0] = 0x82;   // scale 0 = 2; bits 6-7: high bits of scale 4 (2)
  scales[1] = 0x3F;   // scale 1 = 63
  scales[4] = 0xC4;   // min 0 = 4; bits 6-7: high bits of min 4 (3)
  scales[7] = 0xC0;   // min 3 = 0; bits 6-7: high bits of min 7 (3)
  scales[8] = 0x15;   // scale 4 low = 5, min 4 low = 1
  scales[11] = 0xF1;  // scale 7 low = 1, min 7 low = 15
}

TEST(Dequantize, K4ScaleMinUnpacking) {
  uint8_t packed[kKScaleBytes];
  fill_k4_scales(packed);
  const uint8_t expected_scale[8] = {2, 63, 0, 0, 37, 0, 0, 1};
  const uint8_t expected_min[8] = {4, 0, 0, 0, 49, 0, 0, 63};
  for (int j = 0; j < 8; ++j) {
    uint8_t scale = 0, min = 0;
    k4_scale_min(j, packed, &scale, &min);
    EXPECT_EQ(scale, expected_scale[j]) << "sub-block " << j;
    EXPECT_EQ(min, expected_min[j]) << "sub-block " << j;
  }
}

// Q4_K: sub-block s (32 elements) of the super-block takes low nibbles of qs[32 * (s / 2) ..]
// when s is even, high nibbles when odd; w = d * scale_s * q - dmin * min_s.
TEST(Dequantize, Q4_K) {
  BlockQ4_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  fill_k4_scales(b.scales);
  b.qs[0] = 0xA7;    // element 0 (sub-block 0): 7; element 32 (sub-block 1): 10
  b.qs[64] = 0x03;   // element 128 (sub-block 4): 3
  b.qs[127] = 0xF0;  // element 255 (sub-block 7): 15
  const std::vector<float> y = dequantize(WeightType::kQ4_K, &b, 1);
  EXPECT_EQ(y[0], 12.0f);     // 2 * 7 - 0.5 * 4
  EXPECT_EQ(y[31], -2.0f);    // 2 * 0 - 0.5 * 4
  EXPECT_EQ(y[32], 630.0f);   // 63 * 10 - 0
  EXPECT_EQ(y[128], 86.5f);   // 37 * 3 - 0.5 * 49
  EXPECT_EQ(y[224], -31.5f);  // 1 * 0 - 0.5 * 63
  EXPECT_EQ(y[255], -16.5f);  // 1 * 15 - 0.5 * 63
}

// Q5_K: as Q4_K plus a fifth bit: for element 32 * s + l it is bit s of qh[l].
TEST(Dequantize, Q5_K) {
  BlockQ5_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfHalf;
  b.dmin = kHalfOne;
  fill_k4_scales(b.scales);
  b.qs[0] = 0xA7;    // element 0: 7; element 32: 10
  b.qh[0] = 0x11;    // bit 0: element 0 (+16); bit 4: element 128 (+16); bit 1 clear: element 32
  b.qs[64] = 0x03;   // element 128: 3
  b.qs[127] = 0xF0;  // element 255: 15
  b.qh[31] = 0x80;   // bit 7: element 255 (+16)
  const std::vector<float> y = dequantize(WeightType::kQ5_K, &b, 1);
  EXPECT_EQ(y[0], 19.0f);     // 0.5 * 2 * 23 - 4
  EXPECT_EQ(y[1], -4.0f);     // 0.5 * 2 * 0 - 4
  EXPECT_EQ(y[32], 315.0f);   // 0.5 * 63 * 10 - 0
  EXPECT_EQ(y[128], 302.5f);  // 0.5 * 37 * 19 - 49
  EXPECT_EQ(y[255], -47.5f);  // 0.5 * 1 * 31 - 63
}

// Q6_K: two halves of 128; in half h, for lane l (0..31), elements 128h + l, +32, +64, +96 take
// the low nibble of ql[64h + l], the low nibble of ql[64h + l + 32], the high nibble of
// ql[64h + l], the high nibble of ql[64h + l + 32], with bits 0-1, 2-3, 4-5, 6-7 of qh[32h + l]
// on top; sub-block (16 elements) s has int8 scale scales[s]. w = d * scale * (q - 32).
TEST(Dequantize, Q6_K) {
  BlockQ6_K b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfHalf;
  b.scales[0] = 2;     // elements 0..15
  b.scales[1] = -3;    // 16..31
  b.scales[2] = 1;     // 32..47
  b.scales[4] = 4;     // 64..79
  b.scales[6] = -1;    // 96..111
  b.scales[8] = -128;  // 128..143
  b.scales[15] = 127;  // 240..255
  b.ql[0] = 0x5F;      // element 0: 15; element 64: 5
  b.ql[32] = 0x01;     // element 32: 1; element 96: 0
  b.qh[0] = 0x4B;      // 0b01'00'10'11: element 0 +3<<4, 32 +2<<4, 64 +0, 96 +1<<4
  b.ql[64] = 0x01;     // element 128: 1
  b.qh[32] = 0x02;     // element 128: +2<<4
  b.ql[127] = 0xF0;    // element 255: high nibble of ql[64 + 31 + 32]: 15
  b.qh[63] = 0xC0;     // element 255: bits 6-7: +3<<4
  const std::vector<float> y = dequantize(WeightType::kQ6_K, &b, 1);
  EXPECT_EQ(y[0], 31.0f);      // 0.5 * 2 * (63 - 32)
  EXPECT_EQ(y[16], 48.0f);     // 0.5 * -3 * (0 - 32)
  EXPECT_EQ(y[32], 0.5f);      // 0.5 * 1 * (33 - 32)
  EXPECT_EQ(y[64], -54.0f);    // 0.5 * 4 * (5 - 32)
  EXPECT_EQ(y[96], 8.0f);      // 0.5 * -1 * (16 - 32)
  EXPECT_EQ(y[128], -64.0f);   // 0.5 * -128 * (33 - 32)
  EXPECT_EQ(y[255], 1968.5f);  // 0.5 * 127 * (63 - 32)
}

// IQ4_NL: Q4_0's layout, each nibble an index into the non-linear codebook.
TEST(Dequantize, IQ4_NL) {
  BlockIQ4_NL b;
  std::memset(b.qs, 0x88, sizeof(b.qs));  // codebook[8] = 1
  b.d = kHalfHalf;
  b.qs[0] = 0xF0;   // element 0: codebook[0] = -127; element 16: codebook[15] = 113
  b.qs[15] = 0x78;  // element 15: codebook[8] = 1; element 31: codebook[7] = -10
  const std::vector<float> y = dequantize(WeightType::kIQ4_NL, &b, 1);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[1], 0.5f);
  EXPECT_EQ(y[15], 0.5f);
  EXPECT_EQ(y[31], -5.0f);
}

// IQ4_XS: 8 sub-blocks of 32; sub-block s uses qs[16s .. 16s + 15] (low nibbles: its first 16
// elements, high nibbles: the next 16) and the 6-bit scale whose low 4 bits are nibble s % 2 of
// scales_l[s / 2] and high 2 bits are bits 2s..2s+1 of scales_h; w = d * (scale - 32) * code.
TEST(Dequantize, IQ4_XS) {
  BlockIQ4_XS b;
  std::memset(&b, 0, sizeof(b));
  b.d = kHalfHalf;
  // Scales: s0 = 33 (low 1, high 2), s1 = 0, s4 = 36 (low 4, high 2), s7 = 63 (low 15, high 3).
  b.scales_l[0] = 0x01;
  b.scales_l[2] = 0x04;
  b.scales_l[3] = 0xF0;
  b.scales_h = 0xC202;  // bits 0-1 = 2 (s0), bits 8-9 = 2 (s4), bits 14-15 = 3 (s7)
  b.qs[0] = 0xF0;       // element 0: -127; element 16: 113
  b.qs[16] = 0x08;      // element 32: 1; element 48: -127
  b.qs[64] = 0x0C;      // element 128: 53
  b.qs[127] = 0xE0;     // element 255: 89
  const std::vector<float> y = dequantize(WeightType::kIQ4_XS, &b, 1);
  EXPECT_EQ(y[0], -63.5f);     // 0.5 * 1 * -127
  EXPECT_EQ(y[16], 56.5f);     // 0.5 * 1 * 113
  EXPECT_EQ(y[32], -16.0f);    // 0.5 * -32 * 1
  EXPECT_EQ(y[48], 2032.0f);   // 0.5 * -32 * -127
  EXPECT_EQ(y[128], 106.0f);   // 0.5 * 4 * 53
  EXPECT_EQ(y[255], 1379.5f);  // 0.5 * 31 * 89
  EXPECT_EQ(y[254], -1968.5f); // 0.5 * 31 * -127
}

// Block sizes and bytes per block as GGML defines them (ggml.c type_traits), and the row sizes
// that follow.
TEST(WeightTypeInfo, MatchesGgml) {
  struct Expected {
    WeightType type;
    const char* name;
    int block_elems;
    size_t block_bytes;
    bool quantized;
  };
  const Expected expected[] = {
      {WeightType::kF32, "F32", 1, 4, false},       {WeightType::kF16, "F16", 1, 2, false},
      {WeightType::kBF16, "BF16", 1, 2, false},     {WeightType::kQ8_0, "Q8_0", 32, 34, true},
      {WeightType::kQ4_0, "Q4_0", 32, 18, true},    {WeightType::kQ4_1, "Q4_1", 32, 20, true},
      {WeightType::kQ5_0, "Q5_0", 32, 22, true},    {WeightType::kQ5_1, "Q5_1", 32, 24, true},
      {WeightType::kQ2_K, "Q2_K", 256, 84, true},   {WeightType::kQ3_K, "Q3_K", 256, 110, true},
      {WeightType::kQ4_K, "Q4_K", 256, 144, true},  {WeightType::kQ5_K, "Q5_K", 256, 176, true},
      {WeightType::kQ6_K, "Q6_K", 256, 210, true},  {WeightType::kIQ4_NL, "IQ4_NL", 32, 18, true},
      {WeightType::kIQ4_XS, "IQ4_XS", 256, 136, true},
  };
  ASSERT_EQ(std::size(expected), static_cast<size_t>(kNumWeightTypes));
  for (const Expected& e : expected) {
    const WeightTypeInfo& info = weight_type_info(e.type);
    SCOPED_TRACE(e.name);
    EXPECT_EQ(info.type, e.type);
    EXPECT_STREQ(info.name, e.name);
    EXPECT_EQ(info.block_elems, e.block_elems);
    EXPECT_EQ(info.block_bytes, e.block_bytes);
    EXPECT_EQ(info.quantized, e.quantized);
    EXPECT_EQ(weight_block_elems(e.type), e.block_elems);
    EXPECT_NE(std::string(supported_weight_types_list()).find(e.name), std::string::npos);
  }
  // A 2048-wide row (Llama-3.2-1B's hidden size) in each type.
  EXPECT_EQ(weight_row_bytes(WeightType::kF32, 2048), 8192u);
  EXPECT_EQ(weight_row_bytes(WeightType::kBF16, 2048), 4096u);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ8_0, 2048), 64u * 34);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ4_0, 2048), 64u * 18);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ5_1, 2048), 64u * 24);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ2_K, 2048), 8u * 84);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ3_K, 2048), 8u * 110);
  EXPECT_EQ(weight_row_bytes(WeightType::kQ4_K, 2048), 1152u);  // 4.5 bits per weight
  EXPECT_EQ(weight_row_bytes(WeightType::kQ5_K, 2048), 1408u);  // 5.5
  EXPECT_EQ(weight_row_bytes(WeightType::kQ6_K, 2048), 1680u);  // 6.5625
  EXPECT_EQ(weight_row_bytes(WeightType::kIQ4_NL, 2048), 64u * 18);
  EXPECT_EQ(weight_row_bytes(WeightType::kIQ4_XS, 2048), 1088u);  // 4.25
}

}  // namespace
}  // namespace vellum::kernels
