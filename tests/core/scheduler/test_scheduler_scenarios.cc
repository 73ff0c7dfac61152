// Scheduler acceptance scenarios S27-S42 of spec/kv-cache-and-scheduler.md §3 D, with the spec's
// exact expectations. "Step" = schedule() then update_from_output() with the given tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/scheduler/scheduler.h"
#include "core/stop_checker.h"
#include "scheduler_test_util.h"

namespace vellum::core::testing {
namespace {

using Ids = std::vector<std::string>;

TEST(SchedulerScenarios, S27_AddRequestsGrowsWaiting) {
  auto scheduler = create_scheduler();
  auto requests = create_requests(10);
  for (size_t i = 0; i < requests.size(); ++i) {
    scheduler->add_request(requests[i]);
    EXPECT_EQ(scheduler->num_waiting(), static_cast<int>(i) + 1);
    EXPECT_NE(scheduler->get_request(requests[i]->request_id()), nullptr);
  }
}

TEST(SchedulerScenarios, S27_FinishRequestAbortedRemovesFromWaiting) {
  auto scheduler = create_scheduler();
  auto requests = create_requests(10);
  for (auto& r : requests) scheduler->add_request(r);
  for (size_t i = 0; i < requests.size(); ++i) {
    scheduler->finish_request(requests[i]->request_id(), RequestStatus::kFinishedAborted);
    EXPECT_EQ(scheduler->get_request(requests[i]->request_id()), nullptr);
    EXPECT_EQ(scheduler->num_waiting(), 9 - static_cast<int>(i));
    EXPECT_EQ(requests[i]->status, RequestStatus::kFinishedAborted);
  }
}

TEST(SchedulerScenarios, S27_NumUnfinishedAfterStopped) {
  auto scheduler = create_scheduler();
  auto requests = create_requests(10);
  for (auto& r : requests) scheduler->add_request(r);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string ids[] = {requests[i]->request_id()};
    scheduler->finish_requests(ids, RequestStatus::kFinishedStopped);
    EXPECT_EQ(scheduler->num_unfinished_requests(), 9 - static_cast<int>(i));
  }
  EXPECT_FALSE(scheduler->has_unfinished_requests());
  EXPECT_TRUE(scheduler->has_finished_requests());
  EXPECT_EQ(scheduler->schedule().finished_req_ids.size(), 10u);
  EXPECT_FALSE(scheduler->has_requests());
}

class S28 : public ::testing::TestWithParam<bool> {};  // param: prefix caching + prompt logprobs

TEST_P(S28, S28_FirstStepAdmitsEverythingThatFits) {
  const bool caching = GetParam();
  auto scheduler = create_scheduler({.enable_prefix_caching = caching});
  TestRequestOptions ro;
  ro.skip_reading_prefix_cache = caching;  // prompt_logprobs set
  auto requests = create_requests(10, 10, 16, ro);
  for (auto& r : requests) scheduler->add_request(r);
  const SchedulerOutput out = scheduler->schedule();
  EXPECT_EQ(out.num_new_requests(), 10);
  EXPECT_EQ(out.num_cached_requests(), 0);
  EXPECT_TRUE(out.finished_req_ids.empty());
  for (auto& r : requests) EXPECT_EQ(out.num_scheduled_tokens(r->request_id()), 10);
  EXPECT_EQ(out.total_num_scheduled_tokens, 100);
  EXPECT_EQ(scheduler->num_waiting(), 0);
  EXPECT_EQ(scheduler->running_request_ids(), (Ids{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}));
}
INSTANTIATE_TEST_SUITE_P(SchedulerScenarios, S28, ::testing::Bool());

class S29 : public ::testing::TestWithParam<bool> {};  // param: prefix caching

TEST_P(S29, S29_ChunkedPrefillWithLongPrefillThreshold) {
  auto scheduler = create_scheduler({.max_num_batched_tokens = 1024,
                                     .long_prefill_token_threshold = 400,
                                     .enable_prefix_caching = GetParam()});
  auto requests = create_requests(3, 800);
  for (auto& r : requests) scheduler->add_request(r);

  SchedulerOutput out = scheduler->schedule();
  EXPECT_EQ(out.num_new_requests(), 3);
  EXPECT_EQ(out.num_scheduled_tokens("0"), 400);
  EXPECT_EQ(out.num_scheduled_tokens("1"), 400);
  EXPECT_EQ(out.num_scheduled_tokens("2"), 224);
  for (const auto& s : out.scheduled_requests) EXPECT_FALSE(s.samples_token);
  auto outputs = scheduler->update_from_output(out, sample_all(out, 0));
  EXPECT_TRUE(outputs.empty());  // partial prefills produce nothing

  out = scheduler->schedule();
  EXPECT_EQ(out.num_new_requests(), 0);
  EXPECT_EQ(out.num_cached_requests(), 3);
  EXPECT_EQ(out.num_scheduled_tokens("0"), 400);
  EXPECT_EQ(out.num_scheduled_tokens("1"), 400);
  EXPECT_EQ(out.num_scheduled_tokens("2"), 224);
  EXPECT_TRUE(out.find("0")->samples_token);
  EXPECT_TRUE(out.find("1")->samples_token);
  EXPECT_FALSE(out.find("2")->samples_token);
  outputs = scheduler->update_from_output(out, sample_all(out, 0));
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].new_token_ids, std::vector<TokenId>{0});

  out = scheduler->schedule();
  EXPECT_EQ(out.num_scheduled_tokens("0"), 1);
  EXPECT_EQ(out.num_scheduled_tokens("1"), 1);
  EXPECT_EQ(out.num_scheduled_tokens("2"), 352);
}
INSTANTIATE_TEST_SUITE_P(SchedulerScenarios, S29, ::testing::Bool());

class S30 : public ::testing::TestWithParam<bool> {};  // param: chunked prefill

TEST_P(S30, S30_NoSkippingAheadWithoutChunkedPrefill) {
  const bool chunked = GetParam();
  auto scheduler = create_scheduler(
      {.max_num_seqs = 3, .max_num_batched_tokens = 1024, .enable_chunked_prefill = chunked});
  auto requests = create_requests(2, 800, 16, {}, 1);   // "1", "2"
  auto shorts = create_requests(2, 10, 16, {}, 3);      // "3", "4"
  requests.insert(requests.end(), shorts.begin(), shorts.end());
  for (auto& r : requests) scheduler->add_request(r);
  const SchedulerOutput out = scheduler->schedule();
  if (chunked) {
    EXPECT_EQ(out.num_new_requests(), 2);
    EXPECT_EQ(out.num_scheduled_tokens("1"), 800);
    EXPECT_EQ(out.num_scheduled_tokens("2"), 224);
  } else {
    EXPECT_EQ(out.scheduled_req_ids(), (Ids{"1"}));
    EXPECT_EQ(out.num_scheduled_tokens("1"), 800);
    EXPECT_EQ(scheduler->waiting_request_ids(), (Ids{"2", "3", "4"}));
  }
}
INSTANTIATE_TEST_SUITE_P(SchedulerScenarios, S30, ::testing::Bool());

// vLLM test_preempt_during_execution: the token sampled for a request that was preempted while
// its step ran is still appended.
TEST(SchedulerScenarios, S31_PreemptedDuringExecutionStillGetsItsToken) {
  auto scheduler = create_scheduler(
      {.max_num_batched_tokens = 100, .block_size = 16, .num_blocks = 11});
  auto requests = create_requests(2, 80);
  scheduler->add_request(requests[0]);
  const SchedulerOutput out0 = scheduler->schedule();
  ASSERT_EQ(out0.scheduled_requests.size(), 1u);
  EXPECT_EQ(out0.scheduled_requests[0].block_ids().size(), 5u);

  scheduler->add_request(requests[1]);
  const SchedulerOutput out1 = scheduler->schedule();
  ASSERT_EQ(out1.scheduled_requests.size(), 1u);
  EXPECT_EQ(out1.scheduled_requests[0].request_id, "1");
  EXPECT_EQ(out1.scheduled_requests[0].block_ids().size(), 5u);

  scheduler->update_from_output(out0, sampled({{"0", {0}}}));
  const SchedulerOutput out2 = scheduler->schedule();  // "0" needs a 6th block: "1" is preempted
  EXPECT_EQ(scheduler->running_request_ids(), (Ids{"0"}));
  EXPECT_EQ(requests[1]->status, RequestStatus::kPreempted);
  EXPECT_EQ(out2.preempted_req_ids, (Ids{"1"}));

  const auto outputs = scheduler->update_from_output(out1, sampled({{"1", {42}}}));
  EXPECT_EQ(to_vector(requests[1]->output_token_ids()), std::vector<TokenId>{42});
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_EQ(outputs[0].new_token_ids, std::vector<TokenId>{42});
  EXPECT_EQ(requests[1]->status, RequestStatus::kPreempted);
  scheduler->check_invariants();
}

// S32: requests injected as RUNNING with num_computed == num_tokens, then a hand-built
// SchedulerOutput with draft tokens, as vLLM's test_stop_via_update_from_output does.
struct S32Case {
  std::shared_ptr<Request> r0, r1;
  std::unique_ptr<Scheduler> scheduler;
};

S32Case s32_setup(const TestRequestOptions& ro) {
  S32Case c;
  c.scheduler = create_scheduler();
  auto requests = create_requests(2, 10, 16, ro);
  c.r0 = requests[0];
  c.r1 = requests[1];
  for (auto& r : requests) c.scheduler->add_request(r);
  c.scheduler->schedule();  // both RUNNING, num_computed == num_tokens; this output is dropped
  return c;
}

ScheduledRequest scheduled_with_spec(const std::string& id, std::vector<TokenId> spec) {
  ScheduledRequest s;
  s.request_id = id;
  s.num_scheduled_tokens = 1 + static_cast<int>(spec.size());
  s.spec_token_ids = std::move(spec);
  s.samples_token = true;
  return s;
}

TEST(SchedulerScenarios, S32a_StopOnEos) {
  S32Case c = s32_setup({});
  SchedulerOutput out;
  out.scheduled_requests = {scheduled_with_spec("0", {}), scheduled_with_spec("1", {10})};
  const auto outputs = c.scheduler->update_from_output(out, sampled({{"0", {kEos}}, {"1", {10, 11}}}));
  EXPECT_EQ(c.r0->status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(to_vector(c.r0->output_token_ids()), std::vector<TokenId>{kEos});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(c.r0->stop_reason));
  EXPECT_EQ(to_vector(c.r1->output_token_ids()), (std::vector<TokenId>{10, 11}));
  EXPECT_EQ(c.scheduler->running_request_ids(), (Ids{"1"}));
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_STREQ(outputs[0].finish_reason(), "stop");
  EXPECT_EQ(outputs[1].finish_reason(), nullptr);
  EXPECT_EQ(c.scheduler->schedule().finished_req_ids, (Ids{"0"}));
}

TEST(SchedulerScenarios, S32b_StopOnStopTokenTrimsTheRest) {
  S32Case c = s32_setup({.stop_token_ids = {42, 43}});
  SchedulerOutput out;
  out.scheduled_requests = {scheduled_with_spec("0", {10, 42}), scheduled_with_spec("1", {13})};
  const auto outputs =
      c.scheduler->update_from_output(out, sampled({{"0", {10, 42, 12}}, {"1", {13, 14}}}));
  EXPECT_EQ(c.r0->status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(std::get<TokenId>(c.r0->stop_reason), 42);
  EXPECT_EQ(to_vector(c.r0->output_token_ids()), (std::vector<TokenId>{10, 42}));
  EXPECT_EQ(to_vector(c.r1->output_token_ids()), (std::vector<TokenId>{13, 14}));
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].new_token_ids, (std::vector<TokenId>{10, 42}));
  EXPECT_EQ(std::get<TokenId>(outputs[0].stop_reason), 42);
  EXPECT_EQ(c.scheduler->running_request_ids(), (Ids{"1"}));
}

TEST(SchedulerScenarios, S32c_StopOnMaxTokens) {
  S32Case c = s32_setup({.max_tokens = 2});
  SchedulerOutput out;
  out.scheduled_requests = {scheduled_with_spec("0", {10, 11}), scheduled_with_spec("1", {})};
  const auto outputs =
      c.scheduler->update_from_output(out, sampled({{"0", {10, 11, 12}}, {"1", {13}}}));
  EXPECT_EQ(c.r0->status, RequestStatus::kFinishedLengthCapped);
  EXPECT_EQ(to_vector(c.r0->output_token_ids()), (std::vector<TokenId>{10, 11}));
  EXPECT_EQ(to_vector(c.r1->output_token_ids()), std::vector<TokenId>{13});
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_STREQ(outputs[0].finish_reason(), "length");
  EXPECT_EQ(c.scheduler->running_request_ids(), (Ids{"1"}));
}

TEST(SchedulerScenarios, S32d_IgnoreEosKeepsRunning) {
  auto scheduler = create_scheduler();
  auto r = create_requests(1, 10, 16, {.max_tokens = 10, .eos_token_id = std::nullopt})[0];
  scheduler->add_request(r);
  scheduler->schedule();
  SchedulerOutput out;
  out.scheduled_requests = {scheduled_with_spec("0", {kEos, 10})};
  scheduler->update_from_output(out, sampled({{"0", {kEos, 10, 11}}}));
  EXPECT_EQ(r->status, RequestStatus::kRunning);
  EXPECT_EQ(to_vector(r->output_token_ids()), (std::vector<TokenId>{kEos, 10, 11}));
  EXPECT_EQ(scheduler->running_request_ids(), (Ids{"0"}));
}

TEST(SchedulerScenarios, S32_RejectedDraftsRollBackComputedTokens) {
  S32Case c = s32_setup({});
  ASSERT_EQ(c.r1->num_computed_tokens, 10);
  c.r1->num_computed_tokens = 12;  // as if 1 + 2 drafts had been scheduled from 9
  SchedulerOutput out;
  out.scheduled_requests = {scheduled_with_spec("1", {7, 8})};
  c.scheduler->update_from_output(out, sampled({{"1", {7, 5}}}));  // 1 accepted, 1 rejected
  EXPECT_EQ(c.r1->num_computed_tokens, 11);
  EXPECT_EQ(to_vector(c.r1->output_token_ids()), (std::vector<TokenId>{7, 5}));
}

std::shared_ptr<Request> request_with_outputs(const TestRequestOptions& ro,
                                              std::vector<TokenId> outputs) {
  auto r = make_request("r", {1, 2, 3}, 16, ro);
  for (TokenId t : outputs) r->append_output_token_ids(t);
  return r;
}

TEST(SchedulerScenarios, S33_MinTokensSuppressesEosAndStopIds) {
  const int kMaxModelLen = 8192;
  {
    auto r = request_with_outputs({.max_tokens = 20, .min_tokens = 5}, {10, 11, kEos});
    EXPECT_FALSE(check_stop(*r, kMaxModelLen));
    for (TokenId t : {1, 2, 3, 4, 5, kEos}) r->append_output_token_ids(t);
    ASSERT_EQ(r->num_output_tokens(), 9);
    EXPECT_TRUE(check_stop(*r, kMaxModelLen));
    EXPECT_EQ(r->status, RequestStatus::kFinishedStopped);
  }
  {
    auto r = request_with_outputs({.max_tokens = 20, .min_tokens = 0}, {10, kEos});
    EXPECT_TRUE(check_stop(*r, kMaxModelLen));
    EXPECT_EQ(r->status, RequestStatus::kFinishedStopped);
  }
  {
    auto r = request_with_outputs({.max_tokens = 20, .min_tokens = 5, .stop_token_ids = {42}},
                                  {10, 11, 42});
    EXPECT_FALSE(check_stop(*r, kMaxModelLen));
    for (TokenId t : {10, 11, 12, 13, 14, 42}) r->append_output_token_ids(t);
    EXPECT_TRUE(check_stop(*r, kMaxModelLen));
    EXPECT_EQ(r->status, RequestStatus::kFinishedStopped);
    EXPECT_EQ(std::get<TokenId>(r->stop_reason), 42);
  }
}

TEST(SchedulerScenarios, S33_LengthChecks) {
  auto r = request_with_outputs({.max_tokens = 3}, {7, 8});
  EXPECT_FALSE(check_stop(*r, 100));
  EXPECT_TRUE(check_stop(*r, 5));  // 3 prompt + 2 output tokens reach max_model_len 5
  EXPECT_EQ(r->status, RequestStatus::kFinishedLengthCapped);
  auto q = request_with_outputs({.max_tokens = 3}, {7, 8, 9});
  EXPECT_TRUE(check_stop(*q, 100));
  EXPECT_EQ(q->status, RequestStatus::kFinishedLengthCapped);
  auto none = request_with_outputs({}, {});
  EXPECT_FALSE(check_stop(*none, 100));
}

TEST(SchedulerScenarios, S34_OverlappingSteps) {
  auto scheduler = create_scheduler({.max_num_seqs = 2, .max_num_batched_tokens = 1024});
  auto requests = create_requests(2, 512);
  scheduler->add_request(requests[0]);
  const SchedulerOutput out0 = scheduler->schedule();
  EXPECT_EQ(out0.num_scheduled_tokens("0"), 512);

  scheduler->add_request(requests[1]);
  const SchedulerOutput out1 = scheduler->schedule();
  EXPECT_EQ(out1.scheduled_req_ids(), (Ids{"1"}));  // "0" has nothing new yet
  EXPECT_EQ(out1.num_scheduled_tokens("1"), 512);

  scheduler->update_from_output(out0, sample_all(out0, 0));
  const SchedulerOutput out2 = scheduler->schedule();
  EXPECT_EQ(out2.scheduled_req_ids(), (Ids{"0"}));
  EXPECT_EQ(out2.num_scheduled_tokens("0"), 1);

  EXPECT_NO_THROW(scheduler->update_from_output(out1, sample_all(out1, 0)));
  scheduler->check_invariants();
}

TEST(SchedulerScenarios, S35_NoLeaks) {
  auto scheduler = create_scheduler({.enable_prefix_caching = true});
  auto requests = create_requests(5, 10, 16, {.max_tokens = 10});
  std::map<std::string, std::vector<TokenId>> generated;
  std::map<std::string, std::string> reasons;
  auto step = [&] {
    const SchedulerOutput out = scheduler->schedule();
    for (const auto& o : scheduler->update_from_output(out, sample_all(out, 1000))) {
      auto& g = generated[o.request_id];
      g.insert(g.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished()) reasons[o.request_id] = o.finish_reason();
    }
  };
  for (auto& r : requests) {
    scheduler->add_request(r);
    step();
  }
  while (true) {
    const SchedulerOutput out = scheduler->schedule();
    if (scheduler->num_running() == 0) break;
    for (const auto& o : scheduler->update_from_output(out, sample_all(out, 1000))) {
      auto& g = generated[o.request_id];
      g.insert(g.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished()) reasons[o.request_id] = o.finish_reason();
    }
  }
  EXPECT_EQ(scheduler->num_unfinished_requests(), 0);
  EXPECT_EQ(scheduler->num_waiting(), 0);
  EXPECT_FALSE(scheduler->has_finished_requests());
  const KVCacheManager& kv = scheduler->kv_cache_manager();
  EXPECT_EQ(kv.num_resident_requests(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 10000 - 1);
  for (BlockId b = 1; b < kv.block_pool().num_blocks(); ++b) {
    ASSERT_EQ(kv.block_pool().block(b).ref_cnt, 0) << "block " << b;
  }
  scheduler->check_invariants();
  for (auto& r : requests) {
    EXPECT_EQ(generated[r->request_id()], std::vector<TokenId>(10, 1000)) << r->request_id();
    EXPECT_EQ(reasons[r->request_id()], "length");
  }
}

// Priority scenarios (vLLM test_priority_scheduling_*): requests "i" with the given priorities and
// arrival times, 10 tokens each.
std::vector<std::shared_ptr<Request>> with_priority(const std::vector<int>& priorities,
                                                    const std::vector<double>& arrivals,
                                                    int num_tokens = 10) {
  std::vector<std::shared_ptr<Request>> requests;
  for (size_t i = 0; i < priorities.size(); ++i) {
    requests.push_back(create_requests(1, num_tokens, 16,
                                       {.priority = priorities[i], .arrival_time = arrivals[i]},
                                       static_cast<int>(i))[0]);
  }
  return requests;
}

Ids scheduled_order_with_priority(const std::vector<int>& priorities,
                                  const std::vector<double>& arrivals) {
  auto scheduler = create_scheduler({.policy = SchedulingPolicy::kPriority});
  for (auto& r : with_priority(priorities, arrivals)) scheduler->add_request(r);
  return scheduler->schedule().scheduled_req_ids();
}

TEST(SchedulerScenarios, S36_PriorityOrdering) {
  EXPECT_EQ(scheduled_order_with_priority({2, 0, 1}, {1, 2, 3}), (Ids{"1", "2", "0"}));
  EXPECT_EQ(scheduled_order_with_priority({1, 1, 1}, {3, 1, 2}), (Ids{"1", "2", "0"}));
  EXPECT_EQ(scheduled_order_with_priority({2, 1, 1, 0}, {1, 3, 2, 4}), (Ids{"3", "2", "1", "0"}));
  EXPECT_EQ(scheduled_order_with_priority({1, 1, 1, 1}, {4, 1, 3, 2}), (Ids{"1", "3", "2", "0"}));
}

TEST(SchedulerScenarios, S36_PriorityWithLimitedSlots) {
  {
    auto scheduler = create_scheduler({.max_num_seqs = 2, .policy = SchedulingPolicy::kPriority});
    for (auto& r : with_priority({3, 1, 2, 0}, {1, 2, 3, 4})) scheduler->add_request(r);
    Ids ids = scheduler->schedule().scheduled_req_ids();
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(ids, (Ids{"1", "3"}));
    EXPECT_EQ(scheduler->waiting_request_ids(), (Ids{"2", "0"}));
  }
  {
    auto scheduler = create_scheduler({.max_num_seqs = 1, .policy = SchedulingPolicy::kPriority});
    for (auto& r : with_priority({3, 1, 2, 0}, {1, 2, 3, 4})) scheduler->add_request(r);
    EXPECT_EQ(scheduler->schedule().scheduled_req_ids(), (Ids{"3"}));
    EXPECT_EQ(scheduler->waiting_request_ids(), (Ids{"1", "2", "0"}));
  }
}

TEST(SchedulerScenarios, S36_PriorityOneAtATime) {
  auto scheduler = create_scheduler({.max_num_seqs = 1, .policy = SchedulingPolicy::kPriority});
  for (auto& r : with_priority({5, 1, 8, 3, 2, 7, 4, 6}, {0, 1, 2, 3, 4, 5, 6, 7})) {
    scheduler->add_request(r);
  }
  Ids order;
  while (scheduler->has_unfinished_requests()) {
    const Ids ids = scheduler->schedule().scheduled_req_ids();
    ASSERT_EQ(ids.size(), 1u);
    order.push_back(ids[0]);
    scheduler->finish_request(ids[0], RequestStatus::kFinishedStopped);
  }
  EXPECT_EQ(order, (Ids{"1", "4", "3", "6", "0", "7", "5", "2"}));
}

TEST(SchedulerScenarios, S38_PriorityPreemptionAndResumption) {
  auto scheduler = create_scheduler({.max_num_seqs = 2,
                                     .max_num_batched_tokens = 200,
                                     .block_size = 16,
                                     .num_blocks = 5,
                                     .policy = SchedulingPolicy::kPriority});
  auto low = create_requests(1, 30, 16, {.priority = 1, .arrival_time = 0})[0];
  scheduler->add_request(low);
  SchedulerOutput out = scheduler->schedule();
  scheduler->update_from_output(out, sample_all(out, 100));

  auto high = create_requests(1, 32, 16, {.priority = 0, .arrival_time = 1}, 1)[0];
  scheduler->add_request(high);
  out = scheduler->schedule();
  EXPECT_EQ(scheduler->kv_cache_manager().num_free_blocks(), 0);
  EXPECT_EQ(out.num_new_requests(), 1);
  EXPECT_EQ(out.num_cached_requests(), 1);
  scheduler->update_from_output(out, sample_all(out, 100));

  out = scheduler->schedule();  // "1" needs a 3rd block: "0" (worse priority) is preempted
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"1"}));
  EXPECT_EQ(out.num_scheduled_tokens("1"), 1);
  EXPECT_EQ(out.total_num_scheduled_tokens, 1);
  EXPECT_EQ(out.preempted_req_ids, (Ids{"0"}));
  EXPECT_EQ(scheduler->num_waiting(), 1);
  EXPECT_EQ(scheduler->num_running(), 1);
  EXPECT_EQ(low->status, RequestStatus::kPreempted);
  EXPECT_EQ(low->num_preemptions, 1);
  scheduler->update_from_output(out, sample_all(out, 100));
  scheduler->finish_request("1", RequestStatus::kFinishedStopped);

  out = scheduler->schedule();
  EXPECT_EQ(out.resumed_req_ids(), (Ids{"0"}));
  ASSERT_EQ(low->num_tokens(), 32);
  EXPECT_EQ(low->all_token_ids()[31], 100);
  EXPECT_EQ(out.num_scheduled_tokens("0"), 32);
  const ScheduledRequest* s = out.find("0");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->kind, ScheduledKind::kResumed);
  EXPECT_EQ(s->num_computed_tokens, 0);
  EXPECT_EQ(s->token_ids, to_vector(low->all_token_ids()));
  EXPECT_TRUE(s->samples_token);
  EXPECT_EQ(out.finished_req_ids, (Ids{"1"}));
  scheduler->check_invariants();
}

TEST(SchedulerScenarios, S42_ResetPrefixCache) {
  auto scheduler = create_scheduler({.enable_prefix_caching = true});
  auto requests = create_requests(10);
  for (auto& r : requests) scheduler->add_request(r);
  scheduler->schedule();
  EXPECT_EQ(scheduler->num_waiting(), 0);
  const Ids all = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
  EXPECT_EQ(scheduler->running_request_ids(), all);
  EXPECT_FALSE(scheduler->reset_prefix_cache());
  EXPECT_TRUE(scheduler->reset_prefix_cache(/*reset_running_requests=*/true));
  EXPECT_EQ(scheduler->num_running(), 0);
  EXPECT_EQ(scheduler->waiting_request_ids(), all);
  EXPECT_TRUE(scheduler->kv_cache_manager().block_pool().cached_block_index().empty());
  scheduler->check_invariants();
  const SchedulerOutput out = scheduler->schedule();  // all come back, recomputed from scratch
  EXPECT_EQ(out.resumed_req_ids(), all);
  EXPECT_EQ(out.preempted_req_ids, Ids(all.rbegin(), all.rend()));  // tail first
}

}  // namespace
}  // namespace vellum::core::testing
