// Proposer: where draft tokens come from (vLLM's NgramProposer, SuffixDecodingProposer, and a
// draft model or EAGLE head later). The engine asks it once per step, for each running request
// in its decode phase, for up to max_drafts tokens likely to follow the request's tokens; the
// target model then verifies them all in one forward pass (SpecVerifier), so a proposal only
// costs speed when wrong, never exactness.
//
// Thread-safety: engine core thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::engine {

class Proposer {
 public:
  virtual ~Proposer() = default;

  // Up to max_drafts (>= 1) tokens likely to follow `tokens` (the request's prompt followed by its
  // output so far); fewer or none when nothing fits.
  virtual std::vector<int32_t> propose(std::string_view request_id,
                                       std::span<const int32_t> tokens, int max_drafts) = 0;

  // The request finished (any reason) with this output; proposers that learn across requests
  // keep it, the others ignore it.
  virtual void on_request_finished(std::string_view request_id,
                                   std::span<const int32_t> output_tokens) {
    (void)request_id;
    (void)output_tokens;
  }

  // The requests running now; state kept for any other request may be dropped (a preempted or
  // aborted one is proposed for again from its tokens).
  virtual void retain_only(std::span<const std::string> running_ids) { (void)running_ids; }
};

}  // namespace vellum::engine
