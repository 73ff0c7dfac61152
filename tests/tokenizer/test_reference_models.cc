// The real models' SentencePiece vocabularies against llama.cpp's recorded outputs
// (../shared/models/reference/greedy.json): prompt ids with add_special=true and
// parse_special=true, and generated text as the concatenation of llama_token_to_piece.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer_test_util.h"

namespace vellum::tokenizer {
namespace {

using testing::load_gguf_tokenizer;

TEST(ReferenceModels, PromptIdsAndGeneratedTextMatchLlamaCpp) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  const auto greedy = nlohmann::json::parse(testing::read_file(greedy_path));
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  int num_cases = 0;
  for (const auto& test_case : greedy.at("cases")) {
    const std::string model = test_case.at("model");
    VELLUM_REQUIRE_MODEL_FILE(model_path, model);
    auto& tokenizer = tokenizers[model];
    if (!tokenizer) tokenizer = load_gguf_tokenizer(model_path);
    const std::string prompt = test_case.at("prompt");
    SCOPED_TRACE(model + ": '" + prompt + "'");

    EXPECT_EQ(tokenizer->add_bos(), test_case.at("add_bos").get<bool>());
    const auto prompt_ids = tokenizer->encode(prompt, {.add_special = true, .parse_special = true});
    EXPECT_EQ(prompt_ids, test_case.at("prompt_token_ids").get<std::vector<int32_t>>());
    EXPECT_EQ(tokenizer->eos_id(), test_case.at("eos_token_id").get<int32_t>());

    const auto generated = test_case.at("generated_token_ids").get<std::vector<int32_t>>();
    std::string pieces;
    for (const int32_t id : generated) pieces += tokenizer->token_to_piece(id);
    const std::string expected_text = test_case.at("generated_text");
    EXPECT_EQ(pieces, expected_text);

    // The engine streams generated text with the prompt as context: the first generated
    // token keeps its leading space, and the deltas add up to the same text.
    IncrementalDetokenizer detokenizer(*tokenizer, DecodeOptions{}, prompt_ids);
    std::string streamed;
    for (const int32_t id : generated) streamed += detokenizer.step(id);
    streamed += detokenizer.finish();
    EXPECT_EQ(streamed, expected_text);

    // One-shot decode of prompt + generation is the prompt text followed by the generation.
    std::vector<int32_t> all = prompt_ids;
    all.insert(all.end(), generated.begin(), generated.end());
    EXPECT_EQ(tokenizer->decode(all), prompt + expected_text);
    ++num_cases;
  }
  EXPECT_EQ(num_cases, 8);
}

}  // namespace
}  // namespace vellum::tokenizer
