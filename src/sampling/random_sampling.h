// Random sampling of one logits row: temperature → min_p → top-k → top-p → draw, with vLLM's
// semantics (spec §4, vllm/v1/sample/ops/topk_topp_sampler.py):
//   - min_p keeps tokens with prob >= min_p · max_prob, after temperature;
//   - top-k keeps values >= the k-th largest (ties with the k-th value survive);
//   - top-p, on the softmax of what top-k kept, keeps a token when the mass of the tokens ranked
//     above it is < p (the largest token always survives). Ties with the last kept value survive
//     too (vLLM's order among exactly tied values is unspecified).
// Kept tokens are then drawn with probability proportional to their softmax weight using one
// uniform number (inverse CDF); this draws from the same distribution as vLLM's exponential race
// with a single random number per row instead of one per vocabulary entry.
//
// No full sort: one vectorized pass counts the tokens and mass above a few weight levels, which
// bounds the candidates that can hold the k-th value or the top-p cut; only those are gathered
// and selected (nth_element) or sorted. When that is still many (a flat distribution), a
// 4064-bin histogram over the float bits of the weights narrows the sort to one bin.
#pragma once

#include <cstdint>
#include <vector>

namespace vellum::sampling {

struct RandomSamplingConfig {
  float temperature = 1.0f;  // > 0 (the caller raises values in (0, 0.01) to 0.01)
  float min_p = 0.0f;        // 0 disables
  int64_t top_k = 0;         // <= 0 or >= vocab disables
  float top_p = 1.0f;        // >= 1 disables
};

// Scratch reused across rows and steps; sized on first use, no allocation afterwards.
struct RandomSamplingWorkspace {
  std::vector<float> candidates;     // (vocab) weights that may hold the top-k / top-p cut
  std::vector<uint32_t> bin_counts;  // (kNumBins)
  std::vector<double> bin_mass;      // (kNumBins)
  std::vector<float> bin_items;      // the weights of the bin holding the top-p cut
  std::vector<double> block_mass;    // (ceil(vocab / kBlock)) kept mass per block
};

// The kept part of a row after filter_row: row[i] >= threshold are kept with weight row[i].
struct FilteredRow {
  float threshold = 0.0f;
  double kept_mass = 0.0;  // sum of kept weights; 0 when every logit was -inf
};

// Turns row (vocab_size logits, modified in place) into unnormalized weights
// exp((l - max) / T) in [0, 1] and returns which of them survive min_p / top-k / top-p.
FilteredRow filter_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                       RandomSamplingWorkspace* ws);

// Draws a token from a row filtered by filter_row; `uniform` in [0, 1). When every logit was -inf
// there is nothing to draw from and token 0 is returned.
int32_t draw_from_filtered(const float* weights, int64_t vocab_size, const FilteredRow& filtered,
                           double uniform, RandomSamplingWorkspace* ws);

// Speculative decoding's rejection sampling against a one-hot draft (vLLM's rejection sampler
// for a draft distribution that is 1 at draft_token_id): filters the row like sample_row, keeps
// the draft with probability p(draft) (accept_uniform < p), else draws from p with the draft
// removed and renormalized (resample_uniform). The result is distributed exactly as sample_row's,
// and equals draft_token_id exactly when the draft was accepted. Both uniforms in [0, 1).
int32_t rejection_sample_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                             int32_t draft_token_id, double accept_uniform,
                             double resample_uniform, RandomSamplingWorkspace* ws);

// filter_row then draw_from_filtered.
int32_t sample_row(float* row, int64_t vocab_size, const RandomSamplingConfig& config,
                   double uniform, RandomSamplingWorkspace* ws);

}  // namespace vellum::sampling
