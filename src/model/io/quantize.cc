#include "model/io/quantize.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "common/half.h"
#include "kernels/quant_types.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;
using kernels::kIq4nlValues;
using kernels::kKScaleBytes;
using kernels::kQK;
using kernels::kQK_K;

// Round to nearest (ties to even) and clamp to [lo, hi]; NaN gives lo. The clamp comes first, so
// the 1.5 * 2^23 trick (the rounded integer lands in the low mantissa bits) is always in range.
inline int round_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (!(v < static_cast<float>(hi))) return hi;
  const float shifted = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return (bits & 0x007fffff) - 0x00400000;
}

template <typename Block>
void store_block(void* out, int64_t index, const Block& block) {
  std::memcpy(static_cast<uint8_t*>(out) + index * static_cast<int64_t>(sizeof(Block)), &block,
              sizeof(Block));
}

// The signed value of largest magnitude in x[0, n) (0 for an all-zero input).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < std::fabs(x[i])) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  return max;
}

// ---- GGML's reference quantizers of the 32-element types (quantize_row_*_ref) --------------

void quantize_q8_0(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    float amax = 0.0f;
    for (int i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 blk;
    blk.d = float_to_fp16(d);
    for (int i = 0; i < kQK; ++i) blk.qs[i] = static_cast<int8_t>(std::lround(x[i] * id));
    store_block(out, b, blk);
  }
}

void quantize_q4_0(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    // The largest magnitude maps to -8, which has no positive counterpart.
    const float d = signed_absmax(x, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    kernels::BlockQ4_0 blk;
    blk.d = float_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int q1 = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      blk.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(out, b, blk);
  }
}

void quantize_q4_1(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    const auto [lo, hi] = std::minmax_element(x, x + kQK);
    const float min = *lo;
    const float d = (*hi - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    kernels::BlockQ4_1 blk;
    blk.d = float_to_fp16(d);
    blk.m = float_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int q1 = std::min(15, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
      blk.qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
    store_block(out, b, blk);
  }
}

// Q5_0 / Q5_1: the fifth bit of element j goes to bit j of the little-endian qh word.
template <typename Block>
void pack_q5(Block& blk, const int* q) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int q0 = q[j], q1 = q[j + kQK / 2];
    blk.qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + kQK / 2);
  }
  std::memcpy(blk.qh, &qh, sizeof(qh));
}

void quantize_q5_0(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>(x[j] * id + 16.5f));
    kernels::BlockQ5_0 blk;
    blk.d = float_to_fp16(d);
    pack_q5(blk, q);
    store_block(out, b, blk);
  }
}

void quantize_q5_1(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    const auto [lo, hi] = std::minmax_element(x, x + kQK);
    const float min = *lo;
    const float d = (*hi - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
    kernels::BlockQ5_1 blk;
    blk.d = float_to_fp16(d);
    blk.m = float_to_fp16(min);
    pack_q5(blk, q);
    store_block(out, b, blk);
  }
}

// ---- Sub-block fits ---------------------------------------------------------------------

// x ~ scale * q - min with q in [0, nmax], scale >= 0 and min >= 0 (the K types subtract an
// unsigned min, so the lowest representable value is <= 0).
struct AffineFit {
  float scale = 0.0f;
  float min = 0.0f;
};

// Candidate grids: the range [lo, hi] split into nmax + t steps for t in [-1, 1] (GGML's
// make_qkx2_quants searches the same family); each candidate's levels get the least-squares
// scale and offset, and the candidate with the smallest error on its levels wins. n <= 32.
AffineFit fit_affine(const float* x, int n, int nmax) {
  constexpr int kCandidates = 9;
  float lo = x[0], hi = x[0], sum_x = 0.0f, sum_x2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
    sum_x += x[i];
    sum_x2 += x[i] * x[i];
  }
  lo = std::min(lo, 0.0f);
  if (!(hi > lo)) return AffineFit{0.0f, -lo};
  const auto fn = static_cast<float>(n);
  AffineFit best{(hi - lo) / static_cast<float>(nmax), -lo};
  float best_err = std::numeric_limits<float>::infinity();
  for (int c = 0; c < kCandidates; ++c) {
    const float t = -1.0f + 2.0f * static_cast<float>(c) / (kCandidates - 1);
    const float iscale = (static_cast<float>(nmax) + t) / (hi - lo);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(round_clamped(iscale * (x[i] - lo), 0, nmax));
      sum_l += l;
      sum_l2 += l * l;
      sum_xl += l * x[i];
    }
    const float det = fn * sum_l2 - sum_l * sum_l;
    if (!(det > 0.0f)) continue;
    float a = (fn * sum_xl - sum_l * sum_x) / det;
    float b = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (b > 0.0f) {  // an offset above zero cannot be stored: refit the scale alone
      b = 0.0f;
      a = sum_xl / sum_l2;
    }
    if (!(a > 0.0f)) continue;
    // sum (a * l + b - x)^2, expanded.
    const float err = a * a * sum_l2 + 2.0f * a * b * sum_l + fn * b * b - 2.0f * a * sum_xl -
                      2.0f * b * sum_x + sum_x2;
    if (err < best_err) {
      best_err = err;
      best = AffineFit{a, -b};
    }
  }
  return best;
}

// x ~ scale * q with q in [-nmax, nmax - 1]; the scale is signed so that the value of largest
// magnitude can use the extra negative level (as GGML does). Candidates map that value to
// -(nmax + t), t in [-0.8, 0.8]; each gets the least-squares scale for the levels it picks.
float fit_symmetric(const float* x, int n, int nmax) {
  constexpr int kSteps = 4;
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  float best_scale = 0.0f, best = 0.0f;  // best = sum_lx^2 / sum_l2: the error it removes
  for (int step = -kSteps; step <= kSteps; ++step) {
    const float iscale = -(static_cast<float>(nmax) + 0.2f * static_cast<float>(step)) / max;
    float sum_lx = 0.0f, sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto l = static_cast<float>(round_clamped(iscale * x[i], -nmax, nmax - 1));
      sum_lx += l * x[i];
      sum_l2 += l * l;
    }
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      best = sum_lx * sum_lx / sum_l2;
      best_scale = sum_lx / sum_l2;
    }
  }
  return best_scale;
}

// Midpoints between successive IQ4_NL codebook values.
constexpr std::array<float, 15> codebook_midpoints() {
  std::array<float, 15> mid{};
  for (int k = 0; k < 15; ++k) {
    mid[k] = 0.5f * static_cast<float>(kIq4nlValues[k] + kIq4nlValues[k + 1]);
  }
  return mid;
}
constexpr std::array<float, 15> kCodebookMid = codebook_midpoints();

// Index of the codebook value nearest to v: the number of midpoints below v, by binary search.
inline int nearest_code(float v) {
  // Branch-free: the comparisons are data dependent and would mispredict half the time.
  int idx = 8 * static_cast<int>(v > kCodebookMid[7]);
  idx += 4 * static_cast<int>(v > kCodebookMid[idx + 3]);
  idx += 2 * static_cast<int>(v > kCodebookMid[idx + 1]);
  idx += static_cast<int>(v > kCodebookMid[idx]);
  return idx;
}

// x ~ d * codebook[q]: candidates map the value of largest magnitude to -127 + t, t odd in
// [-7, 7] (GGML's quantize_row_iq4_nl_impl tries every integer t there); each gets its
// least-squares d.
float fit_codebook(const float* x, int n) {
  constexpr int kTries = 7;
  const float max = signed_absmax(x, n);
  if (max == 0.0f) return 0.0f;
  float best_d = 0.0f, best = 0.0f;
  for (int t = -kTries; t <= kTries; t += 2) {
    const float id = (static_cast<float>(t) + kIq4nlValues[0]) / max;
    float sum_qx = 0.0f, sum_q2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const auto v = static_cast<float>(kIq4nlValues[nearest_code(id * x[i])]);
      sum_qx += v * x[i];
      sum_q2 += v * v;
    }
    if (sum_q2 > 0.0f && sum_qx * sum_qx > best * sum_q2) {
      best = sum_qx * sum_qx / sum_q2;
      best_d = sum_qx / sum_q2;
    }
  }
  return best_d;
}

// The signed value of largest magnitude among `scales`.
template <size_t N>
float largest_scale(const float (&scales)[N]) {
  return signed_absmax(scales, static_cast<int>(N));
}

// ---- K types ----------------------------------------------------------------------------

// Q2_K / Q3_K element order: for half h and lane l (0..31), byte qs[32h + l] holds the 2-bit
// values of elements 128h + l, +32, +64, +96 in bits 0-1, 2-3, 4-5, 6-7.
void pack_2bit(const int* levels, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int* q = levels + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>((q[0] & 3) | ((q[32] & 3) << 2) | ((q[64] & 3) << 4) |
                                            ((q[96] & 3) << 6));
    }
  }
}

void quantize_q2_k(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    AffineFit fits[16];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; ++j) {
      fits[j] = fit_affine(x + 16 * j, 16, 3);
      max_scale = std::max(max_scale, fits[j].scale);
      max_min = std::max(max_min, fits[j].min);
    }
    kernels::BlockQ2_K blk;
    blk.d = float_to_fp16(max_scale / 15.0f);
    blk.dmin = float_to_fp16(max_min / 15.0f);
    const float d = fp16_to_float(blk.d), dmin = fp16_to_float(blk.dmin);
    int levels[kQK_K];
    for (int j = 0; j < 16; ++j) {
      const int ls = d > 0.0f ? round_clamped(fits[j].scale / d, 0, 15) : 0;
      const int lm = dmin > 0.0f ? round_clamped(fits[j].min / dmin, 0, 15) : 0;
      blk.scales[j] = static_cast<uint8_t>(ls | (lm << 4));
      const float dl = d * static_cast<float>(ls), ml = dmin * static_cast<float>(lm);
      const float inv = dl > 0.0f ? 1.0f / dl : 0.0f;
      for (int i = 0; i < 16; ++i) levels[16 * j + i] = round_clamped((x[16 * j + i] + ml) * inv, 0, 3);
    }
    pack_2bit(levels, blk.qs);
    store_block(out, b, blk);
  }
}

void quantize_q3_k(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric(x + 16 * j, 16, 4);
    const float max_scale = largest_scale(scales);
    kernels::BlockQ3_K blk;
    std::memset(&blk, 0, sizeof(blk));
    // The largest scale maps to -32, the end of the 6-bit range with no positive counterpart.
    blk.d = float_to_fp16(max_scale != 0.0f ? max_scale / -32.0f : 0.0f);
    const float d = fp16_to_float(blk.d);
    int levels[kQK_K];  // 0..7, i.e. q + 4
    for (int j = 0; j < 16; ++j) {
      const int l = d != 0.0f ? round_clamped(scales[j] / d, -32, 31) : 0;
      // 6-bit l + 32: low 4 bits in byte j % 8 (low nibble for j < 8, high for j >= 8), high 2
      // bits in byte 8 + j % 4 at bit 2 * (j / 4).
      const int stored = l + 32;
      blk.scales[j % 8] |= static_cast<uint8_t>((stored & 0xF) << (j < 8 ? 0 : 4));
      blk.scales[8 + j % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (j / 4)));
      const float dl = d * static_cast<float>(l);
      const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int i = 0; i < 16; ++i) {
        levels[16 * j + i] = round_clamped(x[16 * j + i] * inv, -4, 3) + 4;
      }
    }
    // The third bit of element e is bit e / 32 of hmask[e % 32]; a set bit means "no -4".
    for (int e = 0; e < kQK_K; ++e) {
      if (levels[e] > 3) {
        blk.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
        levels[e] -= 4;
      }
    }
    pack_2bit(levels, blk.qs);
    store_block(out, b, blk);
  }
}

// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins; fills the scales and returns the
// levels (0..nmax) in `levels`.
void quantize_k4_scales(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                        uint8_t scales[kKScaleBytes], int* levels) {
  AffineFit fits[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fits[j] = fit_affine(x + 32 * j, 32, nmax);
    max_scale = std::max(max_scale, fits[j].scale);
    max_min = std::max(max_min, fits[j].min);
  }
  *d_out = float_to_fp16(max_scale / 63.0f);
  *dmin_out = float_to_fp16(max_min / 63.0f);
  const float d = fp16_to_float(*d_out), dmin = fp16_to_float(*dmin_out);
  std::memset(scales, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {
    const int ls = d > 0.0f ? round_clamped(fits[j].scale / d, 0, 63) : 0;
    const int lm = dmin > 0.0f ? round_clamped(fits[j].min / dmin, 0, 63) : 0;
    // Inverse of kernels::k4_scale_min.
    if (j < 4) {
      scales[j] |= static_cast<uint8_t>(ls);
      scales[j + 4] |= static_cast<uint8_t>(lm);
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
    const float dl = d * static_cast<float>(ls), ml = dmin * static_cast<float>(lm);
    const float inv = dl > 0.0f ? 1.0f / dl : 0.0f;
    for (int i = 0; i < 32; ++i) levels[32 * j + i] = round_clamped((x[32 * j + i] + ml) * inv, 0, nmax);
  }
}

void quantize_q4_k(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    kernels::BlockQ4_K blk;
    int levels[kQK_K];
    quantize_k4_scales(x, 15, &blk.d, &blk.dmin, blk.scales, levels);
    // Sub-blocks 2g and 2g + 1 share qs[32g .. 32g + 31]: low and high nibbles.
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        blk.qs[32 * g + l] = static_cast<uint8_t>(levels[64 * g + l] | (levels[64 * g + 32 + l] << 4));
      }
    }
    store_block(out, b, blk);
  }
}

void quantize_q5_k(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    kernels::BlockQ5_K blk;
    int levels[kQK_K];
    quantize_k4_scales(x, 31, &blk.d, &blk.dmin, blk.scales, levels);
    // As Q4_K, with the fifth bit of element 32s + l in bit s of qh[l].
    std::memset(blk.qh, 0, sizeof(blk.qh));
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int lo = levels[64 * g + l], hi = levels[64 * g + 32 + l];
        blk.qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
        blk.qs[32 * g + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      }
    }
    store_block(out, b, blk);
  }
}

void quantize_q6_k(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float scales[16];
    for (int j = 0; j < 16; ++j) scales[j] = fit_symmetric(x + 16 * j, 16, 32);
    const float max_scale = largest_scale(scales);
    kernels::BlockQ6_K blk;
    blk.d = float_to_fp16(max_scale != 0.0f ? max_scale / -128.0f : 0.0f);
    const float d = fp16_to_float(blk.d);
    int levels[kQK_K];  // 0..63, i.e. q + 32
    for (int j = 0; j < 16; ++j) {
      const int l = d != 0.0f ? round_clamped(scales[j] / d, -128, 127) : 0;
      blk.scales[j] = static_cast<int8_t>(l);
      const float dl = d * static_cast<float>(l);
      const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
      for (int i = 0; i < 16; ++i) {
        levels[16 * j + i] = round_clamped(x[16 * j + i] * inv, -32, 31) + 32;
      }
    }
    // Half h, lane l: elements 128h + l, +32, +64, +96 -> low nibbles of ql[64h + l] and
    // ql[64h + l + 32], then their high nibbles; their top 2 bits in qh[32h + l].
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 32; ++l) {
        const int* q = levels + 128 * h + l;
        blk.ql[64 * h + l] = static_cast<uint8_t>((q[0] & 0xF) | ((q[64] & 0xF) << 4));
        blk.ql[64 * h + l + 32] = static_cast<uint8_t>((q[32] & 0xF) | ((q[96] & 0xF) << 4));
        blk.qh[32 * h + l] = static_cast<uint8_t>((q[0] >> 4) | ((q[32] >> 4) << 2) |
                                                  ((q[64] >> 4) << 4) | ((q[96] >> 4) << 6));
      }
    }
    store_block(out, b, blk);
  }
}

// ---- IQ4 ----------------------------------------------------------------------------------

// Codebook indices of x[0, 32) for the scale dl, in Q4_0's nibble order, into qs[0, 16).
void pack_codebook(const float* x, float dl, uint8_t* qs) {
  const float inv = dl != 0.0f ? 1.0f / dl : 0.0f;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>(nearest_code(x[j] * inv) | (nearest_code(x[j + 16] * inv) << 4));
  }
}

void quantize_iq4_nl(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK) {
    kernels::BlockIQ4_NL blk;
    blk.d = float_to_fp16(fit_codebook(x, kQK));
    pack_codebook(x, fp16_to_float(blk.d), blk.qs);
    store_block(out, b, blk);
  }
}

void quantize_iq4_xs(const float* x, int64_t nb, void* out) {
  for (int64_t b = 0; b < nb; ++b, x += kQK_K) {
    float scales[8];
    for (int j = 0; j < 8; ++j) scales[j] = fit_codebook(x + 32 * j, 32);
    const float max_scale = largest_scale(scales);
    kernels::BlockIQ4_XS blk;
    std::memset(&blk, 0, sizeof(blk));
    blk.d = float_to_fp16(max_scale != 0.0f ? max_scale / -32.0f : 0.0f);
    const float d = fp16_to_float(blk.d);
    for (int j = 0; j < 8; ++j) {
      const int l = d != 0.0f ? round_clamped(scales[j] / d, -32, 31) : 0;
      const int stored = l + 32;  // low 4 bits: nibble j % 2 of scales_l[j / 2]; high 2: scales_h
      blk.scales_l[j / 2] |= static_cast<uint8_t>((stored & 0xF) << (4 * (j % 2)));
      blk.scales_h = static_cast<uint16_t>(blk.scales_h | ((stored >> 4) << (2 * j)));
      pack_codebook(x + 32 * j, d * static_cast<float>(l), blk.qs + 16 * j);
    }
    store_block(out, b, blk);
  }
}

}  // namespace

bool is_quantizable(gguf::GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_NL:
    case GgmlType::IQ4_XS:
      return true;
    default:
      return false;
  }
}

void quantize_row(gguf::GgmlType type, const float* x, int64_t n, void* out) {
  VELLUM_CHECK(is_quantizable(type), ErrorCode::kInvalidArgument,
               "cannot quantize to {} (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
               "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)",
               gguf::ggml_type_name(type));
  const int64_t block = gguf::ggml_block_size(type);
  VELLUM_CHECK(n % block == 0, ErrorCode::kInvalidArgument,
               "{} values are not whole {} blocks ({} values each)", n, gguf::ggml_type_name(type),
               block);
  const int64_t nb = n / block;
  auto* dst = static_cast<uint8_t*>(out);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_fp16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = float_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case GgmlType::Q8_0: return quantize_q8_0(x, nb, out);
    case GgmlType::Q4_0: return quantize_q4_0(x, nb, out);
    case GgmlType::Q4_1: return quantize_q4_1(x, nb, out);
    case GgmlType::Q5_0: return quantize_q5_0(x, nb, out);
    case GgmlType::Q5_1: return quantize_q5_1(x, nb, out);
    case GgmlType::Q2_K: return quantize_q2_k(x, nb, out);
    case GgmlType::Q3_K: return quantize_q3_k(x, nb, out);
    case GgmlType::Q4_K: return quantize_q4_k(x, nb, out);
    case GgmlType::Q5_K: return quantize_q5_k(x, nb, out);
    case GgmlType::Q6_K: return quantize_q6_k(x, nb, out);
    case GgmlType::IQ4_NL: return quantize_iq4_nl(x, nb, out);
    case GgmlType::IQ4_XS: return quantize_iq4_xs(x, nb, out);
    default: VELLUM_ASSERT(false);
  }
}

}  // namespace vellum::model
