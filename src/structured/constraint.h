// The entry point of the structured-output layer: a constraint as requested (vLLM's
// StructuredOutputsParams: json / json_object / regex / choice / grammar) compiled to a Grammar,
// and GrammarCache, which keeps compiled grammars (with their automaton and mask caches) by the
// constraint's text, so repeated requests with one schema compile once.
#pragma once

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace vellum::structured {

enum class ConstraintKind { kJsonSchema, kJsonObject, kRegex, kChoice, kGrammar };

struct ConstraintSpec {
  ConstraintKind kind = ConstraintKind::kJsonObject;
  std::string text;                  // kJsonSchema: the schema as JSON; kRegex; kGrammar (GBNF)
  std::vector<std::string> choices;  // kChoice
  bool any_whitespace = true;        // JSON kinds: see JsonGrammarOptions
  bool spec_defaults = false;        // kJsonSchema: see JsonGrammarOptions
  bool ignore_unenforceable = false; // kJsonSchema: see JsonGrammarOptions
  // A stable key for caching.
  std::string cache_key() const;
};

// Throws vellum::Error (kInvalidArgument) naming the problem (bad JSON, an unsupported keyword,
// a regex or grammar syntax error, a limit exceeded).
// `warnings` (may be null) receives the keywords accepted without being enforced.
Grammar compile_constraint(const ConstraintSpec& spec, const GrammarLimits& limits = {},
                           std::vector<std::string>* warnings = nullptr);

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenVocabulary> vocab, GrammarLimits limits = {},
               size_t capacity = 64)
      : vocab_(std::move(vocab)), limits_(limits), capacity_(capacity) {}

  // The compiled grammar of `spec`, compiled now or taken from the cache (least recently used
  // entries are dropped beyond the capacity; matchers keep theirs alive).
  std::shared_ptr<CompiledGrammar> get(const ConstraintSpec& spec);
  const TokenVocabulary& vocab() const { return *vocab_; }
  size_t size() const { return entries_.size(); }

 private:
  std::shared_ptr<const TokenVocabulary> vocab_;
  GrammarLimits limits_;
  size_t capacity_;
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> lru_;  // front: newest
  std::unordered_map<std::string, decltype(lru_)::iterator> entries_;
};

}  // namespace vellum::structured
