// Pre-tokenizer regexes by name, checked against splits worked out by hand from the published
// definitions (llama.cpp's llm_tokenizer_bpe, the models' tokenizer.json), and the Qwen2 and
// DeepSeek-LLM vocabularies, which have no llama.cpp test vectors here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "test_util.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex_splitter.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

std::vector<std::string> split_with(std::string_view pre_name, std::string_view text) {
  const auto config = pre_tokenizer_config(pre_name);
  EXPECT_TRUE(config.has_value()) << pre_name;
  if (!config) return {};
  const RegexSplitter splitter(config->regexes);
  std::vector<std::string> pieces;
  for (const auto piece : splitter.split(text)) pieces.emplace_back(piece);
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, Qwen2SplitsSingleDigitsAndNewlineRuns) {
  EXPECT_EQ(split_with("qwen2", "Hello world! 12345 I'm here\n\n  ok"),
            (Pieces{"Hello", " world", "!", " ", "1", "2", "3", "4", "5", " I", "'m", " here",
                    "\n\n", " ", " ok"}));
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
  EXPECT_EQ(split_with("llama-bpe", "Hello world! 12345 I'M here"),
            (Pieces{"Hello", " world", "!", " ", "123", "45", " I", "'M", " here"}));
}

TEST(PreTokenizer, Gpt2KeepsTheSpaceBeforeAWordAndTrailingSpaces) {
  EXPECT_EQ(split_with("gpt-2", "Hello  world 42!?  "),
            (Pieces{"Hello", " ", " world", " 42", "!?", "  "}));
}

TEST(PreTokenizer, DeepseekLlmAppliesItsSixRegexesInOrder) {
  EXPECT_EQ(split_with("deepseek-llm", "Hello, world! \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C 123\n"),
            (Pieces{"Hello", ",", " world", "!", " ", "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C",
                    " ", "123", "\n"}));
}

TEST(PreTokenizer, DeepseekCoderSplitsSingleDigits) {
  EXPECT_EQ(split_with("deepseek-coder", "int x=42;\n"),
            (Pieces{"int", " x", "=", "4", "2", ";", "\n"}));
}

TEST(PreTokenizer, TekkenSplitsCamelCase) {
  // [^\r\n\p{L}\p{N}]?[\p{Lu}...]*[\p{Ll}...]+ keeps an upper-case run with the lower-case
  // letters that follow it.
  EXPECT_EQ(split_with("tekken", "HelloWorld ABCdef 7"),
            (Pieces{"Hello", "World", " ABCdef", " ", "7"}));
}

TEST(PreTokenizer, EveryNamedPreTokenizerCompiles) {
  for (const char* name :
       {"default", "llama-bpe", "llama3", "dbrx", "smaug-bpe", "deepseek-llm", "deepseek-coder",
        "falcon", "starcoder", "refact", "command-r", "smollm", "gpt-2", "phi-2", "qwen2",
        "stablelm2", "tekken", "chatglm-bpe", "poro-chat", "bloom", "viking", "exaone"}) {
    const auto config = pre_tokenizer_config(name);
    ASSERT_TRUE(config.has_value()) << name;
    EXPECT_NO_THROW(RegexSplitter splitter(config->regexes)) << name;
  }
  EXPECT_FALSE(pre_tokenizer_config("no-such-pre-tokenizer").has_value());
}

TEST(PreTokenizer, PiecesCoverTheTextExactly) {
  const std::string text = "  Mixed \t text\r\n with 123456 digits, \xF0\x9F\xA6\x99 emoji and \xE4\xBD\xA0!";
  for (const char* name : {"default", "llama-bpe", "qwen2", "deepseek-llm", "falcon", "tekken"}) {
    std::string joined;
    for (const auto& piece : split_with(name, text)) {
      EXPECT_FALSE(piece.empty()) << name;
      joined += piece;
    }
    EXPECT_EQ(joined, text) << name;
  }
}

TEST(Qwen2Vocab, EncodesKnownIdsAndRoundTrips) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-qwen2.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  const EncodeOptions plain{.add_special = false, .parse_special = false};
  EXPECT_EQ(tokenizer->encode("Hello, world", plain), (std::vector<int32_t>{9707, 11, 1879}));
  EXPECT_EQ(tokenizer->encode("\xE4\xBD\xA0\xE5\xA5\xBD", plain), (std::vector<int32_t>{108386}));
  EXPECT_EQ(tokenizer->encode("12345", plain), (std::vector<int32_t>{16, 17, 18, 19, 20}));
  // Qwen2 adds no BOS.
  EXPECT_FALSE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->encode("Hello, world"), (std::vector<int32_t>{9707, 11, 1879}));

  // Chat markers are control tokens only when parsing special text.
  const std::string chat = "<|im_start|>user\nHi<|im_end|>";
  const auto parsed = tokenizer->encode(chat, {.add_special = false, .parse_special = true});
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 151644);
  EXPECT_EQ(parsed.back(), 151645);
  const auto literal = tokenizer->encode(chat, plain);
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 151644), 0);
  EXPECT_EQ(tokenizer->decode(literal), chat);
  EXPECT_EQ(tokenizer->decode(parsed), "user\nHi");

  // llama.cpp's end-of-generation texts include "</s>", which is a plain piece (128247) here.
  EXPECT_EQ(tokenizer->eog_ids(), (std::vector<int32_t>{128247, 151643, 151645}));
  EXPECT_TRUE(tokenizer->is_eog(151645));

  VELLUM_REQUIRE_MODEL_FILE(inputs, "vocab/ggml-vocab-llama-bpe.gguf");
  for (const auto& test_case : testing::read_vocab_test_cases(inputs)) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(test_case.input, plain)), test_case.input);
  }
}

TEST(DeepseekLlmVocab, EncodesKnownIdsAndRoundTrips) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-deepseek-llm.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  const EncodeOptions plain{.add_special = false, .parse_special = false};
  EXPECT_EQ(tokenizer->encode("Hello world", plain), (std::vector<int32_t>{17464, 1843}));
  EXPECT_TRUE(tokenizer->add_bos());
  const auto with_bos = tokenizer->encode("Hello world");
  EXPECT_EQ(with_bos, (std::vector<int32_t>{100000, 17464, 1843}));
  EXPECT_EQ(tokenizer->decode(with_bos), "Hello world");
  // <｜end▁of▁sentence｜> is EOS and so ends generation.
  EXPECT_TRUE(tokenizer->is_eog(100001));

  VELLUM_REQUIRE_MODEL_FILE(inputs, "vocab/ggml-vocab-llama-bpe.gguf");
  for (const auto& test_case : testing::read_vocab_test_cases(inputs)) {
    EXPECT_EQ(tokenizer->decode(tokenizer->encode(test_case.input, plain)), test_case.input);
  }
}

}  // namespace
}  // namespace vellum::tokenizer
