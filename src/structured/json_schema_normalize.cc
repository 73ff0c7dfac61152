#include "structured/json_schema_normalize.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "common/check.h"

namespace vellum::structured {

const std::set<std::string> kEnforcedKeywords = {
    "type", "enum", "const", "properties", "required", "additionalProperties",
    "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
    "dependentSchemas", "dependencies", "items", "prefixItems", "additionalItems", "minItems",
    "maxItems", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref"};

const std::set<std::string> kUnenforceableKeywords = {
    "uniqueItems", "contains", "minContains", "maxContains", "not", "if",
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"};

namespace {

constexpr int kMaxCombinationDepth = 32;
constexpr size_t kMaxAlternatives = 64;

const OrderedJson kAnything = OrderedJson::object();
// $ref of a link to a subschema (see SchemaNormalizer::link); no JSON pointer starts so.
constexpr const char* kLinkPrefix = "vellum-link:";

[[noreturn]] void refuse(const std::string& path, const std::string& what) {
  VELLUM_THROW(ErrorCode::kInvalidArgument, "JSON schema at '{}': {}", path, what);
}

// True for keyword values that constrain nothing (`uniqueItems: false`, …).
bool is_no_op(const std::string& key, const OrderedJson& value) {
  return key == "uniqueItems" && value.is_boolean() && !value.get<bool>();
}

bool is_pure_ref(const OrderedJson& schema) {
  if (!schema.is_object() || !schema.contains("$ref")) return false;
  for (const auto& [key, value] : schema.items()) {
    if (key != "$ref" && kEnforcedKeywords.contains(key)) return false;
  }
  return true;
}

std::vector<std::string> type_list(const OrderedJson& type) {
  if (type.is_string()) return {type.get<std::string>()};
  std::vector<std::string> out;
  if (type.is_array()) {
    for (const OrderedJson& t : type) {
      if (t.is_string()) out.push_back(t.get<std::string>());
    }
  }
  return out;
}

std::string percent_decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() &&
        std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string unescape_pointer_token(std::string token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
      out += token[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += token[i];
    }
  }
  return out;
}

// The intersection of two `type` values; empty when they share none.
OrderedJson intersect_types(const OrderedJson& a, const OrderedJson& b) {
  const std::vector<std::string> left = type_list(a);
  const std::vector<std::string> right = type_list(b);
  auto has = [](const std::vector<std::string>& list, const std::string& t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  OrderedJson out = OrderedJson::array();
  for (const std::string& t : left) {
    if (has(right, t)) {
      out.push_back(t);
    } else if (t == "integer" && has(right, "number")) {
      out.push_back("integer");
    } else if (t == "number" && has(right, "integer")) {
      out.push_back("integer");
    }
  }
  return out;
}

OrderedJson all_of(const OrderedJson& a, const OrderedJson& b) {
  if (a == b) return a;
  return OrderedJson{{"allOf", OrderedJson::array({a, b})}};
}

}  // namespace

bool has_validation_keywords(const OrderedJson& schema) {
  if (!schema.is_object()) return schema.is_boolean() && !schema.get<bool>();
  for (const auto& [key, value] : schema.items()) {
    if (kEnforcedKeywords.contains(key)) return true;
    if (kUnenforceableKeywords.contains(key) && !is_no_op(key, value)) return true;
  }
  return false;
}

SchemaNormalizer::SchemaNormalizer(const OrderedJson& root, bool ignore_unenforceable)
    : root_(root), ignore_unenforceable_(ignore_unenforceable), legacy_ref_siblings_(false) {
  if (!root.is_object()) return;
  if (root.contains("$schema") && root.at("$schema").is_string()) {
    const std::string dialect = root.at("$schema").get<std::string>();
    for (const char* legacy : {"draft-03", "draft-04", "draft-06", "draft-07"}) {
      legacy_ref_siblings_ = legacy_ref_siblings_ || dialect.find(legacy) != std::string::npos;
    }
  }
  for (const char* key : {"$id", "id"}) {
    if (root.contains(key) && root.at(key).is_string()) {
      root_id_ = root.at(key).get<std::string>();
      if (!root_id_.empty() && root_id_.back() == '#') root_id_.pop_back();
      break;
    }
  }
}

std::vector<const OrderedJson*> SchemaNormalizer::alternatives(const OrderedJson& schema,
                                                               const std::string& path) {
  return expand(schema, path, 0);
}

const OrderedJson* SchemaNormalizer::keep(OrderedJson value) {
  arena_.push_back(std::move(value));
  return &arena_.back();
}

void SchemaNormalizer::check_keywords(const OrderedJson& schema, const std::string& path) {
  for (const auto& [key, value] : schema.items()) {
    if (!kUnenforceableKeywords.contains(key) || is_no_op(key, value)) continue;
    if (key == "minContains" || key == "maxContains") {
      if (!schema.contains("contains")) continue;  // without `contains` they mean nothing
    }
    if (ignore_unenforceable_) {
      warnings_.push_back(fmt::format("the keyword '{}' at '{}' is not enforced", key, path));
      continue;
    }
    refuse(path, fmt::format("the keyword '{}' cannot be expressed by a grammar and is refused "
                             "(structured outputs would not guarantee it); remove it from the "
                             "schema and check it on the output instead",
                             key));
  }
}

const OrderedJson& SchemaNormalizer::canonical(const OrderedJson& schema) {
  const bool boolean_exclusive =
      (schema.contains("exclusiveMinimum") && schema.at("exclusiveMinimum").is_boolean()) ||
      (schema.contains("exclusiveMaximum") && schema.at("exclusiveMaximum").is_boolean());
  const bool list_items = schema.contains("items") && schema.at("items").is_array();
  if (!boolean_exclusive && !list_items && !schema.contains("dependencies")) return schema;
  OrderedJson out = schema;
  for (const auto& [exclusive, inclusive] :
       {std::pair<std::string, std::string>{"exclusiveMinimum", "minimum"},
        {"exclusiveMaximum", "maximum"}}) {
    if (!out.contains(exclusive) || !out.at(exclusive).is_boolean()) continue;
    // Draft 4: a boolean that makes minimum/maximum exclusive.
    if (out.at(exclusive).get<bool>() && out.contains(inclusive)) {
      out[exclusive] = out.at(inclusive);
      out.erase(inclusive);
    } else {
      out.erase(exclusive);
    }
  }
  if (list_items) {
    // Drafts 4-2019: `items` as a list is 2020-12's prefixItems; additionalItems the rest.
    OrderedJson prefix = out.at("items");  // a copy: adding a key moves the members
    out["prefixItems"] = std::move(prefix);
    out.erase("items");
    if (out.contains("additionalItems")) {
      out["items"] = OrderedJson(out.at("additionalItems"));
      out.erase("additionalItems");
    }
  } else {
    out.erase("additionalItems");  // without a list of items it constrains nothing
  }
  if (out.contains("dependencies")) {
    // A copy: adding keys to `out` moves its members.
    const OrderedJson dependencies = out.at("dependencies");
    out.erase("dependencies");
    if (dependencies.is_object()) {
      for (const auto& [name, dependency] : dependencies.items()) {
        out[dependency.is_array() ? "dependentRequired" : "dependentSchemas"][name] = dependency;
      }
    }
  }
  return *keep(std::move(out));
}

SchemaNormalizer::Alternatives SchemaNormalizer::expand(const OrderedJson& schema,
                                                        const std::string& path, int depth) {
  if (depth > kMaxCombinationDepth) {
    refuse(path, fmt::format("allOf / $ref / anyOf combine deeper than {} levels (a recursive "
                             "$ref beside other keywords?); this is not supported",
                             kMaxCombinationDepth));
  }
  if (schema.is_boolean()) {
    if (schema.get<bool>()) return {&kAnything};
    return {};
  }
  if (!schema.is_object()) refuse(path, "a schema must be an object or a boolean");
  check_keywords(schema, path);
  const OrderedJson& s = canonical(schema);
  static const std::set<std::string> kCombinators = {
      "$ref", "allOf", "anyOf", "oneOf", "dependentRequired", "dependentSchemas"};
  bool combined = false;
  for (const std::string& key : kCombinators) combined = combined || s.contains(key);
  if (!combined) return {&s};
  if (s.contains("$ref") && (legacy_ref_siblings_ || is_pure_ref(s))) {
    if (is_pure_ref(s)) return {&s};
    return {keep(OrderedJson{{"$ref", s.at("$ref")}})};
  }
  OrderedJson base = OrderedJson::object();
  for (const auto& [key, value] : s.items()) {
    if (kEnforcedKeywords.contains(key) && !kCombinators.contains(key)) base[key] = value;
  }
  Alternatives result = {base.empty() ? &kAnything : keep(std::move(base))};
  if (s.contains("$ref")) {
    result = cross(result, {keep(OrderedJson{{"$ref", s.at("$ref")}})}, path, depth);
  }
  for (const char* key : {"allOf", "anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const OrderedJson& list = s.at(key);
    if (!list.is_array() || list.empty()) refuse(path, fmt::format("'{}' must be a non-empty array", key));
    const std::string list_path = fmt::format("{}/{}", path, key);
    if (std::string(key) == "allOf") {
      for (size_t i = 0; i < list.size(); ++i) {
        result = cross(result, expand(list[i], fmt::format("{}/{}", list_path, i), depth + 1),
                       path, depth);
      }
    } else {
      Alternatives options;
      for (size_t i = 0; i < list.size(); ++i) {
        for (const OrderedJson* o : expand(list[i], fmt::format("{}/{}", list_path, i), depth + 1)) {
          options.push_back(o);
        }
      }
      result = cross(result, options, path, depth);
    }
  }
  for (const char* key : {"dependentRequired", "dependentSchemas"}) {
    if (!s.contains(key)) continue;
    if (!s.at(key).is_object()) refuse(path, fmt::format("'{}' must be an object", key));
    for (const auto& [name, dependency] : s.at(key).items()) {
      // Either the property is absent, or it is present with what it depends on.
      const OrderedJson* absent = keep(OrderedJson{{"properties", {{name, false}}}});
      Alternatives present;
      if (std::string(key) == "dependentRequired") {
        OrderedJson required = OrderedJson::array({name});
        for (const OrderedJson& other : dependency) required.push_back(other);
        present = {keep(OrderedJson{{"required", required}})};
      } else {
        present = cross({keep(OrderedJson{{"required", {name}}})},
                        expand(dependency, fmt::format("{}/{}/{}", path, key, name), depth + 1),
                        path, depth);
      }
      present.insert(present.begin(), absent);
      result = cross(result, present, path, depth);
    }
  }
  return result;
}

SchemaNormalizer::Alternatives SchemaNormalizer::cross(const Alternatives& left,
                                                       const Alternatives& right,
                                                       const std::string& path, int depth) {
  Alternatives out;
  for (const OrderedJson* l : left) {
    for (const OrderedJson* r : right) {
      if (!has_validation_keywords(*l)) {
        out.push_back(r);
      } else if (!has_validation_keywords(*r)) {
        out.push_back(l);
      } else if (is_pure_ref(*l) || is_pure_ref(*r)) {
        // Intersecting with a reference: inline its target (one level; deeper references stay).
        // The left side's members stay first (allOf order is the order members are written).
        const bool left_is_ref = is_pure_ref(*l);
        const std::string target = (left_is_ref ? *l : *r).at("$ref").get<std::string>();
        const Alternatives inlined = expand(resolve(target, path), path_of(target, path), depth + 1);
        for (const OrderedJson* o : left_is_ref ? cross(inlined, {r}, path, depth + 1)
                                                : cross({l}, inlined, path, depth + 1)) {
          out.push_back(o);
        }
      } else if (auto merged = merge(*l, *r, path)) {
        out.push_back(keep(std::move(*merged)));
      }
      if (out.size() > kMaxAlternatives) {
        refuse(path, fmt::format("anyOf / oneOf / dependencies combine into more than {} "
                                 "alternatives; simplify the schema",
                                 kMaxAlternatives));
      }
    }
  }
  return out;
}

OrderedJson SchemaNormalizer::link(const OrderedJson& subschema, const std::string& path) {
  if (!subschema.is_object() || is_pure_ref(subschema)) return subschema;
  auto [it, inserted] = link_index_.emplace(&subschema, linked_.size());
  if (inserted) {
    linked_.push_back(&subschema);
    linked_paths_.push_back(path);
  }
  return OrderedJson{{"$ref", fmt::format("{}{}", kLinkPrefix, it->second)}};
}

OrderedJson SchemaNormalizer::linked(const OrderedJson& schema, const std::string& path) {
  OrderedJson out = OrderedJson::object();
  for (const auto& [key, value] : schema.items()) {
    if (!kEnforcedKeywords.contains(key)) continue;
    if (key == "properties" || key == "patternProperties") {
      OrderedJson& members = out[key] = OrderedJson::object();
      if (value.is_object()) {
        for (const auto& [name, sub] : value.items()) {
          members[name] = link(sub, fmt::format("{}/{}/{}", path, key, name));
        }
      }
    } else if (key == "prefixItems" && value.is_array()) {
      OrderedJson& items = out[key] = OrderedJson::array();
      for (const OrderedJson& sub : value) {
        items.push_back(link(sub, fmt::format("{}/{}/{}", path, key, items.size())));
      }
    } else if (key == "items" || key == "additionalProperties" || key == "propertyNames") {
      out[key] = link(value, fmt::format("{}/{}", path, key));
    } else {
      out[key] = value;
    }
  }
  return out;
}

std::optional<OrderedJson> SchemaNormalizer::merge(const OrderedJson& a_schema,
                                                   const OrderedJson& b_schema,
                                                   const std::string& path) {
  // Subschemas become links to the originals: the merge stays small, and a recursive schema
  // met again through a link compiles to the rule made the first time.
  const OrderedJson a = linked(a_schema, path);
  const OrderedJson b = linked(b_schema, path);
  OrderedJson out = a;
  static const std::set<std::string> kLowerBounds = {"minimum", "exclusiveMinimum", "minLength",
                                                     "minItems", "minProperties"};
  static const std::set<std::string> kUpperBounds = {"maximum", "exclusiveMaximum", "maxLength",
                                                     "maxItems", "maxProperties"};
  for (const auto& [key, value] : b.items()) {
    if (!kEnforcedKeywords.contains(key)) continue;
    if (!out.contains(key)) {
      out[key] = value;
      continue;
    }
    OrderedJson& mine = out[key];
    if (mine == value) continue;
    if (key == "type") {
      mine = intersect_types(mine, value);
      if (mine.empty()) return std::nullopt;
    } else if (key == "enum") {
      OrderedJson kept = OrderedJson::array();
      for (const OrderedJson& v : mine) {
        if (value.is_array() && std::find(value.begin(), value.end(), v) != value.end()) kept.push_back(v);
      }
      if (kept.empty()) return std::nullopt;
      mine = kept;
    } else if (key == "const") {
      return std::nullopt;  // two different constants
    } else if (key == "required") {
      for (const OrderedJson& name : value) {
        if (std::find(mine.begin(), mine.end(), name) == mine.end()) mine.push_back(name);
      }
    } else if (key == "properties" || key == "patternProperties" || key == "dependentRequired") {
      for (const auto& [name, sub] : value.items()) {
        if (!mine.contains(name)) {
          mine[name] = sub;
        } else if (key == "dependentRequired") {
          for (const OrderedJson& other : sub) mine[name].push_back(other);
        } else {
          mine[name] = all_of(mine[name], sub);
        }
      }
    } else if (key == "prefixItems") {
      for (size_t i = 0; i < value.size(); ++i) {
        if (i < mine.size()) {
          mine[i] = all_of(mine[i], value[i]);
        } else {
          mine.push_back(value[i]);
        }
      }
    } else if (key == "items" || key == "additionalProperties" || key == "propertyNames") {
      mine = all_of(mine, value);
    } else if (kLowerBounds.contains(key) && mine.is_number() && value.is_number()) {
      if (value.get<double>() > mine.get<double>()) mine = value;
    } else if (kUpperBounds.contains(key) && mine.is_number() && value.is_number()) {
      if (value.get<double>() < mine.get<double>()) mine = value;
    } else if (key == "multipleOf" && mine.is_number_integer() && value.is_number_integer()) {
      mine = std::lcm(mine.get<int64_t>(), value.get<int64_t>());
    } else {
      refuse(path, fmt::format("two different values of '{}' ({} and {}) in an intersection "
                               "(allOf, $ref or anyOf beside sibling keywords) are not supported",
                               key, mine.dump(), value.dump()));
    }
  }
  // A property declared on one side only is also subject to the other side's
  // additionalProperties.
  for (const auto& [side, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
    if (!other->contains("additionalProperties") || !side->contains("properties")) continue;
    const OrderedJson& other_properties =
        other->contains("properties") ? other->at("properties") : kAnything;
    for (const auto& [name, sub] : side->at("properties").items()) {
      if (other_properties.contains(name)) continue;
      out["properties"][name] = all_of(out["properties"][name], other->at("additionalProperties"));
    }
  }
  return out;
}

std::string SchemaNormalizer::path_of(const std::string& ref, const std::string& fallback) const {
  if (!ref.starts_with(kLinkPrefix)) return ref.empty() ? fallback : ref;
  return linked_paths_.at(std::stoul(ref.substr(std::string(kLinkPrefix).size())));
}

const OrderedJson& SchemaNormalizer::resolve(const std::string& ref, const std::string& path) const {
  if (ref.starts_with(kLinkPrefix)) return *linked_.at(std::stoul(ref.substr(std::string(kLinkPrefix).size())));
  const size_t hash = ref.find('#');
  const std::string base = ref.substr(0, hash);
  if (!base.empty() && base != root_id_) {
    refuse(path, fmt::format("'$ref' {:?} refers to another document; only local references "
                             "(\"#\", \"#/$defs/NAME\", any \"#/json/pointer\") are supported: "
                             "inline the schema under $defs",
                             ref));
  }
  const std::string fragment = hash == std::string::npos ? "" : percent_decode(ref.substr(hash + 1));
  if (fragment.empty()) return root_;
  if (fragment[0] != '/') {
    refuse(path, fmt::format("'$ref' {:?} names an anchor; only local references (\"#\", "
                             "\"#/$defs/NAME\", any \"#/json/pointer\") are supported",
                             ref));
  }
  const OrderedJson* at = &root_;
  size_t start = 1;
  while (true) {
    const size_t slash = fragment.find('/', start);
    const std::string token = unescape_pointer_token(fragment.substr(start, slash - start));
    if (at->is_object() && at->contains(token)) {
      at = &at->at(token);
    } else if (at->is_array() && !token.empty() &&
               std::all_of(token.begin(), token.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }) &&
               std::stoul(token) < at->size()) {
      at = &(*at)[std::stoul(token)];
    } else {
      refuse(path, fmt::format("'$ref' {:?} does not resolve: no {:?} in the document", ref, token));
    }
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return *at;
}

}  // namespace vellum::structured
