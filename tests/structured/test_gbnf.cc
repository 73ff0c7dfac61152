// GBNF grammars: syntax, matching, errors that name the rule, bounded ambiguity.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "structured_test_util.h"
#include "vellum/status.h"

namespace vellum::structured {
namespace {

using testing::full_match;
using testing::grammar_spec;

const char* kArithmetic = R"G(
# arithmetic over small integers
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor ("*" factor)*
factor ::= [0-9]{1,3} | "(" expr ")"
)G";

TEST(Gbnf, MatchesWhatTheGrammarDescribes) {
  Automaton a(compile_constraint(grammar_spec(kArithmetic)), GrammarLimits{});
  for (const char* ok : {"1", "1+2*3", "(1+2)*(3-4)", "((7))", "123*0"}) {
    EXPECT_TRUE(full_match(a, ok)) << ok;
  }
  for (const char* bad : {"", "1+", "(1", "1234", "a", "1 + 2"}) {
    EXPECT_FALSE(full_match(a, bad)) << bad;
  }
  const char* strings = R"(root ::= "\"" [^"\\]* "\"" "\n" [\x41-\x43]+ "é" .)";
  EXPECT_TRUE(full_match(grammar_spec(strings), "\"hi there\"\nABCéx"));
  EXPECT_FALSE(full_match(grammar_spec(strings), "\"hi\"there\"\nAéx"));
  const char* words = "root ::= (\"yes\" | \"no\") (\", \" (\"yes\" | \"no\"))*\n";
  EXPECT_TRUE(full_match(grammar_spec(words), "yes, no, no"));
  const char* empty = "root ::= \"\" | \"a\"";
  EXPECT_TRUE(full_match(grammar_spec(empty), ""));
}

TEST(Gbnf, ErrorsNameTheRuleOrPosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"root ::= item", "'item' is used but never defined"},
      {"start ::= \"a\"", "no 'root' rule"},
      {"root ::= root \"a\" | \"b\"", "left-recursive"},
      {"root ::= x\nx ::= y \"a\"\ny ::= x | \"b\"", "left-recursive"},
      {"root ::= \"a\" root", "can never end"},
      {"root ::= \"a\"\nroot ::= \"b\"", "defined twice"},
      {"root ::= \"a", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root = \"a\"", "expected '::='"},
      {"root ::= \"a\"{3,1}", "minimum exceeds"},
      {"root ::= \"a\"{99999999}", "too large"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      compile_constraint(grammar_spec(text));
      ADD_FAILURE() << text << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << text << ": " << e.what();
    }
  }
}

TEST(Gbnf, AmbiguousGrammarsHitTheStackLimitInsteadOfGrowingWithoutBound) {
  // After n "a"s this grammar has 2^n live parses; the automaton caps them.
  const char* exponential = R"(root ::= "a" root "b" | "a" root "c" | "")";
  GrammarLimits limits;
  limits.max_stacks_per_state = 256;
  Automaton a(compile_constraint(grammar_spec(exponential), limits), limits);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(full_match(a, std::string(40, 'a') + std::string(40, 'b')));
  EXPECT_NE(a.limit_error().find("too ambiguous"), std::string::npos) << a.limit_error();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Within the limit the same grammar works.
  Automaton b(compile_constraint(grammar_spec(exponential), limits), limits);
  EXPECT_TRUE(full_match(b, "aaabcb"));
}

TEST(GbnfProperty, RandomWalksStayInsideTheGrammar) {
  auto vocab = testing::synthetic_vocab();
  GrammarCache cache(vocab);
  auto g = cache.get(grammar_spec(kArithmetic));
  Automaton check(compile_constraint(grammar_spec(kArithmetic)), GrammarLimits{});
  int finished = 0;
  for (uint64_t seed = 0; seed < 60; ++seed) {
    std::mt19937_64 rng(seed);
    const auto [text, done] = testing::random_generation(g, rng, 200);
    if (!done) continue;
    ++finished;
    EXPECT_TRUE(full_match(check, text)) << text;
  }
  EXPECT_GT(finished, 30);
}

}  // namespace
}  // namespace vellum::structured
