// Regexes against std::regex (ECMAScript, whole-string match) as the oracle, on random strings;
// refused features; limits.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <regex>

#include "structured_test_util.h"
#include "vellum/status.h"

namespace vellum::structured {
namespace {

using testing::full_match;
using testing::regex_spec;

TEST(Regex, AgreesWithStdRegexOnRandomStrings) {
  const std::vector<std::string> patterns = {
      "abc",           "a|b|cd",        "(ab)*c",        "a+b?",         "[a-c]{2,4}",
      "[^ab]*",        "\\d{3}-\\d{2}", "(a|ab)(c|bcd)", "x{0,3}y{2}",   "(a*)*b",
      "[a-c-]+",       "\\w+\\s?\\w*",  "(?:ab|a)+",     "a{3,}",        ".{2}c",
      "(a|b)*abb",     "[\\d.]+",       "((a|b)c?){1,3}"};
  const std::string alphabet = "abcdxy0129-. _";
  std::mt19937_64 rng(7);
  for (const std::string& p : patterns) {
    SCOPED_TRACE(p);
    Automaton a(compile_constraint(regex_spec(p)), GrammarLimits{});
    const std::regex oracle(p);
    for (int i = 0; i < 400; ++i) {
      const size_t len = std::uniform_int_distribution<size_t>(0, 7)(rng);
      std::string s;
      for (size_t k = 0; k < len; ++k) {
        s += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      }
      EXPECT_EQ(testing::full_match(a, s), std::regex_match(s, oracle)) << "input: " << s;
    }
  }
}

TEST(Regex, UnicodeClassesStepThroughUtf8Bytes) {
  EXPECT_TRUE(full_match(regex_spec("[à-ÿ]+"), "éàÿ"));
  EXPECT_FALSE(full_match(regex_spec("[à-ÿ]+"), "e"));
  EXPECT_TRUE(full_match(regex_spec(".€."), "a€\xF0\x9F\x98\x80"));
  EXPECT_FALSE(full_match(regex_spec("."), "\xC3"));  // a cut character is not a character
  EXPECT_TRUE(full_match(regex_spec("[^a]"), "\xE2\x82\xAC"));
  EXPECT_FALSE(full_match(regex_spec("[^a]"), "\xED\xA0\x80"));  // a surrogate is not UTF-8
  EXPECT_TRUE(full_match(regex_spec("\\u00e9\\x41"), "éA"));
  EXPECT_TRUE(full_match(regex_spec("^ab$"), "ab"));
}

TEST(Regex, RefusesWhatItCannotMatchWithAClearError) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(a)\\1", "backreferences"},
      {"a(?=b)", "lookaround"},
      {"\\bword", "word boundaries"},
      {"(?i)abc", "inline flags"},
      {"\\p{L}", "Unicode property"},
      {"a)", "unbalanced"},
      {"(a", "missing ')'"},
      {"[a-", "unterminated"},
      {"*a", "nothing to repeat"},
      {"a{5,2}", "minimum exceeds"},
      {"a^b", "'^'"},
      {"[z-a]", "bad character range"},
  };
  for (const auto& [pattern, expected] : cases) {
    try {
      compile_constraint(regex_spec(pattern));
      ADD_FAILURE() << pattern << " compiled";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << pattern << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("regex"), std::string::npos) << e.what();
    }
  }
}

TEST(Regex, PathologicalPatternsAreBoundedInTimeAndSize) {
  const auto start = std::chrono::steady_clock::now();
  // Huge repetition counts are refused before anything is built.
  EXPECT_THROW(compile_constraint(regex_spec("a{1000000}")), Error);
  EXPECT_THROW(compile_constraint(regex_spec("(a{5000}){5000}")), Error);
  // Nested groups beyond the nesting limit.
  EXPECT_THROW(compile_constraint(regex_spec(std::string(500, '(') + std::string(500, ')'))),
               Error);
  // Classic catastrophic-backtracking patterns run in linear time here.
  Automaton a(compile_constraint(regex_spec("(a+)+b")), GrammarLimits{});
  EXPECT_FALSE(full_match(a, std::string(5000, 'a')));
  Automaton b(compile_constraint(regex_spec("(a|a)*(a|aa)*c")), GrammarLimits{});
  EXPECT_TRUE(full_match(b, std::string(3000, 'a') + "c"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace vellum::structured
