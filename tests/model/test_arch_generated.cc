// Every architecture on models the project generates itself (make-model's tiny-<arch> shapes),
// so these run without ../shared/models: the file loads, and the decoder gives the same logits
// for a sequence computed alone in one pass as batched with others, with chunked prefill and
// one-token decode steps (paged cache, sliding windows across block boundaries, MoE routing of
// different token groupings). Numerical agreement with an independent implementation is
// test_arch_reference.cc's job.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "model/io/make_model.h"
#include "model_test_util.h"
#include "test_util.h"

namespace vellum {
namespace {

constexpr int32_t kBlockSize = 8;

std::vector<int32_t> make_tokens(uint32_t seed, size_t n, int64_t vocab) {
  std::vector<int32_t> tokens{1};
  while (tokens.size() < n) {
    seed = seed * 1664525u + 1013904223u;
    tokens.push_back(3 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab - 3)));
  }
  return tokens;
}

// Logits of every position of each sequence, stepping `chunk` tokens per sequence per step
// (all sequences in each step's batch).
std::vector<std::vector<float>> run(model::Model& m, const std::vector<std::vector<int32_t>>& seqs,
                                    int32_t chunk) {
  const int64_t vocab = m.config().vocab_size;
  model::KvCache cache(m.kv_cache_shape(kBlockSize, kernels::KvType::kF32), 128);
  testing::SequenceBlocks blocks(kBlockSize);
  std::vector<int32_t> done(seqs.size(), 0);
  std::vector<std::vector<float>> out(seqs.size());
  for (;;) {
    model::ForwardBatch batch;
    std::vector<int32_t> n(seqs.size(), 0);
    for (size_t s = 0; s < seqs.size(); ++s) {
      n[s] = std::min<int32_t>(chunk, static_cast<int32_t>(seqs[s].size()) - done[s]);
      if (n[s] == 0) continue;
      blocks.reserve(s, done[s] + n[s]);
      batch.add_sequence(seqs[s].data() + done[s], n[s], done[s], blocks.table(s).data(),
                         static_cast<int32_t>(blocks.table(s).size()), kBlockSize, n[s]);
    }
    if (batch.num_tokens() == 0) break;
    batch.finalize();
    std::vector<float> logits(static_cast<size_t>(batch.num_logits() * vocab));
    m.forward(batch, cache, logits.data());
    size_t offset = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const size_t count = static_cast<size_t>(n[s] * vocab);
      out[s].insert(out[s].end(), logits.begin() + offset, logits.begin() + offset + count);
      offset += count;
      done[s] += n[s];
    }
  }
  return out;
}

class GeneratedArch : public ::testing::TestWithParam<std::string> {};

TEST_P(GeneratedArch, BatchedChunkedEqualsAlone) {
  model::MakeModelOptions options;
  options.shape = GetParam();
  options.seed = 7;
  options.output = testing::temp_dir() / (GetParam() + ".gguf");
  model::make_model(options);
  auto m = testing::load_test_model(options.output, kernels::MatmulPrecision::kF32);
  EXPECT_EQ(m->config().architecture, model::find_arch_spec(m->config().architecture)->name);
  const int64_t vocab = m->config().vocab_size;
  // Longer than the tiny gemmas' window of 8 and several blocks.
  const std::vector<std::vector<int32_t>> seqs = {make_tokens(1, 45, vocab),
                                                  make_tokens(2, 13, vocab),
                                                  make_tokens(3, 30, vocab)};
  const auto batched = run(*m, seqs, 5);
  double max_diff = 0.0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const auto alone = run(*m, {seqs[s]}, 1 << 20)[0];
    ASSERT_EQ(alone.size(), batched[s].size());
    for (size_t i = 0; i < alone.size(); ++i) {
      ASSERT_TRUE(std::isfinite(alone[i])) << GetParam();
      max_diff = std::max(max_diff, static_cast<double>(std::abs(alone[i] - batched[s][i])));
    }
  }
  EXPECT_LE(max_diff, 1e-4) << GetParam() << ": " << m->describe();
}

// The weight bytes a forward pass reads (bench latency's bandwidth figures): dense models read
// every weight once per pass; MoE layers read the router and only the experts their tokens chose,
// so one token reads weight_bytes() and many tokens more, never more than every expert.
TEST(GeneratedArchWeightReads, MoePassesReadOnlyTheChosenExperts) {
  for (const std::string shape : {"tiny", "tiny-mixtral", "tiny-qwen3moe"}) {
    model::MakeModelOptions options;
    options.shape = shape;
    options.seed = 7;
    options.output = testing::temp_dir() / (shape + "-reads.gguf");
    model::make_model(options);
    auto m = testing::load_test_model(options.output, kernels::MatmulPrecision::kF32);
    const int64_t vocab = m->config().vocab_size;
    const size_t start = m->weight_bytes_read();
    run(*m, {make_tokens(1, 1, vocab)}, 1);
    const size_t one_token = m->weight_bytes_read() - start;
    EXPECT_EQ(one_token, m->weight_bytes()) << shape;
    const size_t before_many = m->weight_bytes_read();
    run(*m, {make_tokens(2, 40, vocab)}, 40);
    const size_t many_tokens = m->weight_bytes_read() - before_many;
    if (m->expert_weight_bytes() == 0) {
      EXPECT_EQ(many_tokens, one_token) << shape;
      continue;
    }
    EXPECT_GT(many_tokens, one_token) << shape << ": 40 tokens chose only top-k experts per layer";
    // One token's read (the dense part and top-k experts) plus every expert bounds any pass.
    EXPECT_LE(many_tokens, one_token + m->expert_weight_bytes()) << shape;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, GeneratedArch,
                         ::testing::Values("tiny", "tiny-qwen2", "tiny-qwen3", "tiny-gemma2",
                                           "tiny-gemma3", "tiny-phi3", "tiny-mixtral",
                                           "tiny-qwen3moe"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace vellum
