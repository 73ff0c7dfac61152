// Scenarios §3 B (S07-S09): chained block hashing and extra keys.
#include <gtest/gtest.h>

#include "core/block_hash.h"
#include "core_test_util.h"

namespace vellum::core {
namespace {

using testing::alloc;
using testing::concat;
using testing::iota_tokens;
using testing::make_config;
using testing::make_request;
using testing::repeat;

std::vector<TokenId> toks(std::initializer_list<TokenId> l) { return l; }

TEST(KvCacheScenarios, S07_ChainedHashesFullBlocksOnly) {
  const BlockHasher hasher(3);
  const BlockHash& none = hasher.none_hash();
  Request req = make_request("r", iota_tokens(6), 3);
  const auto h0 = hash_block_tokens(none, std::nullopt, toks({0, 1, 2}), std::nullopt);
  const auto h1 = hash_block_tokens(none, h0, toks({3, 4, 5}), std::nullopt);
  ASSERT_EQ(req.block_hashes().size(), 2u);
  EXPECT_EQ(req.block_hashes()[0], h0);
  EXPECT_EQ(req.block_hashes()[1], h1);
  EXPECT_NE(h0, h1);

  // 7 tokens: the partial third block is not hashed.
  Request req7 = make_request("r7", iota_tokens(7), 3);
  EXPECT_EQ(req7.block_hashes().size(), 2u);
  // Two outputs complete the third block (tokens 6..8, parent h1).
  req7.append_output_token_ids(7);
  EXPECT_EQ(req7.block_hashes().size(), 2u);
  req7.append_output_token_ids(8);
  ASSERT_EQ(req7.block_hashes().size(), 3u);
  EXPECT_EQ(req7.block_hashes()[2], hash_block_tokens(none, h1, toks({6, 7, 8}), std::nullopt));
}

TEST(KvCacheScenarios, S07_HashIsDeterministicAndSensitive) {
  const BlockHasher a(4), b(4), seeded(4, "seed");
  EXPECT_EQ(a.none_hash(), b.none_hash());   // reproducible across runs and instances
  EXPECT_NE(a.none_hash(), seeded.none_hash());
  const auto none = a.none_hash();
  const auto base = hash_block_tokens(none, std::nullopt, toks({1, 2, 3, 4}), std::nullopt);
  EXPECT_EQ(base, hash_block_tokens(none, std::nullopt, toks({1, 2, 3, 4}), std::nullopt));
  EXPECT_NE(base, hash_block_tokens(none, std::nullopt, toks({1, 2, 3, 5}), std::nullopt));
  EXPECT_NE(base, hash_block_tokens(none, base, toks({1, 2, 3, 4}), std::nullopt));
  // None and an empty tuple of extra keys differ.
  EXPECT_NE(base, hash_block_tokens(none, std::nullopt, toks({1, 2, 3, 4}),
                                    std::vector<ExtraKey>{}));
  EXPECT_EQ(base.to_hex().size(), 64u);
}

TEST(KvCacheScenarios, S08_MultiModalExtraKeys) {
  std::vector<MultiModalFeature> mm{{"hash1", 0, 5}, {"hash2", 10, 5}};
  ExtraKeySources src;
  src.mm_features = mm;

  auto r = generate_block_hash_extra_keys(src, 0, 5, 0);
  EXPECT_EQ(r.keys, (ExtraKeys{{MultiModalKey{"hash1", 0}}}));
  EXPECT_EQ(r.next_mm_idx, 1);

  r = generate_block_hash_extra_keys(src, 3, 8, 0);
  EXPECT_EQ(r.keys, (ExtraKeys{{MultiModalKey{"hash1", -3}}}));

  r = generate_block_hash_extra_keys(src, 6, 10, 0);
  EXPECT_EQ(r.keys, std::nullopt);

  r = generate_block_hash_extra_keys(src, 0, 15, 0);
  EXPECT_EQ(r.keys, (ExtraKeys{{MultiModalKey{"hash1", 0}, MultiModalKey{"hash2", 10}}}));
  EXPECT_EQ(r.next_mm_idx, 2);
}

TEST(KvCacheScenarios, S08_CacheSaltAndLoraExtraKeys) {
  ExtraKeySources salt;
  salt.cache_salt = "salt";
  EXPECT_EQ(generate_block_hash_extra_keys(salt, 0, 5, 0).keys, (ExtraKeys{{std::string("salt")}}));
  EXPECT_EQ(generate_block_hash_extra_keys(salt, 0, 10, 0).keys,
            (ExtraKeys{{std::string("salt")}}));
  EXPECT_EQ(generate_block_hash_extra_keys(salt, 1, 5, 0).keys, std::nullopt);
  EXPECT_EQ(generate_block_hash_extra_keys(salt, 6, 10, 0).keys, std::nullopt);

  std::vector<MultiModalFeature> mm{{"hash1", 0, 5}};
  salt.mm_features = mm;
  EXPECT_EQ(generate_block_hash_extra_keys(salt, 0, 5, 0).keys,
            (ExtraKeys{{MultiModalKey{"hash1", 0}, std::string("salt")}}));

  ExtraKeySources lora;
  lora.lora_name = "test_lora_adapter";
  EXPECT_EQ(generate_block_hash_extra_keys(lora, 0, 5, 0).keys,
            (ExtraKeys{{std::string("test_lora_adapter")}}));
  EXPECT_EQ(generate_block_hash_extra_keys(lora, 16, 32, 0).keys,
            (ExtraKeys{{std::string("test_lora_adapter")}}));

  // Through a Request: the adapter name feeds every block, the salt only the first.
  RequestParams p;
  p.lora_id = 7;
  p.lora_name = "adapter";
  p.cache_salt = "s";
  Request with = make_request("a", iota_tokens(8), 4, p);
  Request without = make_request("b", iota_tokens(8), 4);
  const auto none = BlockHasher(4).none_hash();
  const auto h0 = hash_block_tokens(none, std::nullopt, toks({0, 1, 2, 3}),
                                    std::vector<ExtraKey>{std::string("adapter"), std::string("s")});
  EXPECT_EQ(with.block_hashes()[0], h0);
  EXPECT_EQ(with.block_hashes()[1], hash_block_tokens(none, h0, toks({4, 5, 6, 7}),
                                                      std::vector<ExtraKey>{std::string("adapter")}));
  EXPECT_NE(with.block_hashes()[0], without.block_hashes()[0]);
}

TEST(KvCacheScenarios, S09_CacheSaltIsolatesTenants) {
  KVCacheManager kv(make_config(11, 16));
  const auto common = concat(concat(repeat(0, 16), repeat(1, 16)), repeat(2, 16));
  RequestParams salt1;
  salt1.cache_salt = "salt1";
  Request req0 = make_request("0", concat(common, repeat(3, 11)), 16, salt1);
  ASSERT_EQ(req0.block_hashes().size(), 3u);
  const auto none = BlockHasher(16).none_hash();
  const auto h0 = hash_block_tokens(none, std::nullopt, repeat(0, 16),
                                    std::vector<ExtraKey>{std::string("salt1")});
  const auto h1 = hash_block_tokens(none, h0, repeat(1, 16), std::nullopt);
  const auto h2 = hash_block_tokens(none, h1, repeat(2, 16), std::nullopt);
  EXPECT_EQ(req0.block_hashes()[0], h0);
  EXPECT_EQ(req0.block_hashes()[1], h1);
  EXPECT_EQ(req0.block_hashes()[2], h2);
  EXPECT_EQ(kv.get_computed_blocks(req0).num_computed_tokens, 0);
  EXPECT_EQ(alloc(kv, req0, 59), (std::vector<BlockId>{1, 2, 3, 4}));

  Request req1 = make_request("1", concat(common, repeat(4, 5)), 16, salt1);
  const auto hit1 = kv.get_computed_blocks(req1);
  EXPECT_EQ(hit1.num_computed_tokens, 48);
  EXPECT_EQ(hit1.block_ids(), (std::vector<BlockId>{1, 2, 3}));

  RequestParams salt2;
  salt2.cache_salt = "salt2";
  Request req2 = make_request("2", concat(common, repeat(4, 5)), 16, salt2);
  const auto hit2 = kv.get_computed_blocks(req2);
  EXPECT_EQ(hit2.num_computed_tokens, 0);
  EXPECT_TRUE(hit2.block_ids().empty());
}

}  // namespace
}  // namespace vellum::core
