#include <gtest/gtest.h>

#include "cpu/cpu_info.h"
#include "cpu/isa.h"
#include "vellum/status.h"

namespace vellum::cpu {
namespace {

TEST(CpuInfo, FeatureImplicationsHold) {
  const CpuInfo& info = cpu_info();
  // The OS-state checks make every AVX-512 flag depend on AVX-512 state, so a subset implies F.
  if (info.avx512bw || info.avx512vl || info.avx512dq || info.avx512_bf16 || info.avx512_vnni) {
    EXPECT_TRUE(info.avx512f);
  }
  if (info.amx_bf16 || info.amx_int8) {
    EXPECT_TRUE(info.amx_tile);
  }
  EXPECT_FALSE(info.amx_tile && info.amx_permission_denied);
  EXPECT_GE(info.num_logical_cpus, 1);
  EXPECT_GE(info.num_physical_cores, 1);
  EXPECT_LE(info.num_physical_cores, info.num_logical_cpus);
  EXPECT_EQ(default_num_threads(), info.num_physical_cores);
}

TEST(CpuInfo, BestIsaAgreesWithFlags) {
  const CpuInfo& info = cpu_info();
  const Isa best = detect_best_isa();
  EXPECT_EQ(best >= Isa::kAvx2, info.avx2 && info.fma && info.f16c);
  if (best >= Isa::kAvx512) {
    EXPECT_TRUE(info.avx512f && info.avx512bw && info.avx512vl && info.avx512dq);
  }
  if (best >= Isa::kAvx512Bf16) {
    EXPECT_TRUE(info.avx512_bf16 && info.avx512_vnni);
  }
  EXPECT_EQ(best == Isa::kAmx, info.amx_tile && info.amx_bf16 && info.amx_int8 && best >= Isa::kAvx512Bf16);
  const auto isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_EQ(isas.back(), best);
}

TEST(Isa, NamesRoundTrip) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    EXPECT_EQ(parse_isa(isa_name(isa)), isa);
  }
  EXPECT_FALSE(parse_isa("AVX2").has_value());
  EXPECT_FALSE(parse_isa("").has_value());
  EXPECT_FALSE(parse_isa("avx512bf16").has_value());
}

TEST(Isa, OverrideLowersAndRefusesAboveBest) {
  const Isa before = selected_isa();
  set_isa_override(Isa::kScalar);
  EXPECT_EQ(selected_isa(), Isa::kScalar);
  set_isa_override(detect_best_isa());
  EXPECT_EQ(selected_isa(), detect_best_isa());
  if (detect_best_isa() < Isa::kAmx) {
    EXPECT_THROW(set_isa_override(Isa::kAmx), Error);
  }
  set_isa_override(before);
}

}  // namespace
}  // namespace vellum::cpu
