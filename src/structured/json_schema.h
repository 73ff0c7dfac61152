// JSON Schema (the subset structured-output users write, by hand or through pydantic / zod)
// compiled into a GrammarBuilder: type (one or a list), enum, const, object properties with
// required and optional ones (generated in the schema's order), additionalProperties (false,
// true or a schema; absent means none, as vLLM's strict default), arrays with items and
// minItems / maxItems, strings with minLength / maxLength, pattern (full match) and the formats
// date, time, date-time, uuid, email, ipv4, uri; integer, number, boolean, null; anyOf / oneOf
// (as alternatives), allOf of one schema, and $ref to "#", "#/$defs/…" or "#/definitions/…"
// (recursion included). Annotations (title, description, default, examples, …) are ignored;
// every other keyword is refused with an error naming it and where it is.
#pragma once

#include <nlohmann/json.hpp>

#include "structured/grammar.h"

namespace vellum::structured {

struct JsonGrammarOptions {
  // Whitespace the model may put between tokens (a space, or a newline and indentation);
  // false: none, with ", " and ": " as separators (vLLM's disable_any_whitespace).
  bool any_whitespace = true;
};

// The root rule of `schema`. Throws vellum::Error (kInvalidArgument) naming the problem.
uint32_t compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                             const JsonGrammarOptions& options = {});

// Any JSON object (response_format json_object).
uint32_t compile_json_object(GrammarBuilder& builder, const JsonGrammarOptions& options = {});

}  // namespace vellum::structured
