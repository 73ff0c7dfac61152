// GBNF grammars (llama.cpp's EBNF dialect, which vLLM's `grammar` / `guided_grammar` accept):
//   root  ::= "{" ws pair ("," ws pair)* "}"
//   pair  ::= [a-z]+ ":" ws ("yes" | "no")
//   ws    ::= [ \t\n]*          # comments run to the end of the line
// Strings with escapes (\n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH), character classes [a-z] and
// [^...], `.` (any character), groups, alternation and the quantifiers * + ? {m} {m,} {m,n}.
// The start rule is `root`. Errors (syntax, an undefined rule, left recursion, a rule that never
// ends) throw vellum::Error (kInvalidArgument) naming the rule or the position.
#pragma once

#include <string_view>

#include "structured/grammar.h"

namespace vellum::structured {

// The id of the `root` rule.
uint32_t compile_gbnf(GrammarBuilder& builder, std::string_view text);

}  // namespace vellum::structured
