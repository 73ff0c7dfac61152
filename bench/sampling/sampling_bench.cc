// Sampler throughput on a decode-sized batch: 32 rows × 128256 (Llama 3 vocabulary).
// Each iteration restores the logits (the sampler works in place) and samples the batch; the
// restore copy (16 MB) is timed separately in BM_RestoreOnly so it can be subtracted.
//
//   build-*/bench/sampling/sampling_bench --benchmark_min_time=1
// Arg: number of OpenMP threads over rows (1 = serial).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace vellum::sampling {
namespace {

constexpr int64_t kBatch = 32;
constexpr int64_t kVocab = 128256;

// Logits shaped like a real LM head: mostly N(0, 2), a few strong candidates per row.
const std::vector<float>& base_logits() {
  static const std::vector<float> logits = [] {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    std::vector<float> out(kBatch * kVocab);
    for (float& l : out) l = normal(rng);
    for (int64_t r = 0; r < kBatch; ++r) {
      for (int j = 0; j < 8; ++j) out[r * kVocab + rng() % kVocab] += 12.0f - j;
    }
    return out;
  }();
  return logits;
}

void run(benchmark::State& bench, const SamplingParams& params) {
  const auto& base = base_logits();
  std::vector<float> logits(base.size());
  std::vector<SamplingState> states;
  for (int64_t r = 0; r < kBatch; ++r) states.emplace_back(int64_t{r});
  std::vector<std::vector<int32_t>> history(kBatch);
  std::mt19937 rng(1);
  for (auto& h : history) {
    for (int i = 0; i < 256; ++i) h.push_back(static_cast<int32_t>(rng() % kVocab));
  }
  std::vector<SamplingRow> rows(kBatch);
  for (int64_t r = 0; r < kBatch; ++r) {
    rows[r] = {.params = &params,
               .state = &states[r],
               .prompt_token_ids = std::span(history[r]).first(128),
               .output_token_ids = std::span(history[r]).subspan(128)};
  }
  Sampler sampler({.num_threads = static_cast<int>(bench.range(0))});
  SamplerOutput out;
  for (auto _ : bench) {
    std::memcpy(logits.data(), base.data(), base.size() * sizeof(float));
    sampler.sample(logits.data(), kBatch, kVocab, rows, &out);
    benchmark::DoNotOptimize(out.sampled_token_ids.data());
  }
  bench.SetItemsProcessed(bench.iterations() * kBatch);
}

void BM_RestoreOnly(benchmark::State& bench) {
  const auto& base = base_logits();
  std::vector<float> logits(base.size());
  for (auto _ : bench) {
    std::memcpy(logits.data(), base.data(), base.size() * sizeof(float));
    benchmark::ClobberMemory();
  }
}

void BM_Greedy(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.0;
  run(bench, p);
}

void BM_Random(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.8;
  run(bench, p);
}

void BM_TopK50TopP09(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_k = 50;
  p.top_p = 0.9;
  run(bench, p);
}

void BM_TopP09(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  run(bench, p);
}

void BM_TopP09Penalties(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.5;
  p.repetition_penalty = 1.1;
  run(bench, p);
}

void BM_GreedyLogprobs5(benchmark::State& bench) {
  SamplingParams p;
  p.temperature = 0.0;
  p.logprobs = 5;
  run(bench, p);
}

BENCHMARK(BM_RestoreOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Greedy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Random)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TopK50TopP09)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TopP09)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TopP09Penalties)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GreedyLogprobs5)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace vellum::sampling
