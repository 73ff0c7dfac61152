// Vocabularies from small GGUF files this test writes itself (so it always runs): a valid
// byte-level BPE vocabulary works end to end, and each kind of damage is a clear error.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace vellum::tokenizer {
namespace {

// 256 byte characters, then "ab" (256), "Ġab" (257), "<|endoftext|>" (258).
gguf::GgufWriter tiny_bpe_writer() {
  gguf::GgufWriter writer;
  std::vector<std::string> tokens(byte_to_unicode().begin(), byte_to_unicode().end());
  tokens.push_back("ab");
  tokens.push_back("\xC4\xA0" "ab");
  tokens.push_back("<|endoftext|>");
  std::vector<int32_t> types(tokens.size(), 1);
  types.back() = 3;
  writer.set_string("general.architecture", "gpt2");
  writer.set_string("tokenizer.ggml.model", "gpt2");
  writer.set_string("tokenizer.ggml.pre", "gpt-2");
  writer.set_string_array("tokenizer.ggml.tokens", tokens);
  writer.set_i32_array("tokenizer.ggml.token_type", types);
  writer.set_string_array("tokenizer.ggml.merges", {"a b", "\xC4\xA0 ab"});
  writer.set_u32("tokenizer.ggml.bos_token_id", 258);
  writer.set_u32("tokenizer.ggml.eos_token_id", 258);
  return writer;
}

std::unique_ptr<Tokenizer> load(gguf::GgufWriter& writer, const std::string& name) {
  const auto path = vellum::testing::temp_dir() / (name + ".gguf");
  writer.write(path);
  return Tokenizer::from_gguf(*gguf::GgufFile::open(path));
}

void expect_load_error(const std::string& name, const std::function<void(gguf::GgufWriter&)>& damage,
                       ErrorCode code, const std::string& needle) {
  auto writer = tiny_bpe_writer();
  damage(writer);
  try {
    load(writer, name);
    ADD_FAILURE() << name << ": expected an error mentioning '" << needle << "'";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), code) << name << ": " << error.what();
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
        << name << ": " << error.what();
  }
}

TEST(TinyVocab, ValidByteLevelBpeWorks) {
  auto writer = tiny_bpe_writer();
  const auto tokenizer = load(writer, "valid");
  EXPECT_EQ(tokenizer->encode(" ab ab", {.add_special = false}), (std::vector<int32_t>{257, 257}));
  EXPECT_EQ(tokenizer->encode("abc", {.add_special = false}),
            (std::vector<int32_t>{256, 'c'}));
  EXPECT_EQ(tokenizer->decode(tokenizer->encode("x ab\n\tz", {.add_special = false})), "x ab\n\tz");
  EXPECT_EQ(tokenizer->eog_ids(), (std::vector<int32_t>{258}));
}

TEST(TinyVocab, MissingMergesIsAnError) {
  expect_load_error("no-merges", [](auto& w) { w.remove("tokenizer.ggml.merges"); },
                    ErrorCode::kInvalidModel, "without merges");
}

TEST(TinyVocab, MergeOutsideTheVocabularyIsAnError) {
  expect_load_error("bad-merge-part",
                    [](auto& w) { w.set_string_array("tokenizer.ggml.merges", {"a b", "abc d"}); },
                    ErrorCode::kInvalidModel, "not in the vocabulary");
  expect_load_error("bad-merge-result",
                    [](auto& w) { w.set_string_array("tokenizer.ggml.merges", {"a b", "x y"}); },
                    ErrorCode::kInvalidModel, "produces 'xy'");
  expect_load_error("merge-without-space",
                    [](auto& w) { w.set_string_array("tokenizer.ggml.merges", {"ab"}); },
                    ErrorCode::kInvalidModel, "no space");
}

TEST(TinyVocab, OutOfRangeSpecialIdIsAnError) {
  expect_load_error("bad-bos", [](auto& w) { w.set_u32("tokenizer.ggml.bos_token_id", 9999); },
                    ErrorCode::kInvalidModel, "9999");
  // 0xFFFFFFFF is how converters write "none": not an error.
  auto writer = tiny_bpe_writer();
  writer.set_u32("tokenizer.ggml.padding_token_id", 0xFFFFFFFFu);
  EXPECT_NO_THROW(load(writer, "pad-none"));
}

TEST(TinyVocab, InvalidUtf8TokenIsAnError) {
  expect_load_error("bad-utf8",
                    [](auto& w) {
                      std::vector<std::string> tokens(byte_to_unicode().begin(),
                                                      byte_to_unicode().end());
                      tokens.push_back("ab");
                      tokens.push_back("\xC4\xA0" "ab");
                      tokens.push_back("\xFF\xFE");
                      w.set_string_array("tokenizer.ggml.tokens", tokens);
                    },
                    ErrorCode::kInvalidModel, "not valid UTF-8");
}

TEST(TinyVocab, TokenTypeCountMismatchIsAnError) {
  expect_load_error("bad-types",
                    [](auto& w) { w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1}); },
                    ErrorCode::kInvalidModel, "token types");
}

TEST(TinyVocab, UnknownPreTokenizerAndModelAreUnsupported) {
  expect_load_error("bad-pre", [](auto& w) { w.set_string("tokenizer.ggml.pre", "mystery"); },
                    ErrorCode::kUnsupported, "mystery");
  expect_load_error("bad-model", [](auto& w) { w.set_string("tokenizer.ggml.model", "bert"); },
                    ErrorCode::kUnsupported, "bert");
}

TEST(TinyVocab, SentencePieceWithoutByteFallbackOrUnknownIsAnError) {
  Vocab vocab;
  vocab.type = VocabType::kSpm;
  vocab.tokens = {"<s>", "</s>", "\xE2\x96\x81" "a"};
  vocab.attrs = {kAttrControl, kAttrControl, kAttrNormal};
  vocab.scores = {0, 0, -1};
  vocab.bos_id = 0;
  vocab.eos_id = 1;
  try {
    Tokenizer::from_vocab(vocab);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("byte-fallback"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace vellum::tokenizer
