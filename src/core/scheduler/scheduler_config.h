// SchedulerConfig: vLLM's scheduler knobs (spec §2.1, vllm/config/scheduler.py) plus the V0
// preemption mode. Plain data; validate() says what is wrong and how to fix it.
#pragma once

#include <cstdint>

namespace vellum::core {

enum class SchedulingPolicy {
  kFcfs,      // first come, first served; preemption victim = newest running request
  kPriority,  // lowest (priority, arrival_time) first; victim = worst running request
};

enum class PreemptionMode {
  kRecompute,  // free the blocks, requeue at the front of waiting, recompute prompt + outputs
  kSwap,       // V0: move the blocks to the host tier, swap them back in later
};

struct SchedulerConfig {
  int max_num_seqs = 128;             // cap on the number of running requests; >= 1
  int max_num_batched_tokens = 2048;  // per-step token budget; >= max_num_seqs
  // 0: max_num_batched_tokens. The budget schedule() actually uses.
  int max_num_scheduled_tokens = 0;
  int max_model_len = 8192;  // must equal the KV cache manager's max_model_len
  bool enable_chunked_prefill = true;
  // 0: off. Caps the tokens any one request gets per step (long prompts are chunked).
  int long_prefill_token_threshold = 0;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  // Admission gate: a waiting request is admitted only if its whole current sequence (prompt +
  // prior output, capped at max_model_len) fits in the free blocks now (spec §1.6 step 3).
  bool scheduler_reserve_full_isl = true;
  // Extra KV slots reserved for speculative tokens of running requests (0 without drafts).
  int num_lookahead_tokens = 0;

  int token_budget() const {
    return max_num_scheduled_tokens > 0 ? max_num_scheduled_tokens : max_num_batched_tokens;
  }
  // Throws kInvalidArgument naming the offending field and the fix.
  void validate() const;
};

}  // namespace vellum::core
