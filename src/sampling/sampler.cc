#include "sampling/sampler.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "sampling/vec_math.h"

namespace vellum::sampling {
namespace {

void check_ids(std::span<const int32_t> ids, int64_t vocab_size, const char* what) {
  for (int32_t id : ids) {
    VELLUM_CHECK(id >= 0 && id < vocab_size, ErrorCode::kInvalidArgument,
                 "sampler: {} contains token id {} outside the vocabulary of {}; validate the "
                 "request with SamplingParams::validate_for_model first",
                 what, id, vocab_size);
  }
}

}  // namespace

int64_t num_logprob_entries(const SamplingParams& params, int64_t vocab_size) {
  if (params.logprob_token_ids.has_value()) {
    return 1 + static_cast<int64_t>(params.logprob_token_ids->size());
  }
  if (!params.logprobs.has_value()) return 0;
  const int64_t k = *params.logprobs == -1 ? vocab_size : std::min(*params.logprobs, vocab_size);
  return 1 + k;
}

void Sampler::check_row(const SamplingRow& row, int64_t vocab_size) const {
  VELLUM_CHECK(row.params != nullptr, ErrorCode::kInvalidArgument,
               "sampler: a row has no SamplingParams");
  const SamplingParams& p = *row.params;
  VELLUM_CHECK(p.is_greedy() || row.state != nullptr, ErrorCode::kInvalidArgument,
               "sampler: a randomly sampled row needs a SamplingState (its generator)");
  VELLUM_CHECK(p.repetition_penalty > 0.0, ErrorCode::kInvalidArgument,
               "sampler: repetition_penalty must be > 0, got {}; validate the params first",
               p.repetition_penalty);
  VELLUM_CHECK(row.eos_token_id < vocab_size, ErrorCode::kInvalidArgument,
               "sampler: eos_token_id {} is outside the vocabulary of {}", row.eos_token_id,
               vocab_size);
  check_ids(row.output_token_ids, vocab_size, "output_token_ids");
  if (p.repetition_penalty != 1.0) check_ids(row.prompt_token_ids, vocab_size, "prompt_token_ids");
  if (p.allowed_token_ids.has_value()) {
    VELLUM_CHECK(!p.allowed_token_ids->empty(), ErrorCode::kInvalidArgument,
                 "allowed_token_ids is not None and empty!");
    check_ids(*p.allowed_token_ids, vocab_size, "allowed_token_ids");
  }
  for (const auto& word : p.bad_words_token_ids) check_ids(word, vocab_size, "bad_words_token_ids");
  check_ids(p.stop_token_ids, vocab_size, "stop_token_ids");
  check_ids(row.extra_stop_token_ids, vocab_size, "extra_stop_token_ids");
  for (const auto& [id, bias] : p.logit_bias) {
    VELLUM_CHECK(id >= 0 && id < vocab_size, ErrorCode::kInvalidArgument,
                 "sampler: logit_bias has token id {} outside the vocabulary of {}", id,
                 vocab_size);
  }
  if (p.logprob_token_ids.has_value()) {
    check_ids(*p.logprob_token_ids, vocab_size, "logprob_token_ids");
  }
  VELLUM_CHECK(row.draft_token_id >= -1 && row.draft_token_id < vocab_size,
               ErrorCode::kInvalidArgument,
               "sampler: draft_token_id {} is outside the vocabulary of {}", row.draft_token_id,
               vocab_size);
}

void Sampler::sample(float* logits, int64_t num_rows, int64_t vocab_size,
                     std::span<SamplingRow> rows, SamplerOutput* out) {
  VELLUM_CHECK(static_cast<int64_t>(rows.size()) == num_rows, ErrorCode::kInvalidArgument,
               "sampler: {} rows of logits but {} SamplingRows; pass one per logits row", num_rows,
               rows.size());
  VELLUM_CHECK(vocab_size > 0, ErrorCode::kInvalidArgument,
               "sampler: vocab_size must be positive, got {}", vocab_size);
  num_entries_.resize(num_rows);
  for (int64_t r = 0; r < num_rows; ++r) {
    check_row(rows[r], vocab_size);
    num_entries_[r] = num_logprob_entries(*rows[r].params, vocab_size);
  }
  out->sampled_token_ids.resize(num_rows);
  out->logprobs.resize(num_entries_);

  const int num_threads = config_.num_threads > 0 ? config_.num_threads : omp_get_max_threads();
  const int used_threads = static_cast<int>(std::min<int64_t>(num_threads, num_rows));
  if (static_cast<int>(workspaces_.size()) < std::max(used_threads, 1)) {
    workspaces_.resize(std::max(used_threads, 1));
  }
  // A row cannot throw past this point: everything was checked above.
#pragma omp parallel for num_threads(std::max(used_threads, 1)) \
    schedule(dynamic, 1) if (used_threads > 1)
  for (int64_t r = 0; r < num_rows; ++r) {
    Workspace* ws = &workspaces_[omp_get_thread_num()];
    out->sampled_token_ids[r] =
        sample_one(logits + r * vocab_size, vocab_size, rows[r], r, out, ws);
  }
}

int32_t Sampler::sample_one(float* row, int64_t vocab_size, const SamplingRow& sr, int64_t r,
                            SamplerOutput* out, Workspace* ws) {
  const SamplingParams& p = *sr.params;
  const bool want_logprobs = out->logprobs.row_size(r) > 0;
  const PenaltyConfig penalties{static_cast<float>(p.presence_penalty),
                                static_cast<float>(p.frequency_penalty),
                                static_cast<float>(p.repetition_penalty)};
  // Logprobs are of the raw logits: keep a copy unless nothing below changes the row (a greedy
  // row without processors only reads it).
  const bool min_tokens_active = static_cast<int64_t>(sr.output_token_ids.size()) < p.min_tokens;
  const bool modifies_row = !p.is_greedy() || p.allowed_token_ids.has_value() ||
                            !p.bad_words_token_ids.empty() || min_tokens_active ||
                            !p.logit_bias.empty() || penalties.active();
  // The grammar mask comes first and is part of what logprobs see (vLLM masks the logits before
  // its sampler computes them).
  if (!sr.allowed_token_mask.empty()) {
    apply_token_bitmask(row, vocab_size, sr.allowed_token_mask);
  }
  const float* raw_row = row;
  if (want_logprobs && modifies_row) {
    ws->raw_row.resize(vocab_size);
    std::memcpy(ws->raw_row.data(), row, vocab_size * sizeof(float));
    raw_row = ws->raw_row.data();
  }

  if (p.allowed_token_ids.has_value()) {
    apply_allowed_token_mask(row, vocab_size, *p.allowed_token_ids, &ws->saved);
  }
  if (!p.bad_words_token_ids.empty()) {
    apply_bad_words(row, p.bad_words_token_ids, sr.output_token_ids);
  }
  if (min_tokens_active) {
    apply_min_tokens(row, static_cast<int64_t>(sr.output_token_ids.size()), p.min_tokens,
                     p.stop_token_ids, sr.extra_stop_token_ids, sr.eos_token_id);
  }
  if (!p.logit_bias.empty()) apply_logit_bias(row, p.logit_bias);
  if (penalties.active()) {
    apply_penalties(row, vocab_size, penalties, sr.prompt_token_ids, sr.output_token_ids,
                    &ws->penalties);
  }

  int32_t token_id;
  if (p.is_greedy()) {
    token_id = static_cast<int32_t>(row_argmax(row, vocab_size));
  } else {
    RandomSamplingConfig config;
    config.temperature = static_cast<float>(p.effective_temperature());
    config.min_p = static_cast<float>(p.min_p);
    config.top_k = p.top_k;
    config.top_p = static_cast<float>(p.top_p);
    Generator& generator = sr.state->generator();
    if (sr.draft_token_id >= 0) {
      const double accept_uniform = generator.next_uniform();
      token_id = rejection_sample_row(row, vocab_size, config, sr.draft_token_id, accept_uniform,
                                      generator.next_uniform(), &ws->random);
    } else {
      token_id = sample_row(row, vocab_size, config, generator.next_uniform(), &ws->random);
    }
  }

  if (want_logprobs) {
    std::span<const int32_t> listed;
    if (p.logprob_token_ids.has_value()) listed = *p.logprob_token_ids;
    fill_row_logprobs(raw_row, vocab_size, token_id, listed, r, &out->logprobs, &ws->logprobs);
  }
  return token_id;
}

}  // namespace vellum::sampling
