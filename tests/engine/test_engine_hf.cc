// The engine on Hugging Face model directories: the same outputs as the GGUF of the same
// weights, --tokenizer, --skip-tokenizer-init (token-id prompts only), --load-format and
// generation_config.json (EOS ids, sampling defaults, --generation-config vllm).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "model/io/make_model.h"

namespace vellum {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct TinyPair {
  fs::path gguf;
  fs::path dir;
};

// The tiny llama with seed 3, as a GGUF (with its built-in vocabulary) and as an HF directory.
const TinyPair& tiny_pair() {
  static const TinyPair pair = [] {
    TinyPair p;
    const fs::path base = testing::temp_dir() / "engine-hf";
    fs::remove_all(base);
    fs::create_directories(base);
    model::MakeModelOptions o;
    o.shape = "tiny";
    o.dtype = "f16";
    o.seed = 3;
    o.output = p.gguf = base / "tiny.gguf";
    model::make_model(o);
    o.format = "hf";
    o.output = p.dir = base / "tiny-hf";
    model::make_model(o);
    return p;
  }();
  return pair;
}

void write_generation_config(const fs::path& dir, const nlohmann::json& j) {
  std::ofstream(dir / "generation_config.json") << j.dump();
}

std::vector<int32_t> generate_ids(EngineConfig config, const Prompt& prompt,
                                  const SamplingParams& params) {
  LLM llm(config);
  return llm.generate({prompt}, params).at(0).outputs.at(0).token_ids;
}

TEST(EngineHf, DirectoryWithoutTokenizerNeedsAnOption) {
  EngineConfig config = testing::tiny_engine_config(tiny_pair().dir);
  try {
    LLMEngine::create(config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer.json"));
    EXPECT_THAT(e.what(), HasSubstr("--skip-tokenizer-init"));
    EXPECT_THAT(e.what(), HasSubstr("--tokenizer"));
  }
}

TEST(EngineHf, SkipTokenizerInitRunsTokenIdPromptsLikeTheGguf) {
  const std::vector<int32_t> prompt = {1, 45, 200, 17, 9, 311, 64};
  const std::vector<int32_t> expected =
      generate_ids(testing::tiny_engine_config(tiny_pair().gguf), prompt, testing::greedy(12));
  EngineConfig config = testing::tiny_engine_config(tiny_pair().dir);
  config.model.skip_tokenizer_init = true;
  auto engine = LLMEngine::create(config);
  ASSERT_FALSE(engine->add_request("ids", prompt, testing::greedy(12)).has_value());
  const auto text_error = engine->add_request("text", std::string("Once upon"), testing::greedy(4));
  ASSERT_TRUE(text_error.has_value());
  EXPECT_THAT(*text_error, HasSubstr("--skip-tokenizer-init"));
  SamplingParams with_stop = testing::greedy(4);
  with_stop.stop = {"."};
  EXPECT_TRUE(engine->add_request("stop", prompt, with_stop).has_value());
  auto outputs = testing::run_all(*engine);
  ASSERT_EQ(outputs.count("ids"), 1u);
  EXPECT_EQ(outputs["ids"].outputs.at(0).token_ids, expected);
  EXPECT_EQ(outputs["ids"].outputs.at(0).text, "");
  EXPECT_THROW(engine->encode("hello"), Error);
  EXPECT_FALSE(engine->has_chat_template());
}

TEST(EngineHf, TokenizerOptionTakesTheVocabularyFromElsewhere) {
  EngineConfig gguf_config = testing::tiny_engine_config(tiny_pair().gguf);
  EngineConfig hf_config = testing::tiny_engine_config(tiny_pair().dir);
  hf_config.model.tokenizer = tiny_pair().gguf.string();
  LLM a(gguf_config);
  LLM b(hf_config);
  const Prompt prompt = std::string("Once upon a time");
  const RequestOutput x = a.generate({prompt}, testing::greedy(10)).at(0);
  const RequestOutput y = b.generate({prompt}, testing::greedy(10)).at(0);
  EXPECT_EQ(x.prompt_token_ids, y.prompt_token_ids);
  EXPECT_EQ(x.outputs.at(0).token_ids, y.outputs.at(0).token_ids);
  EXPECT_EQ(x.outputs.at(0).text, y.outputs.at(0).text);
  // The two options contradict each other.
  hf_config.model.skip_tokenizer_init = true;
  EXPECT_THROW(LLMEngine::create(hf_config), Error);
}

TEST(EngineHf, LoadFormatIsChecked) {
  EngineConfig config = testing::tiny_engine_config(tiny_pair().dir);
  config.model.skip_tokenizer_init = true;
  config.model.load_format = "gguf";
  EXPECT_THROW(LLMEngine::create(config), Error);
  config.model.load_format = "pt";
  EXPECT_THROW(LLMEngine::create(config), Error);
  config.model.load_format = "safetensors";
  EXPECT_NO_THROW(LLMEngine::create(config));
}

TEST(EngineHf, GenerationConfigGivesEosIdsAndSamplingDefaults) {
  // A copy of the directory whose generation_config.json we can edit.
  const fs::path dir = testing::temp_dir() / "engine-hf-genconfig";
  fs::remove_all(dir);
  fs::copy(tiny_pair().dir, dir);
  EngineConfig config = testing::tiny_engine_config(dir);
  config.model.skip_tokenizer_init = true;
  const std::vector<int32_t> prompt = {1, 45, 200, 17, 9};
  const std::vector<int32_t> free_run = generate_ids(config, prompt, testing::greedy(8));
  ASSERT_EQ(free_run.size(), 8u);
  // The first token generated after step 0 that was not generated before becomes an
  // end-of-sequence id (the second in the list): generation must stop right there.
  const size_t stop_at = testing::first_unseen_token(free_run, 1);
  ASSERT_LT(stop_at, free_run.size()) << "the free run repeats one token";
  const int32_t eos = free_run[stop_at];
  write_generation_config(dir, {{"bos_token_id", 1},
                                {"eos_token_id", {2, eos}},
                                {"temperature", 0.6},
                                {"top_k", 20},
                                {"top_p", 1.0}});
  {
    auto engine = LLMEngine::create(config);
    const SamplingParams defaults = engine->default_sampling_params();
    EXPECT_DOUBLE_EQ(defaults.temperature, 0.6);
    EXPECT_EQ(defaults.top_k, 20);
    EXPECT_DOUBLE_EQ(defaults.top_p, 1.0);
    SamplingParams p = testing::greedy(8);
    p.ignore_eos = false;
    ASSERT_FALSE(engine->add_request("r", prompt, p).has_value());
    auto outputs = testing::run_all(*engine);
    const CompletionOutput& out = outputs["r"].outputs.at(0);
    EXPECT_EQ(out.token_ids, std::vector<int32_t>(free_run.begin(),
                                                  free_run.begin() +
                                                      static_cast<ptrdiff_t>(stop_at) + 1));
    EXPECT_EQ(out.finish_reason, "stop");
    EXPECT_EQ(out.stop_reason_token, eos);
  }
  // --generation-config vllm: Vellum's own defaults and no generation_config EOS.
  config.model.generation_config = "vllm";
  auto engine = LLMEngine::create(config);
  EXPECT_DOUBLE_EQ(engine->default_sampling_params().temperature, 1.0);
  EXPECT_EQ(engine->default_sampling_params().top_k, 0);
  SamplingParams p = testing::greedy(8);
  p.ignore_eos = false;
  ASSERT_FALSE(engine->add_request("r", prompt, p).has_value());
  EXPECT_EQ(testing::run_all(*engine)["r"].outputs.at(0).token_ids, free_run);
  // A directory that has no generation_config.json is refused by name.
  config.model.generation_config = (testing::temp_dir() / "no-such-dir").string();
  EXPECT_THROW(LLMEngine::create(config), Error);
}

// A small SentencePiece-style tokenizer.json (Metaspace BPE with byte fallback: <unk> <s> </s>,
// 256 byte tokens, a few merges) and a tokenizer_config.json with BOS/EOS, an added special token
// and a chat template, written into a copy of the tiny directory.
fs::path hf_dir_with_tokenizer() {
  const fs::path dir = testing::temp_dir() / "engine-hf-tokenizer";
  fs::remove_all(dir);
  fs::copy(tiny_pair().dir, dir);
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    vocab[std::string{'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'}] = 3 + b;
  }
  const std::vector<std::string> pieces = {"\xE2\x96\x81", "h", "e", "l", "o",
                                           "\xE2\x96\x81h", "ll", "\xE2\x96\x81he", "llo",
                                           "\xE2\x96\x81hello"};
  for (size_t i = 0; i < pieces.size(); ++i) vocab[pieces[i]] = 259 + static_cast<int>(i);
  vocab["<|end|>"] = 269;
  nlohmann::json merges = nlohmann::json::array();
  for (const auto& [left, right] :
       {std::pair{"\xE2\x96\x81", "h"}, {"l", "l"}, {"\xE2\x96\x81h", "e"}, {"ll", "o"},
        {"\xE2\x96\x81he", "llo"}}) {
    merges.push_back(nlohmann::json::array({left, right}));
  }
  nlohmann::json added = nlohmann::json::array();
  for (const auto& [id, content] :
       {std::pair{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}, {269, "<|end|>"}}) {
    added.push_back({{"id", id}, {"content", content}, {"special", true}});
  }
  nlohmann::json replace = {{"type", "Replace"}, {"content", "\xE2\x96\x81"}};
  replace["pattern"] = {{"String", " "}};
  nlohmann::json normalizer = {{"type", "Sequence"}};
  normalizer["normalizers"] = nlohmann::json::array(
      {nlohmann::json{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}}, replace});
  nlohmann::json model = {{"type", "BPE"}, {"unk_token", "<unk>"}, {"byte_fallback", true},
                          {"fuse_unk", true}, {"vocab", vocab}, {"merges", merges}};
  nlohmann::json root = {{"added_tokens", added}, {"normalizer", normalizer},
                         {"pre_tokenizer", nullptr}, {"model", model}};
  std::ofstream(dir / "tokenizer.json") << root.dump();
  std::ofstream(dir / "tokenizer_config.json")
      << nlohmann::json{{"add_bos_token", true},
                        {"bos_token", "<s>"},
                        {"eos_token", "</s>"},
                        {"chat_template",
                         "{% for m in messages %}{{ m['content'] }}<|end|>{% endfor %}"}}
             .dump();
  return dir;
}

TEST(EngineHf, TokenizerJsonAndTokenizerConfigFromTheDirectory) {
  EngineConfig config = testing::tiny_engine_config(hf_dir_with_tokenizer());
  auto engine = LLMEngine::create(config);
  // BOS from tokenizer_config.json, the merges of tokenizer.json: "<s> ▁hello".
  EXPECT_EQ(engine->encode("hello"), (std::vector<int32_t>{1, 268}));
  EXPECT_EQ(engine->decode({1, 268, 269}, true), "hello");
  EXPECT_EQ(engine->token_text(269), "<|end|>");
  // The model has more rows than the tokenizer's 270 tokens: the rest decode to nothing.
  ASSERT_GT(engine->vocab_size(), 400);
  EXPECT_EQ(engine->decode({268, 400}, true), "hello");
  EXPECT_EQ(engine->token_text(400), "");
  EXPECT_THROW(engine->decode({static_cast<int32_t>(engine->vocab_size())}, true), Error);
  ASSERT_TRUE(engine->has_chat_template());
  ChatTemplateRequest chat;
  chat.messages_json = R"([{"role": "user", "content": "hello"}])";
  chat.add_generation_prompt = false;
  EXPECT_EQ(engine->apply_chat_template(chat), "hello<|end|>");
  // Text prompts run; the same ids as token-id prompts give the same output.
  LLM llm(config);
  const RequestOutput by_text =
      llm.generate({Prompt(std::string("hello"))}, testing::greedy(6)).at(0);
  const RequestOutput by_ids =
      llm.generate({Prompt(std::vector<int32_t>{1, 268})}, testing::greedy(6)).at(0);
  EXPECT_EQ(by_text.prompt_token_ids, (std::vector<int32_t>{1, 268}));
  EXPECT_EQ(by_text.outputs.at(0).token_ids, by_ids.outputs.at(0).token_ids);
}

TEST(EngineHf, ArchCopyMatchesItsGgufTwin) {
  VELLUM_REQUIRE_MODEL_FILE(dir, "arch/hf/gemma3");
  VELLUM_REQUIRE_MODEL_FILE(twin, "arch/gemma3-f16.gguf");
  const std::vector<int32_t> prompt = {1, 300, 7, 412, 99, 5, 250, 31, 8, 77};
  EngineConfig hf = testing::tiny_engine_config(dir);
  hf.model.skip_tokenizer_init = true;
  EngineConfig gg = testing::tiny_engine_config(twin);
  gg.model.tokenizer.clear();
  EXPECT_EQ(generate_ids(hf, prompt, testing::greedy(40)),
            generate_ids(gg, prompt, testing::greedy(40)));
}

}  // namespace
}  // namespace vellum
