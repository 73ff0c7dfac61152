// Stop strings with streaming hold-back (S44) and prompt validation (S45), spec §2.7-§2.8 / §3 E.
#include <gtest/gtest.h>

#include "core/scheduler/input_validation.h"
#include "core/stop_checker.h"
#include "vellum/status.h"

namespace vellum::core {
namespace {

using Stops = std::vector<std::string>;

TEST(StopStrings, S44_TruncateAtStartOrEnd) {
  const std::string text = "Hello world";
  const Stops stops = {"wor"};
  auto m = check_stop_strings(text, 11, stops, /*include_stop_str_in_output=*/false);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stop, "wor");
  EXPECT_EQ(m->truncate_to, 6);
  EXPECT_EQ(text.substr(0, static_cast<size_t>(m->truncate_to)), "Hello ");

  m = check_stop_strings(text, 11, stops, /*include_stop_str_in_output=*/true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stop, "wor");
  EXPECT_EQ(m->truncate_to, 9);
  EXPECT_EQ(text.substr(0, static_cast<size_t>(m->truncate_to)), "Hello wor");
}

TEST(StopStrings, S44_IncludedStopAtTheEndMeansNoTruncation) {
  const Stops stops = {"world"};
  auto m = check_stop_strings("Hello world", 3, stops, true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stop, "world");
  EXPECT_EQ(m->truncate_to, -1);
  m = check_stop_strings("Hello world", 3, stops, false);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->truncate_to, 6);
}

TEST(StopStrings, S44_NothingNewOrNoStopsReturnsNull) {
  const Stops stops = {"wor"};
  EXPECT_FALSE(check_stop_strings("Hello world", 0, stops, false).has_value());
  EXPECT_FALSE(check_stop_strings("Hello world", 11, {}, false).has_value());
  EXPECT_FALSE(check_stop_strings("Hello world", 11, Stops{"xyz"}, false).has_value());
}

TEST(StopStrings, S44_SearchesOnlyWhatTheNewTextCanComplete) {
  // "wor" lies entirely in old text; with 1 new char the search starts at 11 + 1 - 1 - 3 = 8.
  EXPECT_FALSE(check_stop_strings("Hello world", 1, Stops{"wor"}, false).has_value());
  // A stop string straddling old and new text is found: "rld" with the "d" new.
  auto m = check_stop_strings("Hello world", 1, Stops{"rld"}, false);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->truncate_to, 8);
}

TEST(StopStrings, S44_EarliestMatchWins) {
  const Stops stops = {"cd", "ab"};
  auto m = check_stop_strings("xx ab cd", 8, stops, false);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stop, "ab");
  EXPECT_EQ(m->truncate_to, 3);
  // Same start: the first in list order.
  m = check_stop_strings("xabc", 4, Stops{"ab", "abc"}, true);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->stop, "ab");
  EXPECT_EQ(m->truncate_to, 3);
}

TEST(StopStrings, S44_StreamingHoldBack) {
  const Stops stops = {"abc"};
  // The last max(len) - 1 = 2 characters are withheld while the request runs.
  EXPECT_EQ(num_stop_string_hold_back_bytes("Hello ab", stops, false), 2);
  EXPECT_EQ(num_stop_string_hold_back_bytes("H", stops, false), 1);
  EXPECT_EQ(num_stop_string_hold_back_bytes("", stops, false), 0);
  EXPECT_EQ(num_stop_string_hold_back_bytes("Hello ab", stops, true), 0);
  EXPECT_EQ(num_stop_string_hold_back_bytes("Hello ab", {}, false), 0);
  EXPECT_EQ(num_stop_string_hold_back_bytes("Hello ab", Stops{"a", "abcd"}, false), 3);
  // Characters, not bytes: "é" (2 bytes) and "€" (3 bytes) are one character each.
  EXPECT_EQ(num_stop_string_hold_back_bytes("xé€", stops, false), 5);
  EXPECT_EQ(num_stop_string_hold_back_bytes("xyz", Stops{"é€!"}, false), 2);
}

TEST(StopStrings, EmptyStopStringIsRejected) {
  EXPECT_THROW(check_stop_strings("abc", 3, Stops{""}, false), vellum::Error);
}

TEST(PromptValidation, S45_PromptLength) {
  auto err = validate_prompt_len(0, 16);
  ASSERT_TRUE(err.has_value());
  EXPECT_EQ(*err, "The decoder prompt cannot be empty");

  err = validate_prompt_len(17, 16);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("The decoder prompt (length 17) is longer than the maximum model length of 16"),
            std::string::npos)
      << *err;

  err = validate_prompt_len(16, 16);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("plus the number of requested output tokens (at least 1)"),
            std::string::npos)
      << *err;
  EXPECT_NE(err->find("maximum model length of 16"), std::string::npos) << *err;

  EXPECT_FALSE(validate_prompt_len(15, 16).has_value());
  EXPECT_EQ(resolve_max_tokens(16, 15), 1);
}

TEST(PromptValidation, S45_MaxTokensIsTheMinimumOfEveryLimit) {
  EXPECT_EQ(resolve_max_tokens(100, 10), 90);
  EXPECT_EQ(resolve_max_tokens(100, 10, {.requested = 5}), 5);
  EXPECT_EQ(resolve_max_tokens(100, 10, {.requested = 500}), 90);
  EXPECT_EQ(resolve_max_tokens(100, 10, {.requested = 50, .default_max_tokens = 20}), 20);
  EXPECT_EQ(resolve_max_tokens(100, 10, {.default_max_tokens = 20, .override_max_tokens = 7}), 7);
  EXPECT_THROW(resolve_max_tokens(16, 17), vellum::Error);
}

}  // namespace
}  // namespace vellum::core
