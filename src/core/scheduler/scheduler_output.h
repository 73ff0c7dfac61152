// What one schedule() decides (SchedulerOutput), what the model runner hands back
// (ModelRunnerOutput) and what update_from_output returns per request (EngineCoreOutput).
// Spec §2.4-§2.5; vllm/v1/core/sched/output.py, vllm/v1/outputs.py, vllm/v1/engine/__init__.py.
//
// SchedulerOutput is self-contained: token ids and block tables are copies taken at schedule
// time, so it stays valid while later steps are scheduled (overlapping steps, spec S34).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/request.h"

namespace vellum::core {

// How a scheduled request got into this step.
enum class ScheduledKind {
  kNew,        // first admission (vLLM scheduled_new_reqs)
  kResumed,    // re-admitted after recompute preemption: prompt + outputs are recomputed
  kSwappedIn,  // swapped back in this step (its blocks are in blocks_to_swap_in)
  kRunning,    // was already running (prefill chunk or decode)
};

struct ScheduledRequest {
  std::string request_id;
  // Shared with the Scheduler; it stays alive while this output is alive, even if the request
  // finishes. The scheduler mutates it in later steps (single engine thread).
  std::shared_ptr<const Request> request;
  ScheduledKind kind = ScheduledKind::kRunning;
  // Tokens already in the KV cache before this step (prefix-cache hits included): the position of
  // token_ids[0].
  int num_computed_tokens = 0;
  int num_scheduled_tokens = 0;
  // [num_scheduled_tokens]: all_token_ids()[num_computed_tokens, ...) followed by the scheduled
  // draft tokens (spec_token_ids), which are its last spec_token_ids.size() entries.
  std::vector<TokenId> token_ids;
  std::vector<TokenId> spec_token_ids;
  // The request's whole block table in each KV cache group after this step's allocation (device
  // ids; kNullBlockId for sliding-window holes). Each covers num_computed_tokens +
  // num_scheduled_tokens (+ lookahead).
  std::vector<std::vector<BlockId>> group_block_ids;
  // Group 0's table: the whole table of a single-group (full or sliding) model.
  const std::vector<BlockId>& block_ids() const { return group_block_ids.front(); }
  // True when this step reaches the end of the known tokens (prompt finished, or decode): the
  // runner computes logits for the last non-draft token (plus one per draft token) and samples.
  // False for a partial prefill chunk, which must get an empty sampled list.
  bool samples_token = false;
};

struct SchedulerOutput {
  // Running requests first (in running order), then swapped-in, then new and resumed ones in
  // admission order.
  std::vector<ScheduledRequest> scheduled_requests;
  int total_num_scheduled_tokens = 0;

  // Block moves the runner applies before the forward pass, in this order:
  //   1. blocks_to_swap_out (src = device id, dst = host id): device blocks are freed by the
  //      swap-out and may be reused in the same step, so they must be read first;
  //   2. blocks_to_swap_in (src = host id, dst = device id);
  //   3. blocks_to_copy (copy-on-write, device -> device).
  std::vector<BlockSwap> blocks_to_swap_out;
  std::vector<BlockSwap> blocks_to_swap_in;
  std::vector<BlockCopy> blocks_to_copy;

  // Requests preempted in this step (recompute or swap), in preemption order.
  std::vector<std::string> preempted_req_ids;
  // Requests that finished (any reason) since the previous schedule(); each is reported once, so
  // the runner can drop per-request state.
  std::vector<std::string> finished_req_ids;

  const ScheduledRequest* find(std::string_view request_id) const;
  // 0 when the request is not scheduled in this step.
  int num_scheduled_tokens(std::string_view request_id) const;
  int num_new_requests() const;     // kind == kNew
  // vLLM's scheduled_cached_reqs: everything but kNew.
  int num_cached_requests() const;
  std::vector<std::string> resumed_req_ids() const;  // kind == kResumed
  std::vector<std::string> scheduled_req_ids() const;
};

// What the model runner returns for one SchedulerOutput.
struct ModelRunnerOutput {
  // Parallel lists. One entry per scheduled request: for a request with samples_token, 1 sampled
  // token (+ accepted draft tokens); for a partial prefill chunk, an empty list (or no entry).
  // update_from_output throws kInternal when a samples_token request gets no token or a partial
  // chunk gets one: either would be a runner bug that silently stalls or corrupts the request.
  std::vector<std::string> req_ids;
  std::vector<std::vector<TokenId>> sampled_token_ids;
};

// Per-request result of update_from_output (vLLM EngineCoreOutput). Emitted when a request got
// new tokens or finished.
struct EngineCoreOutput {
  std::string request_id;
  // Tokens appended this step, after trimming at a stop (EOS / stop token kept, nothing after it).
  // Logprobs computed for the sampled tokens should be trimmed to the same length.
  std::vector<TokenId> new_token_ids;
  RequestStatus status = RequestStatus::kRunning;  // a finished status when the request finished
  StopReason stop_reason;  // the stop token id for a stop-token finish, else empty
  int num_cached_tokens = 0;  // prompt tokens served by the prefix cache at first admission
  int num_prompt_tokens = 0;

  bool finished() const { return is_finished(status); }
  // "stop", "length", "abort", "error"; nullptr while unfinished.
  const char* finish_reason() const { return finish_reason_string(status); }
};

}  // namespace vellum::core
