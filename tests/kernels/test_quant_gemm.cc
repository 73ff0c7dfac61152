// The quantized GEMM kernels against exact references, tight enough to catch a wrong bit in the
// unpacking of any type:
// - the int8 panel kernels (AVX512-VNNI, AVX2) quantize activations with one d = amax / 127 per 32
//   values (Q8_0 and the legacy types) or per 256 (the K-quants and IQ4_XS, as GGML's Q8_K), round
//   to nearest even, so they must equal Σ w · x̂ with x̂ those quantized activations, up to float
//   summation order;
// - Q8_0's bf16 slab path (large m on AMX) rounds activations and dequantized weights to bf16 and
//   multiplies with f32 accumulation.
// Weights are random block bytes (every code, sub-scale and min pattern) with sane f16 scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/half.h"
#include "cpu/isa.h"
#include "kernel_test_util.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/matmul.h"
#include "kernels/onednn_matmul.h"
#include "kernels/packed_weights.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

using testing::random_floats;

// Every quantized type; each is packed into panels (packed_weights.h) and reaches the kernels
// through PackedLinear.
constexpr WeightType kQuantTypes[] = {
    WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1,  WeightType::kIQ4_NL,
    WeightType::kQ5_0, WeightType::kQ5_1, WeightType::kQ2_K,  WeightType::kQ3_K,
    WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K,  WeightType::kIQ4_XS};

std::vector<uint8_t> random_block_bytes(WeightType type, int64_t num_elements, uint32_t seed) {
  const WeightTypeInfo& info = weight_type_info(type);
  const int64_t num_blocks = num_elements / info.block_elems;
  std::vector<uint8_t> bytes(static_cast<size_t>(num_blocks) * info.block_bytes);
  std::mt19937 rng(seed);
  for (auto& b : bytes) b = static_cast<uint8_t>(rng());
  std::vector<size_t> offsets;  // the f16 super-scales inside a block
  switch (type) {
    case WeightType::kQ4_1:
    case WeightType::kQ5_1:
    case WeightType::kQ4_K:
    case WeightType::kQ5_K: offsets = {0, 2}; break;
    case WeightType::kQ2_K: offsets = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)}; break;
    case WeightType::kQ3_K: offsets = {offsetof(BlockQ3_K, d)}; break;
    case WeightType::kQ6_K: offsets = {offsetof(BlockQ6_K, d)}; break;
    default: offsets = {0}; break;
  }
  if (type == WeightType::kQ8_0) {
    // Codes of -128 never come out of GGML's quantizer (|q| <= 127); keep them out.
    for (size_t b = 0; b < static_cast<size_t>(num_blocks); ++b) {
      for (size_t i = 2; i < info.block_bytes; ++i) {
        if (bytes[b * info.block_bytes + i] == 0x80) bytes[b * info.block_bytes + i] = 0x81;
      }
    }
  }
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (int64_t b = 0; b < num_blocks; ++b) {
    for (size_t offset : offsets) {
      const uint16_t h = float_to_fp16(scale(rng));
      std::memcpy(bytes.data() + static_cast<size_t>(b) * info.block_bytes + offset, &h, 2);
    }
  }
  return bytes;
}

// Q8_0 rows in PackedLinear's panel layout, written from packed_weights.h's formulas.
detail::PackedWeights q8_0_panels(const std::vector<uint8_t>& bytes, int64_t n_out, int64_t n_in) {
  detail::PackedWeights w;
  w.type = WeightType::kQ8_0;
  w.n_out = n_out;
  w.n_in = n_in;
  w.row_bytes = static_cast<size_t>(n_in);
  const int64_t panels = w.q8_num_panels();
  w.data = AlignedBuffer(static_cast<size_t>(panels * detail::kQ8Panel * n_in));
  w.scales = AlignedBuffer(static_cast<size_t>(panels * detail::kQ8Panel * (n_in / 32)) * 2);
  std::memset(w.data.data(), 128, w.data.size());
  std::memset(w.scales.data(), 0, w.scales.size());
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(bytes.data());
  for (int64_t j = 0; j < n_out; ++j) {
    for (int64_t k = 0; k < n_in; ++k) {
      const BlockQ8_0& b = blocks[j * (n_in / 32) + k / 32];
      w.data.as<uint8_t>()[(j / 16) * 16 * n_in + (k / 4) * 64 + (j % 16) * 4 + k % 4] =
          static_cast<uint8_t>(b.qs[k % 32] + 128);
      w.scales.as<uint16_t>()[((j / 16) * (n_in / 32) + k / 32) * 16 + j % 16] = b.d;
    }
  }
  return w;
}

// x quantized per `block` values exactly as the integer kernels do, back in float.
std::vector<float> quantize_dequantize(const std::vector<float>& x, int64_t m, int64_t n_in,
                                       int64_t block = 32) {
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t k = 0; k < n_in; k += block) {
      const int64_t end = std::min<int64_t>(n_in, k + block);
      float amax = 0.0f;
      for (int64_t i = k; i < end; ++i) amax = std::max(amax, std::fabs(x[r * n_in + i]));
      const float d = amax / 127.0f;
      const float id = d > 0.0f ? 1.0f / d : 0.0f;
      for (int64_t i = k; i < end; ++i) {
        const float q = std::clamp(std::nearbyint(x[r * n_in + i] * id), -128.0f, 127.0f);
        out[r * n_in + i] = static_cast<float>(double{d} * q);
      }
    }
  }
  return out;
}

struct Shape {
  int64_t m, n_out, n_in;
};

std::vector<Shape> shapes_for(WeightType type) {
  const int64_t block = weight_block_elems(type);
  std::vector<Shape> shapes;
  for (int64_t blocks : {1, 2, 3, 5}) {
    for (int64_t n_out : {1, 4, 5, 11}) shapes.push_back({1 + (blocks + n_out) % 9, n_out, blocks * block});
  }
  for (int64_t m = 1; m <= 9; ++m) shapes.push_back({m, 6, 2 * block});
  shapes.push_back({17, 9, 3 * block});
  shapes.push_back({40, 70, 2 * block});
  // Decode tiles span up to 4 panels of 16 outputs: 2, 3 and 4 panels and a short last tile.
  shapes.push_back({1, 27, 2 * block});
  shapes.push_back({1, 37, block});
  shapes.push_back({1, 70, 2 * block});
  shapes.push_back({1, 130, 3 * block});
  shapes.push_back({2, 130, block});
  return shapes;
}

bool has_vnni() { return cpu::detect_best_isa() >= cpu::Isa::kAvx512Bf16; }

// y from PackedLinear with the ISA lowered to `isa` against Σ w · x̂ (x̂: x quantized per 32 or 256
// values, as the type's kernels do).
void check_int8_kernels(cpu::Isa isa, uint32_t seed) {
  for (WeightType type : kQuantTypes) {
    for (const Shape& s : shapes_for(type)) {
      ++seed;
      std::vector<uint8_t> bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
      const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
      const auto xhat = quantize_dequantize(x, s.m, s.n_in, detail::activation_group(type));
      std::vector<float> expected(static_cast<size_t>(s.m * s.n_out));
      ref::matmul(expected.data(), xhat.data(), s.m, bytes.data(), type, s.n_out, s.n_in);
      testing::IsaScope scope(isa);
      const PackedLinear linear =
          PackedLinear::pack(bytes.data(), type, s.n_out, s.n_in, MatmulPrecision::kAuto);
      std::vector<float> y(expected.size());
      AlignedBuffer scratch(linear.scratch_bytes(s.m));
      linear.forward(y.data(), x.data(), s.m, scratch.data());
      const double err = testing::nmse(y.data(), expected.data(), expected.size());
      const size_t worst = testing::worst_index(y.data(), expected.data(), expected.size());
      EXPECT_LT(err, 1e-10) << weight_type_info(type).name << " m=" << s.m << " n_out=" << s.n_out
                            << " n_in=" << s.n_in << " worst " << y[worst] << " vs "
                            << expected[worst];
    }
  }
}

TEST(QuantGemm, VnniEqualsQuantizedActivationReference) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI/BF16 on this CPU";
  check_int8_kernels(cpu::Isa::kAvx512Bf16, 1);
}

TEST(QuantGemm, Avx2EqualsQuantizedActivationReference) {
  if (cpu::detect_best_isa() < cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  check_int8_kernels(cpu::Isa::kAvx2, 500);
}

// Types whose AVX2 and AVX512-VNNI kernels do the same integer sums and the same f32 operations
// per output, in the same order: their outputs are bitwise equal, so a model's tokens do not
// depend on which of the two a CPU runs.
TEST(QuantGemm, Avx2AndVnniGiveTheSameBits) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI/BF16 on this CPU";
  uint32_t seed = 900;
  for (WeightType type : {WeightType::kQ8_0, WeightType::kQ4_K, WeightType::kQ5_K,
                          WeightType::kIQ4_XS, WeightType::kQ6_K, WeightType::kQ3_K}) {
    for (const Shape& s : shapes_for(type)) {
      ++seed;
      const auto bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
      const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
      std::vector<float> y[2];
      const cpu::Isa isas[2] = {cpu::Isa::kAvx2, cpu::Isa::kAvx512Bf16};
      for (int i = 0; i < 2; ++i) {
        testing::IsaScope scope(isas[i]);
        const PackedLinear linear =
            PackedLinear::pack(bytes.data(), type, s.n_out, s.n_in, MatmulPrecision::kAuto);
        y[i].resize(static_cast<size_t>(s.m * s.n_out));
        AlignedBuffer scratch(linear.scratch_bytes(s.m));
        linear.forward(y[i].data(), x.data(), s.m, scratch.data());
      }
      EXPECT_EQ(0, std::memcmp(y[0].data(), y[1].data(), y[0].size() * sizeof(float)))
          << weight_type_info(type).name << " m=" << s.m << " n_out=" << s.n_out
          << " n_in=" << s.n_in;
    }
  }
}

TEST(QuantGemm, Q8_0Bf16SlabsMatchBf16Reference) {
  // oneDNN's bf16 matmul is limited to the selected ISA (VELLUM_ISA may lower it).
  if (cpu::selected_isa() < cpu::Isa::kAvx512Bf16) {
    GTEST_SKIP() << "AVX512-BF16 not selected (" << cpu::isa_name(cpu::selected_isa()) << ")";
  }
  detail::OnednnPlainBf16Matmul onednn;
  uint32_t seed = 100;
  const WeightType type = WeightType::kQ8_0;
  for (const Shape& s : shapes_for(type)) {
    ++seed;
    const auto bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
    const detail::PackedWeights w = q8_0_panels(bytes, s.n_out, s.n_in);
    const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
    // Reference: bf16-rounded activations times bf16-rounded dequantized weights.
    std::vector<float> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = bf16_to_float(float_to_bf16(x[i]));
    std::vector<float> wf(static_cast<size_t>(s.n_out * s.n_in));
    const size_t row_bytes = weight_row_bytes(type, s.n_in);
    for (int64_t j = 0; j < s.n_out; ++j) {
      ref::dequantize_row(wf.data() + j * s.n_in, bytes.data() + j * row_bytes, type, s.n_in);
    }
    for (float& v : wf) v = bf16_to_float(float_to_bf16(v));
    std::vector<float> expected(static_cast<size_t>(s.m * s.n_out));
    ref::matmul(expected.data(), xb.data(), s.m, wf.data(), WeightType::kF32, s.n_out, s.n_in);
    std::vector<float> y(expected.size());
    AlignedBuffer scratch(avx512::gemm_q8_0_bf16_scratch_bytes(s.m, s.n_in, s.n_out));
    avx512::gemm_q8_0_bf16(y.data(), x.data(), s.m, w, onednn, scratch.data());
    const double err = testing::nmse(y.data(), expected.data(), expected.size());
    // Rare double roundings (fused multiply-add before the bf16 rounding) move a weight by one
    // bf16 ulp; anything structural is orders of magnitude above this.
    EXPECT_LT(err, 1e-7) << "m=" << s.m << " n_out=" << s.n_out << " n_in=" << s.n_in;
  }
}

}  // namespace
}  // namespace vellum::kernels
