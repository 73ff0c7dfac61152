// CompiledGrammar and Matcher: the per-request seam between the grammar engine and the sampler.
//
// A CompiledGrammar is an Automaton plus the token masks of the states seen so far (cached per
// state, bounded); it is shared by every request with the same constraint (see GrammarCache).
// A Matcher is one sequence's position in it: sync() brings it to the state after the sequence's
// output tokens — advancing over new tokens, or replaying the output from the start when the
// output is not a continuation of what it saw (a beam that took another path, a reset cache) —
// and mask() gives the allowed tokens of the next step.
//
// Not thread-safe: the engine thread owns every matcher and compiled grammar.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/automaton.h"
#include "structured/token_vocabulary.h"

namespace vellum::structured {

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, const GrammarLimits& limits,
                  std::shared_ptr<const TokenVocabulary> vocab);

  Automaton& automaton() { return automaton_; }
  const TokenVocabulary& vocab() const { return *vocab_; }
  // The mask of `state`, from the cache or computed (and cached unless a limit cut it).
  std::span<const uint64_t> mask(int32_t state);
  size_t num_cached_masks() const { return masks_.size(); }

 private:
  Automaton automaton_;
  std::shared_ptr<const TokenVocabulary> vocab_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  uint64_t masks_epoch_ = 0;
  std::vector<uint64_t> scratch_;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<CompiledGrammar> grammar);

  // Brings the matcher to the state after `output_token_ids` (everything generated so far).
  void sync(std::span<const int32_t> output_token_ids);
  // The tokens allowed next (CompiledGrammar::vocab().num_words() words). When nothing can
  // continue (a dead state after an error), only the end tokens, so the sequence stops.
  std::span<const uint64_t> mask();
  // True when the bytes consumed so far form a complete match.
  bool accepting();
  // Non-empty after the output left the grammar or a limit cut it; says why.
  const std::string& error() const { return error_; }
  const std::string& consumed_bytes() const { return bytes_; }

 private:
  void restart();
  void advance(int32_t token_id);
  // Re-derives state_ from bytes_ after the automaton dropped its states.
  void refresh();

  std::shared_ptr<CompiledGrammar> grammar_;
  int32_t state_ = Automaton::kDead;
  uint64_t epoch_ = 0;
  std::vector<int32_t> consumed_;  // output tokens seen
  std::string bytes_;              // their bytes (end tokens add none)
  bool ended_ = false;             // an end token was consumed
  bool failed_ = false;            // the output left the grammar (or a limit cut it)
  std::string error_;
  std::vector<uint64_t> end_only_;
};

}  // namespace vellum::structured
