// Prompts as llama.cpp makes them (issue section 4): each model's own chat template renders the
// reference conversations exactly as llama.cpp's Jinja engine did (`prompt_text`), and the
// tokenizer turns prompt_text into the reference's `prompt_token_ids` (llama-server's /tokenize
// with add_special and parse_special).
//
// Only SmolLM2's cases are chats. Gemma 3 270M is a base model and its GGUF carries no
// tokenizer.chat_template, so for it the engine must say that chat needs a template.
#include <gtest/gtest.h>

#include <string>

#include "fidelity_util.h"

namespace vellum {
namespace {

using testing::fidelity::ReferenceCase;
using testing::fidelity::ReferenceModel;

// The tokenizer and template only: the quantized file carries the same metadata as the F32 copy.
std::unique_ptr<LLMEngine> engine_for(const std::filesystem::path& model) {
  EngineConfig config = testing::fidelity::reference_engine_config(model);
  return LLMEngine::create(config);
}

class FidelityChat : public ::testing::TestWithParam<std::string> {};

TEST_P(FidelityChat, TokenizationOfPromptTextEqualsReference) {
  const ReferenceModel q = testing::fidelity::load_reference("reference-q.json", GetParam());
  const ReferenceModel f32 = testing::fidelity::load_reference("reference-f32.json", GetParam());
  VELLUM_REQUIRE_REAL_MODEL(model, q.file);
  auto engine = engine_for(model);
  for (const ReferenceModel* ref : {&q, &f32}) {
    for (const ReferenceCase& c : ref->cases) {
      EXPECT_EQ(engine->encode(c.prompt_text, /*add_special=*/true, /*parse_special=*/true),
                c.prompt_token_ids)
          << ref->file << " case " << c.name;
    }
  }
}

TEST(FidelityChat, SmolLM2TemplateRendersReferenceConversations) {
  const ReferenceModel q = testing::fidelity::load_reference("reference-q.json", "smollm2");
  const ReferenceModel f32 = testing::fidelity::load_reference("reference-f32.json", "smollm2");
  VELLUM_REQUIRE_REAL_MODEL(model, q.file);
  auto engine = engine_for(model);
  ASSERT_TRUE(engine->has_chat_template());
  int num_chats = 0;
  for (const ReferenceModel* ref : {&q, &f32}) {
    for (const ReferenceCase& c : ref->cases) {
      if (c.messages_json.empty()) continue;
      ++num_chats;
      ChatTemplateRequest request;
      request.messages_json = c.messages_json;
      request.add_generation_prompt = true;
      const std::string text = engine->apply_chat_template(request);
      EXPECT_EQ(text, c.prompt_text) << ref->file << " case " << c.name;
      // The rendering is meant to be encoded without adding specials (the template writes them).
      EXPECT_EQ(engine->encode(text, /*add_special=*/false, /*parse_special=*/true),
                c.prompt_token_ids)
          << ref->file << " case " << c.name;
    }
  }
  EXPECT_EQ(num_chats, 8);  // chat_capital, chat_haiku, chat_system, chat_multiturn, twice
}

TEST(FidelityChat, Gemma3BaseModelHasNoChatTemplate) {
  const ReferenceModel q = testing::fidelity::load_reference("reference-q.json", "gemma3");
  VELLUM_REQUIRE_REAL_MODEL(model, q.file);
  auto engine = engine_for(model);
  EXPECT_FALSE(engine->has_chat_template());
  ChatTemplateRequest request;
  request.messages_json = R"([{"role": "user", "content": "Hello"}])";
  try {
    (void)engine->apply_chat_template(request);
    ADD_FAILURE() << "a chat rendered without a template";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("chat template"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(RealModels, FidelityChat, ::testing::Values("smollm2", "gemma3"),
                         testing::fidelity::model_key_name);

}  // namespace
}  // namespace vellum
