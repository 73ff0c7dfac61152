// Special tokens: BOS/EOS insertion, parse_special, end-of-generation sets, and how decoding
// treats control tokens (skip_special_tokens, spaces_between_special_tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

using Ids = std::vector<int32_t>;

TEST(SpecialTokens, Llama3BosEogAndParseSpecial) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-bpe.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  EXPECT_EQ(tokenizer->vocab_size(), 128256);
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_FALSE(tokenizer->add_eos());
  EXPECT_EQ(tokenizer->bos_id(), 128000);
  EXPECT_EQ(tokenizer->eos_id(), 128001);
  // <|end_of_text|>, <|eom_id|>, <|eot_id|>.
  EXPECT_EQ(tokenizer->eog_ids(), (Ids{128001, 128008, 128009}));
  EXPECT_TRUE(tokenizer->is_special(128009));
  EXPECT_FALSE(tokenizer->is_special(9906));

  EXPECT_EQ(tokenizer->encode("Hello"), (Ids{128000, 9906}));
  EXPECT_EQ(tokenizer->encode("Hello", {.add_special = false}), (Ids{9906}));

  const std::string text = "Hello<|eot_id|>";
  const Ids parsed = tokenizer->encode(text, {.add_special = false, .parse_special = true});
  EXPECT_EQ(parsed, (Ids{9906, 128009}));
  const Ids literal = tokenizer->encode(text, {.add_special = false, .parse_special = false});
  EXPECT_EQ(std::count(literal.begin(), literal.end(), 128009), 0);
  EXPECT_GT(literal.size(), 3u);
  EXPECT_EQ(tokenizer->decode(literal), text);

  // Decoding control tokens.
  const Ids ids{128000, 9906, 128009};
  EXPECT_EQ(tokenizer->decode(ids), "Hello");
  EXPECT_EQ(tokenizer->decode(ids, {.skip_special_tokens = false,
                                    .spaces_between_special_tokens = false}),
            "<|begin_of_text|>Hello<|eot_id|>");
  EXPECT_EQ(tokenizer->decode(ids, {.skip_special_tokens = false,
                                    .spaces_between_special_tokens = true}),
            "<|begin_of_text|> Hello <|eot_id|>");
  // token_to_piece follows llama.cpp (special=false): control tokens give nothing.
  EXPECT_EQ(tokenizer->token_to_piece(128009), "");
  EXPECT_EQ(tokenizer->token_text(128009), "<|eot_id|>");
  EXPECT_EQ(tokenizer->token_id("<|eot_id|>"), 128009);
  EXPECT_EQ(tokenizer->token_id("no such token text"), std::nullopt);
}

TEST(SpecialTokens, SentencePieceSpacePrefixAfterSpecialTokens) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  EXPECT_TRUE(tokenizer->add_bos());
  EXPECT_EQ(tokenizer->eog_ids(), (Ids{2}));
  const Ids plain = tokenizer->encode("Once", {.add_special = false});
  const Ids with_bos = tokenizer->encode("Once");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(with_bos.front(), 1);
  EXPECT_EQ(Ids(with_bos.begin() + 1, with_bos.end()), plain);
  // "</s>" parsed as EOS; the text after a special token gets the space prefix again.
  const Ids parsed = tokenizer->encode("Once</s>Once", {.add_special = false, .parse_special = true});
  Ids expected = plain;
  expected.push_back(2);
  expected.insert(expected.end(), plain.begin(), plain.end());
  EXPECT_EQ(parsed, expected);
  // Decoding strips the prefix space at the start only.
  EXPECT_EQ(tokenizer->decode(parsed), "Once Once");
  EXPECT_EQ(tokenizer->decode(parsed, {.skip_special_tokens = false,
                                       .spaces_between_special_tokens = false}),
            "Once</s> Once");
  // Empty text: only BOS, as SentencePiece does.
  EXPECT_EQ(tokenizer->encode(""), (Ids{1}));
  EXPECT_TRUE(tokenizer->encode("", {.add_special = false}).empty());
}

TEST(SpecialTokens, Phi3EndTokenIsEndOfGeneration) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-phi-3.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  const auto end_id = tokenizer->token_id("<|end|>");
  ASSERT_TRUE(end_id.has_value());
  EXPECT_TRUE(tokenizer->is_eog(*end_id));
  EXPECT_TRUE(tokenizer->is_eog(*tokenizer->eos_id()));
  EXPECT_TRUE(tokenizer->chat_template().has_value());
}

// llama.cpp marks "</s>" an end-of-generation token by its text and makes it a control token,
// so with parse_special off it is ordinary text, exactly as in the Llama 2 vocabulary that
// Phi-3's first 32000 tokens copy (where "</s>" is a control token by type).
TEST(SpecialTokens, Phi3EndOfSequenceTextIsLiteralWithoutParseSpecial) {
  VELLUM_REQUIRE_MODEL_FILE(phi3_path, "vocab/ggml-vocab-phi-3.gguf");
  VELLUM_REQUIRE_MODEL_FILE(llama_path, "vocab/ggml-vocab-llama-spm.gguf");
  const auto phi3 = testing::load_gguf_tokenizer(phi3_path);
  const auto llama = testing::load_gguf_tokenizer(llama_path);
  const auto eos_text_id = phi3->token_id("</s>");
  ASSERT_EQ(eos_text_id, 2);
  EXPECT_TRUE(phi3->is_eog(2));
  EXPECT_TRUE(phi3->is_special(2));

  const EncodeOptions literal{.add_special = false, .parse_special = false};
  for (const std::string text : {"Hello</s>world", "a </s> b", "</s>", " </s></s>\n</s>x"}) {
    const Ids ids = phi3->encode(text, literal);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0) << "text: '" << text << "'";
    EXPECT_EQ(ids, llama->encode(text, literal)) << "text: '" << text << "'";
    EXPECT_EQ(phi3->decode(ids), text);
  }

  // With parse_special, "</s>" is the token and eats the spaces after it (Phi-3's rstrip);
  // the text after it gets the SentencePiece space prefix again.
  const EncodeOptions parsed{.add_special = false, .parse_special = true};
  const Ids hello = phi3->encode("Hello", literal);
  const Ids world = phi3->encode("world", literal);
  Ids expected = hello;
  expected.push_back(2);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(phi3->encode("Hello</s>   world", parsed), expected);
  // <|end|> keeps its rstrip after being marked end-of-generation.
  const auto end_id = phi3->token_id("<|end|>");
  ASSERT_TRUE(end_id.has_value());
  expected = hello;
  expected.push_back(*end_id);
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(phi3->encode("Hello<|end|> \n world", parsed), expected);
}

TEST(SpecialTokens, DecodeRejectsOutOfRangeIds) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  EXPECT_THROW(tokenizer->decode(Ids{5, 512}), Error);
  EXPECT_THROW(tokenizer->decode(Ids{-1}), Error);
  EXPECT_THROW(tokenizer->token_to_piece(100000), Error);
}

}  // namespace
}  // namespace vellum::tokenizer
