// KV cache manager benchmarks: allocate+free throughput and get_computed_blocks for a
// 32,768-token prompt, fully cached and fully missed.
//
//   ninja -C build core_bench && build/bench/core/core_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/kv_cache_manager.h"

namespace vellum::core {
namespace {

std::vector<TokenId> tokens(int n, TokenId salt) {
  std::vector<TokenId> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = (i * 7919 + salt) % 32000;
  return v;
}

// allocate_slots for a 512-token prompt (32 blocks of 16) and free it, caching off: pure
// block-table bookkeeping. Items = requests.
void BM_AllocateFreeNoCaching(benchmark::State& state) {
  KVCacheConfig cfg;
  cfg.num_blocks = 4097;
  cfg.block_size = 16;
  cfg.enable_caching = false;
  KVCacheManager kv(cfg);
  Request req("r", tokens(512, 1));
  AllocateSlotsArgs args;
  args.num_new_tokens = 512;
  for (auto _ : state) {
    auto blocks = kv.allocate_slots(req, args);
    benchmark::DoNotOptimize(blocks);
    kv.free("r");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocateFreeNoCaching);

// Same with prefix caching on and a miss every time (distinct prompts, hashed up front): the
// allocation caches 32 blocks and evicts the 32 stale hashes it reuses.
void BM_AllocateFreeCachingMiss(benchmark::State& state) {
  KVCacheConfig cfg;
  cfg.num_blocks = 4097;
  cfg.block_size = 16;
  KVCacheManager kv(cfg);
  constexpr int kNumPrompts = 256;
  std::vector<Request> reqs;
  reqs.reserve(kNumPrompts);
  for (int i = 0; i < kNumPrompts; ++i) {
    reqs.emplace_back("r" + std::to_string(i), tokens(512, i), RequestParams{}, BlockHasher(16));
  }
  AllocateSlotsArgs args;
  args.num_new_tokens = 512;
  size_t i = 0;
  for (auto _ : state) {
    Request& req = reqs[i++ % kNumPrompts];
    auto blocks = kv.allocate_slots(req, args);
    benchmark::DoNotOptimize(blocks);
    kv.free(req.request_id());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_AllocateFreeCachingMiss);

// A decode step's allocate_slots (one token, usually no new block) across 256 running requests.
void BM_DecodeAllocateSlots(benchmark::State& state) {
  KVCacheConfig cfg;
  cfg.num_blocks = 256 * 8 + 1;
  cfg.block_size = 16;
  KVCacheManager kv(cfg);
  std::vector<Request> reqs;
  reqs.reserve(256);
  for (int i = 0; i < 256; ++i) {
    reqs.emplace_back("r" + std::to_string(i), tokens(17, i), RequestParams{}, BlockHasher(16));
    AllocateSlotsArgs args;
    args.num_new_tokens = 17;
    (void)kv.allocate_slots(reqs.back(), args);
    reqs.back().num_computed_tokens = 17;
  }
  AllocateSlotsArgs one;
  one.num_new_tokens = 1;
  for (auto _ : state) {
    for (Request& r : reqs) {
      r.append_output_token_ids(5);
      auto blocks = kv.allocate_slots(r, one);
      benchmark::DoNotOptimize(blocks);
      r.num_computed_tokens += 1;
      if (r.num_tokens() >= 16 * 7) {  // keep the tables bounded: restart the request
        state.PauseTiming();
        kv.free(r.request_id());
        r = Request(r.request_id(), tokens(17, 3), RequestParams{}, BlockHasher(16));
        AllocateSlotsArgs args;
        args.num_new_tokens = 17;
        (void)kv.allocate_slots(r, args);
        r.num_computed_tokens = 17;
        state.ResumeTiming();
      }
    }
  }
  state.SetItemsProcessed(state.iterations() * 256);
}
BENCHMARK(BM_DecodeAllocateSlots);

constexpr int kLongPrompt = 32768;

// get_computed_blocks for a 32,768-token prompt whose 2,047 usable blocks are all cached.
void BM_GetComputedBlocks32kHit(benchmark::State& state) {
  KVCacheConfig cfg;
  cfg.num_blocks = kLongPrompt / 16 + 8;
  cfg.block_size = 16;
  cfg.max_model_len = kLongPrompt + 16;
  KVCacheManager kv(cfg);
  Request warm("warm", tokens(kLongPrompt, 11), RequestParams{}, BlockHasher(16));
  AllocateSlotsArgs args;
  args.num_new_tokens = kLongPrompt;
  (void)kv.allocate_slots(warm, args);
  kv.free("warm");
  Request req("q", tokens(kLongPrompt, 11), RequestParams{}, BlockHasher(16));
  for (auto _ : state) {
    ComputedBlocks hit = kv.get_computed_blocks(req);
    benchmark::DoNotOptimize(hit);
    if (hit.num_computed_tokens != kLongPrompt - 16) state.SkipWithError("expected a full hit");
  }
  state.counters["hit_tokens"] = kLongPrompt - 16;
}
BENCHMARK(BM_GetComputedBlocks32kHit);

// The same lookup with nothing cached: stops at the first block.
void BM_GetComputedBlocks32kMiss(benchmark::State& state) {
  KVCacheConfig cfg;
  cfg.num_blocks = kLongPrompt / 16 + 8;
  cfg.block_size = 16;
  cfg.max_model_len = kLongPrompt + 16;
  KVCacheManager kv(cfg);
  Request req("q", tokens(kLongPrompt, 11), RequestParams{}, BlockHasher(16));
  for (auto _ : state) {
    ComputedBlocks hit = kv.get_computed_blocks(req);
    benchmark::DoNotOptimize(hit);
    if (hit.num_computed_tokens != 0) state.SkipWithError("expected a miss");
  }
}
BENCHMARK(BM_GetComputedBlocks32kMiss);

// The cost that precedes any lookup: hashing a 32,768-token prompt (2,048 SHA-256 blocks),
// paid once when the Request is built.
void BM_HashPrompt32k(benchmark::State& state) {
  const auto prompt = tokens(kLongPrompt, 11);
  for (auto _ : state) {
    Request req("q", prompt, RequestParams{}, BlockHasher(16));
    benchmark::DoNotOptimize(req.block_hashes().data());
  }
  state.SetBytesProcessed(state.iterations() * kLongPrompt * static_cast<int64_t>(sizeof(TokenId)));
}
BENCHMARK(BM_HashPrompt32k);

}  // namespace
}  // namespace vellum::core
