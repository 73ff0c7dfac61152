// Parser: tokens → AST for the Jinja subset chat templates use.
//
// Statements: if/elif/else, for (tuple targets, `if` filter, else, recursive), set (expression,
// namespace attribute, block form), macro, call blocks, filter blocks, break/continue,
// generation blocks, raw. Expressions follow Jinja's precedence: conditional < or < and < not <
// comparisons/in < + - < ~ < * / // % < ** < unary - + < filters, tests, calls, attributes.
#pragma once

#include <string_view>

#include "tokenizer/jinja/ast.h"

namespace vellum::jinja {

// Throws vellum::Error(kInvalidArgument) "template syntax error at line L, column C: …" for
// malformed templates: unclosed blocks, stray end tags, unknown statements, bad expressions.
Body parse_template(std::string_view source);

}  // namespace vellum::jinja
