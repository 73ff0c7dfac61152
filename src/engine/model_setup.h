// Start-up decisions shared by the engine and the benchmarks: which precisions the options select,
// how many KV blocks the memory budget buys (and the start-up check that one full-length sequence
// fits, spec §1.9), and how many compute threads to use.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "model/model.h"
#include "vellum/config.h"

namespace vellum::engine {

// --dtype: auto | bfloat16 (bf16) | float32 (f32). Throws naming the valid values.
kernels::MatmulPrecision parse_dtype(const std::string& dtype);
// One KV cache type name: auto (bf16 where the CPU has AVX512-BF16, else f32) | f32 | f16 | bf16
// | q8_0 | q4_0 | fp8 (= fp8_e4m3) | fp8_e5m2 (also the long names: float32, float16, half,
// bfloat16). Throws naming the valid values.
kernels::KvType parse_kv_cache_type(const std::string& name);
// The K and V types of a CacheConfig: cache_type_k / cache_type_v where given, else cache_dtype.
model::KvCacheDtype parse_kv_cache_dtype(const CacheConfig& cache);
const char* kv_type_name(kernels::KvType type);
// "bf16", or "k=q8_0,v=bf16" when K and V differ; "+hadamard_k" when K is stored rotated.
std::string kv_cache_dtype_name(const model::KvCacheDtype& dtype);

// Sets the OpenMP thread count (0: physical cores available to the process); returns it.
int configure_threads(int requested);

struct LoadedModel {
  model::ModelFiles files;  // the GGUF file or Hugging Face directory, its config and tensors
  std::unique_ptr<model::Model> model;
};
// Opens config.model (a GGUF file or a Hugging Face directory, per --load-format) and builds it.
// parallel: this rank's share under tensor / pipeline parallelism (default: the whole model).
LoadedModel load_model_file(const ModelConfig& config, const model::ModelParallel& parallel = {});

// The context length in force: --max-model-len if given (must not exceed the model's), else the
// model's own.
int64_t resolve_max_model_len(const ModelConfig& config, const model::ModelConfig& model_config);

struct KvBudget {
  int64_t num_blocks = 0;        // including the null block 0
  int64_t bytes_per_block = 0;   // all layers, K and V
  int64_t num_host_blocks = 0;   // swap tier
};

// Blocks from --num-kv-blocks, --kv-cache-memory, or --kv-cache-fraction of the memory available
// to the process. The fraction-derived default is capped at what max_num_seqs sequences of
// max_model_len tokens can ever hold, so a small model does not reserve (and, as the free list
// cycles, eventually touch) gigabytes it cannot use. Throws kOutOfMemory, naming the largest
// feasible --max-model-len, when one sequence of max_model_len tokens does not fit.
// group_windows: the KV cache groups (KvCacheLayout::group_windows; 0 = full attention): one
// sequence takes blocks in each, a sliding-window group at most its window plus one step's
// tokens (max_num_batched_tokens), as vLLM's SlidingWindowSpec counts it.
KvBudget plan_kv_cache(const CacheConfig& cache, int64_t bytes_per_block, int64_t max_model_len,
                       int64_t max_num_seqs, std::span<const int64_t> group_windows = {},
                       int64_t max_num_batched_tokens = 0);

// Bytes of memory available to the process (MemAvailable, capped by a cgroup limit).
int64_t available_memory_bytes();

}  // namespace vellum::engine
