// Grammar: the one form every constraint (JSON Schema, regex, choice, GBNF) compiles to — a
// context-free grammar over bytes. A rule is a list of alternatives; an alternative a sequence
// of byte sets and references to rules. UTF-8 characters are spelled as byte sequences
// (utf8_ranges.h), so the automaton that runs it (automaton.h) steps one byte at a time, the unit
// in which tokens are matched.
//
// Compilers build a grammar with GrammarBuilder, which checks on build() what the automaton needs
// to stay bounded: every rule defined and able to end (productive), no left recursion that would
// grow the stack without consuming a byte, and the size within GrammarLimits. Each failure throws
// vellum::Error (kInvalidArgument) naming the rule and the fix.
#pragma once

#include <bitset>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::structured {

using ByteSet = std::bitset<256>;

// Bounds on compilation and on each step, so a pathological constraint fails fast with a clear
// message instead of taking unbounded time or memory.
struct GrammarLimits {
  size_t max_elements = 1u << 20;       // grammar size after repetition counts are expanded
  int64_t max_repetition = 1 << 19;     // the largest {m,n} / maxLength / maxItems bound
  int max_nesting = 128;                // schema / regex / grammar nesting depth
  size_t max_stacks_per_state = 4096;   // parse stacks alive at once (ambiguity)
  size_t max_closure_steps = 1u << 16;  // work to expand one byte's successors
  size_t max_stack_depth = 1024;        // nesting of the generated text
  size_t max_states = 1u << 15;         // cached automaton states before the cache is reset
  size_t max_cached_masks = 512;        // token masks cached per grammar
};

// A compiled grammar: rules flattened into one element array. An alternative is a run of
// elements ending with kEnd; a position is an index into `elements`.
struct Grammar {
  enum class Kind : uint8_t { kEnd, kBytes, kRule };
  struct Element {
    Kind kind;
    uint32_t id;  // kBytes: index into byte_sets; kRule: rule index
  };
  std::vector<Element> elements;
  std::vector<std::vector<uint32_t>> rule_alternatives;  // [rule] start positions
  std::vector<std::string> rule_names;                   // [rule]
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;
};

class GrammarBuilder {
 public:
  struct Item {
    bool is_rule;
    uint32_t id;  // byte set or rule
  };
  using Sequence = std::vector<Item>;

  explicit GrammarBuilder(const GrammarLimits& limits = {}) : limits_(limits) {}

  // A rule with no alternatives yet (defined later with add_alternative; one left undefined is an
  // error on build()). Names are for messages only; they need not be unique.
  uint32_t new_rule(std::string name);
  void add_alternative(uint32_t rule, Sequence sequence);
  bool has_alternatives(uint32_t rule) const { return !alternatives_[rule].empty(); }
  const std::string& rule_name(uint32_t rule) const { return names_[rule]; }

  Item bytes(const ByteSet& set);
  Item byte(uint8_t b);
  Item rule(uint32_t id) const { return Item{true, id}; }
  // The bytes of `text` in order.
  Sequence literal(std::string_view text);
  // One UTF-8 character whose code point lies in one of `ranges` ([lo, hi], inclusive, sorted or
  // not; surrogates are skipped). An empty set gives a rule that matches nothing (an error on
  // build() if it is reachable and nothing else is).
  Item code_points(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

  // Repetition helpers; each returns one item (a new rule) except repeat, a sequence.
  Item star(const Sequence& body);                                  // body*
  Item optional(const Sequence& body);                              // body?
  Sequence plus(const Sequence& body);                              // body body*
  // body{min,max}; max < 0: unbounded. Throws when the bound exceeds the limits.
  Sequence repeat(const Sequence& body, int64_t min, int64_t max);
  // A rule whose alternatives are the given sequences.
  Item choice(std::string name, std::vector<Sequence> alternatives);

  // Elements of `sequence` with every rule written out (its longest alternative; recursion and
  // saturation make it an estimate). Repetitions are built in logarithmic size; a regex checks
  // this against max_elements so that a pattern denoting a huge language ((a{5000}){5000}) is
  // still refused.
  size_t expanded_size(const Sequence& sequence) const;

  const GrammarLimits& limits() const { return limits_; }
  size_t num_elements() const { return num_elements_; }

  // Checks and flattens; see the file comment for what is checked.
  Grammar build(uint32_t root) const;

 private:
  // Repetitions beyond this many copies are built from blocks of it (size ~ log of the count).
  static constexpr int64_t kRepetitionBlock = 64;
  Sequence exactly(const Sequence& body, int64_t n);
  Sequence at_most(const Sequence& body, int64_t n);
  void count(size_t n);

  GrammarLimits limits_;
  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> alternatives_;
  std::vector<ByteSet> byte_sets_;
  std::vector<size_t> expanded_sizes_;  // [rule]
  size_t num_elements_ = 0;
};

}  // namespace vellum::structured
