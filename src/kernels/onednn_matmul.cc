#include "kernels/onednn_matmul.h"

#include <array>
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

// Primitives are kept per m; a serving loop sees a bounded set of prefill chunk sizes, but drop
// everything past this many so that odd sizes cannot grow the cache without bound.
constexpr size_t kMaxCachedShapes = 256;

}  // namespace

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

void OnednnMatmul::run(float* y, const void* x, int64_t m) const {
  State& s = *state_;
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    auto it = s.primitives.find(m);
    if (it == s.primitives.end()) {
      if (s.primitives.size() >= kMaxCachedShapes) s.primitives.clear();
      it = s.primitives.emplace(m, dnnl::matmul(s.make_pd(m, s.weights_md))).first;
    }
    prim = it->second;
  }
  memory src(s.src_md(m), cpu_engine(), const_cast<void*>(x));
  memory dst(s.dst_md(m), cpu_engine(), y);
  dnnl::stream stream(cpu_engine());
  prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, s.weights}, {DNNL_ARG_DST, dst}});
  stream.wait();
}

struct OnednnPlainBf16Matmul::State {
  mutable std::mutex mutex;
  mutable std::map<std::array<int64_t, 4>, dnnl::matmul> primitives;  // keyed by (m, n, k, ldy)
};

OnednnPlainBf16Matmul::OnednnPlainBf16Matmul() : state_(std::make_unique<State>()) {
  limit_onednn_isa_once();
}
OnednnPlainBf16Matmul::~OnednnPlainBf16Matmul() = default;

void OnednnPlainBf16Matmul::run(float* y, int64_t ldy, const uint16_t* x, const uint16_t* w,
                                int64_t m, int64_t n, int64_t k) const {
  const memory::desc src_md({m, k}, memory::data_type::bf16, tag::ab);
  const memory::desc wei_md({k, n}, memory::data_type::bf16, tag::ba);
  const memory::desc dst_md({m, n}, memory::data_type::f32, memory::dims{ldy, 1});
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    const std::array<int64_t, 4> key{m, n, k, ldy};
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
  memory dst(dst_md, cpu_engine(), y);
  dnnl::stream stream(cpu_engine());
  prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
  stream.wait();
}

}  // namespace vellum::kernels::detail
