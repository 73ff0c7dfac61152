// Engine configuration, grouped the way vLLM groups it (EngineConfig{ModelConfig, CacheConfig,
// SchedulerConfig, ParallelConfig}); option names follow vLLM's command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace vellum {

struct ModelConfig {
  // A GGUF file, a Hugging Face model directory, or a Hugging Face repo id found in the local
  // Hugging Face cache (HF_HUB_CACHE / HF_HOME; nothing is downloaded)
  std::string model;
  // The GGUF to load when `model` is a directory or repo holding several (--gguf-file)
  std::string gguf_file;
  std::string load_format = "auto";  // auto | gguf | safetensors  (--load-format)
  // Tokenizer: a Hugging Face directory (tokenizer.json), a tokenizer.json, or a GGUF file;
  // empty: the model's own  (--tokenizer)
  std::string tokenizer;
  bool skip_tokenizer_init = false;  // no tokenizer: token-id prompts only, no output text
  // auto: sampling defaults from the model directory's generation_config.json (vLLM's default);
  // vllm: Vellum's own defaults; or a directory holding a generation_config.json
  std::string generation_config = "auto";
  std::string dtype = "auto";    // auto | bfloat16 | float16 | float32  (--dtype)
  int64_t max_model_len = 0;     // 0: the model's context length  (--max-model-len)
  std::string chat_template;     // path to a Jinja file overriding the model's (--chat-template)
  std::string served_model_name; // name reported by the API; empty: derived from the file name
  // Every matrix product on the kernels whose result for a row does not depend on the other rows,
  // so a request's logits are bitwise the same whatever shares its step and however its prompt
  // is chunked (--batch-invariant; vLLM's VLLM_BATCH_INVARIANT). Costs prefill and batched speed
  // (no oneDNN / AMX); process-wide.
  bool batch_invariant = false;
  // The most logprobs or prompt_logprobs a request may ask for; -1: the whole vocabulary
  // (vLLM's --max-logprobs). Fidelity tests raise it to score arbitrary tokens.
  int64_t max_logprobs = 20;
  // Seeds the random generators of requests that bring no seed of their own (vLLM's --seed), so
  // the same requests in the same order sample alike; none: each such request is seeded at random.
  std::optional<int64_t> seed;
};

struct CacheConfig {
  // Tokens per KV block (--block-size). 128 as vLLM's CPU platform sets it when none is given (the
  // generic default, 16, is what the engine tests use): a kv head's K or V rows of a block are
  // one contiguous run the decode attention reads, 2 KiB at 16 tokens (head dim 64, bf16) and
  // 16 KiB at 128. Measured (Zen 4, 2 threads, BM_PagedAttentionLongDecode 4K-32K context, 8 kv
  // heads, 2 rounds, read probe 59-64 GB/s): 22.4-24.9 GiB/s at 16, 28.2-29.0 at 128. Prefix
  // caching then shares prompts in 128-token steps.
  int64_t block_size = 128;
  // KV cache storage (--kv-cache-dtype): auto | f32 | f16 | bf16 | q8_0 (GGML blocks of 32 with
  // an f16 scale: 53 % of bf16's bytes) | q4_0 (28 %) | fp8 = fp8_e4m3 | fp8_e5m2 (a scale per
  // token and head). cache_type_k / cache_type_v (llama.cpp's --cache-type-k
  // / --cache-type-v) set K or V apart; empty: as cache_dtype.
  std::string cache_dtype = "auto";
  std::string cache_type_k;
  std::string cache_type_v;
  // Store K rotated by a Walsh-Hadamard matrix (queries rotated alike; --kv-cache-rotate-k):
  // auto (on for a 4-bit K: q4_0) | on | off. Needs a power-of-two head dim when on.
  std::string kv_cache_rotate_k = "auto";
  int64_t kv_cache_memory_bytes = 0;        // explicit KV budget (--kv-cache-memory); 0: use fraction
  double kv_cache_fraction = 0.0;           // of available memory (--kv-cache-fraction); 0: default
  bool enable_prefix_caching = true;        // (--enable-prefix-caching / --no-...)
  // One block table for every layer even when full and sliding-window layers are mixed: sliding
  // layers then keep their whole KV (--disable-hybrid-kv-cache-manager, as in vLLM).
  bool disable_hybrid_kv_cache_manager = false;
  int64_t swap_space_bytes = 0;             // host swap tier for preemption by swap (--swap-space)
  int64_t num_blocks_override = 0;          // exact number of KV blocks (tests, --num-kv-blocks)
};

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 0;       // token budget per step; 0: default (2048 or max_model_len)
  int64_t max_num_seqs = 256;               // (--max-num-seqs)
  bool enable_chunked_prefill = true;       // (--enable-chunked-prefill)
  int64_t long_prefill_token_threshold = 0; // (--long-prefill-token-threshold)
  std::string policy = "fcfs";              // fcfs | priority  (--scheduling-policy)
  std::string preemption_mode = "recompute"; // recompute | swap  (--preemption-mode)
};

struct ParallelConfig {
  int num_threads = 0;                      // per rank; 0: physical cores available (--threads)
  // Multi-process parallelism over MPI (launch with `mpirun -np TP*PP vellum ...`): rank 0
  // schedules and samples, every rank runs its share of the forward pass.
  int tensor_parallel_size = 1;             // (--tensor-parallel-size, -tp)
  int pipeline_parallel_size = 1;           // (--pipeline-parallel-size, -pp)
  // A rank that does not answer a step's communication within this time is reported dead and
  // the job stops (--distributed-timeout).
  double distributed_timeout_seconds = 60.0;
};

// Testing only: makes chosen requests throw inside the engine, as a bug or a failed allocation
// would. `vellum serve` reads it once from $VELLUM_FAULT_INJECT_REQUEST_ID (and
// $VELLUM_FAULT_INJECT_FATAL=1).
struct FaultInjectionConfig {
  std::string request_id_substring;  // empty: off; else requests whose id contains it throw
  bool fatal = false;                // false: only that request fails ("error", HTTP 500);
                                     // true: the whole step throws and the engine stops
};

struct EngineConfig {
  ModelConfig model;
  // Speculative decoding, vLLM's --speculative-config JSON, e.g. '{"method": "ngram",
  // "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 5}' or
  // '{"method": "suffix"}'; empty: off. Checked when the engine starts.
  std::string speculative_config;
  CacheConfig cache;
  SchedulerConfig scheduler;
  ParallelConfig parallel;
  FaultInjectionConfig fault_injection;
};

}  // namespace vellum
