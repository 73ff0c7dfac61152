#include "structured/constraint.h"

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/regex.h"

namespace vellum::structured {

std::string ConstraintSpec::cache_key() const {
  std::string key = std::to_string(static_cast<int>(kind)) + (any_whitespace ? "w" : "c") +
                    (spec_defaults ? "s" : "") + (ignore_unenforceable ? "i" : "") + ":";
  if (kind == ConstraintKind::kChoice) {
    for (const std::string& c : choices) key += std::to_string(c.size()) + ":" + c;
  } else {
    key += text;
  }
  return key;
}

Grammar compile_constraint(const ConstraintSpec& spec, const GrammarLimits& limits,
                           std::vector<std::string>* warnings) {
  GrammarBuilder b(limits);
  const JsonGrammarOptions json_options{spec.any_whitespace, spec.spec_defaults,
                                        spec.ignore_unenforceable, warnings};
  switch (spec.kind) {
    case ConstraintKind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(spec.text);
      } catch (const nlohmann::json::exception& e) {
        VELLUM_THROW(ErrorCode::kInvalidArgument, "the JSON schema is not valid JSON: {}",
                     e.what());
      }
      return b.build(compile_json_schema(b, schema, json_options));
    }
    case ConstraintKind::kJsonObject:
      return b.build(compile_json_object(b, json_options));
    case ConstraintKind::kRegex: {
      const uint32_t root = b.new_rule("root");
      b.add_alternative(root, compile_regex(b, spec.text));
      return b.build(root);
    }
    case ConstraintKind::kChoice: {
      VELLUM_CHECK(!spec.choices.empty(), ErrorCode::kInvalidArgument,
                   "choice must be a non-empty list of strings");
      const uint32_t root = b.new_rule("root");
      for (const std::string& c : spec.choices) b.add_alternative(root, b.literal(c));
      return b.build(root);
    }
    case ConstraintKind::kGrammar:
      return b.build(compile_gbnf(b, spec.text));
  }
  VELLUM_THROW(ErrorCode::kInternal, "unknown constraint kind");
}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const ConstraintSpec& spec) {
  const std::string key = spec.cache_key();
  if (auto it = entries_.find(key); it != entries_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  auto compiled =
      std::make_shared<CompiledGrammar>(compile_constraint(spec, limits_), limits_, vocab_);
  lru_.emplace_front(key, compiled);
  entries_[key] = lru_.begin();
  while (entries_.size() > capacity_) {
    entries_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

}  // namespace vellum::structured
