#include "engine/beam_search_driver.h"

#include "common/check.h"

namespace vellum::engine {

BeamSearchGroup::BeamSearchGroup(const std::string& request_id, std::string prompt_text,
                                 std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                 int32_t eos_token_id, int64_t max_tokens, double arrival_time)
    : request_id_(request_id),
      prompt_text_(std::move(prompt_text)),
      prompt_ids_(std::move(prompt_ids)),
      params_(params),
      max_tokens_(max_tokens),
      arrival_time_(arrival_time) {
  VELLUM_CHECK(params.n >= 1 && max_tokens >= 1, ErrorCode::kInvalidArgument,
               "beam search needs n >= 1 beams and max_tokens >= 1 (got n {}, max_tokens {})",
               params.n, max_tokens);
  config_.beam_width = params.n;
  config_.length_penalty = params.length_penalty;
  config_.eos_token_id = eos_token_id;
  config_.ignore_eos = params.ignore_eos;
  live_.push_back({"beam0_" + request_id, {}, 0.0});
}

BeamSearchGroup::StepResult BeamSearchGroup::step(const float* logits, int64_t vocab_size) {
  const size_t num_live = live_.size();
  std::vector<sampling::BeamState> states(num_live);
  for (size_t b = 0; b < num_live; ++b) {
    states[b].cum_logprob = live_[b].cum_logprob;
    states[b].seq_len = static_cast<int64_t>(prompt_ids_.size() + live_[b].output_ids.size());
  }
  sampling::BeamSearchStep step =
      sampling::beam_search_step_from_logits(states, logits, vocab_size, config_);
  ++num_steps_;
  for (sampling::BeamCandidate c : step.completed) {
    std::vector<int32_t> ids = live_[static_cast<size_t>(c.parent_beam)].output_ids;
    ids.push_back(c.token_id);
    c.parent_beam = static_cast<int64_t>(completed_ids_.size());
    completed_ids_.push_back(std::move(ids));
    completed_.push_back(c);
  }
  StepResult result;
  std::vector<Beam> next;
  std::vector<bool> continued(num_live, false);
  for (const sampling::BeamCandidate& c : step.next_beams) {
    const size_t p = static_cast<size_t>(c.parent_beam);
    Beam beam;
    beam.output_ids = live_[p].output_ids;
    beam.output_ids.push_back(c.token_id);
    beam.cum_logprob = c.cum_logprob;
    if (!continued[p]) {
      continued[p] = true;
      beam.seq_id = live_[p].seq_id;
      result.continued.emplace_back(beam.seq_id, c.token_id);
    } else {
      beam.seq_id = "beam" + std::to_string(num_beams_made_++) + "_" + request_id_;
      result.forks.push_back({live_[p].seq_id, beam.seq_id, c.token_id});
    }
    next.push_back(std::move(beam));
  }
  for (size_t p = 0; p < num_live; ++p) {
    if (!continued[p]) result.pruned.push_back(live_[p].seq_id);
  }
  live_ = std::move(next);
  result.done = live_.empty() || num_steps_ >= max_tokens_;
  return result;
}

RequestOutput BeamSearchGroup::make_output(
    const std::function<std::string(const std::vector<int32_t>&, bool)>& decode, bool aborted,
    double now) const {
  std::vector<std::vector<int32_t>> ids = completed_ids_;
  std::vector<sampling::BeamCandidate> live;
  for (const Beam& beam : live_) {
    sampling::BeamCandidate c;
    c.parent_beam = static_cast<int64_t>(ids.size());
    c.cum_logprob = beam.cum_logprob;
    c.seq_len = static_cast<int64_t>(prompt_ids_.size() + beam.output_ids.size());
    c.score = sampling::beam_search_score(c.seq_len, c.cum_logprob, false, config_.length_penalty);
    if (!beam.output_ids.empty()) c.token_id = beam.output_ids.back();
    live.push_back(c);
    ids.push_back(beam.output_ids);
  }
  const std::vector<sampling::BeamCandidate> best =
      sampling::finalize_beams(completed_, live, config_.beam_width);
  RequestOutput out;
  out.request_id = request_id_;
  out.prompt = prompt_text_;
  out.prompt_token_ids = prompt_ids_;
  out.finished = true;
  out.metrics.arrival_time = arrival_time_;
  out.metrics.finished_time = now;
  for (size_t i = 0; i < best.size(); ++i) {
    const sampling::BeamCandidate& c = best[i];
    CompletionOutput o;
    o.index = static_cast<int32_t>(i);
    o.token_ids = ids[static_cast<size_t>(c.parent_beam)];
    if (params_.detokenize) o.text = decode(o.token_ids, params_.skip_special_tokens);
    o.cumulative_logprob = c.cum_logprob;
    const bool ended_on_eos = c.parent_beam < static_cast<int64_t>(completed_ids_.size());
    o.finish_reason = aborted ? "abort" : (ended_on_eos ? "stop" : "length");
    if (ended_on_eos && !aborted) o.stop_reason_token = config_.eos_token_id;
    out.outputs.push_back(std::move(o));
  }
  return out;
}

}  // namespace vellum::engine
