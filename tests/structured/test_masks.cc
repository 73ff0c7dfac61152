// Token masks: the trie walk against a brute-force check of every token; matcher sync, replay and
// cache resets; choice constraints.
#include <gtest/gtest.h>

#include <random>

#include "structured_test_util.h"
#include "vellum/status.h"

namespace vellum::structured {
namespace {

bool bit(std::span<const uint64_t> mask, int32_t id) {
  return (mask[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1;
}

// Whether `token` may follow `state`: every byte steps to a live state.
bool brute_force_allowed(Automaton& a, const TokenVocabulary& vocab, int32_t state, int32_t token) {
  if (vocab.is_end_token(token)) return a.accepting(state);
  const std::string& bytes = vocab.token_bytes(token);
  if (bytes.empty()) return false;
  int32_t s = state;
  for (char c : bytes) {
    s = a.step(s, static_cast<uint8_t>(c));
    if (s == Automaton::kDead) return false;
  }
  return true;
}

TEST(TokenMask, TrieWalkEqualsBruteForceInEveryVisitedState) {
  auto vocab = testing::synthetic_vocab();
  GrammarCache cache(vocab);
  ConstraintSpec schema = testing::schema_spec(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name"]})");
  for (const ConstraintSpec& spec :
       {schema, testing::regex_spec("(yes|no|maybe)( (yes|no))*"),
        testing::grammar_spec("root ::= \"<tool_call>\" [a-z]+ \"</tool_call>\"")}) {
    auto g = cache.get(spec);
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::mt19937_64 rng(seed);
      Matcher m(g);
      std::vector<int32_t> output;
      for (int step = 0; step < 30; ++step) {
        m.sync(output);
        const auto mask = m.mask();
        // The matcher's state: replay its bytes.
        Automaton& a = g->automaton();
        int32_t state = a.initial_state();
        for (char c : m.consumed_bytes()) state = a.step(state, static_cast<uint8_t>(c));
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
          ASSERT_EQ(bit(mask, id), brute_force_allowed(a, *vocab, state, id))
              << "token " << id << " after " << m.consumed_bytes();
          if (bit(mask, id)) allowed.push_back(id);
        }
        for (int64_t id = vocab->num_tokens(); id < vocab->mask_size(); ++id) {
          EXPECT_FALSE(bit(mask, static_cast<int32_t>(id)));  // padding rows never allowed
        }
        ASSERT_FALSE(allowed.empty());
        const int32_t pick =
            allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (pick == 0) break;
        output.push_back(pick);
      }
    }
  }
}

TEST(Matcher, ReplaysWhenTheOutputIsNotAContinuationAndAfterCacheResets) {
  auto vocab = testing::synthetic_vocab();
  GrammarLimits limits;
  limits.max_states = 8;  // forces resets
  GrammarCache cache(vocab, limits);
  auto g = cache.get(testing::regex_spec("(abc|name|age)+"));
  const int32_t name = [&] {
    for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
      if (vocab->token_bytes(id) == "name") return id;
    }
    return -1;
  }();
  ASSERT_GE(name, 0);
  const int32_t a = 'a';  // single-byte tokens have the byte as id
  Matcher m(g);
  m.sync(std::vector<int32_t>{name, a});
  EXPECT_EQ(m.consumed_bytes(), "namea");
  EXPECT_FALSE(m.accepting());
  EXPECT_TRUE(bit(m.mask(), 'b'));
  EXPECT_TRUE(bit(m.mask(), 'g'));
  EXPECT_FALSE(bit(m.mask(), 'x'));
  // A different history (another beam): replayed from the start.
  m.sync(std::vector<int32_t>{a, 'b', 'c'});
  EXPECT_EQ(m.consumed_bytes(), "abc");
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(bit(m.mask(), 0));  // the end token, since it accepts
  // Many states later (several resets), the matcher still knows where it is.
  std::vector<int32_t> long_output;
  for (int i = 0; i < 50; ++i) long_output.insert(long_output.end(), {name, a, 'g', 'e'});
  m.sync(long_output);
  EXPECT_TRUE(m.accepting());
  EXPECT_TRUE(m.error().empty()) << m.error();
  EXPECT_GT(g->automaton().epoch(), 0u);
  // A token outside the constraint ends the matcher with an error; only end tokens remain.
  long_output.push_back('x');
  m.sync(long_output);
  EXPECT_FALSE(m.error().empty());
  EXPECT_TRUE(bit(m.mask(), 0));
  EXPECT_FALSE(bit(m.mask(), 'a'));
}

TEST(Matcher, ChoiceAllowsExactlyThePrefixesOfTheChoices) {
  auto vocab = testing::synthetic_vocab();
  GrammarCache cache(vocab);
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kChoice;
  spec.choices = {"yes", "no", "maybe"};
  auto g = cache.get(spec);
  EXPECT_EQ(cache.get(spec), g);  // cached by text
  Matcher m(g);
  m.sync({});
  std::vector<std::string> allowed;
  for (int32_t id = 0; id < vocab->num_tokens(); ++id) {
    if (bit(m.mask(), id)) allowed.push_back(vocab->token_bytes(id));
  }
  std::sort(allowed.begin(), allowed.end());
  EXPECT_EQ(allowed, (std::vector<std::string>{"m", "maybe", "n", "no", "y", "yes"}));
  spec.choices = {};
  EXPECT_THROW(cache.get(spec), Error);
}

}  // namespace
}  // namespace vellum::structured
