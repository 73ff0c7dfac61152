// The pure pieces of vLLM's beam search (vllm/entrypoints/llm.py::beam_search and
// vllm/beam_search.py::get_beam_search_score); the engine owns the beams' token lists and KV
// forks and calls these to decide which (beam, token) pairs continue.
//
// One step, as vLLM does it: every live beam proposes the tokens of its logprobs (the sampled
// token plus the top 2·width, duplicates merged); a candidate that is EOS (unless ignore_eos) is
// moved to `completed`; the others are sorted by length-penalized score (stable, best first) and
// the best `width` continue. At the end, completed plus live beams are sorted by score and the
// best `width` are returned.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/logprobs.h"

namespace vellum::sampling {

struct BeamSearchConfig {
  int64_t beam_width = 1;
  double length_penalty = 1.0;
  int32_t eos_token_id = -1;  // -1: none
  bool ignore_eos = false;
};

// cum_logprob / seq_len^length_penalty, where seq_len counts prompt and output tokens, minus one
// when the sequence ends with EOS (vLLM's get_beam_search_score).
double beam_search_score(int64_t seq_len, double cum_logprob, bool ends_with_eos,
                         double length_penalty);

// A live beam, as the step helpers need it.
struct BeamState {
  double cum_logprob = 0.0;
  int64_t seq_len = 0;  // prompt + output tokens
};

// A beam extended by one token.
struct BeamCandidate {
  int64_t parent_beam = 0;  // index into the step's live beams
  int32_t token_id = 0;
  float logprob = 0.0f;      // of token_id at this step
  double cum_logprob = 0.0;  // parent's + logprob
  int64_t seq_len = 0;       // parent's + 1
  double score = 0.0;        // beam_search_score of the extended sequence
};

struct BeamSearchStep {
  std::vector<BeamCandidate> next_beams;  // at most beam_width, best first
  std::vector<BeamCandidate> completed;   // every candidate that ended on EOS this step
};

// Candidates of beam b are the entries of logprobs row b (as the Sampler returns them for
// logprobs = 2·beam_width). logprobs.num_rows() == beams.size().
BeamSearchStep beam_search_step(std::span<const BeamState> beams, const LogprobsLists& logprobs,
                                const BeamSearchConfig& config);

// Same, from raw logits rows (num_beams = beams.size(), vocab_size each): each beam proposes its
// top 2·beam_width tokens by logprob.
BeamSearchStep beam_search_step_from_logits(std::span<const BeamState> beams, const float* logits,
                                            int64_t vocab_size, const BeamSearchConfig& config);

// The final answer: completed beams followed by the live ones, stably sorted by score, best
// beam_width kept.
std::vector<BeamCandidate> finalize_beams(std::vector<BeamCandidate> completed,
                                          std::span<const BeamCandidate> live, int64_t beam_width);

}  // namespace vellum::sampling
