#include "structured/automaton.h"

#include <fmt/format.h>

#include <algorithm>

namespace vellum::structured {
namespace {

uint64_t node_key(uint32_t pos, uint32_t parent) {
  return (static_cast<uint64_t>(pos) << 32) | parent;
}

}  // namespace

size_t Automaton::VectorHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull ^ v.size();
  for (uint32_t x : v) {
    h ^= x;
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return static_cast<size_t>(h);
}

Automaton::Automaton(Grammar grammar, const GrammarLimits& limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  clear();
}

void Automaton::clear() {
  nodes_.clear();
  node_index_.clear();
  states_.clear();
  state_index_.clear();
  nodes_.push_back(Node{0, 0, 0});  // the empty stack
  initial_ = kDead;
}

bool Automaton::reset_if_full() {
  if (states_.size() <= limits_.max_states) return false;
  clear();
  ++epoch_;
  return true;
}

void Automaton::fail(std::string message) {
  ++num_limit_hits_;
  if (limit_error_.empty()) limit_error_ = std::move(message);
}

uint32_t Automaton::intern_node(uint32_t pos, uint32_t parent) {
  const auto [it, inserted] =
      node_index_.try_emplace(node_key(pos, parent), static_cast<uint32_t>(nodes_.size()));
  if (inserted) {
    const uint32_t depth = nodes_[parent].depth + 1;
    if (depth > limits_.max_stack_depth) {
      node_index_.erase(it);
      return UINT32_MAX;
    }
    nodes_.push_back(Node{pos, parent, depth});
  }
  return it->second;
}

bool Automaton::expand(uint32_t pos, uint32_t parent) {
  const auto& elements = grammar_.elements;
  work_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    const auto [p, par] = work_.back();
    work_.pop_back();
    if (!visited_.insert(node_key(p, par)).second) continue;
    if (visited_.size() > limits_.max_closure_steps) {
      fail(fmt::format("the constraint needs more than {} expansion steps for one character "
                       "(it is too ambiguous); simplify it",
                       limits_.max_closure_steps));
      return false;
    }
    const Grammar::Element& e = elements[p];
    switch (e.kind) {
      case Grammar::Kind::kEnd:
        if (par == 0) {
          scratch_out_.push_back(0);
        } else {
          work_.emplace_back(nodes_[par].pos, nodes_[par].parent);
        }
        break;
      case Grammar::Kind::kBytes: {
        const uint32_t node = intern_node(p, par);
        if (node == UINT32_MAX) {
          fail(fmt::format("the output nests deeper than {} levels of the constraint",
                           limits_.max_stack_depth));
          return false;
        }
        scratch_out_.push_back(node);
        break;
      }
      case Grammar::Kind::kRule: {
        const uint32_t next = p + 1;
        uint32_t frame = par;
        if (elements[next].kind != Grammar::Kind::kEnd) {
          frame = intern_node(next, par);
          if (frame == UINT32_MAX) {
            fail(fmt::format("the output nests deeper than {} levels of the constraint",
                             limits_.max_stack_depth));
            return false;
          }
        }
        for (uint32_t start : grammar_.rule_alternatives[e.id]) work_.emplace_back(start, frame);
        break;
      }
    }
  }
  return true;
}

int32_t Automaton::intern_state(std::vector<uint32_t> nodes) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (nodes.empty()) return kDead;
  if (nodes.size() > limits_.max_stacks_per_state) {
    fail(fmt::format("the constraint is too ambiguous: more than {} ways to parse the output "
                     "at once; simplify it",
                     limits_.max_stacks_per_state));
    return kDead;
  }
  if (states_.size() >= 4 * limits_.max_states + 1024) {
    fail(fmt::format("the constraint reached more than {} automaton states within one step",
                     4 * limits_.max_states));
    return kDead;
  }
  const auto it = state_index_.find(nodes);
  if (it != state_index_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(states_.size());
  State s;
  s.accepting = nodes.front() == 0;
  s.nodes = nodes;
  states_.push_back(std::move(s));
  state_index_.emplace(std::move(nodes), id);
  return id;
}

int32_t Automaton::initial_state() {
  if (initial_ != kDead) return initial_;
  scratch_out_.clear();
  visited_.clear();
  bool ok = true;
  for (uint32_t start : grammar_.rule_alternatives[grammar_.root]) {
    ok = ok && expand(start, 0);
  }
  initial_ = ok ? intern_state(scratch_out_) : kDead;
  return initial_;
}

int32_t Automaton::compute_step(int32_t state, uint8_t b) {
  scratch_out_.clear();
  visited_.clear();
  // expand() grows nodes_ but never states_, so `tops` stays valid.
  const std::vector<uint32_t>& tops = states_[static_cast<size_t>(state)].nodes;
  for (size_t i = 0; i < tops.size(); ++i) {
    const uint32_t node = tops[i];
    if (node == 0) continue;
    const Node n = nodes_[node];
    const Grammar::Element& e = grammar_.elements[n.pos];
    if (!grammar_.byte_sets[e.id].test(b)) continue;
    if (!expand(n.pos + 1, n.parent)) return kDead;
  }
  return intern_state(scratch_out_);
}

}  // namespace vellum::structured
