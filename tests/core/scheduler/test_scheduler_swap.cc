// Swap preemption (V0-style, spec §2.10) driven through the fake executor, which checks that the
// KV contents survive the round trip through the host tier.
#include <gtest/gtest.h>

#include "core/scheduler/scheduler.h"
#include "fake_model_executor.h"
#include "scheduler_test_util.h"

namespace vellum::core::testing {
namespace {

using Ids = std::vector<std::string>;
constexpr int kVocab = 1000;

struct SwapRig {
  std::unique_ptr<Scheduler> scheduler;
  FakeModelExecutor executor;
  SchedulerOutput last;

  explicit SwapRig(int num_host_blocks)
      : scheduler(create_scheduler({.max_num_seqs = 2, .max_num_batched_tokens = 200,
                                    .block_size = 16, .num_blocks = 5,
                                    .preemption_mode = PreemptionMode::kSwap,
                                    .num_host_blocks = num_host_blocks})),
        executor(5, 16, std::max(num_host_blocks, 1), kVocab) {}

  void step() {
    last = scheduler->schedule();
    scheduler->update_from_output(last, executor.execute(last));
    scheduler->check_invariants();
  }
};

// 4 usable blocks: "0" (30 tokens) and "1" (32 tokens) take 2 blocks each; when "1" needs a 3rd
// it is the newest running request and swaps itself out.
TEST(SchedulerSwap, SwapOutKeepsComputedTokensAndSwapsBackIn) {
  SwapRig rig(8);
  Scheduler& s = *rig.scheduler;
  auto r0 = create_requests(1, 30, 16, {.max_tokens = 100, .eos_token_id = std::nullopt})[0];
  auto r1 = create_requests(1, 32, 16, {.max_tokens = 100, .eos_token_id = std::nullopt}, 1)[0];
  s.add_request(r0);
  s.add_request(r1);
  rig.step();
  EXPECT_EQ(s.kv_cache_manager().num_free_blocks(), 0);
  const std::vector<BlockId> r1_blocks = rig.last.find("1")->block_ids();

  rig.step();  // "1" needs a 3rd block at 33 tokens: swapped out, "0" decodes
  EXPECT_EQ(rig.last.scheduled_req_ids(), (Ids{"0"}));
  EXPECT_EQ(rig.last.preempted_req_ids, (Ids{"1"}));
  ASSERT_EQ(rig.last.blocks_to_swap_out.size(), 2u);
  EXPECT_EQ(rig.last.blocks_to_swap_out[0].src, r1_blocks[0]);
  EXPECT_EQ(rig.last.blocks_to_swap_out[1].src, r1_blocks[1]);
  EXPECT_EQ(r1->status, RequestStatus::kSwapped);
  EXPECT_EQ(r1->num_computed_tokens, 32);  // not recomputed
  EXPECT_EQ(s.swapped_request_ids(), (Ids{"1"}));
  EXPECT_EQ(s.kv_cache_manager().num_free_host_blocks(), 6);

  // While "1" is swapped out (it needs 3 blocks, 2 are free) nothing new is admitted.
  s.add_request(create_requests(1, 4, 16, {}, 2)[0]);
  rig.step();
  EXPECT_EQ(rig.last.scheduled_req_ids(), (Ids{"0"}));
  EXPECT_TRUE(rig.last.blocks_to_swap_in.empty());
  EXPECT_EQ(s.waiting_request_ids(), (Ids{"2"}));

  s.finish_request("0", RequestStatus::kFinishedAborted);
  rig.step();  // "1" comes back with its KV, decodes from position 32; then "2" is admitted
  const ScheduledRequest* back = rig.last.find("1");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->kind, ScheduledKind::kSwappedIn);
  EXPECT_EQ(back->num_computed_tokens, 32);
  EXPECT_EQ(back->num_scheduled_tokens, 1);
  EXPECT_EQ(back->block_ids().size(), 3u);
  ASSERT_EQ(rig.last.blocks_to_swap_in.size(), 2u);
  EXPECT_EQ(rig.last.blocks_to_swap_in[0].dst, back->block_ids()[0]);
  EXPECT_EQ(rig.last.blocks_to_swap_in[1].dst, back->block_ids()[1]);
  EXPECT_EQ(rig.last.scheduled_req_ids(), (Ids{"1", "2"}));
  EXPECT_EQ(r1->num_output_tokens(), 2);
  EXPECT_EQ(s.kv_cache_manager().num_free_host_blocks(), 8);
  EXPECT_EQ(r1->num_preemptions, 1);

  // Outputs match a run without any preemption.
  for (int i = 0; i < 20; ++i) rig.step();
  const FakeStopRule rule{.max_tokens = 100, .max_model_len = 200};
  const auto expected = FakeModelExecutor::reference_generate(r1->prompt_token_ids(), rule, kVocab);
  const auto got = to_vector(r1->output_token_ids());
  ASSERT_LE(got.size(), expected.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), expected.begin()));
}

TEST(SchedulerSwap, TooSmallSwapSpaceFallsBackToRecompute) {
  SwapRig rig(1);  // 1 host block: "1" (2 blocks) cannot be swapped out
  Scheduler& s = *rig.scheduler;
  s.add_request(create_requests(1, 30, 16, {.max_tokens = 100})[0]);
  auto r1 = create_requests(1, 32, 16, {.max_tokens = 100}, 1)[0];
  s.add_request(r1);
  rig.step();
  rig.step();
  EXPECT_EQ(rig.last.preempted_req_ids, (Ids{"1"}));
  EXPECT_TRUE(rig.last.blocks_to_swap_out.empty());
  EXPECT_EQ(r1->status, RequestStatus::kPreempted);
  EXPECT_EQ(r1->num_computed_tokens, 0);
  EXPECT_EQ(s.waiting_request_ids(), (Ids{"1"}));
}

TEST(SchedulerSwap, AbortOfASwappedRequestFreesItsHostBlocks) {
  SwapRig rig(8);
  Scheduler& s = *rig.scheduler;
  s.add_request(create_requests(1, 30, 16, {.max_tokens = 100})[0]);
  s.add_request(create_requests(1, 32, 16, {.max_tokens = 100}, 1)[0]);
  rig.step();
  rig.step();
  ASSERT_EQ(s.num_swapped(), 1);
  s.finish_request("1", RequestStatus::kFinishedAborted);
  EXPECT_EQ(s.num_swapped(), 0);
  EXPECT_EQ(s.kv_cache_manager().num_free_host_blocks(), 8);
  s.check_invariants();
  rig.step();
  EXPECT_EQ(rig.last.finished_req_ids, (Ids{"1"}));
}

// Under the priority policy the victim may be a request already served in the step (ties go to
// the first running one). Here the parent "p" copies its shared partial block on write, then
// a child needs a block too and "p" is swapped out: the host must receive the block's data
// (the copy's source), not the copy's still-unwritten destination.
TEST(SchedulerSwap, VictimServedInTheStepSwapsOutItsCopyOnWriteSource) {
  auto scheduler = create_scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 200,
                                     .block_size = 16, .num_blocks = 5,
                                     .policy = SchedulingPolicy::kPriority,
                                     .preemption_mode = PreemptionMode::kSwap,
                                     .num_host_blocks = 8});
  FakeModelExecutor executor(5, 16, 8, kVocab);
  Scheduler& s = *scheduler;
  const TestRequestOptions options{.max_tokens = 6, .eos_token_id = std::nullopt,
                                   .seq_group_id = "p", .max_num_seqs_in_group = 3};
  auto parent = make_request("p", std::vector<TokenId>(40, 7), 16, options);
  s.add_request(parent);
  SchedulerOutput out = s.schedule();
  s.update_from_output(out, executor.execute(out));  // 3 blocks; the third is partial
  for (const char* id : {"c1", "c2"}) {
    auto child = make_request(id, std::vector<TokenId>(40, 7), 16, options);
    child->append_output_token_ids(parent->output_token_ids());
    s.fork_request("p", child);
  }

  // "p" copies the shared block 2 into the last free block; "c1" needs a copy too, so "p" (tied
  // on priority, first in running order) is preempted; "c2" then writes block 2 alone.
  out = s.schedule();
  EXPECT_EQ(out.preempted_req_ids, (Ids{"p"}));
  EXPECT_EQ(out.scheduled_req_ids(), (Ids{"c1", "c2"}));
  EXPECT_EQ(out.blocks_to_copy.size(), 1u) << "only c1's copy is left";
  ASSERT_EQ(out.blocks_to_swap_out.size(), 3u);
  s.update_from_output(out, executor.execute(out));
  s.check_invariants();
  for (int i = 0; i < 20 && s.has_requests(); ++i) {
    out = s.schedule();
    s.update_from_output(out, executor.execute(out));  // checks every attended slot
    s.check_invariants();
  }
  EXPECT_FALSE(s.has_unfinished_requests());
  EXPECT_GT(executor.num_swapped_in_blocks(), 0);
  const FakeStopRule rule{.max_tokens = 6, .max_model_len = 200};
  const auto expected = FakeModelExecutor::reference_generate(parent->prompt_token_ids(), rule,
                                                              kVocab);
  EXPECT_EQ(to_vector(parent->output_token_ids()), expected);
}

}  // namespace
}  // namespace vellum::core::testing
