// Scheduler behaviour beyond the numbered scenarios: FCFS preemption rules, aborts at every stage,
// prefix-cache hits, the admission gate, plan-then-commit, what ScheduledRequest carries, and
// argument checking.
#include <gtest/gtest.h>

#include "core/scheduler/scheduler.h"
#include "scheduler_test_util.h"
#include "vellum/status.h"

namespace vellum::core::testing {
namespace {

using Ids = std::vector<std::string>;

std::vector<EngineCoreOutput> step(Scheduler& s, TokenId token = 7) {
  const SchedulerOutput out = s.schedule();
  return s.update_from_output(out, sample_all(out, token));
}

// bs 16, 4 usable blocks: three 16-token requests hold 2 blocks each once decoding (17 tokens).
TEST(SchedulerBehaviour, FcfsPreemptsTheNewestAndNeverAdmitsInThatStep) {
  auto s = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 256, .block_size = 16,
                             .num_blocks = 5});
  auto requests = create_requests(3, 16);
  for (auto& r : requests) s->add_request(r);
  SchedulerOutput out = s->schedule();  // 16 tokens = 1 block each; 1 block left
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"0", "1", "2"}));
  s->update_from_output(out, sample_all(out, 7));  // 17 tokens each: a 2nd block is needed
  auto late = create_requests(1, 4, 16, {}, 3)[0];
  s->add_request(late);

  out = s->schedule();
  // "0" takes the last free block for token 17; "1" needs one more: the newest running request
  // ("2") is preempted and "1" gets its block. Nothing is admitted in a step with a preemption.
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"0", "1"}));
  EXPECT_EQ(out.preempted_req_ids, (Ids{"2"}));
  EXPECT_EQ(s->waiting_request_ids(), (Ids{"2", "3"}));  // preempted goes to the head
  EXPECT_EQ(requests[2]->status, RequestStatus::kPreempted);
  EXPECT_EQ(requests[2]->num_computed_tokens, 0);
  EXPECT_EQ(s->num_preemptions_total(), 1);
  s->check_invariants();
}

TEST(SchedulerBehaviour, RequestPreemptsItselfWhenItIsTheNewest) {
  auto s = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 256, .block_size = 16,
                             .num_blocks = 3});
  auto requests = create_requests(2, 16);
  for (auto& r : requests) s->add_request(r);
  step(*s);  // 1 block each, pool full; both sample -> 17 tokens
  const SchedulerOutput out = s->schedule();
  // "0" needs a 2nd block: "1" (the newest) is preempted and its block goes to "0".
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"0"}));
  EXPECT_EQ(out.preempted_req_ids, (Ids{"1"}));

  auto s2 = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 256, .block_size = 16,
                              .num_blocks = 2});
  auto only = create_requests(1, 16)[0];
  s2->add_request(only);
  step(*s2);  // 17 tokens need 2 blocks; only 1 exists: it preempts itself
  const SchedulerOutput out2 = s2->schedule();
  EXPECT_TRUE(out2.scheduled_requests.empty());
  EXPECT_EQ(out2.preempted_req_ids, (Ids{"0"}));
  EXPECT_EQ(only->status, RequestStatus::kPreempted);
  s2->check_invariants();
}

// vLLM test_priority_scheduling_preemption (block math from its docstring): under block pressure
// the worst-priority running request is preempted even though it was admitted first, and the
// step it was already served in is undone.
TEST(SchedulerBehaviour, PriorityPreemptsTheWorstRunningRequestNotTheNewest) {
  auto s = create_scheduler({.max_num_seqs = 3, .max_num_batched_tokens = 200, .block_size = 16,
                             .num_blocks = 6, .policy = SchedulingPolicy::kPriority});
  auto lo = make_request("lo1", std::vector<TokenId>(32, 1), 16, {.priority = 5, .arrival_time = 1});
  s->add_request(lo);
  step(*s);  // 2 blocks, 3 free; 33 tokens
  auto hi = make_request("hi1", std::vector<TokenId>(32, 2), 16, {.priority = 0, .arrival_time = 2});
  s->add_request(hi);
  SchedulerOutput out = s->schedule();  // lo1 takes its 3rd block, hi1 gets 2: 0 free
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"lo1", "hi1"}));
  EXPECT_EQ(s->kv_cache_manager().num_free_blocks(), 0);
  s->update_from_output(out, sample_all(out, 7));

  out = s->schedule();  // hi1 needs a 3rd block: lo1 (served first this step) is the victim
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"hi1"}));
  EXPECT_EQ(out.total_num_scheduled_tokens, 1);
  EXPECT_EQ(out.preempted_req_ids, (Ids{"lo1"}));
  EXPECT_EQ(lo->status, RequestStatus::kPreempted);
  EXPECT_EQ(s->running_request_ids(), (Ids{"hi1"}));
  s->check_invariants();
}

TEST(SchedulerBehaviour, AbortAtEveryStageFreesBlocksAndReportsOnce) {
  auto s = create_scheduler({.max_num_seqs = 8, .max_num_batched_tokens = 64,
                             .long_prefill_token_threshold = 16, .block_size = 4,
                             .num_blocks = 64});
  const int usable = 63;
  auto requests = create_requests(4, 40, 4);
  for (auto& r : requests) s->add_request(r);
  SchedulerOutput out = s->schedule();  // 16 tokens each for "0".."3": all mid-prefill
  EXPECT_EQ(out.total_num_scheduled_tokens, 64);

  // Mid-prefill abort while the step is "executing": its output is skipped.
  s->finish_request("1", RequestStatus::kFinishedAborted);
  auto outputs = s->update_from_output(out, sample_all(out, 7));
  EXPECT_TRUE(outputs.empty());
  EXPECT_EQ(requests[1]->status, RequestStatus::kFinishedAborted);
  EXPECT_EQ(s->get_request("1"), nullptr);

  // Waiting (never allocated) abort.
  auto waiting = create_requests(1, 8, 4, {}, 9)[0];
  s->add_request(waiting);
  s->finish_request("9", RequestStatus::kFinishedAborted);
  // Unknown and already finished ids are ignored.
  s->finish_request("1", RequestStatus::kFinishedAborted);
  s->finish_request("nope", RequestStatus::kFinishedAborted);

  out = s->schedule();
  EXPECT_EQ(out.finished_req_ids, (Ids{"1", "9"}));
  s->update_from_output(out, sample_all(out, 7));
  out = s->schedule();
  EXPECT_TRUE(out.finished_req_ids.empty());  // reported exactly once
  s->update_from_output(out, sample_all(out, 7));
  // Running-decode abort and a full drain.
  while (requests[0]->num_output_tokens() == 0) step(*s);
  s->finish_request("0", RequestStatus::kFinishedAborted);
  const std::string rest[] = {"2", "3"};
  s->finish_requests(rest, RequestStatus::kFinishedAborted);
  EXPECT_FALSE(s->has_unfinished_requests());
  EXPECT_EQ(s->kv_cache_manager().num_free_blocks(), usable);
  s->check_invariants();
  EXPECT_THROW(s->finish_request("0", RequestStatus::kRunning), vellum::Error);
}

TEST(SchedulerBehaviour, AbortOfAPreemptedRequestRemovesItFromWaiting) {
  auto s = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 256, .block_size = 16,
                             .num_blocks = 3});
  auto requests = create_requests(2, 16);
  for (auto& r : requests) s->add_request(r);
  step(*s);
  step(*s);  // "1" preempted
  ASSERT_EQ(requests[1]->status, RequestStatus::kPreempted);
  EXPECT_EQ(requests[1]->num_output_tokens(), 1);
  s->finish_request("1", RequestStatus::kFinishedAborted);
  EXPECT_EQ(s->num_waiting(), 0);
  s->check_invariants();
}

TEST(SchedulerBehaviour, PrefixCacheHitsSkipComputedTokensAndAreReported) {
  auto s = create_scheduler({.block_size = 16, .enable_prefix_caching = true, .log_stats = true});
  std::vector<TokenId> common(48);
  for (int i = 0; i < 48; ++i) common[static_cast<size_t>(i)] = i;
  std::vector<TokenId> p0 = common, p1 = common;
  p0.insert(p0.end(), {100, 101, 102});
  p1.insert(p1.end(), {200, 201});
  s->add_request(make_request("a", p0, 16));
  auto out_steps = step(*s);
  ASSERT_EQ(out_steps.size(), 1u);
  EXPECT_EQ(out_steps[0].num_cached_tokens, 0);

  auto b = make_request("b", p1, 16);
  s->add_request(b);
  const SchedulerOutput out = s->schedule();
  const ScheduledRequest* sb = out.find("b");
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sb->kind, ScheduledKind::kNew);
  EXPECT_EQ(sb->num_computed_tokens, 48);
  EXPECT_EQ(sb->num_scheduled_tokens, 2);
  EXPECT_EQ(sb->token_ids, (std::vector<TokenId>{200, 201}));
  ASSERT_EQ(sb->block_ids().size(), 4u);
  const ScheduledRequest* sa = out.find("a");
  ASSERT_NE(sa, nullptr);
  EXPECT_TRUE(std::equal(sa->block_ids().begin(), sa->block_ids().begin() + 3, sb->block_ids().begin()));
  EXPECT_EQ(b->num_cached_tokens, 48);
  const auto outputs = s->update_from_output(out, sample_all(out, 7));
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[1].request_id, "b");
  EXPECT_EQ(outputs[1].num_cached_tokens, 48);
  EXPECT_EQ(outputs[1].num_prompt_tokens, 50);

  const SchedulerStats stats = s->make_stats();
  ASSERT_TRUE(stats.prefix_cache_stats.has_value());
  EXPECT_EQ(stats.prefix_cache_stats->requests, 2);
  EXPECT_EQ(stats.prefix_cache_stats->queries, 51 + 50);
  EXPECT_EQ(stats.prefix_cache_stats->hits, 48);
  EXPECT_EQ(stats.num_running_reqs, 2);
  EXPECT_GT(stats.kv_cache_usage, 0.0);
}

TEST(SchedulerBehaviour, FullSequenceGateIsStrictHeadOfLineAndLeavesNoTrace) {
  // 4 usable blocks of 16. "big" (80 tokens = 5 blocks) can never pass the gate while "small"
  // (16 tokens) waits behind it: FCFS admission stops at the head.
  auto s = create_scheduler({.max_num_batched_tokens = 256, .block_size = 16, .num_blocks = 5,
                             .enable_prefix_caching = true});
  auto first = make_request("first", std::vector<TokenId>(40, 1), 16);
  s->add_request(first);
  step(*s);  // 3 blocks held
  // 80 tokens: hits first's 2 full blocks, still needs 3 more with 1 free.
  auto big = make_request("big", std::vector<TokenId>(80, 1), 16);
  s->add_request(big);
  s->add_request(make_request("small", {5}, 16));
  const KVCacheManager& kv = s->kv_cache_manager();
  std::vector<int> refs_before;
  for (BlockId b = 1; b < kv.block_pool().num_blocks(); ++b) {
    refs_before.push_back(kv.block_pool().block(b).ref_cnt);
  }
  const int free_before = kv.num_free_blocks();
  const SchedulerOutput out = s->schedule();
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"first"}));
  EXPECT_EQ(s->waiting_request_ids(), (Ids{"big", "small"}));
  // Nothing of big's attempt remains: no blocks, no touched hits, no computed tokens.
  EXPECT_EQ(kv.num_free_blocks(), free_before);
  for (BlockId b = 1; b < kv.block_pool().num_blocks(); ++b) {
    EXPECT_EQ(kv.block_pool().block(b).ref_cnt, refs_before[static_cast<size_t>(b - 1)]) << b;
  }
  EXPECT_FALSE(kv.is_resident("big"));
  EXPECT_EQ(big->num_computed_tokens, 0);
  EXPECT_EQ(big->num_cached_tokens, -1);
  EXPECT_EQ(big->status, RequestStatus::kWaiting);
  s->check_invariants();
}

TEST(SchedulerBehaviour, ChunkedPrefillCarriesTokensBlocksAndSamplingFlag) {
  auto s = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 8, .max_model_len = 64,
                             .block_size = 4, .num_blocks = 32});
  std::vector<TokenId> prompt;
  for (int i = 0; i < 13; ++i) prompt.push_back(100 + i);
  auto r = make_request("r", prompt, 4, {.max_tokens = 2});
  s->add_request(r);
  SchedulerOutput out = s->schedule();
  ASSERT_EQ(out.scheduled_requests.size(), 1u);
  EXPECT_EQ(out.scheduled_requests[0].token_ids, std::vector<TokenId>(prompt.begin(), prompt.begin() + 8));
  EXPECT_EQ(out.scheduled_requests[0].block_ids().size(), 2u);
  EXPECT_FALSE(out.scheduled_requests[0].samples_token);
  // A token for a partial chunk is a runner bug.
  EXPECT_THROW(s->update_from_output(out, sampled({{"r", {1}}})), vellum::Error);
  s->update_from_output(out, sample_all(out, 1));

  out = s->schedule();
  EXPECT_EQ(out.scheduled_requests[0].num_computed_tokens, 8);
  EXPECT_EQ(out.scheduled_requests[0].token_ids, std::vector<TokenId>(prompt.begin() + 8, prompt.end()));
  EXPECT_EQ(out.scheduled_requests[0].block_ids().size(), 4u);
  EXPECT_TRUE(out.scheduled_requests[0].samples_token);
  // And a missing token for a finished prompt is one too.
  EXPECT_THROW(s->update_from_output(out, ModelRunnerOutput{}), vellum::Error);
  s->update_from_output(out, sample_all(out, 55));

  out = s->schedule();
  EXPECT_EQ(out.scheduled_requests[0].token_ids, std::vector<TokenId>{55});
  EXPECT_EQ(out.scheduled_requests[0].num_computed_tokens, 13);
  const auto outputs = s->update_from_output(out, sample_all(out, 56));
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_STREQ(outputs[0].finish_reason(), "length");
  EXPECT_EQ(to_vector(r->output_token_ids()), (std::vector<TokenId>{55, 56}));
}

TEST(SchedulerBehaviour, MaxModelLenCapsTheLength) {
  auto s = create_scheduler({.max_num_batched_tokens = 64, .max_model_len = 12, .block_size = 4,
                             .num_blocks = 16});
  auto r = make_request("r", std::vector<TokenId>(10, 3), 4, {.max_tokens = 100});
  s->add_request(r);
  step(*s);
  const auto outputs = step(*s);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(r->num_tokens(), 12);
  EXPECT_EQ(r->status, RequestStatus::kFinishedLengthCapped);
}

// Pipeline parallelism keeps two steps in flight and gives each half of the running requests:
// the running limit leaves the rest for the next step, and requests whose tokens are still in
// flight are skipped without counting against it.
TEST(SchedulerBehaviour, RunningLimitSpreadsRunningRequestsOverStepsInFlight) {
  auto s = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 256});
  auto requests = create_requests(4, 16);
  for (auto& r : requests) s->add_request(r);
  SchedulerOutput prompts = s->schedule(2);  // admission of waiting requests is not limited
  EXPECT_EQ(prompts.scheduled_req_ids(), (Ids{"0", "1", "2", "3"}));
  s->update_from_output(prompts, sample_all(prompts, 7));

  const SchedulerOutput a = s->schedule(2);
  EXPECT_EQ(a.scheduled_req_ids(), (Ids{"0", "1"}));
  const SchedulerOutput b = s->schedule(2);  // "0" and "1" wait for their tokens
  EXPECT_EQ(b.scheduled_req_ids(), (Ids{"2", "3"}));
  EXPECT_TRUE(s->schedule(2).scheduled_requests.empty());  // everything is in flight
  s->update_from_output(a, sample_all(a, 8));
  const SchedulerOutput c = s->schedule(2);
  EXPECT_EQ(c.scheduled_req_ids(), (Ids{"0", "1"}));
  EXPECT_EQ(c.num_scheduled_tokens("0"), 1);
  s->update_from_output(b, sample_all(b, 8));
  s->update_from_output(c, sample_all(c, 9));
  for (const auto& r : requests) {
    EXPECT_EQ(r->output_token_ids().size(), r->request_id() < "2" ? 3u : 2u) << r->request_id();
  }
  s->check_invariants();
  EXPECT_THROW(s->schedule(0), Error);
}

TEST(SchedulerBehaviour, RejectsBadConfigsAndRequests) {
  EXPECT_THROW(create_scheduler({.max_num_seqs = 0}), vellum::Error);
  EXPECT_THROW(create_scheduler({.max_num_seqs = 64, .max_num_batched_tokens = 32}), vellum::Error);
  EXPECT_THROW(create_scheduler({.max_num_batched_tokens = 512, .max_model_len = 1024,
                                 .enable_chunked_prefill = false}),
               vellum::Error);
  EXPECT_THROW(create_scheduler({.long_prefill_token_threshold = -1}), vellum::Error);
  {
    SchedulerConfig config;
    KVCacheConfig kv;
    kv.num_blocks = 8;
    kv.max_model_len = config.max_model_len + 1;
    EXPECT_THROW(Scheduler scheduler(config, kv), vellum::Error);
  }
  auto s = create_scheduler({.max_num_batched_tokens = 64, .max_model_len = 16});
  s->add_request(make_request("a", {1, 2}, 16));
  EXPECT_THROW(s->add_request(make_request("a", {1, 2}, 16)), vellum::Error);
  EXPECT_THROW(s->add_request(make_request("empty", {}, 16)), vellum::Error);
  EXPECT_THROW(s->add_request(make_request("long", std::vector<TokenId>(16, 1), 16)), vellum::Error);
  auto cached = create_scheduler({.enable_prefix_caching = true});
  EXPECT_THROW(cached->add_request(make_request("bs", {1, 2}, 8)), vellum::Error);
  EXPECT_THROW(cached->add_request(std::make_shared<Request>("nohash", std::vector<TokenId>{1})),
               vellum::Error);
}

}  // namespace
}  // namespace vellum::core::testing
