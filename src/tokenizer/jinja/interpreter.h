// Interpreter: renders a parsed template body. One Renderer per render() call; it owns the
// variable frames and the values created during that render, so concurrent renders of the same
// syntax tree share nothing mutable.
#pragma once

#include <string>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"

namespace vellum::jinja {

// context must be an object (or undefined for none); its entries become top-level variables,
// shadowing the globals (range, dict, namespace, raise_exception, strftime_now).
std::string render_body(const Body& body, const Value& context, const RenderOptions& options);

}  // namespace vellum::jinja
