// The draft proposers of speculative decoding (issue 36): n-gram prompt lookup and the suffix
// trees of suffix decoding, on hand-made token sequences.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/spec_decode/ngram_proposer.h"
#include "engine/spec_decode/suffix_proposer.h"
#include "engine/spec_decode/suffix_tree.h"

namespace vellum::engine {
namespace {

using Tokens = std::vector<int32_t>;

TEST(NgramLookup, ProposesWhatFollowedTheMostRecentLongestMatch) {
  // The tail "1 2 3" occurred twice; the later occurrence was followed by 7 8.
  const Tokens tokens = {1, 2, 3, 4, 5, 9, 1, 2, 3, 7, 8, 6, 0, 1, 2, 3};
  EXPECT_EQ(ngram_lookup(tokens, 2, 5, 2), (Tokens{7, 8}));
  EXPECT_EQ(ngram_lookup(tokens, 2, 5, 9), (Tokens{7, 8, 6, 0, 1, 2, 3}));
  // A longer match wins over a more recent shorter one: "9 1 2" then "0 1 2".
  const Tokens longer = {9, 1, 2, 5, 0, 1, 2, 6, 9, 1, 2};
  EXPECT_EQ(ngram_lookup(longer, 2, 5, 1), (Tokens{5}));
  EXPECT_EQ(ngram_lookup(longer, 2, 2, 1), (Tokens{6}));
}

TEST(NgramLookup, NothingBelowTheMinimumLength) {
  const Tokens tokens = {1, 2, 3, 4, 2, 5, 6, 2};
  EXPECT_EQ(ngram_lookup(tokens, 2, 5, 3), Tokens{});  // only the 1-gram "2" repeats
  EXPECT_EQ(ngram_lookup(tokens, 1, 5, 3), (Tokens{5, 6, 2}));
  EXPECT_EQ(ngram_lookup(Tokens{}, 1, 5, 3), Tokens{});
  EXPECT_EQ(ngram_lookup(Tokens{4}, 1, 5, 3), Tokens{});
}

TEST(SuffixTree, CountsNgramsAndDraftsTheMostFrequentContinuation) {
  SuffixTree tree(4);
  SuffixTree::Cursor cursor;
  // "1 2" is followed by 3 twice and by 4 once.
  const Tokens tokens = {1, 2, 3, 1, 2, 3, 1, 2, 4};
  tree.append(cursor, tokens);
  const Tokens context = {9, 1, 2};
  const auto [node, len] = tree.match(context);
  ASSERT_GE(node, 0);
  EXPECT_EQ(len, 2);
  double score = 0.0;
  // "1 2 3" (2 of 3), then "1 2 3 1" (2 of 2); depth 4 is the deepest n-gram kept.
  EXPECT_EQ(tree.draft(node, 5, 0.1, &score), (Tokens{3, 1}));
  EXPECT_NEAR(score, 2.0 / 3.0 + 2.0 / 3.0, 1e-9);
  // A probability floor above 2/3 drafts nothing.
  EXPECT_EQ(tree.draft(node, 5, 0.7, &score), Tokens{});
}

TEST(SuffixTree, RemovingASequenceLeavesTheOthersCounts) {
  SuffixTree tree(5);
  SuffixTree::Cursor a_cursor;
  SuffixTree::Cursor b_cursor;
  const Tokens a = {1, 2, 3, 4, 5, 6};
  const Tokens b = {7, 2, 3, 9, 2, 3, 9};
  tree.append(a_cursor, a);
  const int64_t nodes_of_a = tree.num_nodes();
  tree.append(b_cursor, b);
  tree.remove(a);
  double score = 0.0;
  const auto [node, len] = tree.match(Tokens{2, 3});
  ASSERT_GE(node, 0);
  EXPECT_EQ(len, 2);
  EXPECT_EQ(tree.draft(node, 2, 0.0, &score), (Tokens{9, 2}));
  EXPECT_EQ(tree.match(Tokens{4, 5}).first, -1) << "a's n-grams are gone";
  tree.remove(b);
  EXPECT_EQ(tree.num_nodes(), 1) << "only the root is left";
  SuffixTree::Cursor again;
  tree.append(again, a);
  EXPECT_EQ(tree.num_nodes(), nodes_of_a) << "freed nodes are reused";
}

TEST(SuffixProposer, DraftsFromTheRequestAndFromFinishedRequests) {
  SpeculativeConfig config;
  config.method = ProposerMethod::kSuffix;
  config.suffix_max_tree_depth = 8;
  config.suffix_max_spec_factor = 2.0;
  config.suffix_min_token_prob = 0.1;
  config.suffix_max_cached_requests = 1;
  SuffixProposer proposer(config);
  // Its own tokens: "5 6 7 8" then "5 6" again.
  EXPECT_EQ(proposer.propose("r", Tokens{5, 6, 7, 8, 1, 5, 6}, 3), (Tokens{7, 8, 1}));
  // The match length caps the draft (factor 2 x 1 matched token).
  EXPECT_EQ(proposer.propose("r", Tokens{5, 6, 7, 8, 1, 5, 6, 7, 8, 2, 9, 8}, 8),
            (Tokens{1, 5}));
  proposer.on_request_finished("r", Tokens{40, 41, 42, 43, 44});
  // A new request whose tail matches the finished one's output.
  EXPECT_EQ(proposer.propose("s", Tokens{3, 41, 42}, 2), (Tokens{43, 44}));
  // Only one finished request is kept: the next one evicts the first.
  proposer.on_request_finished("s", Tokens{50, 51, 52});
  EXPECT_EQ(proposer.propose("t", Tokens{3, 41, 42}, 2), Tokens{});
  EXPECT_EQ(proposer.propose("t", Tokens{4, 50, 51}, 2), (Tokens{52}));
}

}  // namespace
}  // namespace vellum::engine

#include "engine/spec_decode/spec_gate.h"

namespace vellum::engine {
namespace {

TEST(SpecGate, BreakEvenRisesWithTheBatch) {
  EXPECT_NEAR(SpecGate::break_even_acceptance(1), 0.25, 1e-9);
  EXPECT_NEAR(SpecGate::break_even_acceptance(16), 0.68, 1e-9);
  EXPECT_NEAR(SpecGate::break_even_acceptance(32), 0.75, 1e-9);
  for (int b = 1; b < 64; ++b) {
    EXPECT_LE(SpecGate::break_even_acceptance(b), SpecGate::break_even_acceptance(b + 1));
  }
}

TEST(SpecGate, ARequestWhoseDraftsFailStopsAndIsProbedAgain) {
  SpecGate gate(SpecGateMode::kAuto);
  EXPECT_TRUE(gate.allows("r", 1));  // the prior 0.5 is above batch 1's 0.25
  gate.record("r", 4, 0);            // 0.375
  gate.record("r", 4, 1);            // 0.34375: still allowed at batch 1
  EXPECT_TRUE(gate.allows("r", 1));
  EXPECT_FALSE(gate.allows("r", 16)) << "not at batch 16";
  gate.record("r", 4, 0);  // 0.2578
  EXPECT_TRUE(gate.allows("r", 1));
  gate.record("r", 4, 0);  // 0.193
  int num_allowed = 0;
  for (int step = 0; step < 2 * SpecGate::kProbeInterval; ++step) num_allowed += gate.allows("r", 1);
  EXPECT_EQ(num_allowed, 2) << "one probe every kProbeInterval steps";
  gate.record("r", 4, 4);  // 0.395: a good probe turns it back on
  EXPECT_TRUE(gate.allows("r", 1));
  EXPECT_FALSE(gate.allows("r", SpecGate::kMaxDecodeRequests + 1));
}

TEST(SpecGate, AlwaysProposes) {
  SpecGate gate(SpecGateMode::kAlways);
  gate.record("r", 4, 0);
  gate.record("r", 4, 0);
  EXPECT_TRUE(gate.allows("r", 1000));
}

}  // namespace
}  // namespace vellum::engine
