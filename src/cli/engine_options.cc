#include "cli/engine_options.h"

#include <fmt/format.h>

#include <cstdio>
#include <limits>

#include "common/check.h"
#include "common/units.h"
#include "engine/parallel_setup.h"

namespace vellum::cli {

void add_engine_options(CLI::App& app, EngineConfig& config, EngineOptionStrings& strings) {
  app.add_option("--dtype", config.model.dtype,
                 "What unquantized weights are held in: auto (the file's type), bfloat16, "
                 "float16 (half) or float32 (every weight)")
      ->check(CLI::IsMember({"auto", "bfloat16", "bf16", "float16", "f16", "half", "float32",
                             "f32", "float"}));
  app.add_option("--load-format", config.model.load_format,
                 "Model format: auto (a directory is a Hugging Face checkpoint), gguf, "
                 "safetensors")
      ->check(CLI::IsMember({"auto", "gguf", "safetensors"}));
  app.add_option("--gguf-file", config.model.gguf_file,
                 "The GGUF to load when the model is a directory or a Hugging Face repo id "
                 "holding several");
  app.add_option("--tokenizer", config.model.tokenizer,
                 "Tokenizer to use instead of the model's: a Hugging Face directory, a "
                 "tokenizer.json or a GGUF file");
  app.add_flag("--skip-tokenizer-init", config.model.skip_tokenizer_init,
               "Load no tokenizer: prompts must be token ids, outputs carry no text");
  app.add_flag("--batch-invariant", config.model.batch_invariant,
               "Bitwise the same logits for a request whatever shares its step or how its "
               "prompt is chunked (slower prefill and batches: no oneDNN/AMX products)");
  app.add_option("--generation-config", config.model.generation_config,
                 "auto: sampling defaults from the model's generation_config.json; vllm: "
                 "Vellum's defaults; or a directory with a generation_config.json");
  app.add_option("--max-logprobs", config.model.max_logprobs,
                 "The most logprobs / prompt_logprobs a request may ask for (-1: the whole "
                 "vocabulary)")
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()));
  const std::vector<std::string> kv_types = {"auto", "f32", "float32", "f16", "float16", "half",
                                              "bf16", "bfloat16", "q8_0", "q4_0", "fp8",
                                              "fp8_e4m3", "fp8_e5m2"};
  app.add_option("--kv-cache-dtype", config.cache.cache_dtype,
                 "KV cache storage: auto (bf16 where the CPU has AVX512-BF16), f32, f16, bf16, "
                 "q8_0 (8-bit, blocks of 32 with an f16 scale: ~1.9x the tokens of bf16), q4_0 "
                 "(4-bit, ~3.6x), fp8 = fp8_e4m3 or fp8_e5m2 (a scale per token and head)")
      ->check(CLI::IsMember(kv_types));
  app.add_option("--cache-type-k", config.cache.cache_type_k,
                 "Storage of the K cache alone (as --kv-cache-dtype; llama.cpp's name)")
      ->check(CLI::IsMember(kv_types));
  app.add_option("--cache-type-v", config.cache.cache_type_v,
                 "Storage of the V cache alone (as --kv-cache-dtype; llama.cpp's name)")
      ->check(CLI::IsMember(kv_types));
  app.add_option("--kv-cache-rotate-k", config.cache.kv_cache_rotate_k,
                 "Store K rotated by a Walsh-Hadamard matrix, queries alike (scores unchanged): "
                 "auto (on for a q4_0 K), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  app.add_option("--max-model-len", config.model.max_model_len,
                 "Context length (default: the model's)");
  app.add_option("--kv-cache-memory", strings.kv_cache_memory,
                 "KV cache budget, e.g. 4GiB (default: a fraction of available memory)");
  app.add_option("--kv-cache-fraction", config.cache.kv_cache_fraction,
                 "Fraction of available memory for the KV cache (default 0.5 of what the weights "
                 "leave)");
  app.add_option("--block-size", config.cache.block_size, "Tokens per KV cache block");
  app.add_option("--num-kv-blocks", config.cache.num_blocks_override,
                 "Exact number of KV cache blocks (overrides the memory budget)");
  app.add_option("--swap-space", strings.swap_space,
                 "Host swap space for preemption by swap, e.g. 4GiB");
  app.add_flag("--no-enable-prefix-caching", strings.no_prefix_caching, "Disable prefix caching");
  app.add_flag("--disable-hybrid-kv-cache-manager", config.cache.disable_hybrid_kv_cache_manager,
               "One KV block table for all layers even when sliding-window and full-attention "
               "layers are mixed (their sliding layers then keep the whole KV)");
  CLI::Option* no_chunked = app.add_flag("--no-enable-chunked-prefill",
                                         strings.no_chunked_prefill, "Disable chunked prefill");
  app.add_flag("--enable-chunked-prefill", strings.enable_chunked_prefill,
               "Enable chunked prefill (the default)")
      ->excludes(no_chunked);
  app.add_option("--max-num-seqs", config.scheduler.max_num_seqs,
                 "Maximum sequences per step");
  app.add_option("--max-num-batched-tokens", config.scheduler.max_num_batched_tokens,
                 "Token budget per step");
  app.add_option("--long-prefill-token-threshold", config.scheduler.long_prefill_token_threshold,
                 "Cap on the tokens one request may compute per step (0: off)");
  app.add_option("--scheduling-policy", config.scheduler.policy, "fcfs or priority")
      ->check(CLI::IsMember({"fcfs", "priority"}));
  app.add_option("--preemption-mode", config.scheduler.preemption_mode, "recompute or swap")
      ->check(CLI::IsMember({"recompute", "swap"}));
  app.add_option("--speculative-config", config.speculative_config,
                 "Speculative decoding as vLLM's JSON, e.g. '{\"method\": \"ngram\", "
                 "\"num_speculative_tokens\": 4, \"prompt_lookup_min\": 2, "
                 "\"prompt_lookup_max\": 5}' or '{\"method\": \"suffix\"}'; add "
                 "\"gate\": \"always\" to keep proposals on in large batches");
  app.add_option("--threads", config.parallel.num_threads,
                 "Compute threads per rank (default: physical cores available to the process)");
  app.add_option("--tensor-parallel-size", config.parallel.tensor_parallel_size,
                 "Ranks that split each layer's heads and FFN (launch with mpirun -np TP*PP)");
  app.add_option("--pipeline-parallel-size", config.parallel.pipeline_parallel_size,
                 "Pipeline stages that split the layers (launch with mpirun -np TP*PP)");
  app.add_option("--distributed-timeout", config.parallel.distributed_timeout_seconds,
                 "Seconds a rank may stay silent during a step before the job stops with an "
                 "error naming it");
}

std::optional<int> run_if_worker_rank(const EngineConfig& config) {
  if (engine::world_rank() == 0) return std::nullopt;
  return engine::run_worker(config);
}

void finish_engine_options(EngineConfig& config, const EngineOptionStrings& strings) {
  if (!strings.kv_cache_memory.empty()) {
    const auto bytes = parse_byte_size(strings.kv_cache_memory);
    VELLUM_CHECK(bytes && *bytes > 0, ErrorCode::kInvalidArgument,
                 "--kv-cache-memory '{}' is not a size; write e.g. 4GiB, 512MiB or 1073741824",
                 strings.kv_cache_memory);
    config.cache.kv_cache_memory_bytes = *bytes;
  }
  if (!strings.swap_space.empty()) {
    const auto bytes = parse_byte_size(strings.swap_space);
    VELLUM_CHECK(bytes && *bytes >= 0, ErrorCode::kInvalidArgument,
                 "--swap-space '{}' is not a size; write e.g. 4GiB", strings.swap_space);
    config.cache.swap_space_bytes = *bytes;
  }
  if (strings.no_prefix_caching) config.cache.enable_prefix_caching = false;
  if (strings.no_chunked_prefill) config.scheduler.enable_chunked_prefill = false;
}

void print_spec_decode_stats(const EngineStats& stats) {
  if (stats.spec_num_accepted_tokens_per_pos.empty()) return;
  const double drafts = static_cast<double>(stats.spec_num_drafts);
  const double draft_tokens = static_cast<double>(stats.spec_num_draft_tokens);
  const double accepted = static_cast<double>(stats.spec_num_accepted_tokens);
  std::string per_position;
  for (int64_t count : stats.spec_num_accepted_tokens_per_pos) {
    per_position += fmt::format("{}{:.2f}", per_position.empty() ? "" : ", ",
                                drafts > 0 ? static_cast<double>(count) / drafts : 0.0);
  }
  std::printf("Speculative decoding: %lld verifications of %lld draft tokens, %lld accepted: "
              "draft acceptance rate %.1f%%, mean acceptance length %.2f, per-position "
              "acceptance [%s]\n",
              static_cast<long long>(stats.spec_num_drafts),
              static_cast<long long>(stats.spec_num_draft_tokens),
              static_cast<long long>(stats.spec_num_accepted_tokens),
              draft_tokens > 0 ? 100.0 * accepted / draft_tokens : 0.0,
              drafts > 0 ? 1.0 + accepted / drafts : 0.0, per_position.c_str());
}

}  // namespace vellum::cli
