// The run-time ISA choice as the process sees it. ctest runs this binary a second time with
// VELLUM_ISA=avx2 (tests/kernels/CMakeLists.txt); there selected_isa() must honour it and the
// kernels must still be right without any override.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/aligned_buffer.h"
#include "cpu/isa.h"
#include "kernel_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ref/ref_kernels.h"
#include "vellum/status.h"

namespace vellum::kernels {
namespace {

TEST(IsaEnv, SelectedIsaFollowsEnvironment) {
  const char* env = std::getenv("VELLUM_ISA");
  if (env == nullptr || *env == '\0') {
    EXPECT_EQ(cpu::selected_isa(), cpu::detect_best_isa());
    return;
  }
  const auto requested = cpu::parse_isa(env);
  if (!requested.has_value() || *requested > cpu::detect_best_isa()) {
    // Unknown names and levels above the machine's are refused with the valid names listed.
    try {
      (void)cpu::selected_isa();
      ADD_FAILURE() << "VELLUM_ISA=" << env << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("avx512_bf16"), std::string::npos) << e.what();
    }
    return;
  }
  EXPECT_EQ(cpu::selected_isa(), *requested) << "VELLUM_ISA=" << env;
}

TEST(IsaEnv, KernelsCorrectUnderSelectedIsa) {
  // A bf16 product and RMSNorm with whatever ISA the process selected.
  const char* env = std::getenv("VELLUM_ISA");
  if (env != nullptr && *env != '\0') {
    const auto requested = cpu::parse_isa(env);
    if (!requested.has_value() || *requested > cpu::detect_best_isa()) {
      GTEST_SKIP() << "VELLUM_ISA=" << env << " is refused (checked by SelectedIsaFollowsEnvironment)";
    }
  }
  const int64_t m = 5, n_out = 37, n_in = 96;
  const auto x = testing::random_floats(m * n_in, 11);
  const auto values = testing::random_floats(n_out * n_in, 12);
  std::vector<uint16_t> w(values.size());
  for (size_t i = 0; i < values.size(); ++i) w[i] = float_to_bf16(values[i]);
  std::vector<float> expected(m * n_out), y(m * n_out);
  ref::matmul(expected.data(), x.data(), m, w.data(), WeightType::kBF16, n_out, n_in);
  const auto linear = PackedLinear::pack(w.data(), WeightType::kBF16, n_out, n_in, MatmulPrecision::kAuto);
  AlignedBuffer scratch(linear.scratch_bytes(m));
  linear.forward(y.data(), x.data(), m, scratch.data());
  EXPECT_LT(testing::nmse(y.data(), expected.data(), y.size()), 1e-4)
      << "isa=" << cpu::isa_name(cpu::selected_isa());

  std::vector<float> norm(n_in), norm_expected(n_in);
  rms_norm(norm.data(), x.data(), values.data(), 1, n_in, 1e-6f);
  ref::rms_norm(norm_expected.data(), x.data(), values.data(), 1, n_in, 1e-6f);
  EXPECT_LT(testing::nmse(norm.data(), norm_expected.data(), n_in), 1e-10);

  // f32 weights (the AVX2 and AVX-512 FMA kernels), GELU, NEOX RoPE.
  const auto linear_f32 = PackedLinear::pack(values.data(), WeightType::kF32, n_out, n_in, MatmulPrecision::kAuto);
  ref::matmul(expected.data(), x.data(), m, values.data(), WeightType::kF32, n_out, n_in);
  AlignedBuffer scratch_f32(linear_f32.scratch_bytes(m));
  linear_f32.forward(y.data(), x.data(), m, scratch_f32.data());
  EXPECT_LT(testing::nmse(y.data(), expected.data(), y.size()), 1e-9);
  std::vector<float> act(n_in), act_expected(n_in);
  gelu_tanh_mul(act.data(), x.data(), values.data(), n_in);
  ref::gelu_tanh_mul(act_expected.data(), x.data(), values.data(), n_in);
  EXPECT_LT(testing::nmse(act.data(), act_expected.data(), n_in), 1e-9);
  const std::vector<int32_t> positions = {7, 300};
  const std::vector<float> inv_freq = testing::random_floats(24, 13, 0.0f, 1.0f);
  std::vector<float> rot(x.begin(), x.begin() + 2 * n_in), rot_expected = rot;
  rope_neox_inplace(rot.data(), n_in, 2, 2, 48, 48, positions.data(), inv_freq.data());
  ref::rope_neox_inplace(rot_expected.data(), n_in, 2, 2, 48, 48, positions.data(), inv_freq.data());
  EXPECT_LT(testing::nmse(rot.data(), rot_expected.data(), rot.size()), 1e-12);
}

}  // namespace
}  // namespace vellum::kernels
