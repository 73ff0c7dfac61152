// ModelRunner: turns the scheduler's decisions into one flat varlen batch (DESIGN.md §1), applies
// the KV block copies and swaps the KV cache manager asked for, and runs the model.
//
// Owns the KV cache bytes (device pools and the host swap pools) and the logits buffer.
// Thread-safety: engine core thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace vellum::engine {

// One sequence's run in the step.
struct RunnerSequence {
  std::span<const int32_t> new_tokens;  // tokens to compute this step
  int32_t num_computed_tokens = 0;      // tokens already in the cache before this step
  std::span<const std::vector<int32_t>> group_block_ids;  // its block table in each KV group
  int32_t num_logits = 0;               // logits for the last num_logits new tokens
};

struct BlockMove {
  int32_t src = 0;
  int32_t dst = 0;
};

class ModelRunner {
 public:
  ModelRunner(model::Model& model, const model::KvCacheShape& shape, int64_t num_blocks,
              int64_t num_host_blocks);

  // Block moves of a step, applied before its forward pass in this order: swap_out (device ->
  // host; the freed device blocks may be reused by this very step), swap_in (host -> device), then
  // the copy-on-write copies inside the device pools.
  void apply_block_copies(std::span<const BlockMove> copies);
  void swap_out(std::span<const BlockMove> moves);
  void swap_in(std::span<const BlockMove> moves);

  // Runs the step. Returns logits (num_logits_total, vocab), rows in sequence order, valid until
  // the next call.
  std::span<float> execute(std::span<const RunnerSequence> sequences);

  int64_t vocab_size() const { return model_.config().vocab_size; }
  const model::KvCacheShape& kv_shape() const { return cache_.shape(); }
  int64_t num_blocks() const { return cache_.num_blocks(); }

 private:
  model::Model& model_;
  model::KvCache cache_;
  std::optional<model::KvCache> host_cache_;  // swap tier; absent when num_host_blocks == 0
  model::ForwardBatch batch_;
  std::vector<float> logits_;
  std::vector<int32_t> src_ids_, dst_ids_;
  std::vector<std::span<const int32_t>> tables_;  // one sequence's group tables
};

}  // namespace vellum::engine
