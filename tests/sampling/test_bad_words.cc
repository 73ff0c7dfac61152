// Tokenizing bad words as vLLM's update_from_tokenizer does, with a toy word-level tokenizer.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "sampling/bad_words.h"

namespace vellum::sampling {
namespace {

// Words map to ids; a leading space gives the "▁word" id (word id + 100) for the first word.
std::vector<int32_t> toy_encode(const std::string& text) {
  static const std::map<std::string, int32_t> kWords = {{"bad", 1}, {"word", 2}, {"ugly", 3}};
  std::vector<int32_t> ids;
  std::istringstream in(text);
  std::string w;
  bool first = true;
  while (in >> w) {
    int32_t id = kWords.count(w) ? kWords.at(w) : 50;
    if (first && !text.empty() && text[0] == ' ') id += 100;
    ids.push_back(id);
    first = false;
  }
  return ids;
}

TEST(BadWords, EncodesWithAndWithoutLeadingSpace) {
  const auto result = build_bad_words_token_ids({"bad word", "  ugly"}, toy_encode, 200);
  ASSERT_FALSE(result.error.has_value());
  EXPECT_EQ(result.token_ids, (std::vector<std::vector<int32_t>>{{1, 2}, {101, 2}, {3}, {103}}));
}

TEST(BadWords, SpacedFormWithSameFirstTokenIsDropped) {
  // An encoder that ignores spaces: both forms are identical, so only one is kept.
  const auto same = [](const std::string& text) {
    return text.find("bad") != std::string::npos ? std::vector<int32_t>{1} : std::vector<int32_t>{};
  };
  const auto result = build_bad_words_token_ids({"bad"}, same, 10);
  EXPECT_EQ(result.token_ids, (std::vector<std::vector<int32_t>>{{1}}));
}

TEST(BadWords, ReportsEmptyTokenizationAndOutOfVocabIds) {
  const auto empty = [](const std::string&) { return std::vector<int32_t>{}; };
  const auto r1 = build_bad_words_token_ids({"x"}, empty, 10);
  ASSERT_TRUE(r1.error.has_value());
  EXPECT_EQ(r1.error->param, "bad_words");
  EXPECT_EQ(r1.error->message, "bad_words entries must tokenize to at least one token.");
  const auto r2 = build_bad_words_token_ids({"bad word"}, toy_encode, 100);
  ASSERT_TRUE(r2.error.has_value());
  EXPECT_EQ(r2.error->message,
            "The model vocabulary size is 101, but the following tokens were specified as bad: "
            "[101]. All token id values should be integers satisfying: 0 <= token_id <= 100.");
}

}  // namespace
}  // namespace vellum::sampling
