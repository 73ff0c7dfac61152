// Helpers of the structured-output tests: full-match checks through the automaton, and random
// generation through the token masks of a synthetic vocabulary.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/constraint.h"

namespace vellum::structured::testing {

// True when the automaton of `grammar` accepts exactly `text`.
inline bool full_match(Automaton& automaton, std::string_view text) {
  int32_t s = automaton.initial_state();
  for (char c : text) {
    if (s == Automaton::kDead) return false;
    s = automaton.step(s, static_cast<uint8_t>(c));
  }
  return s != Automaton::kDead && automaton.accepting(s);
}

inline bool full_match(const ConstraintSpec& spec, std::string_view text) {
  Automaton a(compile_constraint(spec), GrammarLimits{});
  return full_match(a, text);
}

inline ConstraintSpec regex_spec(std::string pattern) {
  ConstraintSpec s;
  s.kind = ConstraintKind::kRegex;
  s.text = std::move(pattern);
  return s;
}
inline ConstraintSpec schema_spec(std::string schema) {
  ConstraintSpec s;
  s.kind = ConstraintKind::kJsonSchema;
  s.text = std::move(schema);
  return s;
}
inline ConstraintSpec grammar_spec(std::string gbnf) {
  ConstraintSpec s;
  s.kind = ConstraintKind::kGrammar;
  s.text = std::move(gbnf);
  return s;
}

// A byte-level vocabulary: every single byte, common JSON pieces, words, and an end token (id 0,
// no bytes) — enough to spell anything, with multi-byte tokens that cross grammar boundaries.
inline std::shared_ptr<TokenVocabulary> synthetic_vocab() {
  std::vector<std::string> tokens = {""};  // 0: the end token
  for (int b = 1; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
  for (const char* piece :
       {"{\"", "\":", "\": ", "\",", "\", \"", "}", "},", "[{", "}]", "true", "false", "null",
        " \"", "name", "age", "\"name\"", "12", "345", "-1", ".5", "e+", "abc", " the", "ing",
        "\n  ", "\\n", "\\\"", "\\u00", "\xC3\xA9", "\xE2\x82", "\xAC", "2024-", "01", "-0",
        "T12:", "00:00Z", "yes", "no", "maybe", "<tool_call>", "</tool_call>"}) {
    tokens.emplace_back(piece);
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  return std::make_shared<TokenVocabulary>(std::move(tokens), std::vector<int32_t>{0}, n + 5);
}

// Samples tokens uniformly among the allowed ones until an end token or max_tokens; returns the
// text and whether it ended with the end token.
inline std::pair<std::string, bool> random_generation(const std::shared_ptr<CompiledGrammar>& g,
                                                      std::mt19937_64& rng, int max_tokens) {
  Matcher m(g);
  std::vector<int32_t> output;
  for (int step = 0; step < max_tokens; ++step) {
    m.sync(output);
    const auto mask = m.mask();
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < static_cast<int32_t>(mask.size() * 64); ++id) {
      if ((mask[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1) allowed.push_back(id);
    }
    EXPECT_FALSE(allowed.empty());
    if (allowed.empty()) break;
    // Favour the end token a little so that outputs finish.
    int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (allowed.front() == 0 && std::uniform_int_distribution<int>(0, 3)(rng) == 0) pick = 0;
    if (g->vocab().is_end_token(pick)) {
      EXPECT_TRUE(m.accepting());
      return {m.consumed_bytes(), true};
    }
    output.push_back(pick);
  }
  m.sync(output);
  return {m.consumed_bytes(), false};
}

}  // namespace vellum::structured::testing
