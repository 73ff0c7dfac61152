// The lexical pieces of JSON as grammar rules, shared by every schema of one compilation:
// whitespace and separators (per JsonGrammarOptions::any_whitespace), strings, numbers, any
// value / object / array, and a given JSON value as a literal (with the same whitespace freedom
// between its tokens). Each rule is made once, on first use.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "structured/grammar.h"

namespace vellum::structured {

class JsonPieces {
 public:
  using Sequence = GrammarBuilder::Sequence;
  using Item = GrammarBuilder::Item;

  JsonPieces(GrammarBuilder& builder, bool any_whitespace)
      : b_(builder), any_whitespace_(any_whitespace) {}

  Sequence ws();
  Sequence comma();
  Sequence colon();
  Item string_char();       // one character of a JSON string, escapes included
  uint32_t string_rule();   // any JSON string
  uint32_t integer_rule();  // any JSON integer (at most kMaxIntegerDigits digits)
  uint32_t number_rule();   // any JSON number
  uint32_t value_rule();    // any JSON value
  uint32_t object_any_rule();
  uint32_t array_any_rule();
  // "{" (string ":" value ("," string ":" value)*)? "}" with `value` for each member.
  Sequence object_of(const Sequence& value);
  // "[" item ("," item){min-1,max-1} "]"; max < 0: unbounded.
  Sequence array_of(const Sequence& item, int64_t min, int64_t max);
  // A JSON string (quotes included) that is none of `excluded`. Names are matched as JSON writes
  // them with the fewest escapes; another spelling of an excluded name ("\u0061" for "a") passes.
  Sequence string_not_in(const std::vector<std::string>& excluded);
  // Exactly `value` (objects keep their key order).
  Sequence literal(const nlohmann::ordered_json& value);

 private:
  Sequence integer_body();

  GrammarBuilder& b_;
  bool any_whitespace_;
  uint32_t ws_ = UINT32_MAX;
  uint32_t char_ = UINT32_MAX;
  uint32_t string_ = UINT32_MAX;
  uint32_t integer_ = UINT32_MAX;
  uint32_t number_ = UINT32_MAX;
  uint32_t value_ = UINT32_MAX;
  uint32_t object_any_ = UINT32_MAX;
  uint32_t array_any_ = UINT32_MAX;
};

inline void append(GrammarBuilder::Sequence& to, const GrammarBuilder::Sequence& what) {
  to.insert(to.end(), what.begin(), what.end());
}

}  // namespace vellum::structured
