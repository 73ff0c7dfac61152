#include "sampling/beam_search.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "sampling/vec_math.h"

namespace vellum::sampling {
namespace {

void stable_sort_by_score(std::vector<BeamCandidate>* candidates) {
  std::stable_sort(
      candidates->begin(), candidates->end(),
      [](const BeamCandidate& a, const BeamCandidate& b) { return a.score > b.score; });
}

}  // namespace

double beam_search_score(int64_t seq_len, double cum_logprob, bool ends_with_eos,
                         double length_penalty) {
  const int64_t len = ends_with_eos ? seq_len - 1 : seq_len;
  return cum_logprob / std::pow(static_cast<double>(len), length_penalty);
}

BeamSearchStep beam_search_step(std::span<const BeamState> beams, const LogprobsLists& logprobs,
                                const BeamSearchConfig& config) {
  VELLUM_CHECK(logprobs.num_rows() == static_cast<int64_t>(beams.size()),
               ErrorCode::kInvalidArgument,
               "beam search: {} logprobs rows for {} beams; pass one row per live beam",
               logprobs.num_rows(), beams.size());
  VELLUM_CHECK(config.beam_width >= 1, ErrorCode::kInvalidArgument,
               "beam search: beam_width must be >= 1, got {}", config.beam_width);
  BeamSearchStep step;
  std::vector<BeamCandidate> candidates;
  for (int64_t b = 0; b < static_cast<int64_t>(beams.size()); ++b) {
    const auto ids = logprobs.row_token_ids(b);
    const auto lps = logprobs.row_logprobs(b);
    for (size_t j = 0; j < ids.size(); ++j) {
      // vLLM iterates a dict keyed by token id: a repeated id appears once, at its first place.
      if (std::find(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(j), ids[j]) !=
          ids.begin() + static_cast<std::ptrdiff_t>(j)) {
        continue;
      }
      BeamCandidate c;
      c.parent_beam = b;
      c.token_id = ids[j];
      c.logprob = lps[j];
      c.cum_logprob = beams[b].cum_logprob + static_cast<double>(lps[j]);
      c.seq_len = beams[b].seq_len + 1;
      const bool is_eos = config.eos_token_id >= 0 && ids[j] == config.eos_token_id;
      c.score = beam_search_score(c.seq_len, c.cum_logprob, is_eos, config.length_penalty);
      if (is_eos && !config.ignore_eos) {
        step.completed.push_back(c);
      } else {
        candidates.push_back(c);
      }
    }
  }
  stable_sort_by_score(&candidates);
  if (static_cast<int64_t>(candidates.size()) > config.beam_width) {
    candidates.resize(config.beam_width);
  }
  step.next_beams = std::move(candidates);
  return step;
}

BeamSearchStep beam_search_step_from_logits(std::span<const BeamState> beams, const float* logits,
                                            int64_t vocab_size, const BeamSearchConfig& config) {
  const int64_t num_beams = static_cast<int64_t>(beams.size());
  const int64_t top = std::min(2 * config.beam_width, vocab_size);
  LogprobsLists lists;
  std::vector<int64_t> sizes(num_beams, top);
  lists.resize(sizes);
  LogprobsWorkspace ws;
  for (int64_t b = 0; b < num_beams; ++b) {
    const float* row = logits + b * vocab_size;
    const double lse = log_sum_exp(row, vocab_size);
    int32_t* ids = lists.token_ids.data() + lists.offsets[b];
    top_k_ids(row, vocab_size, top, ids, &ws);
    for (int64_t j = 0; j < top; ++j) {
      lists.logprobs[lists.offsets[b] + j] =
          static_cast<float>(static_cast<double>(row[ids[j]]) - lse);
    }
  }
  return beam_search_step(beams, lists, config);
}

std::vector<BeamCandidate> finalize_beams(std::vector<BeamCandidate> completed,
                                          std::span<const BeamCandidate> live, int64_t beam_width) {
  completed.insert(completed.end(), live.begin(), live.end());
  stable_sort_by_score(&completed);
  if (static_cast<int64_t>(completed.size()) > beam_width) completed.resize(beam_width);
  return completed;
}

}  // namespace vellum::sampling
