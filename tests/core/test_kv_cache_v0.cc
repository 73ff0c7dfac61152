// Scenarios §3 F (V0-1..V0-3): watermark admission, copy-on-write forks, swap tier; and the
// errors of bad fork/swap use.
#include <gtest/gtest.h>

#include "common/check.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

using testing::alloc;
using testing::ids;
using testing::iota_tokens;
using testing::make_config;
using testing::make_request;

// V0 pools have no null block; ours reserve block 0, so "N device blocks" is num_blocks = N + 1.
TEST(KvCacheScenarios, V0_1_WatermarkAdmission) {
  auto cfg = make_config(41, 16);
  cfg.watermark = 0.5;  // 20 blocks
  KVCacheManager kv(cfg);
  for (int p = 1; p <= 40; ++p) {
    SCOPED_TRACE(p);
    Request r = make_request("r", iota_tokens(16 * p), 16);
    r.append_output_token_ids(iota_tokens(16, 5000));  // one output block: required = p + 1
    const int required = p + 1;
    const AllocStatus expected = 40 - required < 20 ? AllocStatus::kNever : AllocStatus::kOk;
    EXPECT_EQ(kv.can_allocate(r), expected);
  }
  // LATER: it could fit one day, but not beside the watermark now.
  Request hog = make_request("hog", iota_tokens(16 * 10), 16);
  ASSERT_TRUE(alloc(kv, hog, 160).has_value());  // 30 free
  Request r = make_request("r", iota_tokens(16 * 15), 16);
  EXPECT_EQ(kv.can_allocate(r), AllocStatus::kLater);  // 30 - 15 < 20 <= 40 - 15
  EXPECT_EQ(kv.can_allocate(make_request("s", iota_tokens(16 * 10), 16)), AllocStatus::kOk);
  // Lookahead counts towards the requirement.
  EXPECT_EQ(kv.can_allocate(make_request("s", iota_tokens(16 * 10), 16), 16), AllocStatus::kLater);
}

struct CowCase {
  int seq_len;
  bool append_to_child;
};

TEST(KvCacheScenarios, V0_2_CopyOnWrite) {
  for (CowCase c : {CowCase{129, true}, CowCase{129, false}, CowCase{16, true}}) {
    SCOPED_TRACE(c.seq_len);
    KVCacheManager kv(make_config(1025, 8));
    Request parent = make_request("parent", iota_tokens(c.seq_len), 8);
    ASSERT_TRUE(alloc(kv, parent, c.seq_len).has_value());
    parent.num_computed_tokens = c.seq_len;
    const int num_blocks = (c.seq_len + 7) / 8;
    EXPECT_EQ(kv.num_free_blocks(), 1024 - num_blocks);

    kv.fork("parent", "child");
    Request child = make_request("child", iota_tokens(c.seq_len), 8);
    child.num_computed_tokens = c.seq_len;
    EXPECT_EQ(kv.num_free_blocks(), 1024 - num_blocks);
    EXPECT_EQ(ids(kv.get_block_ids("child")), ids(kv.get_block_ids("parent")));
    kv.check_invariants();

    Request& appender = c.append_to_child ? child : parent;
    const std::string static_id = c.append_to_child ? "parent" : "child";
    const auto static_before = ids(kv.get_block_ids(static_id));
    appender.append_output_token_ids(777);
    ASSERT_TRUE(alloc(kv, appender, 1).has_value());
    const auto appender_ids = ids(kv.get_block_ids(appender.request_id()));
    EXPECT_EQ(ids(kv.get_block_ids(static_id)), static_before);
    const auto copies = kv.take_copy_on_writes();
    if (c.seq_len % 8 != 0) {
      ASSERT_EQ(copies.size(), 1u);
      EXPECT_EQ(copies[0].src, static_before[16]);
      EXPECT_EQ(copies[0].dst, appender_ids[16]);
      EXPECT_NE(copies[0].src, copies[0].dst);
      EXPECT_EQ(kv.num_free_blocks(), 1024 - 18);
      // The shared full blocks stay shared.
      for (size_t i = 0; i < 16; ++i) EXPECT_EQ(appender_ids[i], static_before[i]);
    } else {
      EXPECT_TRUE(copies.empty());
      EXPECT_EQ(appender_ids.size(), static_before.size() + 1);  // a new block, no copy
    }
    EXPECT_TRUE(kv.take_copy_on_writes().empty());
    kv.check_invariants();

    kv.free("parent");
    kv.free("child");
    EXPECT_EQ(kv.num_free_blocks(), 1024);
    kv.check_invariants();
  }
}

TEST(KvCacheManagerTest, CopyOnWriteThatDoesNotFitChangesNothing) {
  KVCacheManager kv(make_config(4, 4));  // 3 usable
  Request parent = make_request("p", iota_tokens(6), 4);
  ASSERT_TRUE(alloc(kv, parent, 6).has_value());  // 2 blocks
  parent.num_computed_tokens = 6;
  kv.fork("p", "c");
  Request child = make_request("c", iota_tokens(6), 4);
  child.num_computed_tokens = 6;
  // Parent writes 3 tokens: CoW of block 1 plus one new block = 2 > 1 free.
  parent.append_output_token_ids(std::vector<TokenId>{9, 9, 9});
  const auto before = ids(kv.get_block_ids("p"));
  EXPECT_EQ(alloc(kv, parent, 3), std::nullopt);
  EXPECT_EQ(ids(kv.get_block_ids("p")), before);
  EXPECT_TRUE(kv.take_copy_on_writes().empty());
  EXPECT_EQ(kv.num_free_blocks(), 1);
  kv.check_invariants();
}

KVCacheConfig swap_config() {
  auto cfg = make_config(5, 8);  // 4 device blocks
  cfg.num_host_blocks = 4;
  cfg.watermark = 0.0;
  return cfg;
}

TEST(KvCacheScenarios, V0_3_SwapOutAndIn) {
  KVCacheManager kv(swap_config());
  Request r = make_request("r", iota_tokens(7), 8);
  ASSERT_TRUE(alloc(kv, r, 7).has_value());
  r.num_computed_tokens = 7;
  r.append_output_token_ids(70);
  ASSERT_TRUE(alloc(kv, r, 1).has_value());
  const auto device_ids = ids(kv.get_block_ids("r"));
  const int device_free = kv.num_free_blocks(), host_free = kv.num_free_host_blocks();

  const std::vector<std::string> group{"r"};
  ASSERT_TRUE(kv.can_swap_out(group));
  const auto out = kv.swap_out(group);
  std::vector<BlockId> keys;
  for (const auto& m : out) keys.push_back(m.src);
  EXPECT_EQ(keys, device_ids);
  EXPECT_EQ(kv.num_free_blocks(), device_free + static_cast<int>(device_ids.size()));
  EXPECT_EQ(kv.num_free_host_blocks(), host_free - static_cast<int>(device_ids.size()));
  EXPECT_TRUE(kv.is_swapped("r"));
  EXPECT_FALSE(kv.is_resident("r"));
  EXPECT_TRUE(kv.get_block_ids("r").empty());
  kv.check_invariants();

  const Request* in_group[] = {&r};
  EXPECT_EQ(kv.can_swap_in(in_group), AllocStatus::kOk);
  const auto in = kv.swap_in(in_group);
  ASSERT_EQ(in.size(), out.size());
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(in[i].src, out[i].dst);  // same host blocks
  EXPECT_EQ(kv.num_free_blocks(), device_free);
  EXPECT_EQ(kv.num_free_host_blocks(), host_free);
  EXPECT_TRUE(kv.is_resident("r"));
  EXPECT_EQ(kv.get_block_ids("r").size(), device_ids.size());
  kv.check_invariants();
}

TEST(KvCacheScenarios, V0_3_CanSwapInLaterAndNever) {
  KVCacheManager kv(swap_config());
  Request r = make_request("r", iota_tokens(24), 8);  // 3 blocks
  ASSERT_TRUE(alloc(kv, r, 24).has_value());
  r.num_computed_tokens = 24;
  const std::vector<std::string> group{"r"};
  (void)kv.swap_out(group);
  Request other = make_request("o", iota_tokens(16, 900), 8);
  ASSERT_TRUE(alloc(kv, other, 16).has_value());  // takes 2 device blocks
  const Request* in_group[] = {&r};
  EXPECT_EQ(kv.can_swap_in(in_group), AllocStatus::kLater);
  EXPECT_EQ(kv.can_swap_in(in_group, /*num_lookahead_tokens=*/100), AllocStatus::kNever);
  EXPECT_THROW((void)kv.swap_in(in_group), Error);  // does not fit: error, state unchanged
  EXPECT_TRUE(kv.is_swapped("r"));
  kv.free("o");
  EXPECT_EQ(kv.can_swap_in(in_group), AllocStatus::kOk);
  // Aborting a swapped request releases its host blocks.
  EXPECT_TRUE(kv.free("r"));
  EXPECT_EQ(kv.num_free_host_blocks(), 4);
  kv.check_invariants();
}

TEST(KvCacheManagerTest, SwapGroupKeepsForkSharing) {
  auto cfg = swap_config();
  cfg.num_blocks = 9;
  KVCacheManager kv(cfg);
  Request p = make_request("p", iota_tokens(12), 8);
  ASSERT_TRUE(alloc(kv, p, 12).has_value());  // 2 blocks
  p.num_computed_tokens = 12;
  kv.fork("p", "c");
  Request c = make_request("c", iota_tokens(12), 8);
  c.num_computed_tokens = 12;
  const std::vector<std::string> group{"p", "c"};
  ASSERT_TRUE(kv.can_swap_out(group));
  const auto out = kv.swap_out(group);
  EXPECT_EQ(out.size(), 2u);  // shared blocks move once
  EXPECT_EQ(kv.num_free_host_blocks(), 2);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  kv.check_invariants();
  const Request* in_group[] = {&p, &c};
  const auto in = kv.swap_in(in_group);
  EXPECT_EQ(in.size(), 2u);
  EXPECT_EQ(ids(kv.get_block_ids("p")), ids(kv.get_block_ids("c")));
  EXPECT_EQ(kv.block_pool().block(kv.get_block_ids("p")[0]).ref_cnt, 2);
  kv.check_invariants();
  // Appending to one of them copies the shared partial block.
  p.append_output_token_ids(5);
  ASSERT_TRUE(alloc(kv, p, 1).has_value());
  EXPECT_EQ(kv.take_copy_on_writes().size(), 1u);
  kv.free("p");
  kv.free("c");
  EXPECT_EQ(kv.num_free_blocks(), 8);
  kv.check_invariants();
}

TEST(KvCacheErrors, SwappingARequestThatIsNotResident) {
  KVCacheManager kv(swap_config());
  const std::vector<std::string> unknown{"ghost"};
  EXPECT_THROW((void)kv.swap_out(unknown), Error);
  EXPECT_THROW((void)kv.can_swap_out(unknown), Error);
  Request r = make_request("r", iota_tokens(8), 8);
  const Request* group[] = {&r};
  EXPECT_THROW((void)kv.swap_in(group), Error);  // resident nowhere
  EXPECT_THROW((void)kv.can_swap_in(group), Error);
  ASSERT_TRUE(alloc(kv, r, 8).has_value());
  EXPECT_THROW((void)kv.swap_in(group), Error);  // resident, not swapped
  const std::vector<std::string> twice{"r", "r"};
  EXPECT_THROW((void)kv.swap_out(twice), Error);
  const std::vector<std::string> once{"r"};
  (void)kv.swap_out(once);
  EXPECT_THROW((void)kv.swap_out(once), Error);  // already swapped out
  EXPECT_THROW((void)alloc(kv, r, 1), Error);    // must swap in first
  EXPECT_THROW(kv.fork("r", "child"), Error);    // cannot fork a swapped request
  kv.check_invariants();
}

TEST(KvCacheErrors, SwapOutBeyondHostCapacityThrowsAndChangesNothing) {
  auto cfg = swap_config();
  cfg.num_host_blocks = 1;
  KVCacheManager kv(cfg);
  Request r = make_request("r", iota_tokens(16), 8);
  ASSERT_TRUE(alloc(kv, r, 16).has_value());
  const std::vector<std::string> group{"r"};
  EXPECT_FALSE(kv.can_swap_out(group));
  const auto before = ids(kv.get_block_ids("r"));
  try {
    (void)kv.swap_out(group);
    FAIL() << "swap_out beyond the host capacity must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  }
  EXPECT_EQ(ids(kv.get_block_ids("r")), before);
  EXPECT_EQ(kv.num_free_host_blocks(), 1);
  kv.check_invariants();
}

TEST(KvCacheErrors, BadForks) {
  KVCacheManager kv(make_config(5, 4));
  EXPECT_THROW(kv.fork("ghost", "child"), Error);
  Request r = make_request("r", iota_tokens(4), 4);
  ASSERT_TRUE(alloc(kv, r, 4).has_value());
  EXPECT_THROW(kv.fork("r", "r"), Error);
  kv.fork("r", "c");
  EXPECT_THROW(kv.fork("r", "c"), Error);
  kv.check_invariants();
}

}  // namespace
}  // namespace vellum::core
