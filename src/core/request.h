// The state of one request as the KV cache manager and the scheduler see it (spec §2.2).
//
// Token state (prompt, output, all tokens) and the eagerly maintained block hashes are private so
// that they stay consistent: block_hashes() always covers every full block of all_token_ids()
// when the request was built with a BlockHasher. Scheduler state is plain public data that the
// scheduler mutates directly. Not thread-safe: owned and touched by the engine core thread only.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "core/block_hash.h"

namespace vellum::core {

// Ordered like vLLM's RequestStatus: every status after kSwapped is a finished one.
enum class RequestStatus : uint8_t {
  kWaiting,
  kWaitingForRemoteKvs,
  kRunning,
  kPreempted,  // recompute preemption: back in the waiting queue, KV blocks freed
  kSwapped,    // swap preemption (V0): KV blocks live in the host tier
  kFinishedStopped,
  kFinishedLengthCapped,
  kFinishedAborted,
  kFinishedIgnored,  // V0: can never fit (AllocStatus::kNever)
  kFinishedError,
};

inline bool is_finished(RequestStatus s) { return s > RequestStatus::kSwapped; }

// OpenAI finish_reason string of a finished status ("stop", "length", "abort", "error"); nullptr
// for an unfinished one.
const char* finish_reason_string(RequestStatus s);

// Stop conditions the scheduler checks in update_from_output (spec §2.6). The scheduler engineer
// may extend this struct; the KV cache manager never reads it.
struct RequestStopParams {
  int32_t max_tokens = std::numeric_limits<int32_t>::max();
  int32_t min_tokens = 0;
  std::optional<TokenId> eos_token_id;  // nullopt when ignore_eos is set or there is no EOS
  std::vector<TokenId> stop_token_ids;
};

// Everything about a request that is fixed at arrival, besides its id and prompt.
struct RequestParams {
  double arrival_time = 0.0;  // seconds, any monotonic origin; FCFS / priority tie-break
  int32_t priority = 0;       // lower value is served first (policy "priority")
  std::string cache_salt;     // empty: none. Mixed into the first block's hash only.
  int32_t lora_id = 0;        // 0: no adapter
  std::string lora_name;      // mixed into every block hash when lora_id != 0
  std::vector<MultiModalFeature> mm_features;  // sorted by offset; usually empty
  // Do not read the prefix cache (still write it). vLLM sets this when prompt_logprobs is on,
  // because cached positions would have no logits.
  bool skip_reading_prefix_cache = false;
  RequestStopParams stop;
  // Parallel sampling (n > 1) and beam search: the sequences of one user request form a group
  // sharing seq_group_id (empty: the request is a group of its own). Forked children copy it.
  std::string seq_group_id;
  // Sequences the group may run at once (n, or the beam width). The scheduler reserves that
  // many of max_num_seqs while any member runs (vLLM V0's get_max_num_running_seqs), so forks
  // never push the running count past the cap.
  int32_t max_num_seqs_in_group = 1;
  // Beam search: the members advance in lockstep (every live beam samples in the same step), so
  // the scheduler serves, preempts (by recompute) and resumes them together.
  bool lockstep_group = false;
};

// Why a request stopped: nothing, a stop token id, or a stop string.
using StopReason = std::variant<std::monostate, TokenId, std::string>;

class Request {
 public:
  // `block_hasher` nullopt: the request has no block hashes (prefix caching disabled).
  Request(std::string request_id, std::vector<TokenId> prompt_token_ids, RequestParams params = {},
          std::optional<BlockHasher> block_hasher = std::nullopt);

  const std::string& request_id() const { return request_id_; }
  const RequestParams& params() const { return params_; }
  // params().seq_group_id, or the request id for a request that is a group of its own.
  const std::string& group_id() const {
    return params_.seq_group_id.empty() ? request_id_ : params_.seq_group_id;
  }

  std::span<const TokenId> prompt_token_ids() const { return prompt_token_ids_; }
  std::span<const TokenId> output_token_ids() const { return output_token_ids_; }
  std::span<const TokenId> all_token_ids() const { return all_token_ids_; }
  int num_prompt_tokens() const { return static_cast<int>(prompt_token_ids_.size()); }
  int num_output_tokens() const { return static_cast<int>(output_token_ids_.size()); }
  int num_tokens() const { return static_cast<int>(all_token_ids_.size()); }
  int num_tokens_with_spec() const {
    return num_tokens() + static_cast<int>(spec_token_ids.size());
  }

  // Appends generated tokens and hashes any block they complete.
  void append_output_token_ids(TokenId token_id);
  void append_output_token_ids(std::span<const TokenId> token_ids);

  // Hashes of the full blocks of all_token_ids(), index i covering tokens [i*bs, (i+1)*bs).
  std::span<const BlockHash> block_hashes() const { return block_hashes_; }
  const std::optional<BlockHasher>& block_hasher() const { return block_hasher_; }

  // The sources of this request's extra hash keys (views into params()).
  ExtraKeySources extra_key_sources() const;

  bool skip_reading_prefix_cache() const { return params_.skip_reading_prefix_cache; }

  // ---- Scheduler state (mutated by the scheduler; the KV manager reads it) ----
  RequestStatus status = RequestStatus::kWaiting;
  // Tokens whose KV is (or is being, this step) written. Advanced at schedule time.
  int num_computed_tokens = 0;
  int num_preemptions = 0;
  // Prompt tokens served from the prefix cache at first admission; -1 until admitted. Set by
  // KVCacheManager::allocate_slots the first time the request is allocated.
  int num_cached_tokens = -1;
  std::vector<TokenId> spec_token_ids;  // draft tokens proposed for the next step
  // Draft tokens scheduled in the step in flight (counted in num_computed_tokens until
  // update_from_output rolls back the rejected ones).
  int num_scheduled_draft_tokens = 0;
  StopReason stop_reason;

 private:
  void update_block_hashes();

  std::string request_id_;
  RequestParams params_;
  std::vector<TokenId> prompt_token_ids_;
  std::vector<TokenId> output_token_ids_;
  std::vector<TokenId> all_token_ids_;  // prompt followed by output
  std::optional<BlockHasher> block_hasher_;
  std::vector<BlockHash> block_hashes_;
};

}  // namespace vellum::core
