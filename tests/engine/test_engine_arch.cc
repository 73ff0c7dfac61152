// End-to-end on the architecture test models (../shared/models/arch): the engine (scheduler,
// KV cache manager, chunked prefill, batched decode, sampler with logprobs) in f32 reproduces
// llama.cpp's f32 greedy tokens and their top-5 logprobs (reference-f32.json), all three prompts
// of a model in flight together with a small token budget so that the long prompts are chunked.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_test_util.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace vellum {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-3;  // README: f32 engine vs reference-f32.json

void check_arch_model(const std::string& file, int64_t block_size) {
  VELLUM_REQUIRE_MODEL_FILE(ref_path, "arch/reference-f32.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, "arch/" + file);
  std::ifstream in(ref_path);
  const json ref = json::parse(in);
  EngineConfig config = testing::tiny_engine_config(model_path);
  config.model.dtype = "float32";
  config.cache.block_size = block_size;
  config.scheduler.max_num_batched_tokens = 64;  // prompts of 100 and 200 tokens are chunked
  config.scheduler.max_num_seqs = 8;
  LLM llm(config);
  std::vector<Prompt> prompts;
  std::vector<const json*> cases;
  for (const auto& c : ref["cases"]) {
    if (c["model"] != file) continue;
    prompts.emplace_back(c["prompt_token_ids"].get<std::vector<int32_t>>());
    cases.push_back(&c);
  }
  ASSERT_EQ(cases.size(), 3u);
  SamplingParams params = testing::greedy(32);
  params.logprobs = 5;
  const std::vector<RequestOutput> outputs = llm.generate(prompts, params);
  ASSERT_EQ(outputs.size(), cases.size());
  for (size_t s = 0; s < cases.size(); ++s) {
    const json& c = *cases[s];
    const auto expected = c["generated_token_ids"].get<std::vector<int32_t>>();
    const CompletionOutput& out = outputs[s].outputs.at(0);
    ASSERT_TRUE(out.logprobs.has_value());
    ASSERT_EQ(out.token_ids.size(), expected.size());
    // Tokens are owed up to the first near tie; past the first difference the inputs differ.
    for (size_t i = 0; i < expected.size(); ++i) {
      if (c["top1_top2_gap"][i].get<double>() < kTolerance || out.token_ids[i] != expected[i]) {
        EXPECT_LT(c["top1_top2_gap"][i].get<double>(), kTolerance)
            << file << " prompt " << s << ": token " << i << " is " << out.token_ids[i]
            << ", reference " << expected[i];
        break;
      }
      const TokenLogprobs& lp = (*out.logprobs)[i];
      for (const auto& entry : c["top5"][i]) {
        const int32_t id = entry[0].get<int32_t>();
        const auto it = std::find_if(lp.top.begin(), lp.top.end(),
                                     [&](const auto& p) { return p.first == id; });
        if (it == lp.top.end()) continue;  // rank 5/6 near tie
        EXPECT_NEAR(it->second, entry[1].get<double>(), kTolerance)
            << file << " prompt " << s << " position " << i << " token " << id;
      }
    }
  }
}

TEST(EngineArch, Gemma2SlidingWindowSoftcaps) { check_arch_model("gemma2-f16.gguf", 16); }
TEST(EngineArch, Gemma3SlidingPatternPerLayerRope) { check_arch_model("gemma3-f16.gguf", 16); }
TEST(EngineArch, Qwen2Biases) { check_arch_model("qwen2-f16.gguf", 16); }
TEST(EngineArch, Qwen3QkNorm) { check_arch_model("qwen3-f16.gguf", 16); }
TEST(EngineArch, Phi3Fused) { check_arch_model("phi3-f16.gguf", 16); }
TEST(EngineArch, MixtralMoe) { check_arch_model("llama-moe-f16.gguf", 16); }
TEST(EngineArch, Qwen3MoeQuantized) { check_arch_model("qwen3moe-q4_k_m.gguf", 8); }

// ---- Sliding windows through the KV cache ----

// gemma2-f16 with sliding_window_pattern 0: every layer slides (window 32), so the engine's one KV
// group is a sliding-window group whose blocks outside the window go back to the pool.
std::filesystem::path all_sliding_gemma2(const std::filesystem::path& source) {
  const auto in = gguf::GgufFile::open(source);
  gguf::GgufWriter w;
  for (const auto& [key, value] : in->metadata()) w.set(key, value);
  for (const gguf::TensorInfo& t : in->tensors()) {
    w.add_tensor_view(t.name, t.type, t.shape, {t.data, t.nbytes});
  }
  w.set_u32("gemma2.attention.sliding_window_pattern", 0);
  const auto out = testing::temp_dir() / "gemma2-all-sliding.gguf";
  w.write(out);
  return out;
}

// Greedy tokens from driving the model directly with a full (never recycled) KV cache.
std::vector<int32_t> greedy_full_cache(const std::filesystem::path& path,
                                       const std::vector<int32_t>& prompt, int num_new) {
  auto model = model::load_model(gguf::GgufFile::open(path),
                                 model::ModelLoadOptions{kernels::MatmulPrecision::kF32});
  const int32_t block_size = 16;
  const int64_t vocab = model->config().vocab_size;
  model::KvCache cache(model->kv_cache_shape(block_size, kernels::KvType::kF32), 40);
  std::vector<int32_t> table;
  for (int32_t b = 1; b < 40; ++b) table.push_back(b);
  std::vector<int32_t> tokens = prompt;
  std::vector<int32_t> generated;
  int32_t num_cached = 0;
  while (static_cast<int>(generated.size()) < num_new) {
    model::ForwardBatch batch;
    const int32_t n = static_cast<int32_t>(tokens.size()) - num_cached;
    batch.add_sequence(tokens.data() + num_cached, n, num_cached, table.data(),
                       static_cast<int32_t>(table.size()), block_size, 1);
    batch.finalize();
    std::vector<float> logits(static_cast<size_t>(vocab));
    model->forward(batch, cache, logits.data());
    num_cached += n;
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    generated.push_back(next);
    tokens.push_back(next);
  }
  return generated;
}

TEST(EngineSlidingWindow, LongPromptHoldsBlocksBoundedByTheWindow) {
  VELLUM_REQUIRE_MODEL_FILE(source, "arch/gemma2-f16.gguf");
  const auto path = all_sliding_gemma2(source);
  std::vector<int32_t> prompt{1};
  uint32_t state = 12345;
  while (prompt.size() < 420) {  // 13x the window
    state = state * 1664525u + 1013904223u;
    prompt.push_back(3 + static_cast<int32_t>((state >> 8) % 509));
  }
  constexpr int kNumNew = 24;
  const std::vector<int32_t> expected = greedy_full_cache(path, prompt, kNumNew);

  EngineConfig config = testing::tiny_engine_config(path);
  config.model.dtype = "float32";
  config.cache.block_size = 16;
  config.cache.num_blocks_override = 1 + 512 / 16;  // room for max_model_len, as required
  config.scheduler.max_num_batched_tokens = 64;
  config.scheduler.max_num_seqs = 4;
  auto engine = LLMEngine::create(config);
  ASSERT_FALSE(engine->add_request("long", prompt, testing::greedy(kNumNew)));
  // Window 32 and chunks of at most 64 tokens: positions [c - 31, c + 64) span at most
  // cdiv(31 + 64, 16) + 1 = 7 blocks, whatever the prompt length.
  constexpr int kMaxBlocks = 7;
  int max_blocks_held = 0;
  std::vector<int32_t> generated;
  while (engine->has_unfinished_requests()) {
    for (const RequestOutput& out : engine->step()) {
      if (out.finished) generated = out.outputs.at(0).token_ids;
    }
    const int held = static_cast<int>(std::lround(engine->stats().kv_cache_usage * 32));
    max_blocks_held = std::max(max_blocks_held, held);
  }
  EXPECT_LE(max_blocks_held, kMaxBlocks);
  EXPECT_GE(max_blocks_held, 3);  // the window itself is held
  EXPECT_EQ(generated, expected);
}

// Gemma 2 (sliding and full layers alternate) and Gemma 3 (five sliding layers per full one): the
// hybrid KV cache manager gives each attention type its own block tables; the full-attention
// groups hold the whole sequence, the sliding groups only the window plus one chunk. The tokens
// equal a run with one full KV table for every layer.
void check_hybrid_kv_groups(const std::string& file) {
  VELLUM_REQUIRE_MODEL_FILE(path, "arch/" + file);
  std::vector<int32_t> prompt{1};
  uint32_t state = 777;
  while (prompt.size() < 420) {  // 13x the window
    state = state * 1664525u + 1013904223u;
    prompt.push_back(3 + static_cast<int32_t>((state >> 8) % 509));
  }
  constexpr int kNumNew = 24;
  const std::vector<int32_t> expected = greedy_full_cache(path, prompt, kNumNew);

  const auto model = model::load_model(gguf::GgufFile::open(path),
                                       model::ModelLoadOptions{kernels::MatmulPrecision::kF32});
  const model::KvCacheLayout layout =
      model->kv_cache_shape(16, kernels::KvType::kF32, /*hybrid=*/true).layout;
  ASSERT_GT(layout.num_groups(), 1) << file << " should mix sliding and full layers";
  int num_full = 0, num_sliding = 0;
  for (int64_t w : layout.group_windows) (w > 0 ? num_sliding : num_full) += 1;
  ASSERT_GT(num_full, 0);
  ASSERT_GT(num_sliding, 0);
  // Window 32 and chunks of at most 64 tokens: at most cdiv(31 + 64, 16) + 1 = 7 blocks per
  // sliding group; a full group holds cdiv(444, 16) = 28 blocks at the end.
  constexpr int kMaxSlidingBlocks = 7;
  const int num_usable = num_full * (512 / 16) + num_sliding * kMaxSlidingBlocks;

  EngineConfig config = testing::tiny_engine_config(path);
  config.model.dtype = "float32";
  config.cache.block_size = 16;
  config.cache.num_blocks_override = 1 + num_usable;  // exactly one max_model_len sequence
  config.scheduler.max_num_batched_tokens = 64;
  config.scheduler.max_num_seqs = 4;
  auto engine = LLMEngine::create(config);
  ASSERT_FALSE(engine->add_request("long", prompt, testing::greedy(kNumNew)));
  int max_blocks_held = 0;
  std::vector<int32_t> generated;
  while (engine->has_unfinished_requests()) {
    for (const RequestOutput& out : engine->step()) {
      if (out.finished) generated = out.outputs.at(0).token_ids;
    }
    const int held = static_cast<int>(std::lround(engine->stats().kv_cache_usage * num_usable));
    max_blocks_held = std::max(max_blocks_held, held);
  }
  const int full_blocks = (420 + kNumNew - 1 + 15) / 16;
  EXPECT_LE(max_blocks_held, num_full * full_blocks + num_sliding * kMaxSlidingBlocks) << file;
  EXPECT_GE(max_blocks_held, num_full * full_blocks + num_sliding * 3) << file;
  EXPECT_EQ(generated, expected) << file;
}

TEST(EngineSlidingWindow, Gemma2HybridGroupsBoundTheSlidingLayers) {
  check_hybrid_kv_groups("gemma2-f16.gguf");
}
TEST(EngineSlidingWindow, Gemma3HybridGroupsBoundTheSlidingLayers) {
  check_hybrid_kv_groups("gemma3-f16.gguf");
}

}  // namespace
}  // namespace vellum
