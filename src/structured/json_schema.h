// JSON Schema compiled into a GrammarBuilder. What is enforced, refused and ignored is the keyword
// policy of json_schema_normalize.h (and README "Structured outputs: keyword policy"): every
// validation keyword is either in the grammar or refused with an error naming it and where it is;
// annotations and unknown keywords are ignored, as JSON Schema requires of a validator.
//
// Enforced: type (one or a list); enum and const of any JSON value; object properties (generated
// in the schema's order), required, additionalProperties, patternProperties, propertyNames,
// minProperties / maxProperties, dependentRequired / dependencies / dependentSchemas; arrays with
// items, prefixItems / items as a list / additionalItems, minItems / maxItems; strings with
// minLength / maxLength, pattern and the formats date, time, date-time, uuid, email, ipv4, ipv6,
// uri, hostname (other formats are annotations, as JSON Schema 2019-09 and later make them);
// integer and number with minimum / maximum / exclusiveMinimum / exclusiveMaximum (draft-4
// boolean and draft-6 numeric forms) and multipleOf; anyOf / oneOf / allOf also beside sibling
// keywords (the intersection); $ref to any "#/json/pointer" of the document, recursion included.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "structured/grammar.h"

namespace vellum::structured {

struct JsonGrammarOptions {
  // Whitespace the model may put between tokens (a space, or a newline and indentation);
  // false: none, with ", " and ": " as separators (vLLM's disable_any_whitespace).
  bool any_whitespace = true;
  // false (vLLM / XGrammar strict mode, the server's default): an absent additionalProperties
  // means none, a schema without `type` takes the type its keywords imply, and `pattern` must
  // match the whole string. true: JSON Schema's own rules (additional properties allowed, an
  // untyped schema admits every type, `pattern` matches anywhere in the string).
  bool spec_defaults = false;
  // Keywords no grammar can express (uniqueItems, not, if, contains, …): refused (false) or
  // accepted without being enforced, each noted in `warnings` (true).
  bool ignore_unenforceable = false;
  std::vector<std::string>* warnings = nullptr;  // not owned; may be null
};

// The root rule of `schema`. Throws vellum::Error (kInvalidArgument) naming the problem.
uint32_t compile_json_schema(GrammarBuilder& builder, const nlohmann::ordered_json& schema,
                             const JsonGrammarOptions& options = {});

// Any JSON object (response_format json_object).
uint32_t compile_json_object(GrammarBuilder& builder, const JsonGrammarOptions& options = {});

}  // namespace vellum::structured
