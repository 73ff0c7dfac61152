// The keyword policy of the JSON Schema compiler, and the rewriting that brings a schema to the
// flat form it compiles: a list of alternatives (a disjunction), each without allOf / anyOf /
// oneOf / dependencies and with the draft-specific spellings made canonical.
//
// Keyword policy (README "Structured outputs: keyword policy"): a keyword is
//   - enforced: kEnforcedKeywords below, compiled into the grammar;
//   - not expressible: kUnenforceableKeywords (uniqueItems, not, if, contains, …), refused with an
//     error naming it, or, with JsonGrammarOptions::ignore_unenforceable, accepted with a warning;
//   - anything else is an annotation or unknown and ignored, as JSON Schema requires of a
//     validator (title, description, $schema, $id, id, examples, default, readOnly, x-*, …).
//
// Rewriting (each step keeps the set of valid instances, except where noted in the README):
//   draft-4 boolean exclusiveMinimum/Maximum -> the numeric forms; `items` as a list ->
//   prefixItems + items (from additionalItems); dependencies -> dependentRequired /
//   dependentSchemas; allOf and $ref with sibling keywords -> the intersection (merge());
//   anyOf / oneOf with siblings -> the siblings intersected with each alternative (oneOf is
//   compiled as anyOf: the grammar does not enforce that exactly one alternative matches);
//   dependentRequired / dependentSchemas on A -> two alternatives: A absent, or A present with
//   the dependency. $ref siblings are ignored under drafts 3-7, as those drafts say.
//
// Not thread-safe; one per compilation. Subschemas it creates live as long as it does.
#pragma once

#include <nlohmann/json.hpp>

#include <deque>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace vellum::structured {

using OrderedJson = nlohmann::ordered_json;

extern const std::set<std::string> kEnforcedKeywords;
extern const std::set<std::string> kUnenforceableKeywords;

class SchemaNormalizer {
 public:
  // `root` must outlive the normalizer. Unenforceable keywords are refused unless
  // `ignore_unenforceable`, when each is recorded in warnings().
  SchemaNormalizer(const OrderedJson& root, bool ignore_unenforceable);

  // The alternatives of `schema` (at `path`, for messages) in flat form; empty when it matches
  // nothing (`false`, contradictory intersections). An alternative may be a bare {"$ref": …}
  // (compiled as a rule, which keeps recursion finite). Throws vellum::Error naming the keyword
  // and path for what it cannot express.
  std::vector<const OrderedJson*> alternatives(const OrderedJson& schema, const std::string& path);

  // The schema a "$ref" points to: "#", "#/json/pointer" (with ~0 ~1 and %xx escapes), or either
  // after the root's own $id. Throws for remote references and anchors.
  const OrderedJson& resolve(const std::string& ref, const std::string& path) const;

  // Where a $ref's target is, for messages: the reference itself, or for a link made while
  // merging, the path of the subschema it stands for.
  std::string path_of(const std::string& ref, const std::string& fallback) const;

  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  using Alternatives = std::vector<const OrderedJson*>;

  Alternatives expand(const OrderedJson& schema, const std::string& path, int depth);
  void check_keywords(const OrderedJson& schema, const std::string& path);
  // The schema with draft-specific spellings made canonical (itself when nothing changes).
  const OrderedJson& canonical(const OrderedJson& schema);
  // Intersection of two flat schemas; nullopt when provably empty.
  std::optional<OrderedJson> merge(const OrderedJson& a, const OrderedJson& b,
                                   const std::string& path);
  // A {"$ref"} standing for `subschema` (which must outlive the normalizer), and `schema`'s
  // validation keywords with every subschema so replaced.
  OrderedJson link(const OrderedJson& subschema, const std::string& path);
  OrderedJson linked(const OrderedJson& schema, const std::string& path);
  Alternatives cross(const Alternatives& left, const Alternatives& right, const std::string& path,
                     int depth);
  const OrderedJson* keep(OrderedJson value);

  const OrderedJson& root_;
  bool ignore_unenforceable_;
  bool legacy_ref_siblings_;  // drafts 3-7: keywords beside $ref are ignored
  std::string root_id_;
  std::deque<OrderedJson> arena_;  // schemas created by rewriting (stable addresses)
  std::vector<const OrderedJson*> linked_;                  // [link index]
  std::vector<std::string> linked_paths_;                   // [link index]
  std::unordered_map<const OrderedJson*, size_t> link_index_;
  std::vector<std::string> warnings_;
};

// True when the schema object has a keyword that constrains instances (not only annotations).
bool has_validation_keywords(const OrderedJson& schema);

}  // namespace vellum::structured
