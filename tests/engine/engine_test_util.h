// Helpers for end-to-end engine tests on the real tiny models.
#pragma once

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "vellum/engine.h"

namespace vellum::testing {

inline EngineConfig tiny_engine_config(const std::filesystem::path& model) {
  EngineConfig config;
  config.model.model = model.string();
  config.model.max_model_len = 512;
  config.cache.block_size = 16;  // the engine tests count blocks of 16 tokens, as vLLM's do
  config.cache.cache_dtype = "f32";
  config.cache.kv_cache_memory_bytes = int64_t{64} << 20;
  config.parallel.num_threads = 2;
  return config;
}

// The index of the first token of `tokens`, from `from` on, that does not occur before it;
// tokens.size() when there is none. Tests use it to pick a token whose first appearance in a
// known run is at a known place (an end-of-sequence id, a marker).
inline size_t first_unseen_token(const std::vector<int32_t>& tokens, size_t from) {
  for (size_t at = from; at < tokens.size(); ++at) {
    const auto end = tokens.begin() + static_cast<ptrdiff_t>(at);
    if (std::find(tokens.begin(), end, tokens[at]) == end) return at;
  }
  return tokens.size();
}

inline SamplingParams greedy(int64_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Runs the engine until idle; returns the final output of each request by id.
inline std::map<std::string, RequestOutput> run_all(LLMEngine& engine, int max_steps = 100000) {
  std::map<std::string, RequestOutput> finished;
  for (int step = 0; engine.has_unfinished_requests() && step < max_steps; ++step) {
    for (RequestOutput& out : engine.step()) {
      if (out.finished) finished[out.request_id] = std::move(out);
    }
  }
  return finished;
}

}  // namespace vellum::testing
