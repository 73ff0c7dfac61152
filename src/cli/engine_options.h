// Command-line options shared by the commands that start an engine (generate, bench, serve):
// vLLM's option names, mapped onto EngineConfig.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "vellum/config.h"
#include "vellum/engine.h"

namespace vellum::cli {

struct EngineOptionStrings {
  std::string kv_cache_memory;  // "4GiB"
  std::string swap_space;       // "4GiB"
  bool no_prefix_caching = false;
  bool no_chunked_prefill = false;
  bool enable_chunked_prefill = false;  // the default; the flag exists for vLLM's command lines
};

// Adds --dtype, --kv-cache-dtype, --max-model-len, --kv-cache-memory, --kv-cache-fraction, ...
// The model path option is added by each command (positional for serve, --model elsewhere).
void add_engine_options(CLI::App& app, EngineConfig& config, EngineOptionStrings& strings);

// Applies the string options (sizes) to config; throws vellum::Error on a malformed value.
void finish_engine_options(EngineConfig& config, const EngineOptionStrings& strings);

// Under mpirun, every rank but 0 runs its share of the model for rank 0 (engine::run_worker)
// instead of the command: returns its exit code there, nothing on rank 0 and without MPI.
std::optional<int> run_if_worker_rank(const EngineConfig& config);

// With --speculative-config: one line with the drafts verified, the draft acceptance rate and the
// mean acceptance length (1 + accepted drafts per verification, vLLM's definition). Nothing
// without speculation.
void print_spec_decode_stats(const EngineStats& stats);

}  // namespace vellum::cli
