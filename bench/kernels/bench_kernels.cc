// Kernel benchmarks. Decode products and paged attention are bandwidth-bound: each reports
// bytes_per_second of weight (or K/V) reads, to be compared with BM_ReadBandwidth from the same
// run. The library prints bytes_per_second in powers of 1024 ("28.5G/s" is 28.5 GiB/s = 30.6
// GB/s); the GBps counters here (the probe, BM_DecodeShare) are 10^9 bytes per second, and the
// share counters compare like with like. Rates use wall time (UseRealTime: the work runs on OpenMP threads, not only on the
// benchmark's thread). The data cycles over several copies whose total exceeds the last-level cache, so the
// numbers are DRAM, not L3, bandwidth.
//
//   ../shared/bench/own-autogroup.sh build/bench/kernels/kernels_bench --benchmark_repetitions=5
// VELLUM_ISA=avx2 (etc.) measures a lower ISA's kernels on the same machine.
#include <benchmark/benchmark.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <memory>
#include <random>
#include <vector>

#include "common/aligned_buffer.h"
#include "common/half.h"
#include "cpu/cpu_info.h"
#include "cpu/isa.h"
#include "kernels/bandwidth.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/onednn_matmul.h"
#include "kernels/quant_types.h"
#include "kernels/threads.h"

namespace vellum::kernels {
namespace {

constexpr size_t kStreamBytes = size_t{640} << 20;  // several times the 105 MiB L3 here

// Decode-sized product: W (n_out = 8192, n_in = 2048), e.g. an MLP up projection.
constexpr int64_t kNOut = 8192;
constexpr int64_t kNIn = 2048;

std::vector<uint8_t> random_weights(WeightType type, int64_t n_out, int64_t n_in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint8_t> bytes(weight_row_bytes(type, n_in) * n_out);
  if (type == WeightType::kQ8_0) {
    auto* blocks = reinterpret_cast<BlockQ8_0*>(bytes.data());
    for (size_t b = 0; b < bytes.size() / sizeof(BlockQ8_0); ++b) {
      blocks[b].d = float_to_fp16(0.01f);
      for (int8_t& q : blocks[b].qs) q = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
    }
  } else if (weight_type_info(type).quantized) {
    // Random codes and sub-scales, sane f16 super-scales at the block offsets GGML uses.
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    const WeightTypeInfo& info = weight_type_info(type);
    std::vector<size_t> offsets = {0};
    if (type == WeightType::kQ4_1 || type == WeightType::kQ5_1 || type == WeightType::kQ4_K ||
        type == WeightType::kQ5_K) {
      offsets = {0, 2};
    } else if (type == WeightType::kQ2_K) {
      offsets = {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    } else if (type == WeightType::kQ3_K) {
      offsets = {offsetof(BlockQ3_K, d)};
    } else if (type == WeightType::kQ6_K) {
      offsets = {offsetof(BlockQ6_K, d)};
    }
    const uint16_t d = float_to_fp16(0.01f);
    for (size_t b = 0; b < bytes.size() / info.block_bytes; ++b) {
      for (size_t o : offsets) std::memcpy(bytes.data() + b * info.block_bytes + o, &d, 2);
    }
  } else if (type == WeightType::kF32) {
    auto* f = reinterpret_cast<float*>(bytes.data());
    for (int64_t i = 0; i < n_out * n_in; ++i) f[i] = dist(rng);
  } else {
    auto* h = reinterpret_cast<uint16_t*>(bytes.data());
    for (int64_t i = 0; i < n_out * n_in; ++i) {
      h[i] = type == WeightType::kBF16 ? float_to_bf16(dist(rng)) : float_to_fp16(dist(rng));
    }
  }
  return bytes;
}

// Enough packed copies of one weight matrix that cycling through them streams from DRAM.
std::vector<PackedLinear> packed_copies(WeightType type, int64_t n_out, int64_t n_in) {
  const auto w = random_weights(type, n_out, n_in, 1);
  std::vector<PackedLinear> copies;
  size_t total = 0;
  while (total < kStreamBytes / 2) {
    copies.push_back(PackedLinear::pack(w.data(), type, n_out, n_in, MatmulPrecision::kAuto));
    total += copies.back().weight_bytes();
  }
  return copies;
}

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = omp_get_max_threads();
  double gbps = 0.0;
  for (auto _ : state) gbps = measure_read_bandwidth_gbps(kStreamBytes, threads);
  state.counters["GBps"] = gbps;
  state.counters["threads"] = threads;
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// The machine's arithmetic ceilings, to compare the compute-bound kernels with (prefill and
// batched GEMMs, attention from cache): each thread runs 12 independent chains of one
// instruction on registers (no memory), 12 x 2^22 instructions per thread per iteration.
// Counters: GOPS (a multiply-add counts 2, as GFLOPs in BM_LinearPrefill), G_instr_per_s (all
// threads) and threads. Skipped where the CPU lacks the instruction (the functions carry their
// own target attributes, so the binary runs anywhere).
enum class PeakOp { kF32FmaYmm, kF32FmaZmm, kBf16DotZmm, kInt8DotZmm };

constexpr int64_t kPeakSteps = int64_t{1} << 22;

// One function per instruction: `steps` rounds of 12 independent chains acc_i = OP(acc_i), kept
// in registers; the chains are xor-folded at the end so the compiler cannot drop them.
#define VELLUM_PEAK_FN(name, isa, Vec, init, op)                                       \
  __attribute__((target(isa))) float name(int64_t steps) {                             \
    Vec a0 = init(0), a1 = init(1), a2 = init(2), a3 = init(3), a4 = init(4), a5 = init(5); \
    Vec a6 = init(6), a7 = init(7), a8 = init(8), a9 = init(9), a10 = init(10), a11 = init(11); \
    for (int64_t n = 0; n < steps; ++n) {                                              \
      a0 = op(a0); a1 = op(a1); a2 = op(a2); a3 = op(a3); a4 = op(a4); a5 = op(a5);     \
      a6 = op(a6); a7 = op(a7); a8 = op(a8); a9 = op(a9); a10 = op(a10); a11 = op(a11); \
    }                                                                                  \
    const Vec all[12] = {a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11};            \
    uint32_t bits = 0;                                                                 \
    for (const Vec& v : all) {                                                         \
      uint32_t lane0;                                                                  \
      std::memcpy(&lane0, &v, sizeof(lane0));                                          \
      bits ^= lane0;                                                                   \
    }                                                                                  \
    return static_cast<float>(bits);                                                   \
  }

#define FMA_YMM_INIT(i) _mm256_set1_ps(0.001f * (i))
#define FMA_YMM_OP(a) _mm256_fmadd_ps(a, _mm256_set1_ps(0.5f), _mm256_set1_ps(0.25f))
VELLUM_PEAK_FN(peak_fma_ymm, "avx2,fma", __m256, FMA_YMM_INIT, FMA_YMM_OP)

#define ZMM_INIT(i) _mm512_set1_ps(0.001f * (i))
#define FMA_ZMM_OP(a) _mm512_fmadd_ps(a, _mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f))
VELLUM_PEAK_FN(peak_fma_zmm, "avx512f", __m512, ZMM_INIT, FMA_ZMM_OP)

// Small bf16 values (0x3c00 = 2^-7) so the sums stay finite.
#define BF16_DOT_OP(a) \
  _mm512_dpbf16_ps(a, reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3c003c00)), \
                   reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3c003c00)))
VELLUM_PEAK_FN(peak_bf16_dot_zmm, "avx512f,avx512bf16", __m512, ZMM_INIT, BF16_DOT_OP)

#define INT8_INIT(i) _mm512_set1_epi32(i)
#define INT8_DOT_OP(a) _mm512_dpbusd_epi32(a, _mm512_set1_epi8(1), _mm512_set1_epi8(1))
VELLUM_PEAK_FN(peak_int8_dot_zmm, "avx512f,avx512vnni", __m512i, INT8_INIT, INT8_DOT_OP)

#undef FMA_YMM_INIT
#undef FMA_YMM_OP
#undef ZMM_INIT
#undef FMA_ZMM_OP
#undef BF16_DOT_OP
#undef INT8_INIT
#undef INT8_DOT_OP
#undef VELLUM_PEAK_FN

void BM_PeakRate(benchmark::State& state, PeakOp op) {
  const cpu::CpuInfo& cpu = cpu::cpu_info();
  // Multiply-adds per instruction, and whether this CPU has it.
  struct Kind {
    double macs;
    bool supported;
    float (*run)(int64_t);
  };
  const Kind kind = [&]() -> Kind {
    switch (op) {
      case PeakOp::kF32FmaYmm: return {8, cpu.avx2 && cpu.fma, peak_fma_ymm};
      case PeakOp::kF32FmaZmm: return {16, cpu.avx512f, peak_fma_zmm};
      case PeakOp::kBf16DotZmm: return {32, cpu.avx512_bf16, peak_bf16_dot_zmm};
      case PeakOp::kInt8DotZmm: return {64, cpu.avx512_vnni, peak_int8_dot_zmm};
    }
    return {0, false, nullptr};
  }();
  if (!kind.supported) {
    state.SkipWithError("this CPU lacks the instruction");
    return;
  }
  const int threads = omp_get_max_threads();
  float sink = 0.0f;
  for (auto _ : state) {
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += kind.run(kPeakSteps);
  }
  benchmark::DoNotOptimize(sink);
  const double instructions = 12.0 * static_cast<double>(kPeakSteps) * threads;
  state.counters["G_instr_per_s"] =
      benchmark::Counter(instructions * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GOPS"] = benchmark::Counter(2.0 * kind.macs * instructions * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}
BENCHMARK_CAPTURE(BM_PeakRate, f32_fma_ymm, PeakOp::kF32FmaYmm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PeakRate, f32_fma_zmm, PeakOp::kF32FmaZmm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PeakRate, bf16_dot_zmm, PeakOp::kBf16DotZmm)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_PeakRate, int8_dot_zmm, PeakOp::kInt8DotZmm)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LinearDecode(benchmark::State& state, WeightType type) {
  const int64_t m = state.range(0);
  const auto copies = packed_copies(type, kNOut, kNIn);
  std::vector<float> x(m * kNIn, 0.5f), y(m * kNOut);
  AlignedBuffer scratch(copies[0].scratch_bytes(m));
  size_t next = 0;
  for (auto _ : state) {
    copies[next].forward(y.data(), x.data(), m, scratch.data());
    next = (next + 1) % copies.size();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(copies[0].weight_bytes()));
  state.counters["rows_per_s"] =
      benchmark::Counter(static_cast<double>(m), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_LinearDecode, bf16, WeightType::kBF16)->Arg(1)->Arg(4)->Arg(6)->Arg(8)->Arg(12)->Arg(16)->Arg(32)->Arg(64)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearDecode, q8_0, WeightType::kQ8_0)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(33)->Arg(64)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearDecode, f16, WeightType::kF16)->Arg(1)->Arg(4)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearDecode, f32, WeightType::kF32)->Arg(1)->Arg(4)
    ->Unit(benchmark::kMicrosecond)->UseRealTime();
#define VELLUM_QUANT_DECODE(name, type)                                              \
  BENCHMARK_CAPTURE(BM_LinearDecode, name, type)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Arg(32) \
      ->Unit(benchmark::kMicrosecond)->UseRealTime()
VELLUM_QUANT_DECODE(q4_0, WeightType::kQ4_0);
VELLUM_QUANT_DECODE(q4_1, WeightType::kQ4_1);
VELLUM_QUANT_DECODE(q5_0, WeightType::kQ5_0);
VELLUM_QUANT_DECODE(q5_1, WeightType::kQ5_1);
VELLUM_QUANT_DECODE(q2_k, WeightType::kQ2_K);
VELLUM_QUANT_DECODE(q3_k, WeightType::kQ3_K);
VELLUM_QUANT_DECODE(q4_k, WeightType::kQ4_K)->Arg(64)->Arg(128);
VELLUM_QUANT_DECODE(q5_k, WeightType::kQ5_K);
VELLUM_QUANT_DECODE(q6_k, WeightType::kQ6_K);
VELLUM_QUANT_DECODE(iq4_nl, WeightType::kIQ4_NL);
VELLUM_QUANT_DECODE(iq4_xs, WeightType::kIQ4_XS);
#undef VELLUM_QUANT_DECODE

// The decode product (m = 1) against the read bandwidth, measured in alternation so that the
// load of a shared machine hits both alike: each of kRounds rounds takes the best of 8 probe
// passes (measure_read_bandwidth_gbps) and the best of 3 passes of m = 1 products over the weight
// copies (as many bytes; in a thread team, as the model runs decode); "share" is the median over
// the rounds of their ratio, the figure issue "kernels at the machine's limits" asks to be
// >= 85 %.
void BM_DecodeShare(benchmark::State& state, WeightType type) {
  constexpr int kRounds = 7;
  const auto copies = packed_copies(type, kNOut, kNIn);
  size_t weight_bytes = 0;
  for (const PackedLinear& c : copies) weight_bytes += c.weight_bytes();
  std::vector<float> x(kNIn, 0.5f), y(kNOut);
  AlignedBuffer scratch(copies[0].scratch_bytes(1));
  const int threads = omp_get_max_threads();
  std::vector<double> shares, gemv_gbps, probe_gbps;
  for (auto _ : state) {
    for (int round = 0; round < kRounds; ++round) {
      probe_gbps.push_back(measure_read_bandwidth_gbps(weight_bytes, threads));
      double best = 1e30;
      threads::run_as_team([&] {  // as the model's decode steps run their products
        for (int pass = 0; pass < 3; ++pass) {
          const auto start = std::chrono::steady_clock::now();
          for (const PackedLinear& c : copies) c.forward(y.data(), x.data(), 1, scratch.data());
          benchmark::ClobberMemory();
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                              start).count());
        }
      });
      gemv_gbps.push_back(static_cast<double>(weight_bytes) / best / 1e9);
      shares.push_back(gemv_gbps.back() / probe_gbps.back());
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  state.counters["share"] = median(shares);
  state.counters["gemv_GBps"] = median(gemv_gbps);
  state.counters["probe_GBps"] = median(probe_gbps);
  state.counters["share_min"] = *std::min_element(shares.begin(), shares.end());
  state.counters["share_max"] = *std::max_element(shares.begin(), shares.end());
}
// The weight types of the decode benchmarks below: X(name, type).
#define VELLUM_DECODE_TYPES(X)                                                          \
  X(bf16, WeightType::kBF16) X(f16, WeightType::kF16) X(q8_0, WeightType::kQ8_0)        \
  X(q4_0, WeightType::kQ4_0) X(q4_1, WeightType::kQ4_1) X(q5_0, WeightType::kQ5_0)      \
  X(q5_1, WeightType::kQ5_1) X(q2_k, WeightType::kQ2_K) X(q3_k, WeightType::kQ3_K)      \
  X(q4_k, WeightType::kQ4_K) X(q5_k, WeightType::kQ5_K) X(q6_k, WeightType::kQ6_K)      \
  X(iq4_nl, WeightType::kIQ4_NL) X(iq4_xs, WeightType::kIQ4_XS)
#define VELLUM_DECODE_SHARE(name, type) \
  BENCHMARK_CAPTURE(BM_DecodeShare, name, type)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
VELLUM_DECODE_TYPES(VELLUM_DECODE_SHARE)
#undef VELLUM_DECODE_SHARE

// The decode product (m = 1) on 4096 x 2048 weights, small enough to stay in the last-level
// cache and large enough to amortise the fork/join of the product: the kernel's compute ceiling
// in bytes of weights per second. Decode from DRAM overlaps that work with the weight reads only
// in part, so the fewer instructions per weight byte, the closer BM_DecodeShare gets to 1.
// Args: rows (16: the fixed cost of one product; 4096: the ceiling), and 0 = each product opens
// an OpenMP region, 1 = products handed to a thread team as the model's forward pass runs them
// (threads::run_as_team); m, the activation rows (decode of m sequences; 1 unless given).
void BM_DecodeFromCache(benchmark::State& state, WeightType type) {
  const int64_t kCacheOut = state.range(0);
  const bool team = state.range(1) != 0;
  const int64_t m = state.range(2);
  const auto w = random_weights(type, kCacheOut, kNIn, 1);
  const PackedLinear linear = PackedLinear::pack(w.data(), type, kCacheOut, kNIn,
                                                 MatmulPrecision::kAuto);
  std::vector<float> x(m * kNIn, 0.5f), y(m * kCacheOut);
  AlignedBuffer scratch(linear.scratch_bytes(m));
  auto loop = [&] {
    for (auto _ : state) {
      linear.forward(y.data(), x.data(), m, scratch.data());
      benchmark::ClobberMemory();
    }
  };
  if (team) {
    threads::run_as_team(loop);
  } else {
    loop();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(linear.weight_bytes()));
}
#define VELLUM_DECODE_CACHE(name, type)                                        \
  BENCHMARK_CAPTURE(BM_DecodeFromCache, name, type)                            \
      ->ArgsProduct({{16, 4096}, {0, 1}, {1}})                                 \
      ->Args({4096, 1, 4})                                                     \
      ->Args({4096, 1, 8})                                                     \
      ->Unit(benchmark::kMicrosecond)                                          \
      ->UseRealTime();
VELLUM_DECODE_TYPES(VELLUM_DECODE_CACHE)
#undef VELLUM_DECODE_CACHE
#undef VELLUM_DECODE_TYPES

// oneDNN alone on the decode shapes: where it overtakes the hand-written small-m kernels
// decides PackedLinear's kMaxSmallM.
void BM_OnednnBf16(benchmark::State& state) {
  const int64_t m = state.range(0);
  const auto w = random_weights(WeightType::kBF16, kNOut, kNIn, 4);
  std::vector<std::unique_ptr<detail::OnednnMatmul>> copies;
  for (size_t total = 0; total < kStreamBytes / 2; total += w.size()) {
    copies.push_back(std::make_unique<detail::OnednnMatmul>(
        w.data(), detail::OnednnMatmul::DataType::kBF16, kNOut, kNIn));
  }
  std::vector<uint16_t> x(m * kNIn, float_to_bf16(0.5f));
  std::vector<float> y(m * kNOut);
  AlignedBuffer scratch(std::max<size_t>(64, copies[0]->scratch_bytes(m)));
  size_t next = 0;
  for (auto _ : state) {
    copies[next]->run(y.data(), x.data(), m, scratch.data());
    next = (next + 1) % copies.size();
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(copies[0]->weight_bytes()));
}
BENCHMARK(BM_OnednnBf16)->Arg(1)->Arg(4)->Arg(8)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_LinearPrefill(benchmark::State& state, WeightType type) {
  const int64_t m = state.range(0);
  const auto w = random_weights(type, kNOut, kNIn, 2);
  const auto linear = PackedLinear::pack(w.data(), type, kNOut, kNIn, MatmulPrecision::kAuto);
  std::vector<float> x(m * kNIn, 0.25f), y(m * kNOut);
  AlignedBuffer scratch(linear.scratch_bytes(m));
  for (auto _ : state) {
    linear.forward(y.data(), x.data(), m, scratch.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPs"] = benchmark::Counter(2.0 * m * kNOut * kNIn * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_LinearPrefill, bf16, WeightType::kBF16)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearPrefill, f32, WeightType::kF32)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearPrefill, q8_0, WeightType::kQ8_0)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearPrefill, q4_k, WeightType::kQ4_K)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_LinearPrefill, q6_k, WeightType::kQ6_K)->Arg(512)->Unit(benchmark::kMillisecond)->UseRealTime();

// Steps of paged attention: num_seqs sequences of ctx tokens each, whose last q_len tokens are
// the step's queries (1: decode), block size 16, shuffled blocks. Cycles over several layers'
// pools (at least two) so that K/V come from DRAM. Decode reports bytes_per_second of K/V reads:
// every context token's K and V rows are read once per step (the GQA heads of a kv head share
// them). Prefill (q_len > 1) reports GFLOPS: 4 · head_dim flops (Q·K and P·V) per query head and
// causally visible key.
struct AttentionShape {
  int64_t num_seqs;
  int64_t ctx;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  KvType kv_type;
  int64_t q_len = 1;
  int64_t block_size = 16;
  bool from_cache = false;  // one pool, read again every iteration (stays in L2 if small)
};

void run_paged_attention(benchmark::State& state, const AttentionShape& shape) {
  const int64_t blocks_per_seq = shape.ctx / shape.block_size;
  const int64_t num_blocks = shape.num_seqs * blocks_per_seq + 1;
  const size_t pool_bytes =
      num_blocks * shape.num_kv_heads * shape.block_size * kv_row_bytes(shape.kv_type, shape.head_dim);
  const int num_layers =
      shape.from_cache ? 1 : static_cast<int>(std::max<size_t>(2, kStreamBytes / 2 / (2 * pool_bytes)));
  std::vector<AlignedBuffer> k_pools, v_pools;
  for (int l = 0; l < num_layers; ++l) {
    k_pools.emplace_back(pool_bytes);
    v_pools.emplace_back(pool_bytes);
    std::memset(k_pools.back().data(), 0x3c, pool_bytes);  // finite values in any type (q8_0: 63)
    std::memset(v_pools.back().data(), 0x3c, pool_bytes);
  }
  std::vector<int32_t> ids(num_blocks - 1);
  std::iota(ids.begin(), ids.end(), 1);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(3));
  std::vector<int32_t> tables(ids.begin(), ids.end());  // (num_seqs, blocks_per_seq)
  std::vector<int32_t> seq_lens(shape.num_seqs, static_cast<int32_t>(shape.ctx));
  std::vector<int32_t> qsl(shape.num_seqs + 1);
  for (int64_t s = 0; s <= shape.num_seqs; ++s) qsl[s] = static_cast<int32_t>(s * shape.q_len);
  std::vector<float> q(shape.num_seqs * shape.q_len * shape.num_heads * shape.head_dim, 0.1f);
  std::vector<float> out(q.size());
  PagedAttentionParams p;
  p.num_seqs = shape.num_seqs;
  p.num_heads = shape.num_heads;
  p.num_kv_heads = shape.num_kv_heads;
  p.head_dim = shape.head_dim;
  p.block_size = shape.block_size;
  p.max_blocks_per_seq = blocks_per_seq;
  p.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  p.k_type = shape.kv_type;
  p.v_type = shape.kv_type;
  AlignedBuffer workspace(paged_attention_workspace_bytes(p, shape.ctx, omp_get_max_threads()));
  int layer = 0;
  for (auto _ : state) {
    paged_attention(out.data(), q.data(), shape.num_heads * shape.head_dim, k_pools[layer].data(),
                    v_pools[layer].data(), tables.data(), seq_lens.data(), qsl.data(), p,
                    workspace.data());
    layer = (layer + 1) % num_layers;
    benchmark::ClobberMemory();
  }
  if (shape.q_len == 1) {
    const int64_t step_bytes = 2 * shape.num_seqs * shape.ctx * shape.num_kv_heads *
                               static_cast<int64_t>(kv_row_bytes(shape.kv_type, shape.head_dim));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * step_bytes);
    // The read bandwidth right after the timed loop, and the K/V read rate as its share (the
    // figure issue "close to the machine's limits" asks to be >= 80 %): a rate counter, so the
    // library divides by the same time as bytes_per_second.
    const double probe = measure_read_bandwidth_gbps(kStreamBytes / 2, omp_get_max_threads());
    state.counters["probe_GBps"] = probe;
    state.counters["share"] = benchmark::Counter(static_cast<double>(step_bytes) / 1e9 / probe,
                                                 benchmark::Counter::kIsIterationInvariantRate);
    return;
  }
  // Query i of q_len (position ctx - q_len + i) sees ctx - q_len + i + 1 keys.
  const double keys = static_cast<double>(shape.q_len) * static_cast<double>(shape.ctx - shape.q_len) +
                      static_cast<double>(shape.q_len) * static_cast<double>(shape.q_len + 1) / 2;
  const double flops = 4.0 * static_cast<double>(shape.num_seqs * shape.num_heads * shape.head_dim) * keys;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// 32 sequences × 512 tokens of context, Llama-3-8B heads (32 q, 8 kv, 128); arg: KvType.
void BM_PagedAttentionDecode(benchmark::State& state) {
  run_paged_attention(state, {32, 512, 32, 8, 128, static_cast<KvType>(state.range(0))});
}
BENCHMARK(BM_PagedAttentionDecode)
    ->Arg(static_cast<int>(KvType::kBF16))
    ->Arg(static_cast<int>(KvType::kF32))
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Long-context decode, bf16 cache, head_dim 64, 4 query heads per kv head as Llama-3.2-1B.
// args: context tokens, sequences, kv heads, block size (16: vLLM's generic default; 128: its
// CPU default and Vellum's). With 8 kv heads (32 q heads: Llama-3.2-1B) a single
// sequence already has 8 work items; with 1 kv head (4 q heads) it has one, so only splitting its
// context over the threads (flash-decoding) can use more than one core. The arithmetic per byte
// of K/V is the same in both, so their shares of BM_ReadBandwidth compare directly.
void BM_PagedAttentionLongDecode(benchmark::State& state) {
  const int64_t num_kv_heads = state.range(2);
  run_paged_attention(state, {state.range(1), state.range(0), 4 * num_kv_heads, num_kv_heads, 64,
                               KvType::kBF16, 1, state.range(3)});
}
BENCHMARK(BM_PagedAttentionLongDecode)
    ->ArgNames({"ctx", "seqs", "kv_heads", "block"})
    ->ArgsProduct({{4096, 16384, 32768}, {1, 8}, {8, 1}, {128, 16}})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Long-context decode per cache type (issue 37): the BM_PagedAttentionLongDecode shape with 8 kv
// heads, block 128, one sequence; args: context tokens, KvType. tok/s = 1 / time per step;
// share = the K/V bytes actually read (q8_0: 34 per 32 values, q4_0: 18, fp8: 1 + 4 per row)
// over the probed read bandwidth.
void BM_PagedAttentionLongDecodeKvType(benchmark::State& state) {
  run_paged_attention(state, {1, state.range(0), 32, 8, 64, static_cast<KvType>(state.range(1)), 1,
                              128});
}
BENCHMARK(BM_PagedAttentionLongDecodeKvType)
    ->ArgNames({"ctx", "kv_type"})
    ->ArgsProduct({{16384, 32768},
                   {static_cast<int>(KvType::kBF16), static_cast<int>(KvType::kQ8_0),
                    static_cast<int>(KvType::kFp8E4M3), static_cast<int>(KvType::kQ4_0)}})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// The decode kernel's arithmetic ceiling: the shape of BM_PagedAttentionLongDecode (block 128)
// with K/V that stay in each core's L2 (one pool, 512 KiB of K/V per thread at 2 threads: 8 kv
// heads x 512 tokens, or 1 kv head x 4096 tokens split over the threads). Where this rate is
// below the DRAM probe, decode attention is bound by the kernel's instructions, not by memory.
void BM_PagedAttentionDecodeFromCache(benchmark::State& state) {
  const int64_t num_kv_heads = state.range(1);
  AttentionShape shape{1, state.range(0), 4 * num_kv_heads, num_kv_heads, 64, KvType::kBF16, 1, 128};
  shape.from_cache = true;
  run_paged_attention(state, shape);
}
BENCHMARK(BM_PagedAttentionDecodeFromCache)
    ->ArgNames({"ctx", "kv_heads"})
    ->Args({512, 8})
    ->Args({4096, 1})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// A prefill chunk: the last 512 tokens of a ctx-token prompt as queries (ctx 512: a whole
// 512-token prompt; 4096: the last chunk of a 4K prompt), Llama-3.2-1B heads (32 q, 8 kv, 64),
// bf16 cache; arg: ctx. The arithmetic rate to compare with the machine's bf16 dot-product or
// AMX peak.
void BM_PagedAttentionPrefill(benchmark::State& state) {
  run_paged_attention(state, {1, state.range(0), 32, 8, 64, KvType::kBF16, 512});
}
BENCHMARK(BM_PagedAttentionPrefill)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vellum::kernels
