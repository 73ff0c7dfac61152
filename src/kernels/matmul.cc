// PackedLinear: packing (once, at load) and the per-ISA choice of GEMM backend.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <exception>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "common/check.h"
#include "common/half.h"
#include "common/logging.h"
#include "cpu/isa.h"
#include "kernels/avx2/avx2_quant.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/onednn_matmul.h"
#include "kernels/packed_weights.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"
#include "kernels/threads.h"

namespace vellum::kernels {
namespace {

using detail::PackedWeights;

// Up to this many rows the hand-written AVX-512 kernels (bandwidth-bound, several rows per
// weight load) beat oneDNN; above it the product is compute-bound and goes to oneDNN (AMX).
// Measured with bench/kernels (BM_LinearDecode vs BM_OnednnBf16, 8192x2048 bf16, 2 threads):
// on a Sapphire Rapids with AMX, oneDNN is ahead from m = 8 on (3.4 vs 4.3 ms), roughly even at
// m = 4 (vdpbf16ps runs at a quarter of the FMA rate there, and oneDNN has AMX). Without AMX
// (Zen 4, 2026-11-28, two rounds) the AVX512-BF16 kernel is ahead up to m = 16: m = 8 39.6 vs
// 24.7-28.0 GiB/s of weights, m = 16 22.1-22.4 vs 18.3-19.0; at m = 32 both run 10.5-11.2.
constexpr int64_t kMaxSmallMBf16Amx = 5;
constexpr int64_t kMaxSmallMBf16 = 16;
int64_t max_small_m_bf16() {
  return cpu::selected_isa() >= cpu::Isa::kAmx ? kMaxSmallMBf16Amx : kMaxSmallMBf16;
}
constexpr int64_t kMaxSmallMF32 = 8;
// Q8_0: the VNNI panel kernel runs every m where AVX512-BF16 (and VNNI) is the best the CPU has:
// measured on AVX-512 VNNI without AMX (bench/kernels, 8192x2048, 2 threads), it beats bf16 slabs
// + oneDNN at every m (m = 32: 2.0 vs 6.1 ms; m = 512: 29 vs 45 ms). With AMX, oneDNN's AMX-BF16
// (~1.1 TFLOP/s measured there) should win for large m: slabs from this m up. Not measured (no
// AMX machine here); the value keeps decode batches on the int8 kernel.
constexpr int64_t kMaxSmallMQ8Amx = 64;
int64_t max_small_m_q8_0() {
  return cpu::selected_isa() >= cpu::Isa::kAmx ? kMaxSmallMQ8Amx
                                               : std::numeric_limits<int64_t>::max();
}

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The 32-block types packed into nibble panels (pack_legacy).
bool is_legacy_panel_type(WeightType type) {
  return type == WeightType::kQ4_0 || type == WeightType::kQ4_1 || type == WeightType::kIQ4_NL ||
         type == WeightType::kQ5_0 || type == WeightType::kQ5_1;
}

// The K types (and IQ4_XS) packed into panels with 32-input sub-blocks (pack_q45_k) and with
// 16-input ones (pack_k16).
bool is_q45_k_panel_type(WeightType type) {
  return type == WeightType::kQ4_K || type == WeightType::kQ5_K || type == WeightType::kIQ4_XS;
}
bool is_k16_panel_type(WeightType type) {
  return type == WeightType::kQ6_K || type == WeightType::kQ3_K || type == WeightType::kQ2_K;
}

PackedWeights pack_rows(const void* w, WeightType type, int64_t n_out, int64_t n_in) {
  PackedWeights p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = weight_row_bytes(type, n_in);
  const size_t bytes = p.row_bytes * static_cast<size_t>(n_out);
  p.data = AlignedBuffer(bytes);
  std::memcpy(p.data.data(), w, bytes);
  return p;
}

PackedWeights pack_q8_0(const void* w, int64_t n_out, int64_t n_in) {
  using detail::kQ8Panel;
  PackedWeights p;
  p.type = WeightType::kQ8_0;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = static_cast<size_t>(n_in);
  const int64_t num_panels = p.q8_num_panels();
  const int64_t num_blocks = n_in / kQ8_0BlockSize;
  p.data = AlignedBuffer(static_cast<size_t>(num_panels * kQ8Panel * n_in));
  p.scales = AlignedBuffer(static_cast<size_t>(num_panels * kQ8Panel * num_blocks) *
                           sizeof(uint16_t));
  std::memset(p.data.data(), 128, p.data.size());  // padding rows: zero weights
  std::memset(p.scales.data(), 0, p.scales.size());
  const auto* blocks = static_cast<const BlockQ8_0*>(w);
  for (int64_t j = 0; j < n_out; ++j) {
    auto* panel = p.data.as<uint8_t>() + (j / kQ8Panel) * kQ8Panel * n_in;
    auto* scales = p.scales.as<uint16_t>() + (j / kQ8Panel) * kQ8Panel * num_blocks;
    const int64_t lane = j % kQ8Panel;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const BlockQ8_0& block = blocks[j * num_blocks + b];
      scales[b * kQ8Panel + lane] = block.d;
      for (int i = 0; i < kQ8_0BlockSize; ++i) {
        const int64_t k = b * kQ8_0BlockSize + i;
        panel[(k / 4) * 64 + lane * 4 + k % 4] =
            static_cast<uint8_t>(static_cast<int>(block.qs[i]) + 128);
      }
    }
  }
  return p;
}

// Q4_K / Q5_K / IQ4_XS rows into 16-row nibble panels (packed_weights.h): codes regrouped by 8
// inputs (Q5_K's fifth bits into their own vector per 32-block), the sub-block scales (and
// mins) unpacked to a byte each next to the panel's d (and dmin).
PackedWeights pack_q45_k(const void* w, WeightType type, int64_t n_out, int64_t n_in) {
  using detail::kQ8Panel;
  const bool five = type == WeightType::kQ5_K;
  const bool xs = type == WeightType::kIQ4_XS;
  PackedWeights p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = weight_row_bytes(type, n_in);
  const int64_t num_panels = p.q8_num_panels();
  const int64_t num_blocks = n_in / kQK_K;
  const int64_t block32_bytes = p.nibble_block_bytes();
  const int64_t scale_bytes = xs ? detail::kIq4XsPanelScaleBytes : detail::kQ4KPanelScaleBytes;
  p.data = AlignedBuffer(static_cast<size_t>(num_panels * (n_in / 32) * block32_bytes));
  p.scales = AlignedBuffer(static_cast<size_t>(num_panels * num_blocks * scale_bytes));
  std::memset(p.data.data(), 0, p.data.size());  // padding rows: d = dmin = 0, zero weights
  std::memset(p.scales.data(), 0, p.scales.size());
  const size_t block_bytes = weight_type_info(type).block_bytes;
  for (int64_t j = 0; j < n_out; ++j) {
    const int64_t panel = j / kQ8Panel;
    const int64_t lane = j % kQ8Panel;
    uint8_t* codes = p.data.as<uint8_t>() + panel * (n_in / 32) * block32_bytes;
    for (int64_t g = 0; g < num_blocks; ++g) {
      const uint8_t* block =
          static_cast<const uint8_t*>(w) + (j * num_blocks + g) * static_cast<int64_t>(block_bytes);
      auto* scales = p.scales.as<uint8_t>() + (panel * num_blocks + g) * scale_bytes;
      // All three start with the f16 d.
      std::memcpy(scales + 2 * lane, block, 2);
      const uint8_t* qs = nullptr;
      const uint8_t* qh = nullptr;
      if (xs) {
        const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(block);
        qs = b.qs;
        for (int sub = 0; sub < 8; ++sub) {
          const int ls = ((b.scales_l[sub / 2] >> 4 * (sub % 2)) & 0xF) |
                         (((b.scales_h >> 2 * sub) & 3) << 4);
          scales[detail::kIq4XsScOffset + sub * kQ8Panel + lane] = static_cast<uint8_t>(ls - 32);
        }
      } else {
        // Q4_K and Q5_K share d, dmin and the packed scales at the front of the block.
        const auto& head = *reinterpret_cast<const BlockQ4_K*>(block);
        qs = five ? reinterpret_cast<const BlockQ5_K*>(block)->qs : head.qs;
        qh = five ? reinterpret_cast<const BlockQ5_K*>(block)->qh : nullptr;
        std::memcpy(scales + detail::kQ4KDminOffset + 2 * lane, &head.dmin, 2);
        for (int sub = 0; sub < 8; ++sub) {
          k4_scale_min(sub, head.scales, &scales[detail::kQ4KScOffset + sub * kQ8Panel + lane],
                       &scales[detail::q4k_mn_index(sub, lane)]);
        }
      }
      for (int i = 0; i < kQK_K; ++i) {
        // GGML K types: 64-input chunks of 32 bytes, low nibbles first, then high nibbles; Q5_K's
        // fifth bit of input i is bit (i / 32) of qh[i % 32]. IQ4_XS: 16 bytes per 32 inputs,
        // low nibbles first.
        uint8_t code;
        if (xs) {
          const uint8_t byte = qs[(i / 32) * 16 + i % 16];
          code = i % 32 < 16 ? (byte & 0xF) : (byte >> 4);
        } else {
          const int within = i % 64;
          const uint8_t byte = qs[(i / 64) * 32 + within % 32];
          code = within < 32 ? (byte & 0xF) : (byte >> 4);
        }
        const int64_t k = g * kQK_K + i;
        uint8_t* block32 = codes + (k / 32) * block32_bytes;
        const int64_t t = (k % 32) / 8;
        const bool high_nibble = k % 8 >= 4;
        uint8_t& dst = block32[t * 64 + lane * 4 + k % 4];
        dst = static_cast<uint8_t>(dst | (high_nibble ? code << 4 : code));
        if (five) {
          const int fifth = (qh[i % 32] >> (i / 32)) & 1;
          block32[256 + lane * 4 + k % 4] |=
              static_cast<uint8_t>(fifth << (2 * t + (high_nibble ? 1 : 0)));
        }
      }
    }
  }
  return p;
}

// Q4_0 / Q4_1 / IQ4_NL / Q5_0 / Q5_1 rows into nibble panels with per-32-block d (and m) per row
// (packed_weights.h).
PackedWeights pack_legacy(const void* w, WeightType type, int64_t n_out, int64_t n_in) {
  using detail::kQ8Panel;
  PackedWeights p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = weight_row_bytes(type, n_in);
  const bool has_min = type == WeightType::kQ4_1 || type == WeightType::kQ5_1;
  const bool five = type == WeightType::kQ5_0 || type == WeightType::kQ5_1;
  const int64_t num_panels = p.q8_num_panels();
  const int64_t num_blocks = n_in / 32;
  const int64_t block32_bytes = p.nibble_block_bytes();
  p.data = AlignedBuffer(static_cast<size_t>(num_panels * num_blocks * block32_bytes));
  p.scales = AlignedBuffer(static_cast<size_t>(num_panels * num_blocks * kQ8Panel *
                                               (has_min ? 2 : 1)) * sizeof(uint16_t));
  std::memset(p.data.data(), 0, p.data.size());  // padding rows: d = m = 0
  std::memset(p.scales.data(), 0, p.scales.size());
  const size_t block_bytes = weight_type_info(type).block_bytes;
  const int64_t qh_offset = has_min ? 4 : 2;                    // after d (and m)
  const int64_t qs_offset = qh_offset + (five ? 4 : 0);         // after qh (Q5_*)
  const auto* bytes = static_cast<const uint8_t*>(w);
  for (int64_t j = 0; j < n_out; ++j) {
    const int64_t panel = j / kQ8Panel;
    const int64_t lane = j % kQ8Panel;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const uint8_t* block = bytes + (j * num_blocks + b) * static_cast<int64_t>(block_bytes);
      const uint8_t* qs = block + qs_offset;
      uint32_t qh = 0;
      if (five) std::memcpy(&qh, block + qh_offset, sizeof(qh));
      uint16_t* scales =
          p.scales.as<uint16_t>() + (panel * num_blocks + b) * kQ8Panel * (has_min ? 2 : 1);
      std::memcpy(&scales[lane], block, 2);
      if (has_min) std::memcpy(&scales[kQ8Panel + lane], block + 2, 2);
      uint8_t* block32 = p.data.as<uint8_t>() + (panel * num_blocks + b) * block32_bytes;
      for (int i = 0; i < 32; ++i) {
        // GGML: input i < 16 in the low nibble of qs[i], input i + 16 in the high one; Q5_*'s
        // fifth bit of input i is bit i of qh.
        const uint8_t code = i < 16 ? (qs[i] & 0xF) : (qs[i - 16] >> 4);
        const int64_t t = i / 8;
        const bool high_nibble = i % 8 >= 4;
        uint8_t& dst = block32[t * 64 + lane * 4 + i % 4];
        dst = static_cast<uint8_t>(dst | (high_nibble ? code << 4 : code));
        if (five) {
          block32[256 + lane * 4 + i % 4] |= static_cast<uint8_t>(
              ((qh >> i) & 1) << (2 * t + (high_nibble ? 1 : 0)));
        }
      }
    }
  }
  return p;
}

// Q6_K / Q3_K / Q2_K rows into 16-row panels of 16-input sub-blocks (packed_weights.h).
PackedWeights pack_k16(const void* w, WeightType type, int64_t n_out, int64_t n_in) {
  using detail::kQ8Panel;
  PackedWeights p;
  p.type = type;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = weight_row_bytes(type, n_in);
  const int64_t num_panels = p.q8_num_panels();
  const int64_t num_blocks = n_in / kQK_K;
  const int64_t block32_bytes = p.k16_block_bytes();
  const int64_t scale_bytes =
      type == WeightType::kQ2_K ? detail::kQ2KPanelScaleBytes : detail::kQ6KPanelScaleBytes;
  p.data = AlignedBuffer(static_cast<size_t>(num_panels * (n_in / 32) * block32_bytes));
  p.scales = AlignedBuffer(static_cast<size_t>(num_panels * num_blocks * scale_bytes));
  std::memset(p.data.data(), 0, p.data.size());  // padding rows: d = dmin = 0
  std::memset(p.scales.data(), 0, p.scales.size());
  const size_t block_bytes = weight_type_info(type).block_bytes;
  for (int64_t j = 0; j < n_out; ++j) {
    const int64_t panel = j / kQ8Panel;
    const int64_t lane = j % kQ8Panel;
    for (int64_t g = 0; g < num_blocks; ++g) {
      const uint8_t* src =
          static_cast<const uint8_t*>(w) + (j * num_blocks + g) * static_cast<int64_t>(block_bytes);
      auto* scales = p.scales.as<uint8_t>() + (panel * num_blocks + g) * scale_bytes;
      int8_t q3_scales[16];
      switch (type) {
        case WeightType::kQ6_K: {
          const auto& b = *reinterpret_cast<const BlockQ6_K*>(src);
          std::memcpy(scales + 2 * lane, &b.d, 2);
          for (int sub = 0; sub < 16; ++sub) {
            scales[detail::kQ6KScOffset + sub * kQ8Panel + lane] = static_cast<uint8_t>(b.scales[sub]);
          }
          break;
        }
        case WeightType::kQ3_K: {
          const auto& b = *reinterpret_cast<const BlockQ3_K*>(src);
          std::memcpy(scales + 2 * lane, &b.d, 2);
          q3_k_scales(b.scales, q3_scales);
          for (int sub = 0; sub < 16; ++sub) {
            scales[detail::kQ6KScOffset + sub * kQ8Panel + lane] =
                static_cast<uint8_t>(q3_scales[sub] - 32);
          }
          break;
        }
        default: {
          const auto& b = *reinterpret_cast<const BlockQ2_K*>(src);
          std::memcpy(scales + 2 * lane, &b.d, 2);
          std::memcpy(scales + detail::kQ2KDminOffset + 2 * lane, &b.dmin, 2);
          for (int sub = 0; sub < 16; ++sub) {
            scales[detail::kQ2KScOffset + sub * kQ8Panel + lane] = b.scales[sub];
          }
          break;
        }
      }
      for (int e = 0; e < kQK_K; ++e) {
        // GGML: 128-input halves; in each, 32 inputs per quarter. Q6_K: the low 4 bits from
        // ql's nibbles, the top 2 from qh; Q2_K / Q3_K: 2 bits from qs (bits 2 * quarter), Q3_K's
        // third from bit 4 * half + quarter of hmask.
        const int half = e / 128;
        const int quarter = (e % 128) / 32;
        const int l = e % 32;
        const int64_t k = g * kQK_K + e;
        uint8_t* dst = p.data.as<uint8_t>() + (panel * (n_in / 32) + k / 32) * block32_bytes;
        const int64_t byte = lane * 4 + k % 4;
        if (type == WeightType::kQ6_K) {
          const auto& b = *reinterpret_cast<const BlockQ6_K*>(src);
          const uint8_t low_byte = b.ql[64 * half + l + (quarter % 2) * 32];
          const int low = quarter < 2 ? (low_byte & 0xF) : (low_byte >> 4);
          const int top = (b.qh[32 * half + l] >> (2 * quarter)) & 3;
          const int64_t t = (k % 32) / 8;
          const bool high_nibble = k % 8 >= 4;
          dst[t * 64 + byte] |= static_cast<uint8_t>(high_nibble ? low << 4 : low);
          const int shift = static_cast<int>(4 * (t % 2) + (high_nibble ? 2 : 0));
          dst[256 + (t / 2) * 64 + byte] |= static_cast<uint8_t>(top << shift);
          continue;
        }
        const uint8_t* qs = type == WeightType::kQ3_K
                                ? reinterpret_cast<const BlockQ3_K*>(src)->qs
                                : reinterpret_cast<const BlockQ2_K*>(src)->qs;
        const int code = (qs[32 * half + l] >> (2 * quarter)) & 3;
        const int64_t h = (k % 32) / 16;
        const int s = static_cast<int>((k % 16) / 4);
        dst[h * 64 + byte] |= static_cast<uint8_t>(code << (2 * s));
        if (type == WeightType::kQ3_K) {
          const auto& b = *reinterpret_cast<const BlockQ3_K*>(src);
          const int third = (b.hmask[l] >> (4 * half + quarter)) & 1;
          dst[128 + byte] |= static_cast<uint8_t>(third << (4 * h + s));
        }
      }
    }
  }
  return p;
}

// Converts every row to `target` (f32 or bf16) through f32.
PackedWeights pack_converted(const void* w, WeightType type, int64_t n_out, int64_t n_in,
                             WeightType target) {
  PackedWeights p;
  p.type = target;
  p.n_out = n_out;
  p.n_in = n_in;
  p.row_bytes = weight_row_bytes(target, n_in);
  p.data = AlignedBuffer(p.row_bytes * static_cast<size_t>(n_out));
  const size_t src_row_bytes = weight_row_bytes(type, n_in);
  std::vector<float> row(static_cast<size_t>(n_in));  // (n_in), pack time only
  for (int64_t j = 0; j < n_out; ++j) {
    ref::dequantize_row(row.data(), static_cast<const uint8_t*>(w) + j * src_row_bytes, type, n_in);
    if (target == WeightType::kF32) {
      std::memcpy(p.data.as<float>() + j * n_in, row.data(), row.size() * sizeof(float));
    } else if (target == WeightType::kF16) {
      uint16_t* dst = p.data.as<uint16_t>() + j * n_in;
      for (int64_t i = 0; i < n_in; ++i) dst[i] = float_to_fp16(row[i]);
    } else {
      uint16_t* dst = p.data.as<uint16_t>() + j * n_in;
      for (int64_t i = 0; i < n_in; ++i) dst[i] = float_to_bf16(row[i]);
    }
  }
  return p;
}

}  // namespace

namespace {
std::atomic<bool> g_batch_invariant{false};
}  // namespace

void set_batch_invariant(bool on) { g_batch_invariant.store(on, std::memory_order_relaxed); }
bool batch_invariant() { return g_batch_invariant.load(std::memory_order_relaxed); }

struct PackedLinear::Impl {
  PackedWeights weights;
  // Mixed-type fused layers: the sub-layers and the first output column of each (weights then
  // holds only n_out / n_in).
  std::vector<PackedLinear> parts;
  std::vector<int64_t> part_offsets;
  // Large-m path for f32 and bf16 weights (a second, blocked copy of the weights).
  std::unique_ptr<detail::OnednnMatmul> onednn;
  // Large-m path for Q8_0 (bf16 slabs, no second copy of the weights).
  std::unique_ptr<detail::OnednnPlainBf16Matmul> onednn_q8;
};

PackedLinear::PackedLinear() = default;
PackedLinear::~PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;

WeightType packed_weight_type(WeightType stored, MatmulPrecision precision) {
  if (precision == MatmulPrecision::kF32) return WeightType::kF32;
  const bool unquantized = stored == WeightType::kF32 || stored == WeightType::kF16 ||
                           stored == WeightType::kBF16;
  if (precision == MatmulPrecision::kBF16 && unquantized) return WeightType::kBF16;
  if (precision == MatmulPrecision::kF16 && unquantized) return WeightType::kF16;
  return stored;
}

std::string matmul_backend(WeightType stored, MatmulPrecision precision) {
  const WeightType type = packed_weight_type(stored, precision);
  const cpu::Isa isa = cpu::selected_isa();
  std::string what = weight_type_info(stored).name;
  if (type != stored) what += fmt::format(" as {}", weight_type_info(type).name);
  std::string how;
  // Activations: one scale per 32 (GGML's Q8_0) or per 256 (Q8_K), as llama.cpp pairs them.
  const std::string act =
      fmt::format("activations quantized per {}", detail::activation_group(type));
  if (isa < cpu::Isa::kAvx2) {
    how = "scalar";
  } else if (isa < cpu::Isa::kAvx512) {
    how = !weight_type_info(type).quantized
              ? "AVX2 FMA"
              : "AVX2 int8 dot products on 16-row panels, " + act;
  } else {
    const bool bf16 = isa >= cpu::Isa::kAvx512Bf16;
    switch (type) {
      case WeightType::kF32: how = fmt::format("AVX-512 (m <= {}), oneDNN f32 (m > {})",
                                               kMaxSmallMF32, kMaxSmallMF32); break;
      case WeightType::kF16: how = "AVX-512 F16C"; break;
      case WeightType::kBF16:
        how = bf16 ? fmt::format("AVX512-BF16 (m <= {}), oneDNN bf16{} (m > {})", max_small_m_bf16(),
                                 isa >= cpu::Isa::kAmx ? " on AMX" : "", max_small_m_bf16())
                   : "AVX-512 FMA";
        break;
      case WeightType::kQ8_0:
        how = !bf16 ? "AVX2 int8 dot products on 16-row panels, " + act
              : isa >= cpu::Isa::kAmx
                  ? fmt::format("AVX512-VNNI on 16-row panels, {} (m <= {}), bf16 slabs + oneDNN "
                                "on AMX (m > {})",
                                act, kMaxSmallMQ8Amx, kMaxSmallMQ8Amx)
                  : "AVX512-VNNI on 16-row panels, " + act + " (every m)";
        break;
      default:  // the other quantized types
        how = bf16 ? "AVX512-VNNI on 16-row panels, " + act + " (every m)"
                   : "AVX2 int8 dot products on 16-row panels, " + act;
        break;
    }
  }
  return fmt::format("{}: {} [{}]", what, how, cpu::isa_name(isa));
}

PackedLinear PackedLinear::pack(const void* w, WeightType type, int64_t n_out, int64_t n_in,
                                MatmulPrecision precision) {
  VELLUM_CHECK(w != nullptr && n_out > 0 && n_in > 0, ErrorCode::kInvalidArgument,
               "PackedLinear::pack needs weights and positive dims, got n_out={} n_in={}", n_out,
               n_in);
  VELLUM_CHECK(n_in % weight_block_elems(type) == 0, ErrorCode::kInvalidModel,
               "{} weight rows must be a multiple of {} elements, got n_in={}",
               weight_type_info(type).name, weight_block_elems(type), n_in);
  const WeightType target = packed_weight_type(type, precision);

  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& impl = *out.impl_;
  if (target == type && type == WeightType::kQ8_0) {
    impl.weights = pack_q8_0(w, n_out, n_in);
  } else if (target == type && is_q45_k_panel_type(type)) {
    impl.weights = pack_q45_k(w, type, n_out, n_in);
  } else if (target == type && is_k16_panel_type(type)) {
    impl.weights = pack_k16(w, type, n_out, n_in);
  } else if (target == type && is_legacy_panel_type(type)) {
    impl.weights = pack_legacy(w, type, n_out, n_in);
  } else if (target == type) {
    impl.weights = pack_rows(w, type, n_out, n_in);
  } else {
    impl.weights = pack_converted(w, type, n_out, n_in, target);
  }
  const cpu::Isa isa = cpu::selected_isa();
  // Q8_0's bf16 slabs for large m on AMX; the other quantized types run the panel kernels at
  // every m.
  if (target == WeightType::kQ8_0 && isa >= cpu::Isa::kAmx) {
    try {
      impl.onednn_q8 = std::make_unique<detail::OnednnPlainBf16Matmul>();
    } catch (const std::exception& e) {
      VELLUM_LOG_WARN("oneDNN unavailable for {} prefill ({}); using the VNNI kernel",
                      weight_type_info(target).name, e.what());
    }
  }
  // oneDNN is only worth its second weight copy where it runs with AVX-512 (f32) or native bf16.
  if ((target == WeightType::kF32 && isa >= cpu::Isa::kAvx512) ||
      (target == WeightType::kBF16 && isa >= cpu::Isa::kAvx512Bf16)) {
    try {
      impl.onednn = std::make_unique<detail::OnednnMatmul>(
          impl.weights.data.data(),
          target == WeightType::kF32 ? detail::OnednnMatmul::DataType::kF32
                                     : detail::OnednnMatmul::DataType::kBF16,
          n_out, n_in);
    } catch (const std::exception& e) {
      // oneDNN may have been limited to a lower ISA earlier in this process (tests that switch
      // ISAs); the AVX-512 kernels below handle every m, only slower for large m.
      VELLUM_LOG_WARN("oneDNN matmul unavailable for {}x{} weights ({}); using Vellum's kernels",
                      n_out, n_in, e.what());
    }
  }
  return out;
}

PackedLinear PackedLinear::pack_parts(const std::vector<Part>& parts, int64_t n_in,
                                      MatmulPrecision precision) {
  VELLUM_CHECK(!parts.empty() && n_in > 0, ErrorCode::kInvalidArgument,
               "PackedLinear::pack_parts needs parts and a positive n_in");
  int64_t total_rows = 0;
  bool one_type = true;
  for (const Part& p : parts) {
    VELLUM_CHECK(p.w != nullptr && p.rows > 0, ErrorCode::kInvalidArgument,
                 "PackedLinear::pack_parts: a part has no weights or no rows");
    total_rows += p.rows;
    one_type = one_type && p.type == parts[0].type;
  }
  if (parts.size() == 1) return pack(parts[0].w, parts[0].type, parts[0].rows, n_in, precision);
  if (one_type) {
    // GGML rows are contiguous and independent: concatenating the parts' bytes concatenates their
    // rows. The copy lives only until pack() has prepared its own layout.
    const size_t row_bytes = weight_row_bytes(parts[0].type, n_in);
    std::vector<uint8_t> fused(row_bytes * static_cast<size_t>(total_rows));
    size_t offset = 0;
    for (const Part& p : parts) {
      const size_t bytes = row_bytes * static_cast<size_t>(p.rows);
      std::memcpy(fused.data() + offset, p.w, bytes);
      offset += bytes;
    }
    return pack(fused.data(), parts[0].type, total_rows, n_in, precision);
  }
  // Runs of consecutive parts with one type are still fused.
  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  out.impl_->weights.n_out = total_rows;
  out.impl_->weights.n_in = n_in;
  int64_t column = 0;
  for (size_t i = 0; i < parts.size();) {
    size_t end = i + 1;
    while (end < parts.size() && parts[end].type == parts[i].type) ++end;
    const std::vector<Part> run(parts.begin() + static_cast<std::ptrdiff_t>(i),
                                parts.begin() + static_cast<std::ptrdiff_t>(end));
    out.impl_->part_offsets.push_back(column);
    out.impl_->parts.push_back(pack_parts(run, n_in, precision));
    column += out.impl_->parts.back().n_out();
    i = end;
  }
  out.impl_->weights.type = out.impl_->parts[0].packed_type();
  return out;
}

size_t PackedLinear::scratch_bytes(int64_t m) const {
  if (!impl_->parts.empty()) {
    // Each part's output (m, rows) goes to scratch first, then to its columns of y.
    size_t need = 0;
    int64_t max_rows = 0;
    for (const PackedLinear& part : impl_->parts) {
      need = std::max(need, part.scratch_bytes(m));
      max_rows = std::max(max_rows, part.n_out());
    }
    return static_cast<size_t>(round_up(static_cast<int64_t>(need), 64)) +
           static_cast<size_t>(m * max_rows) * sizeof(float) + 64;
  }
  const PackedWeights& w = impl_->weights;
  // oneDNN's padded rows (onednn_rows) come after the bf16 activations.
  const size_t onednn_bytes = impl_->onednn ? impl_->onednn->scratch_bytes(m) + 64 : 0;
  switch (w.type) {
    case WeightType::kF32: return onednn_bytes;
    case WeightType::kBF16:
      // As forward() dispatches: AVX2 rearranges f32 activations, AVX-512 rounds them to bf16.
      if (cpu::selected_isa() == cpu::Isa::kAvx2) return avx2::gemm_bf16_scratch_bytes(m, w.n_in);
      return static_cast<size_t>(round_up(
                 static_cast<int64_t>(avx512::gemm_bf16_scratch_bytes(m, w.n_in)), 64)) +
             onednn_bytes;
    case WeightType::kQ8_0:
      return m > max_small_m_q8_0() ? std::max(avx512::gemm_q8_0_scratch_bytes(m, w.n_in),
                                         avx512::gemm_q8_0_bf16_scratch_bytes(m, w.n_in, w.n_out))
                              : avx512::gemm_q8_0_scratch_bytes(m, w.n_in);
    default:
      return weight_type_info(w.type).quantized ? avx512::gemm_q8_0_scratch_bytes(m, w.n_in) : 0;
  }
}

void PackedLinear::forward(float* y, const float* x, int64_t m, void* scratch) const {
  forward(y, InputRows(x, impl_->weights.n_in), m, scratch);
}

void PackedLinear::forward(float* y, const InputRows& rows, int64_t m, void* scratch) const {
  const PackedWeights& w = impl_->weights;
  if (m <= 0) return;
  VELLUM_ASSERT(rows.n_in() == w.n_in);
  if (!impl_->parts.empty()) {
    // Every part reads the same rows: produce them once.
    const float* x = rows.matrix(m);
    size_t part_scratch = 0;
    for (const PackedLinear& part : impl_->parts) {
      part_scratch = std::max(part_scratch, part.scratch_bytes(m));
    }
    float* part_y = reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) +
                                             round_up(static_cast<int64_t>(part_scratch), 64));
    for (size_t i = 0; i < impl_->parts.size(); ++i) {
      const PackedLinear& part = impl_->parts[i];
      const int64_t part_rows = part.n_out();
      part.forward(part_y, x, m, scratch);
      threads::parallel_for(m, m * part_rows >= 65536, [&](int64_t r) {
        std::memcpy(y + r * w.n_out + impl_->part_offsets[i], part_y + r * part_rows,
                    static_cast<size_t>(part_rows) * sizeof(float));
      });
    }
    return;
  }
  // The kernels that quantize their activations or round them to bf16 take `rows` as given
  // (produced rows are converted from L1); the others read f32 rows (rows.matrix(m)).
  const cpu::Isa isa = cpu::selected_isa();
  // AVX2 dense (f32/f16/bf16) weights; the quantized types are dispatched below.
  if (isa == cpu::Isa::kAvx2) {
    switch (w.type) {
      case WeightType::kF32: avx2::gemm_f32(y, rows.matrix(m), m, w); return;
      case WeightType::kF16: avx2::gemm_f16(y, rows.matrix(m), m, w); return;
      case WeightType::kBF16: avx2::gemm_bf16(y, rows.matrix(m), m, w, scratch); return;
      default: break;
    }
  }
  if (isa < cpu::Isa::kAvx512) {
    if (isa >= cpu::Isa::kAvx2 && weight_type_info(w.type).quantized) {
      avx2::gemm_quant(y, rows, m, w, scratch);
    } else {
      detail::gemm_scalar(y, rows.matrix(m), m, w);
    }
    return;
  }
  const bool has_bf16 = isa >= cpu::Isa::kAvx512Bf16;
  const bool onednn = uses_onednn(m);
  switch (w.type) {
    case WeightType::kF32:
      if (onednn) {
        impl_->onednn->run(y, rows.matrix(m), m, scratch);
      } else {
        avx512::gemm_f32(y, rows.matrix(m), m, w);
      }
      return;
    case WeightType::kF16:
      avx512::gemm_f16(y, rows.matrix(m), m, w);
      return;
    case WeightType::kBF16:
      if (!has_bf16) {
        avx512::gemm_bf16_fma(y, rows.matrix(m), m, w);
      } else if (onednn) {
        auto* x_bf16 = static_cast<uint16_t*>(scratch);  // (m, n_in)
        avx512::convert_rows_to_bf16(x_bf16, rows, m);
        impl_->onednn->run(y, x_bf16, m,
                           static_cast<uint8_t*>(scratch) +
                               round_up(static_cast<int64_t>(
                                            avx512::gemm_bf16_scratch_bytes(m, w.n_in)), 64));
      } else {
        avx512::gemm_bf16_dot(y, rows, m, w, scratch);
      }
      return;
    case WeightType::kQ8_0:
      if (onednn) {
        avx512::gemm_q8_0_bf16(y, rows.matrix(m), m, w, *impl_->onednn_q8, scratch);
      } else if (has_bf16) {
        avx512::gemm_q8_0_vnni(y, rows, m, w, scratch);
      } else {
        avx2::gemm_quant(y, rows, m, w, scratch);  // AVX-512 without VNNI
      }
      return;
    default:  // the other quantized types
      if (!has_bf16) {
        avx2::gemm_quant(y, rows, m, w, scratch);  // AVX-512 without VNNI
      } else if (is_q45_k_panel_type(w.type)) {
        avx512::gemm_q45_k_vnni(y, rows, m, w, scratch);
      } else if (is_k16_panel_type(w.type)) {
        avx512::gemm_k16_vnni(y, rows, m, w, scratch);
      } else {
        avx512::gemm_q4_legacy_vnni(y, rows, m, w, scratch);
      }
      return;
  }
}

bool PackedLinear::uses_onednn(int64_t m) const {
  if (!impl_->parts.empty()) {
    return std::any_of(impl_->parts.begin(), impl_->parts.end(),
                       [m](const PackedLinear& part) { return part.uses_onednn(m); });
  }
  const cpu::Isa isa = cpu::selected_isa();
  // The large-m kernels block and reduce differently from the small-m ones.
  if (isa < cpu::Isa::kAvx512 || batch_invariant()) return false;
  const bool has_bf16 = isa >= cpu::Isa::kAvx512Bf16;
  switch (impl_->weights.type) {
    case WeightType::kF32: return m > kMaxSmallMF32 && impl_->onednn != nullptr;
    case WeightType::kBF16: return has_bf16 && m > max_small_m_bf16() && impl_->onednn != nullptr;
    case WeightType::kQ8_0:
      return has_bf16 && m > max_small_m_q8_0() && impl_->onednn_q8 != nullptr;
    default: return false;
  }
}

int64_t PackedLinear::n_out() const { return impl_->weights.n_out; }
int64_t PackedLinear::n_in() const { return impl_->weights.n_in; }
WeightType PackedLinear::packed_type() const { return impl_->weights.type; }

std::vector<WeightType> PackedLinear::packed_types() const {
  if (impl_->parts.empty()) return {impl_->weights.type};
  std::vector<WeightType> types;
  for (const PackedLinear& part : impl_->parts) types.push_back(part.packed_type());
  return types;
}

size_t PackedLinear::weight_bytes() const {
  if (!impl_->parts.empty()) {
    size_t bytes = 0;
    for (const PackedLinear& part : impl_->parts) bytes += part.weight_bytes();
    return bytes;
  }
  const PackedWeights& w = impl_->weights;
  return w.data.size() + w.scales.size();
}

}  // namespace vellum::kernels
