// Scheduler: vLLM V1's continuous-batching scheduler (spec §2.3-§2.6, vllm/v1/core/sched/
// scheduler.py) with V0's swap preemption (spec §2.10) as an option.
//
// One step = schedule() -> model runner -> update_from_output(). There are no prefill and decode
// phases: every running request advances num_computed_tokens toward num_tokens; a step mixes
// prefill chunks and decode tokens up to the token budget. Order of service in schedule():
//   1. running requests, in admission order (preempting the newest, or under the priority policy
//      the worst, running request when the KV cache is full; a request may preempt itself);
//   2. swapped-out requests (swap mode), only if nothing was preempted in this step;
//   3. waiting requests (new, then recompute-preempted ones at the head), only if nothing was
//      preempted and nothing is left swapped out. Strict head-of-line: the first waiting request
//      that does not fit stops admission.
// Plan, then commit: requests that end up not scheduled keep no trace of the attempt (a failed
// allocate_slots changes nothing; the hit lookup only records prefix-cache stats).
//
// Ownership: the Scheduler owns the KVCacheManager and shares ownership of the Requests (callers
// may keep a shared_ptr to inspect a request after it finished). Not thread-safe: the engine core
// thread only.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/kv_cache_manager.h"
#include "core/prefix_cache_stats.h"
#include "core/request.h"
#include "core/scheduler/request_queue.h"
#include "core/scheduler/scheduler_config.h"
#include "core/scheduler/scheduler_output.h"

namespace vellum::core {

struct SchedulerStats {
  int num_running_reqs = 0;
  int num_waiting_reqs = 0;  // waiting + swapped out (vLLM's num_requests_waiting)
  int num_swapped_reqs = 0;
  double kv_cache_usage = 0.0;     // BlockPool usage, 0..1
  int64_t num_preempted_reqs = 0;  // preemptions since the previous make_stats()
  std::optional<PrefixCacheStats> prefix_cache_stats;  // when KVCacheConfig.log_stats
};

class Scheduler {
 public:
  // Throws kInvalidArgument on an invalid config, or when config.max_model_len differs from
  // kv_config.max_model_len.
  Scheduler(const SchedulerConfig& config, const KVCacheConfig& kv_config);
  // Queues hold pointers into requests_: not copyable or movable.
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const SchedulerConfig& config() const { return config_; }
  // The model runner reads block tables here; only the Scheduler mutates it.
  KVCacheManager& kv_cache_manager() { return kv_; }
  const KVCacheManager& kv_cache_manager() const { return kv_; }

  // Queues a new request (status kWaiting, nothing computed). Its prompt must be non-empty and
  // shorter than max_model_len (validate with validate_prompt_len first); with prefix caching on
  // it must carry a BlockHasher of the KV block size. Throws kInvalidArgument otherwise or on a
  // duplicate id.
  void add_request(std::shared_ptr<Request> request);

  // Finishes requests wherever they are (waiting, mid-prefill, running, preempted, swapped out)
  // with `finished_status` (e.g. kFinishedAborted) and frees their blocks. Unknown or already
  // finished ids are ignored. The ids are reported in the next SchedulerOutput.finished_req_ids.
  void finish_requests(std::span<const std::string> request_ids, RequestStatus finished_status);
  void finish_request(std::string_view request_id, RequestStatus finished_status);

  // Decides the next step and advances the scheduled requests' num_computed_tokens.
  // running_limit: at most this many running requests get tokens in this step (a lockstep group
  // counts whole); the others wait for a later step, as when the token budget runs out. Pipeline
  // parallelism spreads the running requests over the steps in flight with it.
  SchedulerOutput schedule(int running_limit = std::numeric_limits<int>::max());

  // Applies the sampled tokens of a step: appends them (none for partial prefill chunks), runs
  // check_stop after each and drops the tokens after a stop, frees finished requests. Requests
  // finished meanwhile (aborted during execution) are skipped; a request preempted during
  // execution still receives its tokens. Returns one output per request that got tokens or
  // finished, plus requests the scheduler itself finished since the last call (kFinishedIgnored:
  // a swapped-out request that can never be swapped back in).
  std::vector<EngineCoreOutput> update_from_output(const SchedulerOutput& scheduler_output,
                                                   const ModelRunnerOutput& runner_output);

  // Speculative decoding (vLLM's update_draft_token_ids): the draft tokens a running request in
  // its decode phase verifies in its next step, as extra query positions that count against the
  // token budget. Replaces any earlier drafts; preemption drops them. After the step,
  // update_from_output rolls num_computed_tokens back past the rejected drafts and releases
  // their blocks. Throws kInvalidArgument unless the request is running with only its last
  // token left to compute.
  void set_draft_token_ids(std::string_view request_id, std::vector<TokenId> draft_token_ids);

  // Clears the prefix cache; false if blocks are in use. With reset_running_requests, every running
  // request is first preempted (recompute; tail first, so waiting keeps their order) and reported
  // in the next SchedulerOutput.preempted_req_ids.
  bool reset_prefix_cache(bool reset_running_requests = false);

  // ---- Queries ----
  bool has_unfinished_requests() const { return num_unfinished_requests() > 0; }
  // Finished ids not yet reported by schedule().
  bool has_finished_requests() const { return !finished_req_ids_.empty(); }
  bool has_requests() const { return has_unfinished_requests() || has_finished_requests(); }
  int num_unfinished_requests() const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return waiting_.size(); }
  int num_swapped() const { return swapped_.size(); }
  // Queue contents in serving order.
  std::vector<std::string> running_request_ids() const;
  std::vector<std::string> waiting_request_ids() const;
  std::vector<std::string> swapped_request_ids() const;
  // nullptr when unknown or finished.
  const Request* get_request(std::string_view request_id) const;
  int64_t num_preemptions_total() const { return num_preemptions_total_; }

  // Metrics snapshot; resets the per-interval counters and the prefix-cache stats.
  SchedulerStats make_stats();

  // Forks a running request (parallel sampling and beam search, spec §2.10): `child` (new: status
  // waiting, nothing computed; same prompt, its own outputs) joins running_ at the end, sharing
  // every KV block of the parent (KVCacheManager::fork, ref counts only). Its num_computed_tokens
  // and num_cached_tokens become the parent's. The first write into a shared partial block copies
  // it (copy-on-write); the copy is reported in the next SchedulerOutput.blocks_to_copy. Throws
  // kInvalidArgument when the parent is not running, the child id is in use, or the child has
  // fewer tokens than the parent has computed.
  void fork_request(std::string_view parent_id, std::shared_ptr<Request> child);

  // Queue/status/KV consistency (and KVCacheManager::check_invariants). Throws kInternal on the
  // first violation. O(requests + blocks); for tests.
  void check_invariants() const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // A request picked for this step; committed into the SchedulerOutput at the end of schedule().
  struct Planned {
    Request* request;
    int num_tokens;
    ScheduledKind kind;
  };

  void schedule_running(int& token_budget, int running_limit, std::vector<Planned>& planned,
                        std::vector<Request*>& preempted);
  // Tokens for each member of a unit (one request, or a lockstep group's running members in
  // running order). A lockstep group samples only when every member finishes this step; until
  // then each member stops one token short, so none samples alone.
  std::vector<int> plan_unit_tokens(std::span<Request* const> unit, int token_budget) const;
  // Removes the victim (and every running member of its lockstep group) from running_, undoes
  // what this step planned for them and preempts them.
  void preempt_unit(Request* victim, int& token_budget, std::vector<Planned>& planned,
                    std::vector<Request*>& preempted);
  // Admits the waiting members of the head request's lockstep group together, or none of them.
  bool admit_lockstep_group(Request* head, int& token_budget, std::vector<Planned>& planned);
  // Members of the request's group in running_ (running order) / waiting_ (serving order).
  std::vector<Request*> running_members(const Request& request) const;
  std::vector<Request*> waiting_members(const Request& request) const;
  // Seats of max_num_seqs taken by running requests: each group with a running member holds its
  // max_num_seqs_in_group.
  int num_running_seats() const;
  // Seats admitting `request` would add: none if a member of its group is already running.
  int seats_needed(const Request& request) const;
  void schedule_swapped(int& token_budget, std::vector<Planned>& planned);
  void schedule_waiting(int& token_budget, std::vector<Planned>& planned);
  // Tokens a running / swapped-in request may compute now under the budget and caps.
  int num_new_tokens_for(const Request& request, int token_budget) const;
  ScheduledRequest commit(const Planned& planned);
  // Preempts a request just removed from running_ (recompute or swap, per config).
  void preempt(Request& request, bool force_recompute);
  // Frees a finished request (already out of every queue): KV blocks, the id is reported once.
  void free_request(Request& request);
  void remove_from_queue(Request& request, RequestStatus queue_status);
  std::shared_ptr<Request> shared(const Request& request) const;

  SchedulerConfig config_;
  KVCacheManager kv_;
  std::unordered_map<std::string, std::shared_ptr<Request>, StringHash, std::equal_to<>> requests_;
  RequestQueue waiting_;             // new and recompute-preempted requests
  RequestQueue swapped_;             // swap-preempted requests (same policy as waiting_)
  std::vector<Request*> running_;    // admission order
  std::vector<std::string> finished_req_ids_;  // since the last schedule()
  // Preemptions and swap-outs made outside schedule() (reset_prefix_cache) or during it, reported
  // in the next SchedulerOutput.
  std::vector<std::string> pending_preempted_ids_;
  std::vector<BlockSwap> pending_swap_out_;
  std::vector<BlockSwap> swap_in_moves_;  // swap-ins of the step being scheduled
  // Outputs of requests the scheduler finished itself (kFinishedIgnored), emitted by the next
  // update_from_output.
  std::vector<EngineCoreOutput> pending_outputs_;
  int64_t num_preemptions_total_ = 0;
  int64_t num_preemptions_since_stats_ = 0;
  bool warned_swap_fallback_ = false;
};

}  // namespace vellum::core
