// What the server takes from a Hugging Face model directory beside the weights:
//   - max_tokens against generation_config.json: vLLM's get_max_tokens takes the smallest of the
//     request's max_tokens, what the context leaves and the model's max_new_tokens (which also
//     fills in a request that sets none);
//   - --reasoning-parser with structured outputs: the constraint waits for "</think>" when the
//     tokenizer has it as one token.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <variant>

#include "model/io/make_model.h"
#include "server/serving.h"
#include "test_util.h"
#include "vellum/engine.h"

namespace vellum::server {
namespace {

namespace fs = std::filesystem;

// The tiny llama as a Hugging Face directory (token-id prompts: it has no tokenizer.json) with
// the given generation_config.json (none when `generation_config` is null).
std::unique_ptr<LLMEngine> tiny_hf_engine(const std::string& name,
                                          const nlohmann::json& generation_config,
                                          const nlohmann::json& tokenizer_json = nullptr) {
  const fs::path dir = ::vellum::testing::temp_dir() / name;
  fs::remove_all(dir);
  model::MakeModelOptions make;
  make.shape = "tiny";
  make.dtype = "f16";
  make.format = "hf";
  make.output = dir;
  model::make_model(make);
  if (!generation_config.is_null()) {
    std::ofstream(dir / "generation_config.json") << generation_config.dump();
  }
  EngineConfig config;
  config.model.model = dir.string();
  if (tokenizer_json.is_null()) {
    config.model.skip_tokenizer_init = true;
  } else {
    std::ofstream(dir / "tokenizer.json") << tokenizer_json.dump();
  }
  config.model.max_model_len = 64;
  config.cache.kv_cache_memory_bytes = int64_t{16} << 20;
  config.parallel.num_threads = 1;
  return LLMEngine::create(config);
}

int64_t resolved_max_tokens(const LLMEngine& engine, size_t prompt_len,
                            std::optional<int64_t> requested) {
  SamplingParams params;
  params.max_tokens = requested;
  const std::vector<int32_t> prompt(prompt_len, 5);
  auto input = prepare_engine_input(engine, Prompt(prompt), params, true, false);
  const auto* ok = std::get_if<EngineInput>(&input);
  if (ok == nullptr) {
    ADD_FAILURE() << std::get<ApiError>(input).message;
    return -1;
  }
  return ok->params.max_tokens.value_or(-1);
}

TEST(ServeGenerationConfig, MaxNewTokensCapsEveryRequest) {
  auto engine = tiny_hf_engine("genconfig-max-new-tokens", {{"max_new_tokens", 7}});
  ASSERT_EQ(engine->default_max_tokens(), std::optional<int64_t>(7));
  EXPECT_EQ(engine->default_sampling_params().max_tokens, std::optional<int64_t>(7));
  EXPECT_EQ(resolved_max_tokens(*engine, 4, std::nullopt), 7);  // none: the model's default
  EXPECT_EQ(resolved_max_tokens(*engine, 4, 100), 7);           // capped, as vLLM does
  EXPECT_EQ(resolved_max_tokens(*engine, 4, 3), 3);
  EXPECT_EQ(resolved_max_tokens(*engine, 60, 100), 4);  // the context leaves 64 - 60
}

TEST(ServeGenerationConfig, WithoutMaxNewTokensTheContextIsTheLimit) {
  auto engine = tiny_hf_engine("genconfig-none", {{"temperature", 0.6}});
  EXPECT_EQ(engine->default_max_tokens(), std::nullopt);
  EXPECT_EQ(resolved_max_tokens(*engine, 4, std::nullopt), 60);
  EXPECT_EQ(resolved_max_tokens(*engine, 4, 100), 60);
  EXPECT_EQ(resolved_max_tokens(*engine, 4, 9), 9);
}

TEST(ServeGenerationConfig, BadMaxNewTokensIsRefusedByName) {
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(2.5), nlohmann::json(-3)}) {
    try {
      tiny_hf_engine("genconfig-bad", {{"max_new_tokens", bad}});
      ADD_FAILURE() << "max_new_tokens " << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("max_new_tokens"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos)
          << e.what();
    }
  }
}

// A SentencePiece-style byte-fallback BPE vocabulary (<unk>, the 256 byte tokens) with <think> and </think> as
// added special tokens, as reasoning models have them.
nlohmann::json think_tokenizer_json() {
  nlohmann::json vocab = {{"<unk>", 0}};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    vocab[std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'}] = 1 + b;
  }
  vocab["<think>"] = 257;
  vocab["</think>"] = 258;
  vocab["a"] = 259;  // one merge (a vocabulary needs some)
  vocab["b"] = 260;
  vocab["ab"] = 261;
  nlohmann::json added = nlohmann::json::array();
  for (const auto& [id, content] : {std::pair{0, "<unk>"}, {257, "<think>"}, {258, "</think>"}}) {
    added.push_back({{"id", id}, {"content", content}, {"special", true}});
  }
  nlohmann::json model = {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true},
                          {"vocab", vocab},
                          {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"})})}};
  // SentencePiece style: a space is "\u2581" (Metaspace, as a normalizer).
  nlohmann::json replace = {{"type", "Replace"}, {"content", "\xE2\x96\x81"}};
  replace["pattern"] = {{"String", " "}};
  nlohmann::json normalizer = {{"type", "Sequence"}};
  normalizer["normalizers"] = nlohmann::json::array(
      {nlohmann::json{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, replace});
  return {{"added_tokens", added}, {"normalizer", normalizer}, {"pre_tokenizer", nullptr},
          {"model", model}};
}

SamplingParams choice_params() {
  SamplingParams p;
  p.structured_outputs = StructuredOutputsParams{};
  p.structured_outputs->choice = std::vector<std::string>{"a", "b"};
  return p;
}

TEST(ServeReasoning, StructuredOutputsWaitForThinkEndWhenItIsOneToken) {
  auto engine = tiny_hf_engine("reasoning-think-vocab", nullptr, think_tokenizer_json());
  ASSERT_EQ(engine->encode("</think>", false, true), std::vector<int32_t>{258});
  SamplingParams p = choice_params();
  constrain_after_reasoning(*engine, "deepseek_r1", p);
  EXPECT_EQ(p.structured_outputs->reasoning_end_token_ids, std::vector<int32_t>{258});
  SamplingParams no_parser = choice_params();
  constrain_after_reasoning(*engine, "", no_parser);
  EXPECT_TRUE(no_parser.structured_outputs->reasoning_end_token_ids.empty());
  SamplingParams unconstrained;
  constrain_after_reasoning(*engine, "qwen3", unconstrained);
  EXPECT_FALSE(unconstrained.structured_outputs.has_value());
}

TEST(ServeReasoning, WithoutAThinkTokenTheConstraintStartsAtOnce) {
  const fs::path path = ::vellum::testing::temp_dir() / "reasoning-plain-vocab.gguf";
  model::MakeModelOptions make;
  make.shape = "tiny";
  make.output = path;
  model::make_model(make);
  EngineConfig config;
  config.model.model = path.string();
  config.cache.kv_cache_memory_bytes = int64_t{16} << 20;
  config.parallel.num_threads = 1;
  auto engine = LLMEngine::create(config);
  ASSERT_GT(engine->encode("</think>", false, true).size(), 1u);
  SamplingParams p = choice_params();
  constrain_after_reasoning(*engine, "qwen3", p);
  EXPECT_TRUE(p.structured_outputs->reasoning_end_token_ids.empty());
}

}  // namespace
}  // namespace vellum::server
