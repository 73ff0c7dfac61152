// A small JSON Schema validator for the subset the grammar engine compiles, used as the oracle of
// the property tests (an output must parse as JSON and validate against its schema).
#pragma once

#include <nlohmann/json.hpp>

#include <regex>
#include <string>

namespace vellum::structured::testing {

inline size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

inline bool validate_json(const nlohmann::json& v, const nlohmann::json& schema,
                          const nlohmann::json& root, std::string* why) {
  using json = nlohmann::json;
  auto no = [&](const std::string& reason) {
    *why = reason + " at " + v.dump();
    return false;
  };
  if (schema.is_boolean()) return schema.get<bool>() || no("false schema");
  if (schema.contains("$ref")) {
    const std::string ref = schema["$ref"];
    if (ref == "#") return validate_json(v, root, root, why);
    const size_t slash = ref.rfind('/');
    const std::string section = ref.substr(2, slash - 2);
    return validate_json(v, root[section][ref.substr(slash + 1)], root, why);
  }
  if (schema.contains("const") && v != schema["const"]) return no("const");
  if (schema.contains("enum")) {
    bool found = false;
    for (const json& e : schema["enum"]) found = found || e == v;
    if (!found) return no("enum");
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!schema.contains(key)) continue;
    bool ok = false;
    for (const json& s : schema[key]) {
      std::string ignored;
      ok = ok || validate_json(v, s, root, &ignored);
    }
    if (!ok) return no(key);
  }
  if (schema.contains("allOf")) {
    for (const json& s : schema["allOf"]) {
      if (!validate_json(v, s, root, why)) return false;
    }
  }
  if (schema.contains("type")) {
    std::vector<std::string> types;
    if (schema["type"].is_string()) {
      types.push_back(schema["type"]);
    } else {
      for (const json& t : schema["type"]) types.push_back(t);
    }
    bool ok = false;
    for (const std::string& t : types) {
      ok = ok || (t == "string" && v.is_string()) || (t == "integer" && v.is_number_integer()) ||
           (t == "number" && v.is_number()) || (t == "boolean" && v.is_boolean()) ||
           (t == "null" && v.is_null()) || (t == "array" && v.is_array()) ||
           (t == "object" && v.is_object());
    }
    if (!ok) return no("type");
  }
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (schema.contains("minLength") && utf8_length(s) < schema["minLength"].get<size_t>()) {
      return no("minLength");
    }
    if (schema.contains("maxLength") && utf8_length(s) > schema["maxLength"].get<size_t>()) {
      return no("maxLength");
    }
    if (schema.contains("pattern") &&
        !std::regex_match(s, std::regex(schema["pattern"].get<std::string>()))) {
      return no("pattern");
    }
  }
  if (v.is_array()) {
    if (schema.contains("minItems") && v.size() < schema["minItems"].get<size_t>()) {
      return no("minItems");
    }
    if (schema.contains("maxItems") && v.size() > schema["maxItems"].get<size_t>()) {
      return no("maxItems");
    }
    if (schema.contains("items")) {
      for (const json& item : v) {
        if (!validate_json(item, schema["items"], root, why)) return false;
      }
    }
  }
  if (v.is_object()) {
    if (schema.contains("required")) {
      for (const json& name : schema["required"]) {
        if (!v.contains(name.get<std::string>())) return no("required " + name.dump());
      }
    }
    const json props = schema.value("properties", json::object());
    for (const auto& [key, value] : v.items()) {
      if (props.contains(key)) {
        if (!validate_json(value, props[key], root, why)) return false;
      } else if (schema.contains("additionalProperties")) {
        if (!validate_json(value, schema["additionalProperties"], root, why)) return false;
      } else if (!props.empty()) {
        return no("additional property " + key);
      }
    }
  }
  return true;
}

}  // namespace vellum::structured::testing
