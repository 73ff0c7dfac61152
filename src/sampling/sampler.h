// Sampler: picks the next token of every row of a logits batch, in vLLM V1's order (spec §4):
//   structured-output token mask → raw logprobs (when requested) → allowed-token mask → bad words → min_tokens → logit bias →
//   penalties (repetition, frequency, presence) → greedy argmax, or temperature → min_p →
//   top-k/top-p → a draw from the request's own generator.
//
// Rows are independent: a row's result depends only on its logits, its params, its token history
// and its generator, never on the other rows, so a seeded request gives the same tokens alone or
// in any batch. Rows run in parallel over OpenMP threads when config.num_threads allows.
//
// Not thread-safe: one Sampler per engine thread. Buffers are owned by the Sampler and reused, so
// steady-state steps do not allocate (except growing the output lists to a new maximum).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/logits_processors.h"
#include "sampling/logprobs.h"
#include "sampling/random_sampling.h"
#include "sampling/sampling_state.h"
#include "vellum/sampling_params.h"

namespace vellum::sampling {

// One row of the logits batch: the request it belongs to and what the processors need.
// Nothing is owned; everything must outlive the sample() call.
struct SamplingRow {
  const SamplingParams* params = nullptr;     // normalized and validated
  // Advanced by one draw when the row samples randomly; may be null for greedy rows. Rows run in
  // parallel, so two rows must never share a state.
  SamplingState* state = nullptr;
  std::span<const int32_t> prompt_token_ids;  // for the repetition penalty
  std::span<const int32_t> output_token_ids;  // generated so far: penalties, bad words, min_tokens
  // Masked with params->stop_token_ids while min_tokens is not reached (vLLM's
  // all_stop_token_ids): the EOS id (-1: none; pass it even with ignore_eos, as vLLM does) and
  // any other end-of-generation ids the engine stops on.
  int32_t eos_token_id = -1;
  std::span<const int32_t> extra_stop_token_ids;
  // Structured outputs: a bitmask over the vocabulary (bit id % 64 of word id / 64; ids beyond it
  // are disallowed), applied before everything else, as vLLM applies its grammar bitmask to the
  // logits before the sampler. Empty: no constraint.
  std::span<const uint64_t> allowed_token_mask;
  // Speculative decoding: a draft token this row verifies (-1: none). A random row then runs
  // rejection sampling (rejection_sample_row) on its final distribution, with two draws from its
  // generator, and returns the draft exactly when it is accepted; a greedy row ignores it (its
  // argmax is compared with the draft by the caller).
  int32_t draft_token_id = -1;
};

struct SamplerOutput {
  std::vector<int32_t> sampled_token_ids;  // (num_rows)
  // Rows with params->logprobs set (or logprob_token_ids) get 1 + k entries: the sampled token,
  // then the top-k (k = logprobs; -1 = vocabulary) or the logprob_token_ids. Raw logits.
  LogprobsLists logprobs;
};

struct SamplerConfig {
  int num_threads = 0;  // OpenMP threads over rows; 0 = the OpenMP default, 1 = serial
};

class Sampler {
 public:
  explicit Sampler(SamplerConfig config = {}) : config_(config) {}

  // logits: (num_rows, vocab_size) fp32, row-major, modified in place (it holds scratch values
  // afterwards). rows.size() == num_rows. Throws vellum::Error (kInvalidArgument) for a row whose
  // params or token ids do not fit the vocabulary.
  void sample(float* logits, int64_t num_rows, int64_t vocab_size, std::span<SamplingRow> rows,
              SamplerOutput* out);

 private:
  struct Workspace {
    std::vector<float> raw_row;  // (vocab_size) copy of the raw logits for logprobs
    std::vector<float> saved;    // allowed-token values
    PenaltyWorkspace penalties;
    RandomSamplingWorkspace random;
    LogprobsWorkspace logprobs;
  };

  void check_row(const SamplingRow& row, int64_t vocab_size) const;
  int32_t sample_one(float* logits, int64_t vocab_size, const SamplingRow& row, int64_t r,
                     SamplerOutput* out, Workspace* ws);

  SamplerConfig config_;
  std::vector<Workspace> workspaces_;  // one per OpenMP thread
  std::vector<int64_t> num_entries_;   // (num_rows) logprob entries per row
};

// Number of logprob entries (sampled token + top-k or listed ids) a row produces; 0 for none.
int64_t num_logprob_entries(const SamplingParams& params, int64_t vocab_size);

}  // namespace vellum::sampling
