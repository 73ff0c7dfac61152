// A deterministic stand-in for the model runner + sampler, for scheduler tests.
//
// It keeps a fake KV cache: one (token, position) record per slot of every device and host
// block. execute() applies the step's swap-outs, swap-ins and copy-on-write copies in the order
// the SchedulerOutput prescribes, writes each scheduled token into its slot
// (block_ids[pos / bs], pos % bs), then checks that every position the request attends to holds
// that request's token at that position. A wrong block table, a bad prefix-cache hit, a lost
// swap or a missed copy therefore throws with the request, position and slot.
//
// The sampled token depends only on the request's context (prompt + outputs so far), through
// next_token(); so a request's output is independent of batching, chunking and preemption and
// can be compared with reference_generate().
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/scheduler/scheduler_output.h"

namespace vellum::core::testing {

struct FakeStopRule {
  int max_tokens = 16;
  int min_tokens = 0;
  std::optional<TokenId> eos_token_id;
  int max_model_len = 0;
};

class FakeModelExecutor {
 public:
  // vocab_size: sampled tokens are in [0, vocab_size).
  FakeModelExecutor(int num_blocks, int block_size, int num_host_blocks, int vocab_size);

  ModelRunnerOutput execute(const SchedulerOutput& out);

  // The token sampled after `context`: a hash of the whole context, modulo vocab_size.
  static TokenId next_token(std::span<const TokenId> context, int vocab_size);

  // What a request generates with no scheduler in the way: outputs until the stop rule fires
  // (EOS after min_tokens, max_tokens, or max_model_len total tokens).
  static std::vector<TokenId> reference_generate(std::span<const TokenId> prompt,
                                                 const FakeStopRule& rule, int vocab_size);

  int64_t num_swapped_out_blocks() const { return num_swapped_out_blocks_; }
  int64_t num_swapped_in_blocks() const { return num_swapped_in_blocks_; }
  int64_t num_copied_blocks() const { return num_copied_blocks_; }

 private:
  struct Slot {
    TokenId token = -1;  // -1: never written
    int position = -1;
  };
  Slot& device_slot(BlockId block, int offset);

  int block_size_;
  int vocab_size_;
  std::vector<Slot> device_;  // [num_blocks * block_size]
  std::vector<Slot> host_;    // [num_host_blocks * block_size]
  int64_t num_swapped_out_blocks_ = 0;
  int64_t num_swapped_in_blocks_ = 0;
  int64_t num_copied_blocks_ = 0;
};

}  // namespace vellum::core::testing
