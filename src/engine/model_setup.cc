#include "engine/model_setup.h"

#include <omp.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "common/check.h"
#include "common/logging.h"
#include "common/units.h"
#include "cpu/cpu_info.h"
#include "cpu/isa.h"
#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "model/io/hf_cache.h"
#include "model/weight_loading.h"

namespace vellum::engine {

kernels::MatmulPrecision parse_dtype(const std::string& dtype) {
  if (dtype == "auto") return kernels::MatmulPrecision::kAuto;
  if (dtype == "bfloat16" || dtype == "bf16") return kernels::MatmulPrecision::kBF16;
  if (dtype == "float16" || dtype == "f16" || dtype == "half") {
    return kernels::MatmulPrecision::kF16;
  }
  if (dtype == "float32" || dtype == "f32" || dtype == "float") {
    return kernels::MatmulPrecision::kF32;
  }
  VELLUM_THROW(ErrorCode::kInvalidArgument,
               "--dtype '{}' is not supported; use auto, bfloat16, float16 or float32", dtype);
}

kernels::KvType parse_kv_cache_type(const std::string& name) {
  if (name == "auto") {
    return cpu::selected_isa() >= cpu::Isa::kAvx512Bf16 ? kernels::KvType::kBF16
                                                        : kernels::KvType::kF32;
  }
  if (name == "f32" || name == "float32") return kernels::KvType::kF32;
  if (name == "f16" || name == "float16" || name == "half") return kernels::KvType::kF16;
  if (name == "bf16" || name == "bfloat16") return kernels::KvType::kBF16;
  if (name == "q8_0") return kernels::KvType::kQ8_0;
  if (name == "q4_0") return kernels::KvType::kQ4_0;
  if (name == "fp8" || name == "fp8_e4m3") return kernels::KvType::kFp8E4M3;
  if (name == "fp8_e5m2") return kernels::KvType::kFp8E5M2;
  VELLUM_THROW(ErrorCode::kInvalidArgument,
               "KV cache type '{}' is not supported; use auto, f32, f16, bf16, q8_0, q4_0, fp8 "
               "(= fp8_e4m3) or fp8_e5m2",
               name);
}

model::KvCacheDtype parse_kv_cache_dtype(const CacheConfig& cache) {
  const kernels::KvType both = parse_kv_cache_type(cache.cache_dtype);
  model::KvCacheDtype dtype{
      cache.cache_type_k.empty() ? both : parse_kv_cache_type(cache.cache_type_k),
      cache.cache_type_v.empty() ? both : parse_kv_cache_type(cache.cache_type_v)};
  const std::string& rotate = cache.kv_cache_rotate_k;
  VELLUM_CHECK(rotate == "auto" || rotate == "on" || rotate == "off", ErrorCode::kInvalidArgument,
               "--kv-cache-rotate-k '{}' is not one of auto, on, off", rotate);
  dtype.rotate_k = rotate == "on" || (rotate == "auto" && dtype.k == kernels::KvType::kQ4_0);
  VELLUM_CHECK(kernels::kv_type_pair_supported(dtype.k, dtype.v), ErrorCode::kInvalidArgument,
               "a K cache of {} with a V cache of {} is not supported; give V the K type, or "
               "bf16, f16 or q8_0 (--cache-type-v)",
               kv_type_name(dtype.k), kv_type_name(dtype.v));
  return dtype;
}

const char* kv_type_name(kernels::KvType type) {
  switch (type) {
    case kernels::KvType::kF32: return "f32";
    case kernels::KvType::kF16: return "f16";
    case kernels::KvType::kBF16: return "bf16";
    case kernels::KvType::kQ8_0: return "q8_0";
    case kernels::KvType::kQ4_0: return "q4_0";
    case kernels::KvType::kFp8E4M3: return "fp8_e4m3";
    case kernels::KvType::kFp8E5M2: return "fp8_e5m2";
  }
  return "?";
}

std::string kv_cache_dtype_name(const model::KvCacheDtype& dtype) {
  const std::string types = dtype.k == dtype.v ? std::string(kv_type_name(dtype.k))
                                               : fmt::format("k={},v={}", kv_type_name(dtype.k),
                                                             kv_type_name(dtype.v));
  return dtype.rotate_k ? types + "+hadamard_k" : types;
}

int configure_threads(int requested) {
  VELLUM_CHECK(requested >= 0, ErrorCode::kInvalidArgument,
               "--threads must be positive (or 0 for the default), got {}", requested);
  const int threads = requested > 0 ? requested : cpu::default_num_threads();
  omp_set_num_threads(threads);
  return threads;
}

LoadedModel load_model_file(const ModelConfig& config, const model::ModelParallel& parallel) {
  kernels::set_batch_invariant(config.batch_invariant);
  VELLUM_CHECK(!config.model.empty(), ErrorCode::kInvalidArgument,
               "no model given: pass a GGUF file or a Hugging Face model directory (make one "
               "with `vellum make-model`)");
  LoadedModel loaded;
  // A Hugging Face repo id is looked up in the local cache (offline, as vLLM with
  // HF_HUB_OFFLINE=1); --gguf-file picks one GGUF of a repo or directory holding several.
  loaded.files = model::open_model_files(model::resolve_model_path(config.model, config.gguf_file),
                                         model::parse_load_format(config.load_format));
  model::ModelLoadOptions options;
  options.precision = parse_dtype(config.dtype);
  options.parallel = parallel;
  loaded.model = model::load_model(loaded.files, options);
  VELLUM_LOG_INFO("{}", loaded.model->describe());
  VELLUM_LOG_INFO("tensor types in the {}: {}",
                  loaded.files.is_hf() ? "checkpoint" : "file",
                  loaded.model->config().weight_type_summary);
  // The kernels each stored weight type runs on (2-D tensors: the matrix products).
  const model::WeightSource& weights = *loaded.files.weights;
  std::vector<kernels::WeightType> types;
  for (const gguf::TensorInfo& t : weights.tensors()) {
    if (t.shape.size() < 2) continue;
    const kernels::WeightType type = model::weight_type_of(weights, t);
    if (std::find(types.begin(), types.end(), type) == types.end()) types.push_back(type);
  }
  for (kernels::WeightType type : types) {
    VELLUM_LOG_INFO("kernels: {}", kernels::matmul_backend(type, parse_dtype(config.dtype)));
  }
  return loaded;
}

int64_t resolve_max_model_len(const ModelConfig& config, const model::ModelConfig& model_config) {
  const int64_t native = model_config.max_position_embeddings;
  if (config.max_model_len <= 0) return native;
  VELLUM_CHECK(config.max_model_len <= native, ErrorCode::kInvalidArgument,
               "--max-model-len {} is larger than the model's context length {}; use at most {}",
               config.max_model_len, native, native);
  return config.max_model_len;
}

int64_t available_memory_bytes() {
  int64_t available = 0;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t value = 0;
  std::string unit;
  while (meminfo >> key >> value >> unit) {
    if (key == "MemAvailable:") {
      available = value * 1024;
      break;
    }
  }
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cgroup >> limit && limit != "max") {
    try {
      const int64_t cap = std::stoll(limit);
      if (cap > 0 && (available == 0 || cap < available)) available = cap;
    } catch (const std::exception&) {
    }
  }
  return available;
}

KvBudget plan_kv_cache(const CacheConfig& cache, int64_t bytes_per_block, int64_t max_model_len,
                       int64_t max_num_seqs, std::span<const int64_t> group_windows,
                       int64_t max_num_batched_tokens) {
  VELLUM_CHECK(cache.block_size > 0, ErrorCode::kInvalidArgument,
               "--block-size must be positive, got {}", cache.block_size);
  const int64_t no_windows[] = {0};
  if (group_windows.empty()) group_windows = no_windows;
  // Blocks one sequence of `len` tokens can hold at once, over all groups.
  const auto blocks_per_seq = [&](const CacheConfig& c, int64_t len) {
    int64_t total = 0;
    for (const int64_t window : group_windows) {
      int64_t n = (len + c.block_size - 1) / c.block_size;
      if (window > 0) {
        const int64_t step = max_num_batched_tokens > 0 ? max_num_batched_tokens : len;
        n = std::min(n, (std::min(window - 1 + step, len) + c.block_size - 1) / c.block_size + 1);
      }
      total += n;
    }
    return total;
  };
  KvBudget budget;
  budget.bytes_per_block = bytes_per_block;
  std::string source;
  if (cache.num_blocks_override > 0) {
    budget.num_blocks = cache.num_blocks_override;
    source = "--num-kv-blocks";
  } else {
    int64_t bytes = cache.kv_cache_memory_bytes;
    source = "--kv-cache-memory";
    if (bytes <= 0) {
      const double fraction = cache.kv_cache_fraction > 0 ? cache.kv_cache_fraction : 0.5;
      VELLUM_CHECK(fraction <= 1.0, ErrorCode::kInvalidArgument,
                   "--kv-cache-fraction must be in (0, 1], got {}", fraction);
      bytes = static_cast<int64_t>(static_cast<double>(available_memory_bytes()) * fraction);
      source = "--kv-cache-fraction";
    }
    budget.num_blocks = bytes / bytes_per_block;
    if (cache.kv_cache_memory_bytes <= 0) {
      budget.num_blocks = std::min(budget.num_blocks, 1 + std::max<int64_t>(1, max_num_seqs) *
                                                              blocks_per_seq(cache, max_model_len));
    }
  }
  const int64_t seq_blocks = blocks_per_seq(cache, max_model_len);
  // Block 0 is the null block: usable blocks are num_blocks - 1.
  const int64_t usable = budget.num_blocks - 1;
  if (usable < seq_blocks) {
    // The largest length whose blocks fit (blocks_per_seq grows with the length).
    int64_t largest = 0;
    for (int64_t lo = 0, hi = max_model_len; lo <= hi;) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (blocks_per_seq(cache, mid) <= usable) {
        largest = mid;
        lo = mid + 1;
      } else {
        hi = mid - 1;
      }
    }
    largest = largest / cache.block_size * cache.block_size;
    VELLUM_THROW(ErrorCode::kOutOfMemory,
                 "the KV cache ({} blocks of {} tokens, {} from {}) cannot hold one sequence of "
                 "max_model_len = {} tokens ({} blocks). Raise the KV cache budget (e.g. "
                 "--kv-cache-memory {}) or lower --max-model-len to at most {}",
                 usable, cache.block_size, format_bytes(usable * bytes_per_block), source,
                 max_model_len, seq_blocks,
                 format_bytes((seq_blocks + 1) * bytes_per_block), largest);
  }
  if (cache.swap_space_bytes > 0) budget.num_host_blocks = cache.swap_space_bytes / bytes_per_block;
  VELLUM_LOG_INFO(
      "KV cache: {} blocks x {} tokens, {} per block, {} in total; max concurrency at "
      "{} tokens: {:.2f}x; swap space: {} blocks",
      usable, cache.block_size, format_bytes(bytes_per_block), format_bytes(usable * bytes_per_block),
      max_model_len, static_cast<double>(usable) / static_cast<double>(seq_blocks),
      budget.num_host_blocks);
  return budget;
}

}  // namespace vellum::engine
