#include "server/structured_request.h"

#include <fmt/format.h>

namespace vellum::server {
namespace {

using json = nlohmann::ordered_json;

// A JSON schema given as an object or as JSON text; the text of it.
std::optional<std::string> schema_text(const json& value, const char* field,
                                       std::optional<ApiError>* error) {
  if (value.is_object() || value.is_boolean()) return value.dump();
  if (value.is_string()) {
    try {
      return json::parse(value.get<std::string>()).dump();
    } catch (const json::exception& e) {
      *error = ApiError::bad_request(
          fmt::format("'{}' is not a valid JSON schema: {}", field, e.what()), field);
      return std::nullopt;
    }
  }
  *error = ApiError::invalid_request(
      fmt::format("'{}' must be a JSON schema (an object or JSON text)", field), field);
  return std::nullopt;
}

std::optional<ApiError> string_field(const json& obj, const char* key, const char* param,
                                     std::optional<std::string>* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return ApiError::invalid_request(fmt::format("'{}' must be a string", param), param);
  *out = it->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> choice_field(const json& obj, const char* key, const char* param,
                                     std::optional<std::vector<std::string>>* out) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) {
    return ApiError::invalid_request(fmt::format("'{}' must be a list of strings", param), param);
  }
  std::vector<std::string> choices;
  for (const json& c : *it) {
    if (!c.is_string()) {
      return ApiError::invalid_request(fmt::format("'{}' must be a list of strings", param), param);
    }
    choices.push_back(c.get<std::string>());
  }
  *out = std::move(choices);
  return std::nullopt;
}

std::optional<ApiError> parse_structured_object(const json& so, StructuredOutputsParams& out) {
  const char* param = "structured_outputs";
  if (!so.is_object()) return ApiError::invalid_request("'structured_outputs' must be an object", param);
  for (const auto& [key, value] : so.items()) {
    if (key == "json" || key == "regex" || key == "choice" || key == "grammar" ||
        key == "json_object" || key == "disable_any_whitespace" || value.is_null()) {
      continue;
    }
    // Backend selection has one answer here; the rest change what is generated.
    if ((key == "disable_fallback" || key == "disable_additional_properties") &&
        value.is_boolean()) {
      if (key == "disable_additional_properties" && value.get<bool>()) continue;  // the default
      if (key == "disable_fallback") continue;
      return ApiError::bad_request(
          "structured_outputs.disable_additional_properties=false is not supported: additional "
          "properties are generated only where the schema's additionalProperties allows them",
          param);
    }
    return ApiError::bad_request(
        fmt::format("structured_outputs.{} is not supported by Vellum; use json, regex, choice, "
                    "grammar, json_object or disable_any_whitespace",
                    key),
        param);
  }
  std::optional<ApiError> error;
  if (auto it = so.find("json"); it != so.end() && !it->is_null()) {
    out.json = schema_text(*it, "structured_outputs.json", &error);
    if (error) return error;
  }
  if (auto e = string_field(so, "regex", "structured_outputs.regex", &out.regex)) return e;
  if (auto e = choice_field(so, "choice", "structured_outputs.choice", &out.choice)) return e;
  if (auto e = string_field(so, "grammar", "structured_outputs.grammar", &out.grammar)) return e;
  for (const char* key : {"json_object", "disable_any_whitespace"}) {
    if (auto it = so.find(key); it != so.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        return ApiError::invalid_request(
            fmt::format("'structured_outputs.{}' must be a boolean", key), param);
      }
      (std::string(key) == "json_object" ? out.json_object : out.disable_any_whitespace) =
          it->get<bool>();
    }
  }
  return std::nullopt;
}

bool given(const json& body, const char* key) {
  const auto it = body.find(key);
  return it != body.end() && !it->is_null();
}

}  // namespace

std::optional<ApiError> parse_structured_outputs(const json& body, SamplingParams& params) {
  std::optional<StructuredOutputsParams> so;
  const bool any_guided = given(body, "guided_json") || given(body, "guided_regex") ||
                          given(body, "guided_choice") || given(body, "guided_grammar");
  if (given(body, "structured_outputs")) {
    if (any_guided) {
      return ApiError::bad_request(
          "give either 'structured_outputs' or the older guided_json / guided_regex / "
          "guided_choice / guided_grammar fields, not both",
          "structured_outputs");
    }
    so.emplace();
    if (auto e = parse_structured_object(body.at("structured_outputs"), *so)) return e;
  } else if (any_guided) {
    so.emplace();
    std::optional<ApiError> error;
    if (given(body, "guided_json")) {
      so->json = schema_text(body.at("guided_json"), "guided_json", &error);
      if (error) return error;
    }
    if (auto e = string_field(body, "guided_regex", "guided_regex", &so->regex)) return e;
    if (auto e = choice_field(body, "guided_choice", "guided_choice", &so->choice)) return e;
    if (auto e = string_field(body, "guided_grammar", "guided_grammar", &so->grammar)) return e;
  }
  if (given(body, "guided_whitespace_pattern")) {
    return ApiError::bad_request(
        "guided_whitespace_pattern is not supported; use structured_outputs."
        "disable_any_whitespace for compact JSON",
        "guided_whitespace_pattern");
  }
  if (given(body, "response_format")) {
    const json& format = body.at("response_format");
    if (!format.is_object() || !format.contains("type") || !format.at("type").is_string()) {
      return ApiError::invalid_request("'response_format' must be an object with a 'type'",
                                       "response_format");
    }
    const std::string type = format.at("type").get<std::string>();
    if (type == "json_object") {
      if (!so) so.emplace();
      so->json_object = true;
    } else if (type == "json_schema") {
      const auto js = format.find("json_schema");
      if (js == format.end() || !js->is_object() || !js->contains("schema") ||
          js->at("schema").is_null()) {
        return ApiError::bad_request(
            "response_format of type json_schema needs 'json_schema': {\"name\": ..., "
            "\"schema\": {...}}",
            "response_format");
      }
      if (js->contains("strict") && !js->at("strict").is_boolean() && !js->at("strict").is_null()) {
        return ApiError::invalid_request("'response_format.json_schema.strict' must be a boolean",
                                         "response_format");
      }
      std::optional<ApiError> error;
      auto text = schema_text(js->at("schema"), "response_format.json_schema.schema", &error);
      if (error) return error;
      if (!so) so.emplace();
      so->json = std::move(text);
    } else if (type == "structural_tag") {
      return ApiError::not_implemented(
          "response_format of type structural_tag is not supported by this server",
          "response_format");
    } else if (type != "text") {
      return ApiError::bad_request(
          fmt::format("response_format type '{}' is unknown: use text, json_object or "
                      "json_schema",
                      type),
          "response_format");
    }
  }
  if (so) params.structured_outputs = std::move(so);
  return std::nullopt;
}

// `parallel_tool_calls` after tool_choice: false is enforced by the "required" grammar (at most
// one call; vLLM's maxItems 1) and holds trivially for a named function; with "auto" the parser
// returns every call the model writes, so false is refused rather than silently ignored.
static std::optional<ApiError> parse_parallel_tool_calls(const json& body, ToolRequest& out) {
  if (!given(body, "parallel_tool_calls")) return std::nullopt;
  const json& value = body.at("parallel_tool_calls");
  if (!value.is_boolean()) {
    return ApiError::invalid_request("'parallel_tool_calls' must be true or false",
                                     "parallel_tool_calls");
  }
  out.parallel_tool_calls = value.get<bool>();
  if (!out.parallel_tool_calls && out.choice == "auto") {
    return ApiError::not_implemented(
        "parallel_tool_calls false is enforced for tool_choice \"required\" or a named function; "
        "with \"auto\" this server returns every call the model writes: use one of those, or "
        "leave parallel_tool_calls unset",
        "parallel_tool_calls");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_fields(const json& body, ToolRequest& out) {
  out = ToolRequest{};
  if (given(body, "tools")) {
    const json& tools = body.at("tools");
    if (!tools.is_array()) return ApiError::invalid_request("'tools' must be a list", "tools");
    for (const json& tool : tools) {
      const bool ok = tool.is_object() && tool.value("type", std::string("function")) == "function" &&
                      tool.contains("function") && tool.at("function").is_object() &&
                      tool.at("function").contains("name") &&
                      tool.at("function").at("name").is_string();
      if (!ok) {
        return ApiError::invalid_request(
            "'tools' must be a list of {\"type\": \"function\", \"function\": {\"name\": ..., "
            "\"parameters\": {...}}}",
            "tools");
      }
      const json& f = tool.at("function");
      if (f.contains("parameters") && !f.at("parameters").is_null() &&
          !f.at("parameters").is_object()) {
        return ApiError::invalid_request("a tool's 'parameters' must be a JSON schema object",
                                         "tools");
      }
    }
    out.tools = tools;
  }
  if (!given(body, "tool_choice")) {
    out.choice = out.tools.empty() ? "none" : "auto";
    return parse_parallel_tool_calls(body, out);
  }
  const json& choice = body.at("tool_choice");
  if (choice.is_string()) {
    out.choice = choice.get<std::string>();
    if (out.choice != "none" && out.choice != "auto" && out.choice != "required") {
      return ApiError::invalid_request(
          "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
          "\"function\": {\"name\": ...}}",
          "tool_choice");
    }
  } else if (choice.is_object() && choice.contains("function") &&
             choice.at("function").is_object() && choice.at("function").contains("name") &&
             choice.at("function").at("name").is_string()) {
    out.choice = "function";
    out.function_name = choice.at("function").at("name").get<std::string>();
  } else {
    return ApiError::invalid_request(
        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
        "\"function\": {\"name\": ...}}",
        "tool_choice");
  }
  if (auto error = parse_parallel_tool_calls(body, out)) return error;
  if ((out.choice == "required" || out.named()) && out.tools.empty()) {
    return ApiError::bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  }
  if (out.named()) {
    bool found = false;
    for (const json& tool : out.tools) found = found || tool["function"]["name"] == out.function_name;
    if (!found) {
      return ApiError::bad_request(
          fmt::format("Tool '{}' has not been passed in `tools`.", out.function_name),
          "tool_choice");
    }
  }
  return std::nullopt;
}

std::optional<std::string> tool_choice_schema(const ToolRequest& request) {
  auto parameters = [](const json& function) {
    if (function.contains("parameters") && function.at("parameters").is_object()) {
      return function.at("parameters");
    }
    return json{{"type", "object"}, {"properties", json::object()}};
  };
  if (request.named()) {
    for (const json& tool : request.tools) {
      if (tool["function"]["name"] == request.function_name) {
        return parameters(tool["function"]).dump();
      }
    }
    return std::nullopt;
  }
  if (request.choice != "required") return std::nullopt;
  // vLLM's schema: [{"name": <one of the tools>, "parameters": <its parameters>}, ...], the
  // tools' $defs hoisted to the root so their references resolve.
  json any_of = json::array();
  json defs = json::object();  // section ("$defs" / "definitions") -> name -> schema
  for (const json& tool : request.tools) {
    json params = parameters(tool["function"]);
    for (const char* section : {"$defs", "definitions"}) {
      if (params.contains(section) && params[section].is_object()) {
        for (const auto& [name, def] : params[section].items()) defs[section][name] = def;
        params.erase(section);
      }
    }
    any_of.push_back(
        {{"properties",
          {{"name", {{"type", "string"}, {"enum", json::array({tool["function"]["name"]})}}},
           {"parameters", std::move(params)}}},
         {"required", json::array({"name", "parameters"})}});
  }
  json schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(any_of)}}}};
  if (!request.parallel_tool_calls) schema["maxItems"] = 1;
  for (const auto& [section, entries] : defs.items()) schema[section] = entries;
  return schema.dump();
}

}  // namespace vellum::server
