// Regular expressions (the Python `re` subset vLLM users write for `regex` / `guided_regex` and
// JSON Schema `pattern`) compiled into a GrammarBuilder: literals, `.`, classes with ranges and
// negation, \d \w \s (and their negations), \n \t \xHH \uHHHH escapes, groups (capturing,
// (?:...), named), alternation, and the quantifiers * + ? {n} {n,} {n,m} (lazy forms match the
// same strings). The pattern must match the whole output (a leading ^ and trailing $ are
// accepted and mean the same). Backreferences, lookaround, word boundaries, inline flags and
// Unicode property classes are refused with an error naming them.
#pragma once

#include <string_view>

#include "structured/grammar.h"

namespace vellum::structured {

struct RegexOptions {
  // The pattern describes the characters of a JSON string (schema `pattern`): '"', '\' and
  // control characters are produced as their JSON escapes.
  bool json_string = false;
};

// Throws vellum::Error (kInvalidArgument) naming the problem and its position.
GrammarBuilder::Sequence compile_regex(GrammarBuilder& builder, std::string_view pattern,
                                       const RegexOptions& options = {});

// The characters of one JSON string character: a code point in `ranges`, written as itself or,
// for '"', '\' and control characters, as its JSON escape.
GrammarBuilder::Item json_string_chars(GrammarBuilder& builder,
                                       std::vector<std::pair<uint32_t, uint32_t>> ranges);

}  // namespace vellum::structured
