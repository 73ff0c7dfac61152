// PackedLinear: packing (once, at load) and the per-ISA choice of GEMM backend.
#include "kernels/matmul.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <vector>

#include "common/check.h"
#include "common/half.h"
#include "common/logging.h"
#include "cpu/isa.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/onednn_matmul.h"
#include "kernels/packed_weights.h"
#include "kernels/quant_types.h"
#include "kernels/ref/ref_kernels.h"

namespace vellum::kernels {
namespace {

using detail::PackedWeights;

// Up to this many rows the hand-written AVX-512 kernels (bandwidth-bound, several rows per
// weight load) beat oneDNN; above it the product is compute-bound and goes to oneDNN (AMX).
// Measured with bench/kernels (BM_LinearDecode vs BM_OnednnBf16, 8192x2048 bf16, 2 threads):
// oneDNN is ahead from m = 8 on (3.4 vs 4.3 ms), roughly even at m = 4. vdpbf16ps runs at a
// quarter of the FMA rate on these machines, so the small-m bf16 kernel is compute-bound early.
constexpr int64_t kMaxSmallMBf16 = 5;
constexpr int64_t kMaxSmallMF32 = 8;
// Q8_0: above this, dequantizing weight slabs to bf16 for oneDNN beats the VNNI kernel
// (measured: m = 33 takes 7.9 ms that way vs 10.4 ms for m = 32 with VNNI; m = 16, 5.4 ms VNNI).
constexpr int64_t kMaxSmallMQ8 = 16;

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

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
  PackedWeights p;
  p.type = WeightType::kQ8_0;
  p.n_out = n_out;
  p.n_in = n_in;
  p.k_pad = round_up(n_in, detail::kQ8PadK);
  p.row_bytes = static_cast<size_t>(p.k_pad);
  p.data = AlignedBuffer(static_cast<size_t>(n_out * p.k_pad));
  p.scales = AlignedBuffer(static_cast<size_t>(n_out * (p.k_pad / 32)) * sizeof(uint16_t));
  const auto* blocks = static_cast<const BlockQ8_0*>(w);
  const int64_t num_blocks = n_in / kQ8_0BlockSize;
  for (int64_t j = 0; j < n_out; ++j) {
    auto* qs = p.data.as<uint8_t>() + j * p.k_pad;
    auto* scales = p.scales.as<uint16_t>() + j * (p.k_pad / 32);
    std::memset(qs, 128, static_cast<size_t>(p.k_pad));
    std::memset(scales, 0, static_cast<size_t>(p.k_pad / 32) * sizeof(uint16_t));
    for (int64_t b = 0; b < num_blocks; ++b) {
      const BlockQ8_0& block = blocks[j * num_blocks + b];
      scales[b] = block.d;
      for (int i = 0; i < kQ8_0BlockSize; ++i) {
        qs[b * kQ8_0BlockSize + i] = static_cast<uint8_t>(static_cast<int>(block.qs[i]) + 128);
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
    } else {
      uint16_t* dst = p.data.as<uint16_t>() + j * n_in;
      for (int64_t i = 0; i < n_in; ++i) dst[i] = float_to_bf16(row[i]);
    }
  }
  return p;
}

}  // namespace

struct PackedLinear::Impl {
  PackedWeights weights;
  // Large-m path for f32 and bf16 weights (a second, blocked copy of the weights).
  std::unique_ptr<detail::OnednnMatmul> onednn;
  // Large-m path for Q8_0 (bf16 slabs, no second copy of the weights).
  std::unique_ptr<detail::OnednnPlainBf16Matmul> onednn_q8;
};

PackedLinear::PackedLinear() = default;
PackedLinear::~PackedLinear() = default;
PackedLinear::PackedLinear(PackedLinear&&) noexcept = default;
PackedLinear& PackedLinear::operator=(PackedLinear&&) noexcept = default;

PackedLinear PackedLinear::pack(const void* w, WeightType type, int64_t n_out, int64_t n_in,
                                MatmulPrecision precision) {
  VELLUM_CHECK(w != nullptr && n_out > 0 && n_in > 0, ErrorCode::kInvalidArgument,
               "PackedLinear::pack needs weights and positive dims, got n_out={} n_in={}", n_out,
               n_in);
  VELLUM_CHECK(n_in % weight_block_elems(type) == 0, ErrorCode::kInvalidModel,
               "{} weight rows must be a multiple of {} elements, got n_in={}",
               weight_type_info(type).name, weight_block_elems(type), n_in);
  WeightType target = type;
  if (precision == MatmulPrecision::kF32) {
    target = WeightType::kF32;
  } else if (precision == MatmulPrecision::kBF16 &&
             (type == WeightType::kF32 || type == WeightType::kF16)) {
    target = WeightType::kBF16;
  }

  PackedLinear out;
  out.impl_ = std::make_unique<Impl>();
  Impl& impl = *out.impl_;
  if (target == type && type == WeightType::kQ8_0) {
    impl.weights = pack_q8_0(w, n_out, n_in);
  } else if (target == type) {
    impl.weights = pack_rows(w, type, n_out, n_in);
  } else {
    impl.weights = pack_converted(w, type, n_out, n_in, target);
  }
  const cpu::Isa isa = cpu::selected_isa();
  if (target == WeightType::kQ8_0 && isa >= cpu::Isa::kAvx512Bf16) {
    try {
      impl.onednn_q8 = std::make_unique<detail::OnednnPlainBf16Matmul>();
    } catch (const std::exception& e) {
      VELLUM_LOG_WARN("oneDNN unavailable for Q8_0 prefill ({}); using the VNNI kernel", e.what());
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

size_t PackedLinear::scratch_bytes(int64_t m) const {
  const PackedWeights& w = impl_->weights;
  switch (w.type) {
    case WeightType::kBF16: return avx512::gemm_bf16_scratch_bytes(m, w.n_in);
    case WeightType::kQ8_0:
      return m > kMaxSmallMQ8 ? std::max(avx512::gemm_q8_0_scratch_bytes(m, w.k_pad),
                                         avx512::gemm_q8_0_bf16_scratch_bytes(m, w.n_in, w.n_out))
                              : avx512::gemm_q8_0_scratch_bytes(m, w.k_pad);
    default: return 0;
  }
}

void PackedLinear::forward(float* y, const float* x, int64_t m, void* scratch) const {
  const PackedWeights& w = impl_->weights;
  if (m <= 0) return;
  const cpu::Isa isa = cpu::selected_isa();
  // AVX2 dense (f32/f16/bf16) weights; the quantized types are dispatched below.
  if (isa == cpu::Isa::kAvx2) {
    switch (w.type) {
      case WeightType::kF32: avx2::gemm_f32(y, x, m, w); return;
      case WeightType::kF16: avx2::gemm_f16(y, x, m, w); return;
      case WeightType::kBF16: avx2::gemm_bf16(y, x, m, w); return;
      default: break;
    }
  }
  if (isa < cpu::Isa::kAvx512) {
    detail::gemm_scalar(y, x, m, w);
    return;
  }
  const bool has_bf16 = isa >= cpu::Isa::kAvx512Bf16;
  switch (w.type) {
    case WeightType::kF32:
      if (m > kMaxSmallMF32 && impl_->onednn) {
        impl_->onednn->run(y, x, m);
      } else {
        avx512::gemm_f32(y, x, m, w);
      }
      return;
    case WeightType::kF16:
      avx512::gemm_f16(y, x, m, w);
      return;
    case WeightType::kBF16:
      if (!has_bf16) {
        avx512::gemm_bf16_fma(y, x, m, w);
      } else if (m > kMaxSmallMBf16 && impl_->onednn) {
        auto* x_bf16 = static_cast<uint16_t*>(scratch);  // (m, n_in)
        avx512::convert_f32_to_bf16(x_bf16, x, m * w.n_in);
        impl_->onednn->run(y, x_bf16, m);
      } else {
        avx512::gemm_bf16_dot(y, x, m, w, scratch);
      }
      return;
    case WeightType::kQ8_0:
      if (has_bf16 && m > kMaxSmallMQ8 && impl_->onednn_q8) {
        avx512::gemm_q8_0_bf16(y, x, m, w, *impl_->onednn_q8, scratch);
      } else if (has_bf16) {
        avx512::gemm_q8_0_vnni(y, x, m, w, scratch);
      } else {
        detail::gemm_scalar(y, x, m, w);
      }
      return;
    default:
      detail::gemm_scalar(y, x, m, w);
      return;
  }
}

int64_t PackedLinear::n_out() const { return impl_->weights.n_out; }
int64_t PackedLinear::n_in() const { return impl_->weights.n_in; }
WeightType PackedLinear::packed_type() const { return impl_->weights.type; }

size_t PackedLinear::weight_bytes() const {
  const PackedWeights& w = impl_->weights;
  return w.data.size() + w.scales.size();
}

}  // namespace vellum::kernels
