// SpecDecoder: speculative decoding's part of an engine step (vLLM's spec-decode path in
// GPUModelRunner plus its SpecDecodingStats). Before a step is scheduled it asks the Proposer
// for drafts for each running request in its decode phase (the scheduler turns them into extra
// query positions); after the step's rows are sampled it verifies them: the longest prefix of
// drafts that equals what the target itself produced at those positions is accepted, plus the
// target's own token after it (the bonus token when every draft matched).
//
// The verification is exact for any request: row j of a request is sampled from the target's
// distribution given the request's tokens and drafts[0, j), with the request's own logits
// processors. Greedy rows take its argmax; random rows run rejection sampling against the
// one-hot draft (Sampler, SamplingRow::draft_token_id), whose result is the draft exactly when
// accepted. Either way the emitted tokens follow the target's distribution.
//
// Thread-safety: engine core thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/scheduler/scheduler.h"
#include "engine/spec_decode/proposer.h"
#include "engine/spec_decode/spec_gate.h"
#include "engine/spec_decode/speculative_config.h"

namespace vellum::engine {

// Cumulative counts with vLLM's metric names (vllm:spec_decode_*).
struct SpecDecodeCounters {
  int64_t num_drafts = 0;           // request-steps that verified at least one draft token
  int64_t num_draft_tokens = 0;     // draft tokens verified
  int64_t num_accepted_tokens = 0;  // draft tokens accepted
  // (num_speculative_tokens) drafts accepted at each draft position.
  std::vector<int64_t> num_accepted_tokens_per_pos;
};

// Longest prefix of `drafts` equal to `row_tokens` (the target's tokens at the drafts' positions;
// row_tokens.size() >= drafts.size()).
int num_accepted_drafts(std::span<const int32_t> drafts, std::span<const int32_t> row_tokens);

class SpecDecoder {
 public:
  explicit SpecDecoder(const SpeculativeConfig& config);

  const SpeculativeConfig& config() const { return config_; }

  // Sets the drafts of every running request in its decode phase that `may_speculate` and the
  // gate allow (and clears the others'). Never more
  // drafts than the request may still emit (max_tokens, max_model_len) minus its bonus token.
  void propose(core::Scheduler& scheduler,
               const std::function<bool(const core::Request&)>& may_speculate);

  // Records the outcome of one request's verification; returns the number of drafts accepted.
  int verify(std::string_view request_id, std::span<const int32_t> drafts,
             std::span<const int32_t> row_tokens);

  // The request finished; proposers that learn across requests keep its output.
  void on_request_finished(std::string_view request_id, std::span<const int32_t> output_tokens) {
    proposer_->on_request_finished(request_id, output_tokens);
  }

  const SpecDecodeCounters& counters() const { return counters_; }
  const SpecGate& gate() const { return gate_; }

 private:
  SpeculativeConfig config_;
  std::unique_ptr<Proposer> proposer_;
  SpecGate gate_;
  SpecDecodeCounters counters_;
};

}  // namespace vellum::engine
