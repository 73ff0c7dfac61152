// Fidelity on the quantized files themselves (issue section 4). Quantized engines are not
// bit-identical (llama.cpp quantizes activations to 8 bits and sums in its own order), so the
// measure is the distance from the F32 copy: at every step of every case, fed the quantized
// reference run's own tokens, |logprob - F32 copy's logprob| over the F32 copy's top-5 tokens
// (the reference's f32_forced_top5). Vellum's median and p99 of that distance must not exceed
// llama.cpp's by more than two correct int8 engines' draws differ (see the test). Greedy ids equal the reference's while its top1-top2 gap is >= 0.5.
//
// The reference lists only llama.cpp's top-5 per step, so its distance is known for the F32
// top-5 tokens that are also in its own top-5 (3,096 of the 3,200 pairs); both engines are
// measured on those same pairs. Vellum's distance over all F32 top-5 tokens is printed too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fidelity_util.h"

namespace vellum {
namespace {

using testing::fidelity::Agreement;
using testing::fidelity::ReferenceCase;
using testing::fidelity::ReferenceModel;

constexpr double kGapThreshold = 0.5;

// The value below which `fraction` of the sorted values lie (nearest rank).
double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(fraction * static_cast<double>(values.size())));
  return values[std::max<size_t>(rank, 1) - 1];
}

// A position's logprob of every vocabulary entry (prompt_logprobs = -1), by token id.
std::vector<float> logprobs_by_id(const TokenLogprobs& entry, int64_t vocab_size) {
  std::vector<float> by_id(static_cast<size_t>(vocab_size), std::nanf(""));
  for (const auto& [id, logprob] : entry.top) by_id[static_cast<size_t>(id)] = logprob;
  return by_id;
}

struct Distances {
  std::vector<double> llama;        // llama.cpp's, on the pairs it lists
  std::vector<double> vellum;       // Vellum's, on the same pairs
  std::vector<double> vellum_all;   // Vellum's, on every F32 top-5 token
};

class FidelityQuantized : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { ref_ = testing::fidelity::load_reference("reference-q.json", GetParam()); }

  EngineConfig config(const std::filesystem::path& model) const {
    EngineConfig c = testing::fidelity::reference_engine_config(model);
    c.cache.enable_prefix_caching = false;
    c.model.max_logprobs = -1;  // the logprob of any token: the F32 top-5 need not be ours
    return c;
  }

  ReferenceModel ref_;
};

// Teacher-forced on the quantized reference run's tokens, all cases: the distance from the F32
// copy, and the argmax where the reference's gap is >= 0.5.
TEST_P(FidelityQuantized, DistanceFromF32NoLargerThanLlamaCpp) {
  VELLUM_REQUIRE_REAL_MODEL(model, ref_.file);
  auto engine = LLMEngine::create(config(model));
  Distances d;
  Agreement forced;
  for (const ReferenceCase& c : ref_.cases) {
    ASSERT_EQ(c.f32_forced_top5.size(), static_cast<size_t>(c.num_steps())) << c.name;
    // One case at a time: a whole-vocabulary row per position is large (Gemma 3: 262,144).
    ASSERT_EQ(engine->add_request("forced/" + c.name, c.forced_prompt(),
                                  testing::fidelity::forced_scoring(-1)),
              std::nullopt);
    const auto outputs = testing::run_all(*engine);
    const RequestOutput& out = outputs.at("forced/" + c.name);
    ASSERT_TRUE(out.prompt_logprobs.has_value());
    testing::fidelity::expect_forced_agreement(c, *out.prompt_logprobs, kGapThreshold, -1.0,
                                               &forced);
    for (int64_t s = 0; s < c.num_steps(); ++s) {
      const auto step = static_cast<size_t>(s);
      const std::vector<float> ours =
          logprobs_by_id((*out.prompt_logprobs)[c.forced_entry(s)], engine->vocab_size());
      std::map<int32_t, float> llama(c.top5[step].begin(), c.top5[step].end());
      for (const auto& [id, f32_logprob] : c.f32_forced_top5[step]) {
        const float mine = ours[static_cast<size_t>(id)];
        ASSERT_FALSE(std::isnan(mine)) << c.name << " step " << s << ": token " << id;
        const double vellum_distance = std::abs(double{mine} - f32_logprob);
        d.vellum_all.push_back(vellum_distance);
        if (auto it = llama.find(id); it != llama.end()) {
          d.llama.push_back(std::abs(double{it->second} - f32_logprob));
          d.vellum.push_back(vellum_distance);
        }
      }
    }
  }
  ASSERT_FALSE(d.llama.empty());
  const double llama_median = percentile(d.llama, 0.5), llama_p99 = percentile(d.llama, 0.99);
  const double vellum_median = percentile(d.vellum, 0.5), vellum_p99 = percentile(d.vellum, 0.99);
  std::cout << "[fidelity q] " << GetParam() << " distance from the F32 copy over " << d.llama.size()
            << " (step, token) pairs: llama.cpp median " << llama_median << " p99 " << llama_p99
            << ", Vellum median " << vellum_median << " p99 " << vellum_p99
            << "; Vellum over all " << d.vellum_all.size() << " F32 top-5 pairs: median "
            << percentile(d.vellum_all, 0.5) << " p99 " << percentile(d.vellum_all, 0.99)
            << " max " << percentile(d.vellum_all, 1.0)
            << "\n  teacher-forced: " << forced.summary() << std::endl;
  testing::fidelity::expect_argmax_checked(forced, "teacher-forced");
  // Two correct int8 engines draw different rounding noise: an activation code that flips on a
  // last-bit difference upstream moves a logprob by up to ~1 nat. Vellum's own two kernel sets
  // give medians and p99s 6-10 % apart (Zen 4: Gemma 3 median 0.0753 with AVX-512 vs 0.0693 with
  // AVX2, p99 0.505 vs 0.538; SmolLM2 p99 0.436 vs 0.501), on either side of llama.cpp's. So the
  // bound is llama.cpp's figure plus that spread (15 %); a systematic error (a wrong scale,
  // truncation instead of rounding, a missed block) moves these figures by far more. Whether
  // Vellum is at or below llama.cpp's own figure is printed.
  constexpr double kDrawSpread = 1.15;
  std::cout << "[fidelity q] " << GetParam() << ": Vellum <= llama.cpp: median "
            << (vellum_median <= llama_median ? "yes" : "no") << ", p99 "
            << (vellum_p99 <= llama_p99 ? "yes" : "no") << std::endl;
  EXPECT_LE(vellum_median, kDrawSpread * llama_median)
      << "median distance from the F32 copy (nats), llama.cpp's " << llama_median;
  EXPECT_LE(vellum_p99, kDrawSpread * llama_p99)
      << "p99 distance from the F32 copy (nats), llama.cpp's " << llama_p99;
}

// Greedy generation, all cases in one batch: the same tokens as llama.cpp's quantized run until
// the first step where they differ, which must be one where the reference's gap is < 0.5.
TEST_P(FidelityQuantized, GreedyIdsEqualWhileGapIsLarge) {
  VELLUM_REQUIRE_REAL_MODEL(model, ref_.file);
  auto engine = LLMEngine::create(config(model));
  for (const ReferenceCase& c : ref_.cases) {
    ASSERT_EQ(engine->add_request("gen/" + c.name, c.prompt_token_ids,
                                  testing::fidelity::greedy_with_logprobs(c.num_steps())),
              std::nullopt);
  }
  const auto outputs = testing::run_all(*engine);
  Agreement generated;
  for (const ReferenceCase& c : ref_.cases) {
    const RequestOutput& g = outputs.at("gen/" + c.name);
    ASSERT_EQ(g.outputs.size(), 1u);
    testing::fidelity::expect_generation_agreement(c, g.outputs[0], kGapThreshold, -1.0,
                                                   &generated);
  }
  std::cout << "[fidelity q] " << GetParam() << " generation: " << generated.summary()
            << std::endl;
  testing::fidelity::expect_argmax_checked(generated, "generation");
}

// A q8_0 KV cache (issue 37): greedy runs still follow llama.cpp's tokens wherever its gap is
// >= 0.5, and the log counts the cases whose 64 tokens are identical to a bf16-KV run's.
TEST_P(FidelityQuantized, Q8_0KvCacheKeepsGreedyIdsWhileGapIsLarge) {
  VELLUM_REQUIRE_REAL_MODEL(model, ref_.file);
  auto generate = [&](const std::string& kv_dtype) {
    EngineConfig c = config(model);
    c.cache.cache_dtype = kv_dtype;
    auto engine = LLMEngine::create(c);
    for (const ReferenceCase& rc : ref_.cases) {
      EXPECT_EQ(engine->add_request(rc.name, rc.prompt_token_ids,
                                    testing::fidelity::greedy_with_logprobs(rc.num_steps())),
                std::nullopt);
    }
    return testing::run_all(*engine);
  };
  const auto bf16 = generate("bf16");
  const auto q8 = generate("q8_0");
  Agreement generated;
  int identical = 0;
  for (const ReferenceCase& c : ref_.cases) {
    const RequestOutput& g = q8.at(c.name);
    ASSERT_EQ(g.outputs.size(), 1u);
    testing::fidelity::expect_generation_agreement(c, g.outputs[0], kGapThreshold, -1.0,
                                                   &generated);
    identical += g.outputs[0].token_ids == bf16.at(c.name).outputs[0].token_ids;
  }
  std::cout << "[kv q8_0] " << GetParam() << ": " << identical << " of " << ref_.cases.size()
            << " cases identical to bf16 K/V for " << ref_.cases.front().num_steps()
            << " tokens; against llama.cpp: " << generated.summary() << std::endl;
}

INSTANTIATE_TEST_SUITE_P(RealModels, FidelityQuantized, ::testing::Values("smollm2", "gemma3"),
                         testing::fidelity::model_key_name);

}  // namespace
}  // namespace vellum
