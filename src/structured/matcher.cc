#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

#include "common/logging.h"

namespace vellum::structured {

CompiledGrammar::CompiledGrammar(Grammar grammar, const GrammarLimits& limits,
                                 std::shared_ptr<const TokenVocabulary> vocab)
    : automaton_(std::move(grammar), limits), vocab_(std::move(vocab)) {}

std::span<const uint64_t> CompiledGrammar::mask(int32_t state) {
  if (masks_epoch_ != automaton_.epoch()) {
    masks_.clear();
    masks_epoch_ = automaton_.epoch();
  }
  if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  scratch_.resize(vocab_->num_words());
  const bool complete = vocab_->mask_for_state(automaton_, state, scratch_.data());
  if (!complete) return scratch_;
  if (masks_.size() >= automaton_.limits().max_cached_masks) masks_.clear();
  return masks_.emplace(state, scratch_).first->second;
}

Matcher::Matcher(std::shared_ptr<CompiledGrammar> grammar) : grammar_(std::move(grammar)) {
  restart();
  const TokenVocabulary& vocab = grammar_->vocab();
  end_only_.assign(vocab.num_words(), 0);
  for (int32_t id : vocab.end_token_ids()) end_only_[id >> 6] |= uint64_t{1} << (id & 63);
}

void Matcher::restart() {
  Automaton& a = grammar_->automaton();
  a.reset_if_full();
  epoch_ = a.epoch();
  state_ = a.initial_state();
  consumed_.clear();
  bytes_.clear();
  ended_ = false;
  failed_ = state_ == Automaton::kDead;
  error_.clear();
  if (failed_) error_ = "the constraint cannot start: " + a.limit_error();
}

void Matcher::refresh() {
  Automaton& a = grammar_->automaton();
  if ((a.reset_if_full() || epoch_ != a.epoch()) && !failed_) {
    epoch_ = a.epoch();
    state_ = a.initial_state();
    for (size_t i = 0; i < bytes_.size() && state_ != Automaton::kDead; ++i) {
      state_ = a.step(state_, static_cast<uint8_t>(bytes_[i]));
    }
    if (state_ == Automaton::kDead) {
      failed_ = true;
      error_ = "the constraint could not be replayed: " + a.limit_error();
    }
  }
}

void Matcher::advance(int32_t token_id) {
  consumed_.push_back(token_id);
  const TokenVocabulary& vocab = grammar_->vocab();
  if (ended_ || failed_) return;
  Automaton& a = grammar_->automaton();
  if (vocab.is_end_token(token_id)) {
    ended_ = true;
    if (!a.accepting(state_)) error_ = "the output ended before the constraint was complete";
    return;
  }
  if (token_id < 0 || token_id >= vocab.num_tokens()) {
    state_ = Automaton::kDead;
    failed_ = true;
    error_ = "token " + std::to_string(token_id) + " is outside the vocabulary";
    return;
  }
  const std::string& piece = vocab.token_bytes(token_id);
  for (char c : piece) {
    state_ = a.step(state_, static_cast<uint8_t>(c));
    if (state_ == Automaton::kDead) {
      failed_ = true;
      error_ = a.limit_error().empty()
                   ? "token " + std::to_string(token_id) + " does not fit the constraint"
                   : a.limit_error();
      return;
    }
  }
  bytes_ += piece;
}

void Matcher::sync(std::span<const int32_t> output_token_ids) {
  const bool continues =
      consumed_.size() <= output_token_ids.size() &&
      std::equal(consumed_.begin(), consumed_.end(), output_token_ids.begin());
  if (!continues) restart();
  refresh();
  for (size_t i = consumed_.size(); i < output_token_ids.size(); ++i) {
    advance(output_token_ids[i]);
  }
}

bool Matcher::accepting() {
  refresh();
  return !failed_ && grammar_->automaton().accepting(state_);
}

std::span<const uint64_t> Matcher::mask() {
  refresh();
  if (ended_ || failed_) return end_only_;
  std::span<const uint64_t> m = grammar_->mask(state_);
  if (std::all_of(m.begin(), m.end(), [](uint64_t w) { return w == 0; })) {
    if (error_.empty()) {
      error_ = "no token of the vocabulary can continue the constrained output";
      VELLUM_LOG_WARN("structured output: {}; ending the sequence", error_);
    }
    return end_only_;
  }
  return m;
}

}  // namespace vellum::structured
