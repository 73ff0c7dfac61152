#include "engine/output_processor.h"

#include <algorithm>

#include "common/check.h"
#include "core/stop_checker.h"

namespace vellum::engine {
namespace {

}  // namespace

bool OutputProcessor::RequestState::finished() const {
  return std::all_of(sequences.begin(), sequences.end(),
                     [](const Sequence& s) { return s.finish_reason.has_value(); });
}

void OutputProcessor::add_request(const std::string& request_id, const std::string& prompt,
                                  const std::vector<int32_t>& prompt_token_ids,
                                  const SamplingParams& params,
                                  const std::vector<std::string>& seq_ids, double arrival_time) {
  VELLUM_ASSERT(!requests_.count(request_id));
  RequestState& state = requests_[request_id];
  state.prompt = prompt;
  state.prompt_token_ids = prompt_token_ids;
  state.params = params;
  state.seq_ids = seq_ids;
  state.metrics.arrival_time = arrival_time;
  tokenizer::DecodeOptions options;
  options.skip_special_tokens = params.skip_special_tokens;
  options.spaces_between_special_tokens = params.spaces_between_special_tokens;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    Sequence seq;
    seq.index = static_cast<int32_t>(i);
    if (params.detokenize && tokenizer_ != nullptr) {
      seq.detokenizer = std::make_unique<tokenizer::IncrementalDetokenizer>(
          *tokenizer_, options, tokenizer_ids(prompt_token_ids));
    }
    state.sequences.push_back(std::move(seq));
    seq_to_request_[seq_ids[i]] = {request_id, static_cast<int32_t>(i)};
  }
}

std::vector<int32_t> OutputProcessor::tokenizer_ids(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < tokenizer_->vocab_size()) out.push_back(id);
  }
  return out;
}

std::optional<std::string> OutputProcessor::request_of(const std::string& seq_id) const {
  auto it = seq_to_request_.find(seq_id);
  if (it == seq_to_request_.end()) return std::nullopt;
  return it->second.first;
}

void OutputProcessor::record_first_scheduled(const std::string& seq_id, double now) {
  auto it = seq_to_request_.find(seq_id);
  if (it == seq_to_request_.end()) return;
  RequestMetrics& m = requests_.at(it->second.first).metrics;
  if (m.first_scheduled_time == 0.0) m.first_scheduled_time = now;
}

bool OutputProcessor::append_text(RequestState& request, Sequence& seq,
                                  const SequenceUpdate& update) {
  if (!seq.detokenizer) return false;
  const SamplingParams& params = request.params;
  std::vector<int32_t> ids = update.new_token_ids;
  // A request that ended on EOS or a stop token id does not show that token's text unless asked.
  const bool token_stop = update.finish_reason == std::string("stop");
  if (token_stop && !params.include_stop_str_in_output && !ids.empty()) ids.pop_back();
  const size_t num_outputs_before = seq.token_ids.size() - update.new_token_ids.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t before = seq.text.size();
    // Ids past the tokenizer's vocabulary (a model's padded embedding rows) have no text.
    if (ids[i] < tokenizer_->vocab_size()) seq.text += seq.detokenizer->step(ids[i]);
    const size_t num_output_tokens = num_outputs_before + i + 1;
    // Stop strings are checked once more than min_tokens tokens exist.
    if (params.stop.empty() || static_cast<int64_t>(num_output_tokens) <= params.min_tokens) {
      continue;
    }
    if (auto hit = core::check_stop_strings(seq.text, static_cast<int>(seq.text.size() - before),
                                            params.stop, params.include_stop_str_in_output)) {
      if (hit->truncate_to >= 0) seq.text.resize(static_cast<size_t>(hit->truncate_to));
      seq.stop_reason_text = hit->stop;
      // Tokens after the one that completed the stop string are dropped.
      seq.token_ids.resize(num_outputs_before + i + 1);
      if (seq.logprobs.size() > seq.token_ids.size()) seq.logprobs.resize(seq.token_ids.size());
      return true;
    }
  }
  if (update.finish_reason) seq.text += seq.detokenizer->finish();
  return false;
}

OutputProcessor::Result OutputProcessor::process(std::vector<SequenceUpdate>& updates,
                                                 double now) {
  Result result;
  std::vector<std::string> touched;
  for (SequenceUpdate& update : updates) {
    auto where = seq_to_request_.find(update.seq_id);
    if (where == seq_to_request_.end()) continue;
    const std::string& request_id = where->second.first;
    RequestState& request = requests_.at(request_id);
    Sequence& seq = request.sequences[static_cast<size_t>(where->second.second)];
    if (seq.finish_reason) continue;  // already ended by a stop string
    if (seq.index == 0 && update.num_cached_tokens > 0) {
      request.num_cached_tokens = update.num_cached_tokens;
    }
    if (!update.new_token_ids.empty()) {
      RequestMetrics& m = request.metrics;
      if (m.first_token_time == 0.0) {
        m.first_token_time = now;
      } else if (now > m.last_token_time) {
        m.inter_token_latencies.push_back(now - m.last_token_time);
      }
      m.last_token_time = now;
    }
    seq.token_ids.insert(seq.token_ids.end(), update.new_token_ids.begin(),
                         update.new_token_ids.end());
    for (TokenLogprobs& lp : update.new_logprobs) {
      seq.cumulative_logprob += lp.logprob;
      seq.logprobs.push_back(std::move(lp));
    }
    if (append_text(request, seq, update)) {
      seq.finish_reason = "stop";
      result.stopped_seq_ids.push_back(update.seq_id);
    } else if (update.finish_reason) {
      seq.finish_reason = update.finish_reason;
      seq.stop_reason_token = update.stop_token;
    }
    if (std::find(touched.begin(), touched.end(), request_id) == touched.end()) {
      touched.push_back(request_id);
    }
  }
  for (const std::string& request_id : touched) {
    RequestState& request = requests_.at(request_id);
    const bool finished = request.finished();
    if (finished) request.metrics.finished_time = now;
    if (request.params.output_kind == RequestOutputKind::kFinalOnly && !finished) continue;
    result.outputs.push_back(make_output(request, request_id, finished));
    if (finished) {
      for (const std::string& seq_id : request.seq_ids) seq_to_request_.erase(seq_id);
      requests_.erase(request_id);
    }
  }
  return result;
}

RequestOutput OutputProcessor::make_output(RequestState& request, const std::string& request_id,
                                           bool finished) {
  RequestOutput out;
  out.request_id = request_id;
  out.prompt = request.prompt;
  out.prompt_token_ids = request.prompt_token_ids;
  out.finished = finished;
  out.num_cached_tokens = request.num_cached_tokens;
  out.metrics = request.metrics;
  for (const Sequence& seq : request.sequences) {
    out.metrics.num_generation_tokens += static_cast<int64_t>(seq.token_ids.size());
  }
  const bool delta = request.params.output_kind == RequestOutputKind::kDelta;
  for (Sequence& seq : request.sequences) {
    // Streaming hold-back: the tail that could still become a stop string is not shown yet.
    size_t visible = seq.text.size();
    if (!seq.finish_reason) {
      visible -= static_cast<size_t>(core::num_stop_string_hold_back_bytes(
          seq.text, request.params.stop, request.params.include_stop_str_in_output));
    }
    visible = std::max(visible, std::min(seq.emitted_chars, seq.text.size()));
    const size_t text_from = delta ? seq.emitted_chars : 0;
    const size_t tokens_from = delta ? seq.emitted_tokens : 0;
    if (delta && !seq.finish_reason && visible == seq.emitted_chars &&
        seq.token_ids.size() == seq.emitted_tokens) {
      continue;  // nothing new for this child
    }
    CompletionOutput c;
    c.index = seq.index;
    c.text = seq.text.substr(text_from, visible - std::min(text_from, visible));
    c.token_ids.assign(seq.token_ids.begin() + static_cast<int64_t>(std::min(tokens_from, seq.token_ids.size())),
                       seq.token_ids.end());
    c.cumulative_logprob = seq.cumulative_logprob;
    if (request.params.logprobs.has_value()) {
      c.logprobs.emplace(seq.logprobs.begin() + static_cast<int64_t>(std::min(tokens_from, seq.logprobs.size())),
                         seq.logprobs.end());
    }
    c.finish_reason = seq.finish_reason;
    c.stop_reason_text = seq.stop_reason_text;
    c.stop_reason_token = seq.stop_reason_token;
    seq.emitted_chars = visible;
    seq.emitted_tokens = seq.token_ids.size();
    out.outputs.push_back(std::move(c));
  }
  return out;
}

}  // namespace vellum::engine
