// Automaton: runs a Grammar one byte at a time as a set of parse stacks (the pushdown automaton
// of llama.cpp's GBNF engine), with every stack and every set of stacks interned so that a state
// is a small integer and transitions are cached per (state, byte).
//
// A stack is a chain of interned nodes {position, parent}: the top node's position is always a
// byte-set element (stacks are expanded eagerly), the other nodes hold where to resume after the
// rule below returns. Node 0 is the empty stack: a state holding it accepts. A rule reference in
// the last position of an alternative replaces its frame instead of pushing one (a tail call), so
// repetition does not grow the stack.
//
// Bounds (GrammarLimits): stacks per state, expansion work per byte and stack depth are capped —
// a transition that would exceed them is treated as dead and reported through limit_error() —
// and the number of cached states is capped: reset_if_full() drops every state (the epoch
// changes) and users re-derive theirs from the bytes they consumed.
//
// Not thread-safe: one engine thread drives it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "structured/grammar.h"

namespace vellum::structured {

class Automaton {
 public:
  static constexpr int32_t kDead = -1;

  Automaton(Grammar grammar, const GrammarLimits& limits);

  // The state before any byte (after a reset, a new id).
  int32_t initial_state();
  // The state after `b`, or kDead when no stack can read it. Cached.
  int32_t step(int32_t state, uint8_t b) {
    State& s = states_[static_cast<size_t>(state)];
    if (s.transitions == nullptr) {
      s.transitions = std::make_unique<std::array<int32_t, 256>>();
      s.transitions->fill(kUnknown);
    }
    int32_t& next = (*s.transitions)[b];
    if (next == kUnknown) next = compute_step(state, b);
    return next;
  }
  bool accepting(int32_t state) const { return states_[static_cast<size_t>(state)].accepting; }

  // Drops every cached state when there are more than the limit; returns true when it did (the
  // epoch changed and state ids taken before are invalid).
  bool reset_if_full();
  uint64_t epoch() const { return epoch_; }
  size_t num_states() const { return states_.size(); }
  // Set once a transition was cut by a limit; a user-facing explanation.
  const std::string& limit_error() const { return limit_error_; }
  uint64_t num_limit_hits() const { return num_limit_hits_; }
  const Grammar& grammar() const { return grammar_; }
  const GrammarLimits& limits() const { return limits_; }

 private:
  static constexpr int32_t kUnknown = -2;
  struct Node {
    uint32_t pos;
    uint32_t parent;
    uint32_t depth;
  };
  struct State {
    std::vector<uint32_t> nodes;  // sorted top nodes (0: the empty stack)
    bool accepting = false;
    std::unique_ptr<std::array<int32_t, 256>> transitions;  // lazily, kUnknown until computed
  };
  struct VectorHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  int32_t compute_step(int32_t state, uint8_t b);
  // Expands (pos, parent) into top nodes appended to scratch_out_; false when a limit was hit.
  bool expand(uint32_t pos, uint32_t parent);
  // Interns a node; UINT32_MAX when the stack would be too deep.
  uint32_t intern_node(uint32_t pos, uint32_t parent);
  int32_t intern_state(std::vector<uint32_t> nodes);
  void clear();
  void fail(std::string message);

  Grammar grammar_;
  GrammarLimits limits_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, int32_t, VectorHash> state_index_;
  int32_t initial_ = kDead;
  uint64_t epoch_ = 0;
  std::string limit_error_;
  uint64_t num_limit_hits_ = 0;
  // Scratch of compute_step.
  std::vector<uint32_t> scratch_out_;
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
};

}  // namespace vellum::structured
