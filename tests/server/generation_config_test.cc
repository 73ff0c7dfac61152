// The server's max_tokens against a Hugging Face model's generation_config.json: vLLM's
// get_max_tokens takes the smallest of the request's max_tokens, what the context leaves and
// the model's max_new_tokens (which also fills in a request that sets none).
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
                                          const nlohmann::json& generation_config) {
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
  config.model.skip_tokenizer_init = true;
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

}  // namespace
}  // namespace vellum::server
