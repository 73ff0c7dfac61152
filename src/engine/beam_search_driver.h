// BeamSearchGroup: the bookkeeping of one beam search request (use_beam_search, n = width), as
// vLLM's beam search does it (vllm/entrypoints/llm.py::beam_search), on top of the pure helpers
// in sampling/beam_search.h. The engine owns the KV side: every live beam is a scheduler request;
// after each step it applies the StepResult (a kept candidate continues in its parent's request
// or in a fork of it, with copy-on-write; pruned beams are freed).
//
// Beams advance in lockstep: step() takes the logits of every live beam of one engine step.
// Final-only output: make_output() returns the best `width` of the completed (EOS) and live beams.
//
// Not thread-safe: engine core thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sampling/beam_search.h"
#include "vellum/outputs.h"
#include "vellum/sampling_params.h"

namespace vellum::engine {

class BeamSearchGroup {
 public:
  struct Beam {
    std::string seq_id;  // its scheduler request id
    std::vector<int32_t> output_ids;
    double cum_logprob = 0.0;
  };
  struct Fork {
    std::string parent_seq_id;  // fork this live beam (its tokens before this step's token)
    std::string child_seq_id;
    int32_t token_id = 0;  // the child's first own token
  };
  // What the engine applies after step().
  struct StepResult {
    std::vector<std::pair<std::string, int32_t>> continued;  // (beam seq id, its next token)
    std::vector<Fork> forks;
    std::vector<std::string> pruned;  // beams without a kept candidate: free them
    // max_tokens reached or no live beam left: call make_output() and free the live beams.
    bool done = false;
  };

  // eos_token_id -1: none. max_tokens: steps to run (>= 1).
  BeamSearchGroup(const std::string& request_id, std::string prompt_text,
                  std::vector<int32_t> prompt_ids, const SamplingParams& params,
                  int32_t eos_token_id, int64_t max_tokens, double arrival_time);

  const std::string& request_id() const { return request_id_; }
  const std::vector<int32_t>& prompt_ids() const { return prompt_ids_; }
  const std::vector<Beam>& live() const { return live_; }

  // logits: (live().size(), vocab_size) raw logits, row b for live()[b]. Updates live() to the
  // kept beams (continued ones keep their seq id, forks get new ids "beam<k>_<request id>").
  StepResult step(const float* logits, int64_t vocab_size);

  // The final RequestOutput (finished): the best `width` beams by score, index = rank.
  // decode(ids, skip_special_tokens) gives the text. aborted: finish_reason "abort" for all.
  RequestOutput make_output(
      const std::function<std::string(const std::vector<int32_t>&, bool)>& decode, bool aborted,
      double now) const;

 private:
  std::string request_id_;
  std::string prompt_text_;
  std::vector<int32_t> prompt_ids_;
  SamplingParams params_;
  sampling::BeamSearchConfig config_;
  int64_t max_tokens_ = 0;
  int64_t num_steps_ = 0;
  int64_t num_beams_made_ = 1;  // names forks uniquely
  double arrival_time_ = 0.0;
  std::vector<Beam> live_;
  // Beams that ended on EOS: their candidate (parent_beam = index into completed_ids_).
  std::vector<sampling::BeamCandidate> completed_;
  std::vector<std::vector<int32_t>> completed_ids_;
};

}  // namespace vellum::engine
