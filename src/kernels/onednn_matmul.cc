#include "kernels/onednn_matmul.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>

#include "common/check.h"
#include "common/logging.h"
#include "cpu/isa.h"

namespace vellum::kernels::detail {
namespace {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

memory::data_type to_dnnl(OnednnMatmul::DataType type) {
  return type == OnednnMatmul::DataType::kF32 ? memory::data_type::f32 : memory::data_type::bf16;
}

// Buckets keep the cache small (8 per doubling of m); this only bounds it against absurd sizes.
constexpr size_t kMaxCachedShapes = 256;

size_t align64(size_t bytes) { return (bytes + 63) / 64 * 64; }

// Copies rows [0, m) of y_padded (row stride n) into y (row stride ldy).
void copy_rows_out(float* y, int64_t ldy, const float* y_padded, int64_t m, int64_t n) {
#pragma omp parallel for schedule(static) if (m * n >= (int64_t{1} << 16))
  for (int64_t r = 0; r < m; ++r) {
    std::memcpy(y + r * ldy, y_padded + r * n, static_cast<size_t>(n) * sizeof(float));
  }
}

}  // namespace

int64_t onednn_rows(int64_t m) {
  const int64_t step =
      std::max<int64_t>(4, static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(m))) / 8);
  return (m + step - 1) / step * step;
}

void limit_onednn_isa_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    dnnl::cpu_isa max_isa = dnnl::cpu_isa::all;
    switch (cpu::selected_isa()) {
      case cpu::Isa::kScalar:
      case cpu::Isa::kAvx2: max_isa = dnnl::cpu_isa::avx2; break;
      case cpu::Isa::kAvx512: max_isa = dnnl::cpu_isa::avx512_core; break;
      case cpu::Isa::kAvx512Bf16: max_isa = dnnl::cpu_isa::avx512_core_bf16; break;
      case cpu::Isa::kAmx: max_isa = dnnl::cpu_isa::all; break;
    }
    try {
      dnnl::set_max_cpu_isa(max_isa);
    } catch (const dnnl::error&) {
      // Already fixed by an earlier oneDNN call in this process; keep oneDNN's choice.
    }
  });
}

struct OnednnMatmul::State {
  DataType type;
  int64_t n_out;
  int64_t n_in;
  memory::desc weights_md;  // the blocked layout chosen by oneDNN
  memory weights;           // owns the reordered weights
  mutable std::mutex mutex;
  mutable std::map<int64_t, dnnl::matmul> primitives;  // keyed by m

  memory::desc src_md(int64_t m) const { return memory::desc({m, n_in}, to_dnnl(type), tag::ab); }
  memory::desc dst_md(int64_t m) const {
    return memory::desc({m, n_out}, memory::data_type::f32, tag::ab);
  }
  dnnl::matmul::primitive_desc make_pd(int64_t m, const memory::desc& wei_md) const {
    dnnl::matmul::desc desc(src_md(m), wei_md, dst_md(m));
    return dnnl::matmul::primitive_desc(desc, cpu_engine());
  }
};

OnednnMatmul::OnednnMatmul(const void* w, DataType type, int64_t n_out, int64_t n_in)
    : state_(std::make_unique<State>()) {
  limit_onednn_isa_once();
  State& s = *state_;
  s.type = type;
  s.n_out = n_out;
  s.n_in = n_in;
  // W is (n_out, n_in) row-major = the (K=n_in, N=n_out) weights of oneDNN in "ba" order.
  const memory::desc plain_md({n_in, n_out}, to_dnnl(type), tag::ba);
  const memory::desc any_md({n_in, n_out}, to_dnnl(type), tag::any);
  // A representative prefill size picks the layout; every later m uses the same one.
  constexpr int64_t kLayoutM = 256;
  const auto pd = s.make_pd(kLayoutM, any_md);
  s.weights_md = pd.weights_desc();
  s.weights = memory(s.weights_md, cpu_engine());
  memory plain(plain_md, cpu_engine(), const_cast<void*>(w));
  dnnl::stream stream(cpu_engine());
  dnnl::reorder(plain, s.weights).execute(stream, plain, s.weights);
  stream.wait();
  VELLUM_LOG_DEBUG("oneDNN matmul {}x{} {}: implementation {}", n_out, n_in,
                   type == DataType::kF32 ? "f32" : "bf16", pd.impl_info_str());
}

OnednnMatmul::~OnednnMatmul() = default;

size_t OnednnMatmul::weight_bytes() const { return state_->weights_md.get_size(); }

size_t OnednnMatmul::num_primitives() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->primitives.size();
}

// Sized for padding whether or not m needs it, so that scratch_bytes grows with m: callers (MoE
// experts, fused parts) size scratch once for the largest m and run smaller ones in it.
size_t OnednnMatmul::scratch_bytes(int64_t m) const {
  const int64_t rows = onednn_rows(m);
  const size_t elem = state_->type == DataType::kF32 ? sizeof(float) : sizeof(uint16_t);
  return align64(static_cast<size_t>(rows * state_->n_in) * elem) +
         static_cast<size_t>(rows * state_->n_out) * sizeof(float);
}

void OnednnMatmul::run(float* y, const void* x, int64_t m, void* scratch) const {
  State& s = *state_;
  const int64_t rows = onednn_rows(m);
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.primitives.find(rows);
    if (it == s.primitives.end()) {
      if (s.primitives.size() >= kMaxCachedShapes) s.primitives.clear();
      it = s.primitives.emplace(rows, dnnl::matmul(s.make_pd(rows, s.weights_md))).first;
    }
    prim = it->second;
  }
  // Padded rows: x's m rows then zeros in scratch, the product into scratch, m rows copied out.
  const void* src_data = x;
  float* dst_data = y;
  if (rows != m) {
    const size_t elem = s.type == DataType::kF32 ? sizeof(float) : sizeof(uint16_t);
    const size_t row_bytes = static_cast<size_t>(s.n_in) * elem;
    auto* x_padded = static_cast<uint8_t*>(scratch);
    std::memcpy(x_padded, x, static_cast<size_t>(m) * row_bytes);
    std::memset(x_padded + static_cast<size_t>(m) * row_bytes, 0,
                static_cast<size_t>(rows - m) * row_bytes);
    src_data = x_padded;
    dst_data = reinterpret_cast<float*>(x_padded + align64(static_cast<size_t>(rows) * row_bytes));
  }
  memory src(s.src_md(rows), cpu_engine(), const_cast<void*>(src_data));
  memory dst(s.dst_md(rows), cpu_engine(), dst_data);
  dnnl::stream stream(cpu_engine());
  prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst}});
  stream.wait();
  if (rows != m) copy_rows_out(y, s.n_out, dst_data, m, s.n_out);
}

struct OnednnPlainBf16Matmul::State {
  mutable std::mutex mutex;
  // Keyed by (onednn_rows(m), n, k, output row stride): the output goes to y directly (stride
  // ldy) when m is a bucket, else through scratch with stride n.
  mutable std::map<std::array<int64_t, 4>, dnnl::matmul> primitives;
};

OnednnPlainBf16Matmul::OnednnPlainBf16Matmul() : state_(std::make_unique<State>()) {
  limit_onednn_isa_once();
}
OnednnPlainBf16Matmul::~OnednnPlainBf16Matmul() = default;

size_t OnednnPlainBf16Matmul::scratch_bytes(int64_t m, int64_t n) {
  return static_cast<size_t>(onednn_rows(m) * n) * sizeof(float);  // grows with m, as above
}

size_t OnednnPlainBf16Matmul::num_primitives() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->primitives.size();
}

void OnednnPlainBf16Matmul::run(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w,
                                int64_t m, int64_t n, int64_t k, void* scratch) const {
  const int64_t rows = onednn_rows(m);
  // The primitive's output stride: ldy into y itself, or n into the padded scratch.
  float* dst_data = rows == m ? y : static_cast<float*>(scratch);
  const int64_t dst_ld = rows == m ? ldy : n;
  const memory::desc src_md({rows, k}, memory::data_type::bf16, tag::ab);
  const memory::desc wei_md({k, n}, memory::data_type::bf16, tag::ba);
  const memory::desc dst_md({rows, n}, memory::data_type::f32, memory::dims{dst_ld, 1});
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const std::array<int64_t, 4> key{rows, n, k, dst_ld};
    auto it = state_->primitives.find(key);
    if (it == state_->primitives.end()) {
      if (state_->primitives.size() >= kMaxCachedShapes) state_->primitives.clear();
      dnnl::matmul::desc desc(src_md, wei_md, dst_md);
      it = state_->primitives
               .emplace(key, dnnl::matmul(dnnl::matmul::primitive_desc(desc, cpu_engine())))
               .first;
    }
    prim = it->second;
  }
  memory src(src_md, cpu_engine(), const_cast<uint16_t*>(x));
  memory wei(wei_md, cpu_engine(), const_cast<uint16_t*>(w));
  memory dst(dst_md, cpu_engine(), dst_data);
  dnnl::stream stream(cpu_engine());
  prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  stream.wait();
  if (rows != m) copy_rows_out(y, ldy, dst_data, m, n);
}

}  // namespace vellum::kernels::detail
