// Streaming property: for random token sequences (byte tokens that split multi-byte characters,
// control tokens, lone continuation bytes), the incremental detokenizer's deltas concatenate to
// the one-shot decode, and every delta is valid UTF-8.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

void check_streaming(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                     const DecodeOptions& options, std::mt19937& rng) {
  IncrementalDetokenizer detokenizer(tokenizer, options);
  std::string streamed;
  size_t i = 0;
  while (i < ids.size()) {
    // Feed one to four tokens at a time.
    const size_t n = std::min(ids.size() - i, static_cast<size_t>(1 + rng() % 4));
    const std::string delta =
        detokenizer.step(std::span<const int32_t>(ids.data() + i, n));
    ASSERT_TRUE(is_valid_utf8(delta));
    streamed += delta;
    i += n;
    EXPECT_LE(detokenizer.prefix_offset(), detokenizer.read_offset());
    EXPECT_EQ(detokenizer.read_offset(), i);
  }
  const std::string tail = detokenizer.finish();
  ASSERT_TRUE(is_valid_utf8(tail));
  streamed += tail;
  const std::string one_shot = tokenizer.decode(ids, options);
  ASSERT_TRUE(is_valid_utf8(one_shot));
  ASSERT_EQ(streamed, one_shot);
  ASSERT_EQ(detokenizer.output_text(), one_shot);
}

// Random ids weighted towards the tokens that make streaming hard.
std::vector<int32_t> random_ids(const Tokenizer& tokenizer, std::mt19937& rng,
                                const std::vector<int32_t>& tricky) {
  std::vector<int32_t> ids(1 + rng() % 40);
  for (auto& id : ids) {
    id = (rng() % 2 == 0) ? tricky[rng() % tricky.size()]
                          : static_cast<int32_t>(rng() % tokenizer.vocab_size());
  }
  return ids;
}

TEST(IncrementalDetokenizer, RandomSequencesMatchOneShotDecode) {
  VELLUM_REQUIRE_MODEL_FILE(spm_path, "vocab/ggml-vocab-llama-spm.gguf");
  VELLUM_REQUIRE_MODEL_FILE(bpe_path, "vocab/ggml-vocab-llama-bpe.gguf");
  std::mt19937 rng(42);
  for (const auto& path : {spm_path, bpe_path}) {
    SCOPED_TRACE(path.string());
    const auto tokenizer = testing::load_gguf_tokenizer(path);
    // Tokens of partial characters (byte tokens / single high bytes) and special tokens.
    std::vector<int32_t> tricky;
    for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      const std::string piece = tokenizer->token_to_piece(id);
      if (tokenizer->is_special(id) || (!piece.empty() && !is_valid_utf8(piece))) {
        tricky.push_back(id);
      }
    }
    ASSERT_GT(tricky.size(), 100u);
    const DecodeOptions option_sets[] = {
        {.skip_special_tokens = true, .spaces_between_special_tokens = true},
        {.skip_special_tokens = false, .spaces_between_special_tokens = true},
        {.skip_special_tokens = false, .spaces_between_special_tokens = false},
    };
    for (int iteration = 0; iteration < 300; ++iteration) {
      const auto ids = random_ids(*tokenizer, rng, tricky);
      for (const auto& options : option_sets) {
        ASSERT_NO_FATAL_FAILURE(check_streaming(*tokenizer, ids, options, rng));
      }
    }
  }
}

TEST(IncrementalDetokenizer, HoldsBackASplitCharacterUntilItCompletes) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-spm.gguf");
  const auto tokenizer = testing::load_gguf_tokenizer(path);
  // U+1F999 (llama emoji) as four byte tokens <0xF0><0x9F><0xA6><0x99>.
  std::vector<int32_t> bytes;
  for (const char* hex : {"<0xF0>", "<0x9F>", "<0xA6>", "<0x99>"}) {
    bytes.push_back(*tokenizer->token_id(hex));
  }
  IncrementalDetokenizer detokenizer(*tokenizer, DecodeOptions{});
  EXPECT_EQ(detokenizer.step(bytes[0]), "");
  EXPECT_EQ(detokenizer.step(bytes[1]), "");
  EXPECT_EQ(detokenizer.step(bytes[2]), "");
  EXPECT_EQ(detokenizer.prefix_offset(), 0u);
  EXPECT_EQ(detokenizer.step(bytes[3]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(detokenizer.prefix_offset(), 4u);
  // A cut-off character at the end becomes U+FFFD only when the sequence finishes.
  EXPECT_EQ(detokenizer.step(bytes[0]), "");
  EXPECT_EQ(detokenizer.finish(), "\xEF\xBF\xBD");
}

}  // namespace
}  // namespace vellum::tokenizer
