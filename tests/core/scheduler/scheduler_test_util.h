// Helpers for scheduler tests, mirroring vLLM's tests/v1/core/utils.py (create_scheduler,
// create_requests) with the defaults of spec §3 D.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/scheduler/scheduler.h"

namespace vellum::core::testing {

inline constexpr TokenId kEos = 50256;

struct TestSchedulerOptions {
  int max_num_seqs = 16;
  int max_num_batched_tokens = 8192;
  std::optional<int> max_model_len;  // default: max_num_batched_tokens
  bool enable_chunked_prefill = true;
  int long_prefill_token_threshold = 0;
  int block_size = 16;
  int num_blocks = 10000;
  bool enable_prefix_caching = false;
  SchedulingPolicy policy = SchedulingPolicy::kFcfs;
  PreemptionMode preemption_mode = PreemptionMode::kRecompute;
  int num_host_blocks = 0;
  bool log_stats = false;
  bool scheduler_reserve_full_isl = true;
};

inline std::unique_ptr<Scheduler> create_scheduler(const TestSchedulerOptions& o = {}) {
  SchedulerConfig config;
  config.max_num_seqs = o.max_num_seqs;
  config.max_num_batched_tokens = o.max_num_batched_tokens;
  config.max_model_len = o.max_model_len.value_or(o.max_num_batched_tokens);
  config.enable_chunked_prefill = o.enable_chunked_prefill;
  config.long_prefill_token_threshold = o.long_prefill_token_threshold;
  config.policy = o.policy;
  config.preemption_mode = o.preemption_mode;
  config.scheduler_reserve_full_isl = o.scheduler_reserve_full_isl;
  KVCacheConfig kv;
  kv.num_blocks = o.num_blocks;
  kv.block_size = o.block_size;
  kv.max_model_len = config.max_model_len;
  kv.enable_caching = o.enable_prefix_caching;
  kv.log_stats = o.log_stats;
  kv.num_host_blocks = o.num_host_blocks;
  return std::make_unique<Scheduler>(config, kv);
}

struct TestRequestOptions {
  int max_tokens = 16;
  int min_tokens = 0;
  std::optional<TokenId> eos_token_id = kEos;  // nullopt: ignore_eos
  std::vector<TokenId> stop_token_ids;
  int priority = 0;
  double arrival_time = 0.0;
  bool skip_reading_prefix_cache = false;  // what prompt_logprobs implies
  std::string seq_group_id;                // n > 1 / beam search group; empty: alone
  int max_num_seqs_in_group = 1;
  bool lockstep_group = false;             // beam search
};

inline std::shared_ptr<Request> make_request(const std::string& id, std::vector<TokenId> prompt,
                                             int block_size, const TestRequestOptions& o = {}) {
  RequestParams params;
  params.arrival_time = o.arrival_time;
  params.priority = o.priority;
  params.skip_reading_prefix_cache = o.skip_reading_prefix_cache;
  params.stop.max_tokens = o.max_tokens;
  params.stop.min_tokens = o.min_tokens;
  params.stop.eos_token_id = o.eos_token_id;
  params.stop.stop_token_ids = o.stop_token_ids;
  params.seq_group_id = o.seq_group_id;
  params.max_num_seqs_in_group = o.max_num_seqs_in_group;
  params.lockstep_group = o.lockstep_group;
  return std::make_shared<Request>(id, std::move(prompt), std::move(params),
                                   BlockHasher(block_size));
}

// Request i has id "i" and prompt [i] * num_tokens (vLLM's create_requests).
inline std::vector<std::shared_ptr<Request>> create_requests(int num_requests, int num_tokens = 10,
                                                             int block_size = 16,
                                                             const TestRequestOptions& o = {},
                                                             int first_id = 0) {
  std::vector<std::shared_ptr<Request>> requests;
  for (int i = first_id; i < first_id + num_requests; ++i) {
    requests.push_back(make_request(std::to_string(i),
                                    std::vector<TokenId>(static_cast<size_t>(num_tokens), i),
                                    block_size, o));
  }
  return requests;
}

// Runner output sampling `token` for every scheduled request that samples this step (and an
// empty list for partial prefill chunks).
inline ModelRunnerOutput sample_all(const SchedulerOutput& out, TokenId token) {
  ModelRunnerOutput r;
  for (const ScheduledRequest& s : out.scheduled_requests) {
    r.req_ids.push_back(s.request_id);
    r.sampled_token_ids.push_back(s.samples_token ? std::vector<TokenId>{token}
                                                  : std::vector<TokenId>{});
  }
  return r;
}

// Runner output with explicit lists per request id; other scheduled requests get none.
inline ModelRunnerOutput sampled(const std::map<std::string, std::vector<TokenId>>& tokens) {
  ModelRunnerOutput r;
  for (const auto& [id, t] : tokens) {
    r.req_ids.push_back(id);
    r.sampled_token_ids.push_back(t);
  }
  return r;
}

inline std::vector<TokenId> to_vector(std::span<const TokenId> s) { return {s.begin(), s.end()}; }

}  // namespace vellum::core::testing
