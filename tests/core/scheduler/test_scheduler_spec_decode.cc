// Speculative decoding in the scheduler (issue 36), as a multi-step scenario: drafts become extra
// query positions counted in the token budget, rejected drafts roll num_computed_tokens back and
// give back the blocks that held only their KV, and prefix-cache hashes cover accepted tokens only.
#include <gtest/gtest.h>

#include "scheduler_test_util.h"
#include "vellum/status.h"

namespace vellum::core::testing {
namespace {

TEST(SchedulerSpecDecode, DraftsAreScheduledVerifiedAndTheirBlocksReleased) {
  auto scheduler = create_scheduler({.max_num_batched_tokens = 64, .num_blocks = 12,
                                     .enable_prefix_caching = true});
  auto r = create_requests(1, 15, 16, {.max_tokens = 100, .eos_token_id = std::nullopt})[0];
  scheduler->add_request(r);
  EXPECT_THROW(scheduler->set_draft_token_ids("0", {1, 2}), vellum::Error) << "not running yet";
  SchedulerOutput out = scheduler->schedule();  // prefill 15 tokens, 1 block
  scheduler->update_from_output(out, sample_all(out, 100));
  ASSERT_EQ(r->num_tokens(), 16);
  ASSERT_EQ(r->num_computed_tokens, 15);
  KVCacheManager& kv = scheduler->kv_cache_manager();
  EXPECT_EQ(kv.num_held_blocks("0"), 1);

  // Step 2: four drafts; positions 15..19 span a second block.
  scheduler->set_draft_token_ids("0", {101, 102, 103, 104});
  out = scheduler->schedule();
  ASSERT_EQ(out.scheduled_requests.size(), 1u);
  const ScheduledRequest& s = out.scheduled_requests[0];
  EXPECT_EQ(s.num_scheduled_tokens, 5);
  EXPECT_EQ(out.total_num_scheduled_tokens, 5);
  EXPECT_EQ(s.token_ids, (std::vector<TokenId>{100, 101, 102, 103, 104}));
  EXPECT_EQ(s.spec_token_ids, (std::vector<TokenId>{101, 102, 103, 104}));
  EXPECT_TRUE(s.samples_token);
  EXPECT_EQ(kv.num_held_blocks("0"), 2);
  EXPECT_EQ(r->num_computed_tokens, 20);
  scheduler->check_invariants();  // drafts in flight count as computed

  // Every draft rejected: the target's own token only.
  scheduler->update_from_output(out, sampled({{"0", {555}}}));
  EXPECT_EQ(r->num_tokens(), 17);
  EXPECT_EQ(r->num_computed_tokens, 16);
  EXPECT_EQ(kv.num_held_blocks("0"), 1) << "the block holding only rejected drafts is released";
  EXPECT_EQ(r->block_hashes().size(), 1u);  // tokens 0..15: prompt + the first sampled token

  // Step 3: three drafts, two accepted plus the bonus token.
  scheduler->set_draft_token_ids("0", {7, 8, 9});
  out = scheduler->schedule();
  EXPECT_EQ(out.total_num_scheduled_tokens, 4);
  scheduler->update_from_output(out, sampled({{"0", {7, 8, 600}}}));
  EXPECT_EQ(to_vector(r->output_token_ids()), (std::vector<TokenId>{100, 555, 7, 8, 600}));
  EXPECT_EQ(r->num_computed_tokens, 19);
  EXPECT_EQ(kv.num_held_blocks("0"), 2);
  scheduler->check_invariants();

  // The token budget caps drafts: the budget left after another request's prefill.
  scheduler->add_request(create_requests(1, 62, 16, {}, 1)[0]);
  scheduler->set_draft_token_ids("0", {1, 2, 3, 4});
  out = scheduler->schedule();
  EXPECT_EQ(out.num_scheduled_tokens("0"), 5);
  EXPECT_EQ(out.num_scheduled_tokens("1"), 59);  // 64 - 5: its prefill is chunked
  scheduler->update_from_output(out, sample_all(out, 3));
  EXPECT_EQ(r->num_computed_tokens, 20);  // 19 + 5 scheduled - 4 rejected
  scheduler->check_invariants();
}

TEST(SchedulerSpecDecode, PreemptionDropsDrafts) {
  auto scheduler = create_scheduler({.num_blocks = 100});
  auto r = create_requests(1, 10, 16, {.max_tokens = 100})[0];
  scheduler->add_request(r);
  SchedulerOutput out = scheduler->schedule();
  scheduler->update_from_output(out, sample_all(out, 5));
  scheduler->set_draft_token_ids("0", {6, 7});
  EXPECT_EQ(r->num_tokens_with_spec(), 13);
  ASSERT_TRUE(scheduler->reset_prefix_cache(/*reset_running_requests=*/true));
  EXPECT_TRUE(r->spec_token_ids.empty());
  EXPECT_EQ(r->num_computed_tokens, 0);
  scheduler->check_invariants();
}

}  // namespace
}  // namespace vellum::core::testing
