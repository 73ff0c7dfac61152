// UTF-8 validation, the streaming sanitizer (maximal-subpart replacement, split-invariant), and
// GPT-2's byte-to-unicode alphabet.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>

#include "tokenizer/unicode.h"

namespace vellum::tokenizer {
namespace {

TEST(Utf8, Validation) {
  EXPECT_TRUE(is_valid_utf8(""));
  EXPECT_TRUE(is_valid_utf8("abc \xC3\xA4 \xE2\x82\xAC \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(is_valid_utf8("\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC3"));
  EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Utf8, SanitizerReplacesMaximalSubparts) {
  // Python: b"...".decode("utf-8", "replace").
  EXPECT_EQ(sanitize_utf8("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\xA6"), "\xEF\xBF\xBD");    // truncated: one U+FFFD
  EXPECT_EQ(sanitize_utf8("\xF0\x9F" "A"), "\xEF\xBF\xBD" "A");
  EXPECT_EQ(sanitize_utf8("\xE0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("\xC3\xA4"), "\xC3\xA4");
}

TEST(Utf8, SanitizerIsIndependentOfHowBytesArePushed) {
  std::mt19937 rng(7);
  const std::string alphabet = "a\x80\xBF\xC2\xC3\xA4\xE0\xE2\x82\xAC\xED\xA0\xF0\x9F\xA6\x99\xF4\x90\xFF";
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string bytes(rng() % 24, '\0');
    for (char& c : bytes) c = alphabet[rng() % alphabet.size()];
    std::string streamed;
    Utf8Sanitizer sanitizer;
    for (size_t i = 0; i < bytes.size();) {
      const size_t n = std::min(bytes.size() - i, static_cast<size_t>(1 + rng() % 3));
      sanitizer.push(std::string_view(bytes).substr(i, n), streamed);
      ASSERT_TRUE(is_valid_utf8(streamed));
      i += n;
    }
    sanitizer.finish(streamed);
    ASSERT_EQ(streamed, sanitize_utf8(bytes));
    ASSERT_TRUE(is_valid_utf8(streamed));
  }
}

TEST(ByteLevel, AlphabetIsABijectionOnPrintableCodePoints) {
  const auto& table = byte_to_unicode();
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    EXPECT_TRUE(is_valid_utf8(table[b]));
    EXPECT_TRUE(seen.insert(table[b]).second);
    size_t offset = 0;
    EXPECT_EQ(unicode_to_byte(next_codepoint(table[b], offset)), b);
  }
  EXPECT_EQ(table[' '], "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(table['\n'], "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(table['A'], "A");
  EXPECT_EQ(unicode_to_byte(0x4E00), -1);
}

}  // namespace
}  // namespace vellum::tokenizer
