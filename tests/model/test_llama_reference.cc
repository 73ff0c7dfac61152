// Golden tests of the llama forward pass against llama.cpp's reference outputs
// (../shared/models/reference, see its README for settings and tolerances).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model_test_util.h"
#include "test_util.h"

namespace vellum {
namespace {

using nlohmann::json;

json load_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::vector<double> log_softmax(const float* logits, int64_t n) {
  const float max = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  const double lse = max + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = logits[i] - lse;
  return out;
}

int32_t argmax(const float* logits, int64_t n) {
  return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
}

struct Case {
  std::vector<int32_t> prompt;
  std::vector<int32_t> generated;
  json top5;
  std::string name;
};

std::vector<Case> cases_for(const json& greedy, const std::string& model_file) {
  std::vector<Case> cases;
  for (const auto& c : greedy["cases"]) {
    if (c["model"] != model_file) continue;
    cases.push_back({c["prompt_token_ids"].get<std::vector<int32_t>>(),
                     c["generated_token_ids"].get<std::vector<int32_t>>(), c["top5"],
                     c["prompt"].get<std::string>()});
  }
  return cases;
}

struct KvVariant {
  kernels::KvType type;
  double tolerance;  // max |logprob - reference| (README "Suggested tolerances")
};


// Teacher-forced: all cases of the model in ONE flat batch (prompt + reference continuation of each),
// logits for every generated position; top-5 logprobs compared with the reference.
void check_teacher_forced(const std::filesystem::path& model_path, const std::string& model_file,
                          const KvVariant& variant, int32_t block_size) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  const json greedy = load_json(greedy_path);
  const std::vector<Case> cases = cases_for(greedy, model_file);
  ASSERT_FALSE(cases.empty());

  auto model = testing::load_test_model(model_path);
  const int64_t vocab = model->config().vocab_size;
  model::KvCache cache(model->kv_cache_shape(block_size, variant.type), 512);
  testing::SequenceBlocks blocks(block_size);

  model::ForwardBatch batch;
  std::vector<std::vector<int32_t>> inputs;
  for (size_t s = 0; s < cases.size(); ++s) {
    std::vector<int32_t> tokens = cases[s].prompt;
    tokens.insert(tokens.end(), cases[s].generated.begin(), cases[s].generated.end() - 1);
    blocks.reserve(s, static_cast<int32_t>(tokens.size()));
    const auto& table = blocks.table(s);
    batch.add_sequence(tokens.data(), static_cast<int32_t>(tokens.size()), 0, table.data(),
                       static_cast<int32_t>(table.size()), block_size,
                       static_cast<int32_t>(cases[s].generated.size()));
    inputs.push_back(std::move(tokens));
  }
  batch.finalize();
  std::vector<float> logits(static_cast<size_t>(batch.num_logits() * vocab));
  model->forward(batch, cache, logits.data());

  int64_t row = 0;
  double max_err = 0.0;
  for (const Case& c : cases) {
    for (size_t i = 0; i < c.generated.size(); ++i, ++row) {
      const float* r = logits.data() + row * vocab;
      const std::vector<double> lp = log_softmax(r, vocab);
      for (const auto& entry : c.top5[i]) {
        const int32_t id = entry[0].get<int32_t>();
        const double expected = entry[1].get<double>();
        const double err = std::abs(lp[static_cast<size_t>(id)] - expected);
        max_err = std::max(max_err, err);
        ASSERT_LE(err, variant.tolerance)
            << "case '" << c.name << "' step " << i << " token " << id << ": got "
            << lp[static_cast<size_t>(id)] << ", reference " << expected;
      }
    }
  }
  ::testing::Test::RecordProperty("max_logprob_error", std::to_string(max_err));
}

TEST(LlamaReference, Stories260KTeacherForcedF32Kv) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  check_teacher_forced(path, "stories260K.gguf", {kernels::KvType::kF32, 1e-3}, 16);
}
TEST(LlamaReference, Stories260KTeacherForcedF16Kv) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  check_teacher_forced(path, "stories260K.gguf", {kernels::KvType::kF16, 5e-2}, 16);
}
TEST(LlamaReference, Stories260KTeacherForcedBf16KvBlockSize1) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  check_teacher_forced(path, "stories260K.gguf", {kernels::KvType::kBF16, 0.25}, 1);
}
TEST(LlamaReference, TinyRandomTeacherForcedF32Kv) {
  VELLUM_REQUIRE_MODEL_FILE(path, "llama-2-tiny-random.gguf");
  check_teacher_forced(path, "llama-2-tiny-random.gguf", {kernels::KvType::kF32, 3e-4}, 16);
}
TEST(LlamaReference, TinyRandomTeacherForcedBf16Kv) {
  VELLUM_REQUIRE_MODEL_FILE(path, "llama-2-tiny-random.gguf");
  check_teacher_forced(path, "llama-2-tiny-random.gguf", {kernels::KvType::kBF16, 1e-3}, 32);
}

// Full logits at the last prompt position (logits.json).
TEST(LlamaReference, LastPromptLogitsMatch) {
  VELLUM_REQUIRE_MODEL_FILE(logits_path, "reference/logits.json");
  const json ref = load_json(logits_path);
  for (const auto& c : ref["cases"]) {
    const std::string model_file = c["model"];
    const auto model_path = testing::model_file(model_file);
    ASSERT_FALSE(model_path.empty()) << model_file;
    auto model = testing::load_test_model(model_path);
    const int64_t vocab = model->config().vocab_size;
    ASSERT_EQ(vocab, c["n_vocab"].get<int64_t>());
    model::KvCache cache(model->kv_cache_shape(16, kernels::KvType::kF32), 8);
    testing::SequenceBlocks blocks(16);
    const auto prompt = c["prompt_token_ids"].get<std::vector<int32_t>>();
    blocks.reserve(0, static_cast<int32_t>(prompt.size()));
    model::ForwardBatch batch;
    batch.add_sequence(prompt.data(), static_cast<int32_t>(prompt.size()), 0,
                       blocks.table(0).data(), static_cast<int32_t>(blocks.table(0).size()), 16, 1);
    batch.finalize();
    std::vector<float> logits(static_cast<size_t>(vocab));
    model->forward(batch, cache, logits.data());
    const auto expected = c["logits"].get<std::vector<double>>();
    const double tolerance = model_file == "stories260K.gguf" ? 1e-3 : 2e-4;
    double max_err = 0;
    for (int64_t i = 0; i < vocab; ++i) {
      max_err = std::max(max_err, std::abs(logits[static_cast<size_t>(i)] - expected[static_cast<size_t>(i)]));
    }
    EXPECT_LE(max_err, tolerance) << model_file;
    EXPECT_EQ(argmax(logits.data(), vocab), c["argmax"].get<int32_t>()) << model_file;
  }
}

// Greedy generation through the paged cache, incrementally (prefill then one token per step),
// each prompt alone and all prompts of a model in one batch: the token ids must equal the reference.
void check_greedy(const std::string& model_file, bool together, int32_t block_size,
                  int32_t prefill_chunk) {
  VELLUM_REQUIRE_MODEL_FILE(greedy_path, "reference/greedy.json");
  VELLUM_REQUIRE_MODEL_FILE(model_path, model_file);
  const std::vector<Case> cases = cases_for(load_json(greedy_path), model_file);
  auto model = testing::load_test_model(model_path);
  const int64_t vocab = model->config().vocab_size;

  std::vector<std::vector<size_t>> groups;
  if (together) {
    groups.emplace_back();
    for (size_t s = 0; s < cases.size(); ++s) groups[0].push_back(s);
  } else {
    for (size_t s = 0; s < cases.size(); ++s) groups.push_back({s});
  }
  for (const auto& group : groups) {
    model::KvCache cache(model->kv_cache_shape(block_size, kernels::KvType::kF32),
                         1 + 128 * 4 / block_size * static_cast<int64_t>(group.size()));
    testing::SequenceBlocks blocks(block_size);
    std::vector<std::vector<int32_t>> tokens;  // per sequence: everything fed or generated
    std::vector<int32_t> num_cached(group.size(), 0);
    for (size_t s : group) tokens.push_back(cases[s].prompt);
    std::vector<std::vector<int32_t>> generated(group.size());
    const size_t n_predict = cases[group[0]].generated.size();
    auto unfinished = [&] {
      for (const auto& gen : generated) {
        if (gen.size() < n_predict) return true;
      }
      return false;
    };
    while (unfinished()) {
      model::ForwardBatch batch;
      std::vector<bool> samples(group.size());
      for (size_t g = 0; g < group.size(); ++g) {
        if (generated[g].size() >= n_predict) continue;  // done: no longer in the batch
        const int32_t remaining = static_cast<int32_t>(tokens[g].size()) - num_cached[g];
        const int32_t n = std::min(remaining, prefill_chunk);
        blocks.reserve(g, num_cached[g] + n);
        const auto& table = blocks.table(g);
        samples[g] = (n == remaining);
        batch.add_sequence(tokens[g].data() + num_cached[g], n, num_cached[g], table.data(),
                           static_cast<int32_t>(table.size()), block_size, samples[g] ? 1 : 0);
        num_cached[g] += n;
      }
      batch.finalize();
      std::vector<float> logits(static_cast<size_t>(batch.num_logits() * vocab));
      model->forward(batch, cache, logits.data());
      int64_t row = 0;
      for (size_t g = 0; g < group.size(); ++g) {
        if (!samples[g] || generated[g].size() >= n_predict) continue;
        const int32_t next = argmax(logits.data() + row++ * vocab, vocab);
        generated[g].push_back(next);
        tokens[g].push_back(next);
      }
    }
    for (size_t g = 0; g < group.size(); ++g) {
      EXPECT_EQ(generated[g], cases[group[g]].generated)
          << model_file << " prompt '" << cases[group[g]].name << "'"
          << (together ? " (batched)" : " (alone)");
    }
  }
}

TEST(LlamaReference, Stories260KGreedyAlone) { check_greedy("stories260K.gguf", false, 16, 512); }
TEST(LlamaReference, Stories260KGreedyBatched) { check_greedy("stories260K.gguf", true, 16, 512); }
TEST(LlamaReference, Stories260KGreedyBatchedChunkedPrefill) {
  check_greedy("stories260K.gguf", true, 4, 3);
}
TEST(LlamaReference, TinyRandomGreedyAlone) {
  check_greedy("llama-2-tiny-random.gguf", false, 16, 512);
}
TEST(LlamaReference, TinyRandomGreedyBatched) {
  check_greedy("llama-2-tiny-random.gguf", true, 16, 512);
}

}  // namespace
}  // namespace vellum
