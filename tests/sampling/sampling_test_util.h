// Helpers for the sampling tests: reference maths in double, chi-square, and the real
// stories260K logits recorded by llama.cpp (../shared/models/reference/logits.json).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "test_util.h"

namespace vellum::sampling::testing {

// softmax(logits / temperature) in double.
inline std::vector<double> softmax(const std::vector<float>& logits, double temperature = 1.0) {
  double max_value = -INFINITY;
  for (float l : logits) max_value = std::max(max_value, static_cast<double>(l) / temperature);
  std::vector<double> probs(logits.size());
  double sum = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(logits[i]) / temperature - max_value);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  return probs;
}

// Pearson's chi-square statistic of observed counts against expected probabilities; bins with
// probability 0 must have no observations (returns +inf otherwise).
inline double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs,
                         int64_t num_samples) {
  double chi2 = 0.0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double expected = probs[i] * static_cast<double>(num_samples);
    if (expected == 0.0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    const double diff = static_cast<double>(counts[i]) - expected;
    chi2 += diff * diff / expected;
  }
  return chi2;
}

// Critical values of chi-square at p = 0.001, by degrees of freedom (1..10).
inline double chi_square_critical_0001(int64_t dof) {
  static constexpr double kTable[] = {10.83, 13.82, 16.27, 18.47, 20.52,
                                      22.46, 24.32, 26.12, 27.88, 29.59};
  return kTable[dof - 1];
}

inline std::vector<float> random_logits(int64_t vocab_size, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> logits(vocab_size);
  for (float& l : logits) l = normal(rng);
  return logits;
}

struct RealLogits {
  std::vector<float> logits;  // (vocab_size) at the last prompt position
  std::vector<int32_t> prompt_token_ids;
  int32_t argmax = -1;
};

// The stories260K + "Once upon a time" row of logits.json; empty logits when absent.
inline RealLogits load_stories_logits() {
  RealLogits out;
  const auto path = ::vellum::testing::model_file("reference/logits.json");
  if (path.empty()) return out;
  std::ifstream in(path);
  const auto doc = nlohmann::json::parse(in);
  for (const auto& c : doc.at("cases")) {
    if (c.at("model") != "stories260K.gguf") continue;
    out.logits = c.at("logits").get<std::vector<float>>();
    out.prompt_token_ids = c.at("prompt_token_ids").get<std::vector<int32_t>>();
    out.argmax = c.at("argmax").get<int32_t>();
  }
  return out;
}

}  // namespace vellum::sampling::testing

#define VELLUM_REQUIRE_STORIES_LOGITS(var)                                       \
  const auto var = ::vellum::sampling::testing::load_stories_logits();           \
  if (var.logits.empty()) {                                                      \
    VELLUM_SKIP_FOR_MISSING_MODEL() << "reference/logits.json not found: put the " \
                                       "shared models at ../shared/models or set " \
                                       "VELLUM_TEST_MODELS";                       \
  }
