// llama.cpp's tokenizer test vectors for every vocab-only GGUF that has them: exact ids
// (add_special=false, parse_special=false), and decoding back to the input.
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

using testing::load_gguf_tokenizer;
using testing::read_vocab_test_cases;

class GoldenVocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenVocabTest, EncodesLikeLlamaCppAndDecodesBack) {
  const std::string name = std::string("vocab/ggml-vocab-") + GetParam() + ".gguf";
  VELLUM_REQUIRE_MODEL_FILE(path, name);
  const auto tokenizer = load_gguf_tokenizer(path);
  const auto cases = read_vocab_test_cases(path);
  ASSERT_GE(cases.size(), 40u) << "could not read the test vectors next to " << path;
  const EncodeOptions encode_options{.add_special = false, .parse_special = false};
  for (const auto& test_case : cases) {
    const auto ids = tokenizer->encode(test_case.input, encode_options);
    EXPECT_EQ(ids, test_case.expected) << "input: '" << test_case.input << "'";
    // Byte fallback / byte-level alphabets make every one of these vocabularies lossless.
    EXPECT_EQ(tokenizer->decode(ids), test_case.input) << "input: '" << test_case.input << "'";
    // Token by token, the stream gives the same text.
    IncrementalDetokenizer detokenizer(*tokenizer, DecodeOptions{});
    std::string streamed;
    for (const int32_t id : ids) streamed += detokenizer.step(id);
    streamed += detokenizer.finish();
    EXPECT_EQ(streamed, test_case.input);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, GoldenVocabTest,
                         ::testing::Values("llama-spm", "llama-bpe", "phi-3", "gpt-2",
                                           "starcoder", "deepseek-coder", "falcon"),
                         [](const auto& param_info) {
                           std::string name = param_info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace vellum::tokenizer
