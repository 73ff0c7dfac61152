// The quantized GEMM kernels against exact references, tight enough to catch a wrong bit in the
// unpacking of any type:
// - the VNNI kernel quantizes activations per 32 values (d = amax / 127, round to nearest even),
//   so it must equal Σ w · x̂ with x̂ those quantized activations, up to float summation order;
// - the bf16 slab path rounds activations and dequantized weights to bf16 and multiplies with
//   f32 accumulation.
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

// The types the row kernels (VNNI, bf16 slabs) read in their GGUF layout; the others are packed
// into panels (packed_weights.h) and reach the tests through PackedLinear.
constexpr WeightType kQuantTypes[] = {WeightType::kQ2_K, WeightType::kQ3_K, WeightType::kIQ4_XS};
constexpr WeightType kPanelTypes[] = {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1,
                                      WeightType::kIQ4_NL, WeightType::kQ5_0, WeightType::kQ5_1,
                                      WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};

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

detail::PackedWeights packed_rows(const std::vector<uint8_t>& bytes, WeightType type,
                                  int64_t n_out, int64_t n_in) {
  detail::PackedWeights w;
  w.type = type;
  w.n_out = n_out;
  w.n_in = n_in;
  w.row_bytes = weight_row_bytes(type, n_in);
  w.data = AlignedBuffer(bytes.size());
  std::memcpy(w.data.data(), bytes.data(), bytes.size());
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
  return shapes;
}

bool has_vnni() { return cpu::detect_best_isa() >= cpu::Isa::kAvx512Bf16; }

TEST(QuantGemm, VnniEqualsQuantizedActivationReference) {
  if (!has_vnni()) GTEST_SKIP() << "no AVX512-VNNI/BF16 on this CPU";
  uint32_t seed = 1;
  for (WeightType type : kQuantTypes) {
    for (const Shape& s : shapes_for(type)) {
      ++seed;
      const auto bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
      const detail::PackedWeights w = packed_rows(bytes, type, s.n_out, s.n_in);
      const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
      const auto xhat = quantize_dequantize(x, s.m, s.n_in);
      std::vector<float> expected(static_cast<size_t>(s.m * s.n_out));
      ref::matmul(expected.data(), xhat.data(), s.m, bytes.data(), type, s.n_out, s.n_in);
      std::vector<float> y(expected.size());
      AlignedBuffer scratch(avx512::gemm_quant_scratch_bytes(s.m, s.n_in));
      avx512::gemm_quant_vnni(y.data(), x.data(), s.m, w, scratch.data());
      const double err = testing::nmse(y.data(), expected.data(), expected.size());
      const size_t worst = testing::worst_index(y.data(), expected.data(), expected.size());
      EXPECT_LT(err, 1e-10) << weight_type_info(type).name << " m=" << s.m << " n_out=" << s.n_out
                            << " n_in=" << s.n_in << " worst " << y[worst] << " vs "
                            << expected[worst];
    }
  }
}

// The AVX2 kernels: every quantized type, the panel types included (through PackedLinear::pack
// with the ISA lowered to AVX2).
TEST(QuantGemm, Avx2EqualsQuantizedActivationReference) {
  if (cpu::detect_best_isa() < cpu::Isa::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU";
  uint32_t seed = 500;
  std::vector<WeightType> types(std::begin(kQuantTypes), std::end(kQuantTypes));
  types.insert(types.end(), std::begin(kPanelTypes), std::end(kPanelTypes));
  for (WeightType type : types) {
    for (const Shape& s : shapes_for(type)) {
      ++seed;
      std::vector<uint8_t> bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
      const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
      // Every type quantizes the activations per 32 values (the K-type panels included).
      const auto xhat = quantize_dequantize(x, s.m, s.n_in, 32);
      std::vector<float> expected(static_cast<size_t>(s.m * s.n_out));
      ref::matmul(expected.data(), xhat.data(), s.m, bytes.data(), type, s.n_out, s.n_in);
      testing::IsaScope scope(cpu::Isa::kAvx2);
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

TEST(QuantGemm, Bf16SlabsMatchBf16Reference) {
  // oneDNN's bf16 matmul is limited to the selected ISA (VELLUM_ISA may lower it).
  if (cpu::selected_isa() < cpu::Isa::kAvx512Bf16) {
    GTEST_SKIP() << "AVX512-BF16 not selected (" << cpu::isa_name(cpu::selected_isa()) << ")";
  }
  detail::OnednnPlainBf16Matmul onednn;
  uint32_t seed = 100;
  for (WeightType type : kQuantTypes) {
    for (const Shape& s : shapes_for(type)) {
      ++seed;
      const auto bytes = random_block_bytes(type, s.n_out * s.n_in, seed);
      const detail::PackedWeights w = packed_rows(bytes, type, s.n_out, s.n_in);
      const auto x = random_floats(s.m * s.n_in, seed + 3, -2.0f, 2.0f);
      // Reference: bf16-rounded activations times bf16-rounded dequantized weights.
      std::vector<float> xb(x.size());
      for (size_t i = 0; i < x.size(); ++i) xb[i] = bf16_to_float(float_to_bf16(x[i]));
      std::vector<float> wf(static_cast<size_t>(s.n_out * s.n_in));
      for (int64_t j = 0; j < s.n_out; ++j) {
        ref::dequantize_row(wf.data() + j * s.n_in, bytes.data() + j * w.row_bytes, type, s.n_in);
      }
      for (float& v : wf) v = bf16_to_float(float_to_bf16(v));
      std::vector<float> expected(static_cast<size_t>(s.m * s.n_out));
      ref::matmul(expected.data(), xb.data(), s.m, wf.data(), WeightType::kF32, s.n_out, s.n_in);
      std::vector<float> y(expected.size());
      AlignedBuffer scratch(avx512::gemm_quant_bf16_scratch_bytes(s.m, s.n_in, s.n_out));
      avx512::gemm_quant_bf16(y.data(), x.data(), s.m, w, onednn, scratch.data());
      const double err = testing::nmse(y.data(), expected.data(), expected.size());
      // Rare double roundings (fused multiply-add before the bf16 rounding) move a weight by one
      // bf16 ulp; anything structural is orders of magnitude above this.
      EXPECT_LT(err, 1e-7) << weight_type_info(type).name << " m=" << s.m << " n_out=" << s.n_out
                           << " n_in=" << s.n_in;
    }
  }
}

}  // namespace
}  // namespace vellum::kernels
