// --batch-invariant: a request's logits are bitwise the same alone, batched with other requests
// (steps of many rows, where the default kernels switch to oneDNN), and with its prompt chunked.
// Compared through the top-5 logprobs of every generated token (float bits) and the tokens.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "engine_test_util.h"
#include "kernels/matmul.h"
#include "model/io/make_model.h"

namespace vellum {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;  // every generated token's top-5, in order
};

Outcome run(const std::filesystem::path& model, int64_t max_num_batched_tokens, int num_others) {
  EngineConfig config = testing::tiny_engine_config(model);
  config.model.batch_invariant = true;
  if (max_num_batched_tokens > 0) {
    config.scheduler.max_num_batched_tokens = max_num_batched_tokens;
    config.scheduler.max_num_seqs = 8;
    config.model.max_model_len = max_num_batched_tokens * 8;
  }
  auto engine = LLMEngine::create(config);
  std::vector<int32_t> prompt(37);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(3 + i * 7 % 200);
  SamplingParams p = testing::greedy(12);
  p.logprobs = 5;
  std::mt19937 rng(11);
  // Others arrive first and last, with prompts of different lengths, so the request shares
  // prefill and decode steps with them.
  for (int i = 0; i < num_others; ++i) {
    std::vector<int32_t> other(static_cast<size_t>(20 + 9 * i));
    for (int32_t& t : other) t = static_cast<int32_t>(rng() % 250 + 3);
    EXPECT_FALSE(engine->add_request("other" + std::to_string(i), other, testing::greedy(20)));
    if (i == 0) {
      EXPECT_FALSE(engine->add_request("r", prompt, p));
    }
  }
  if (num_others == 0) {
    EXPECT_FALSE(engine->add_request("r", prompt, p));
  }
  auto finished = testing::run_all(*engine);
  Outcome out;
  const CompletionOutput& c = finished.at("r").outputs.at(0);
  out.tokens = c.token_ids;
  for (const TokenLogprobs& lp : c.logprobs.value()) {
    for (const auto& [id, value] : lp.top) out.logprobs.push_back(value);
  }
  return out;
}

TEST(EngineBatchInvariance, AloneBatchedAndChunkedGiveBitwiseTheSameLogits) {
  const auto path = testing::temp_dir() / "batch-invariance-f32.gguf";
  model::MakeModelOptions make;
  make.shape = "tiny";
  make.dtype = "f32";  // the small-m f32 kernels stop at 8 rows; oneDNN takes more by default
  make.seed = 5;
  make.output = path;
  model::make_model(make);
  const Outcome alone = run(path, 0, 0);
  ASSERT_EQ(alone.tokens.size(), 12u);
  ASSERT_EQ(alone.logprobs.size(), 12u * 5);
  for (const auto& [what, other] : {std::pair{"batched", run(path, 0, 9)},
                                    std::pair{"chunked", run(path, 16, 0)},
                                    std::pair{"chunked and batched", run(path, 16, 9)}}) {
    EXPECT_EQ(other.tokens, alone.tokens) << what;
    ASSERT_EQ(other.logprobs.size(), alone.logprobs.size()) << what;
    EXPECT_EQ(0, std::memcmp(other.logprobs.data(), alone.logprobs.data(),
                             alone.logprobs.size() * sizeof(float)))
        << what;
  }
  kernels::set_batch_invariant(false);  // process-wide: leave the default for other tests
}

}  // namespace
}  // namespace vellum
