// The structured-output and tool fields of a request (vLLM's precedence, spec §5):
//   - `structured_outputs` {json, regex, choice, grammar, json_object, disable_any_whitespace},
//     or the older `guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`;
//   - `response_format` {"type": "text" | "json_object" | "json_schema"} on top: json_object sets
//     structured_outputs.json_object, json_schema sets structured_outputs.json to its "schema";
//   - chat `tools` and `tool_choice` ("none", "auto", "required" or a named function). The last
//     two are enforced with a JSON schema (tool_choice_schema) that replaces structured_outputs.json;
//     `parallel_tool_calls: false` bounds "required" to one call in that schema (a named function
//     is one call already; "auto" parses what the model writes, so false is refused there).
// Errors are 400s naming the field; the schema itself is compiled (and its errors reported) when
// the engine takes the request.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "server/api_error.h"
#include "vellum/sampling_params.h"

namespace vellum::server {

struct ToolRequest {
  // "none", "auto", "required" or "function" (a named function). Without tool_choice: "auto"
  // when tools are given, else "none" (vLLM's default).
  std::string choice = "none";
  std::string function_name;  // choice "function"
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // validated function tools
  // OpenAI's parallel_tool_calls (default true): false allows at most one call.
  bool parallel_tool_calls = true;
  bool named() const { return choice == "function"; }
};

// Sets params.structured_outputs from the body (structured_outputs, guided_*, response_format).
std::optional<ApiError> parse_structured_outputs(const nlohmann::ordered_json& body,
                                                 SamplingParams& params);

// Reads `tools`, `tool_choice` and `parallel_tool_calls`.
std::optional<ApiError> parse_tool_fields(const nlohmann::ordered_json& body, ToolRequest& out);

// The JSON schema (as text) that enforces tool_choice "required" (a non-empty array of
// {"name", "parameters"} calls of the given tools, of one call with parallel_tool_calls false) or
// a named function (its parameters); none for "none" and "auto".
std::optional<std::string> tool_choice_schema(const ToolRequest& tools);

}  // namespace vellum::server
