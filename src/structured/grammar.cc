#include "structured/grammar.h"

#include <algorithm>

#include "common/check.h"
#include "structured/utf8_ranges.h"

namespace vellum::structured {

void GrammarBuilder::count(size_t n) {
  num_elements_ += n;
  VELLUM_CHECK(num_elements_ <= limits_.max_elements, ErrorCode::kInvalidArgument,
               "the constraint is too large: it compiles to more than {} grammar elements; "
               "simplify it (fewer alternatives, smaller repetition bounds such as maxLength or "
               "{{m,n}})",
               limits_.max_elements);
}

uint32_t GrammarBuilder::new_rule(std::string name) {
  names_.push_back(std::move(name));
  alternatives_.emplace_back();
  expanded_sizes_.push_back(1);
  return static_cast<uint32_t>(names_.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, Sequence sequence) {
  count(sequence.size() + 1);
  expanded_sizes_[rule] = std::max(expanded_sizes_[rule], expanded_size(sequence));
  alternatives_[rule].push_back(std::move(sequence));
}

size_t GrammarBuilder::expanded_size(const Sequence& sequence) const {
  size_t size = 0;
  for (const Item& item : sequence) {
    size += item.is_rule ? expanded_sizes_[item.id] : 1;
    size = std::min(size, limits_.max_elements + 1);  // saturate: only the comparison matters
  }
  return size;
}

GrammarBuilder::Item GrammarBuilder::bytes(const ByteSet& set) {
  // Small grammars reuse sets; the linear scan stops mattering once the set table is large, so
  // only the most recent sets are searched.
  const size_t begin = byte_sets_.size() > 64 ? byte_sets_.size() - 64 : 0;
  for (size_t i = begin; i < byte_sets_.size(); ++i) {
    if (byte_sets_[i] == set) return Item{false, static_cast<uint32_t>(i)};
  }
  byte_sets_.push_back(set);
  return Item{false, static_cast<uint32_t>(byte_sets_.size() - 1)};
}

GrammarBuilder::Item GrammarBuilder::byte(uint8_t b) {
  ByteSet set;
  set.set(b);
  return bytes(set);
}

GrammarBuilder::Sequence GrammarBuilder::literal(std::string_view text) {
  Sequence seq;
  seq.reserve(text.size());
  for (char c : text) seq.push_back(byte(static_cast<uint8_t>(c)));
  return seq;
}

GrammarBuilder::Item GrammarBuilder::code_points(
    const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<Utf8Sequence> seqs;
  for (const auto& [lo, hi] : ranges) {
    for (Utf8Sequence& s : utf8_sequences(lo, hi)) seqs.push_back(std::move(s));
  }
  // Single bytes merge into one set; longer sequences with the same leading ranges stay apart
  // (the automaton deduplicates the stacks they lead to).
  ByteSet ascii;
  std::vector<Sequence> alternatives;
  for (const Utf8Sequence& s : seqs) {
    if (s.size() == 1) {
      for (uint32_t b = s[0].first; b <= s[0].second; ++b) ascii.set(b);
      continue;
    }
    Sequence seq;
    for (const auto& [a, z] : s) {
      ByteSet set;
      for (uint32_t b = a; b <= z; ++b) set.set(b);
      seq.push_back(bytes(set));
    }
    alternatives.push_back(std::move(seq));
  }
  if (alternatives.empty() && ascii.any()) return bytes(ascii);
  if (ascii.any()) alternatives.insert(alternatives.begin(), Sequence{bytes(ascii)});
  const uint32_t rule = new_rule("char");
  for (Sequence& s : alternatives) add_alternative(rule, std::move(s));
  return Item{true, rule};
}

GrammarBuilder::Item GrammarBuilder::star(const Sequence& body) {
  const uint32_t rule = new_rule("star");
  Sequence loop = body;
  loop.push_back(Item{true, rule});
  add_alternative(rule, std::move(loop));
  add_alternative(rule, {});
  return Item{true, rule};
}

GrammarBuilder::Item GrammarBuilder::optional(const Sequence& body) {
  const uint32_t rule = new_rule("optional");
  add_alternative(rule, body);
  add_alternative(rule, {});
  return Item{true, rule};
}

GrammarBuilder::Sequence GrammarBuilder::plus(const Sequence& body) {
  Sequence seq = body;
  seq.push_back(star(body));
  return seq;
}

GrammarBuilder::Sequence GrammarBuilder::repeat(const Sequence& body, int64_t min, int64_t max) {
  VELLUM_CHECK(min >= 0 && (max < 0 || max >= min), ErrorCode::kInvalidArgument,
               "invalid repetition bounds {{{},{}}}: the minimum must not exceed the maximum", min,
               max);
  VELLUM_CHECK(min <= limits_.max_repetition && max <= limits_.max_repetition,
               ErrorCode::kInvalidArgument,
               "repetition bound {} is too large: at most {} is supported", std::max(min, max),
               limits_.max_repetition);
  Sequence seq = exactly(body, min);
  if (max < 0) {
    seq.push_back(star(body));
  } else if (max > min) {
    const Sequence rest = at_most(body, max - min);
    seq.insert(seq.end(), rest.begin(), rest.end());
  }
  return seq;
}

GrammarBuilder::Sequence GrammarBuilder::exactly(const Sequence& body, int64_t n) {
  Sequence seq;
  if (n > kRepetitionBlock) {
    // Blocks of kRepetitionBlock copies, themselves repeated: the size grows with log(n).
    const uint32_t block = new_rule("repeat_block");
    add_alternative(block, exactly(body, kRepetitionBlock));
    seq = exactly({rule(block)}, n / kRepetitionBlock);
    n %= kRepetitionBlock;
  }
  for (int64_t i = 0; i < n; ++i) seq.insert(seq.end(), body.begin(), body.end());
  return seq;
}

GrammarBuilder::Sequence GrammarBuilder::at_most(const Sequence& body, int64_t n) {
  if (n == 0) return {};
  if (n <= kRepetitionBlock) {
    // (body (body (...)?)?)? as a chain of rules, each a tail call of the previous one.
    Item tail = optional(body);
    for (int64_t i = 1; i < n; ++i) {
      Sequence next = body;
      next.push_back(tail);
      tail = optional(next);
    }
    return {tail};
  }
  // Fewer than q whole blocks and then fewer than a block, or q blocks and then at most the
  // remainder: every count from 0 to n in one way, in a size that grows with log(n).
  const int64_t num_blocks = n / kRepetitionBlock;
  const uint32_t block = new_rule("repeat_block");
  add_alternative(block, exactly(body, kRepetitionBlock));
  Sequence fewer = at_most({rule(block)}, num_blocks - 1);
  const Sequence partial = at_most(body, kRepetitionBlock - 1);
  fewer.insert(fewer.end(), partial.begin(), partial.end());
  Sequence all = exactly({rule(block)}, num_blocks);
  const Sequence remainder = at_most(body, n % kRepetitionBlock);
  all.insert(all.end(), remainder.begin(), remainder.end());
  return {choice("repeat_at_most", {std::move(fewer), std::move(all)})};
}

GrammarBuilder::Item GrammarBuilder::choice(std::string name, std::vector<Sequence> alternatives) {
  const uint32_t rule = new_rule(std::move(name));
  for (Sequence& s : alternatives) add_alternative(rule, std::move(s));
  return Item{true, rule};
}

namespace {

// Tarjan's strongly connected components, iteratively. comp[v] is v's component id.
std::vector<uint32_t> strongly_connected(const std::vector<std::vector<uint32_t>>& adj) {
  const uint32_t n = static_cast<uint32_t>(adj.size());
  constexpr uint32_t kUnset = UINT32_MAX;
  std::vector<uint32_t> index(n, kUnset), low(n, 0), comp(n, kUnset);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, size_t>> call;  // (vertex, next edge)
  uint32_t next_index = 0;
  uint32_t next_comp = 0;
  for (uint32_t s = 0; s < n; ++s) {
    if (index[s] != kUnset) continue;
    call.emplace_back(s, 0);
    while (!call.empty()) {
      auto& [v, e] = call.back();
      if (e == 0 && index[v] == kUnset) {
        index[v] = low[v] = next_index++;
        stack.push_back(v);
        on_stack[v] = 1;
      }
      if (e < adj[v].size()) {
        const uint32_t w = adj[v][e++];
        if (index[w] == kUnset) {
          call.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = next_comp;
        } while (w != v);
        ++next_comp;
      }
      const uint32_t done = v;
      call.pop_back();
      if (!call.empty()) {
        const uint32_t parent = call.back().first;
        low[parent] = std::min(low[parent], low[done]);
      }
    }
  }
  return comp;
}

}  // namespace

Grammar GrammarBuilder::build(uint32_t root) const {
  const size_t num_rules = names_.size();
  VELLUM_ASSERT(root < num_rules);
  for (size_t r = 0; r < num_rules; ++r) {
    VELLUM_CHECK(!alternatives_[r].empty(), ErrorCode::kInvalidArgument,
                 "grammar rule '{}' is used but never defined; define it or remove the reference",
                 names_[r]);
  }
  // Productive rules (able to derive a finite string) and nullable ones (the empty string).
  std::vector<uint8_t> productive(num_rules, 0), nullable(num_rules, 0);
  auto item_productive = [&](const Item& it) {
    return it.is_rule ? productive[it.id] != 0 : byte_sets_[it.id].any();
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < num_rules; ++r) {
      for (const Sequence& alt : alternatives_[r]) {
        if (!productive[r] && std::all_of(alt.begin(), alt.end(), item_productive)) {
          productive[r] = 1;
          changed = true;
        }
        if (!nullable[r] && std::all_of(alt.begin(), alt.end(), [&](const Item& it) {
              return it.is_rule && nullable[it.id];
            })) {
          nullable[r] = 1;
          changed = true;
        }
      }
    }
  }
  // Reachable from the root through productive alternatives only (the others are dropped).
  std::vector<uint8_t> reachable(num_rules, 0);
  std::vector<uint32_t> todo{root};
  reachable[root] = 1;
  while (!todo.empty()) {
    const uint32_t r = todo.back();
    todo.pop_back();
    VELLUM_CHECK(productive[r], ErrorCode::kInvalidArgument,
                 "grammar rule '{}' can never end (each of its alternatives needs itself again or "
                 "a character no string has); give it an alternative that terminates",
                 names_[r]);
    for (const Sequence& alt : alternatives_[r]) {
      if (!std::all_of(alt.begin(), alt.end(), item_productive)) continue;
      for (const Item& it : alt) {
        if (it.is_rule && !reachable[it.id]) {
          reachable[it.id] = 1;
          todo.push_back(it.id);
        }
      }
    }
  }
  // Left recursion: an edge A -> B when B can start A's alternative (after a nullable prefix).
  // A non-tail edge pushes a stack frame, so a cycle through one grows the stack forever
  // without reading a byte. Cycles of tail calls only are harmless (the automaton dedups them).
  std::vector<std::vector<uint32_t>> adj(num_rules);
  std::vector<std::pair<uint32_t, uint32_t>> push_edges;
  for (size_t r = 0; r < num_rules; ++r) {
    if (!reachable[r]) continue;
    for (const Sequence& alt : alternatives_[r]) {
      for (size_t i = 0; i < alt.size(); ++i) {
        const Item& it = alt[i];
        if (!it.is_rule) break;
        adj[r].push_back(it.id);
        if (i + 1 < alt.size()) push_edges.emplace_back(static_cast<uint32_t>(r), it.id);
        if (!nullable[it.id]) break;
      }
    }
  }
  const std::vector<uint32_t> comp = strongly_connected(adj);
  for (const auto& [a, b] : push_edges) {
    VELLUM_CHECK(comp[a] != comp[b], ErrorCode::kInvalidArgument,
                 "grammar rule '{}' is left-recursive (it can reach itself through '{}' before "
                 "reading any character); rewrite it with repetition, e.g. "
                 "list ::= item (\",\" item)*",
                 names_[a], names_[b]);
  }

  Grammar g;
  g.byte_sets = byte_sets_;
  g.rule_names = names_;
  g.rule_alternatives.resize(num_rules);
  g.root = root;
  for (size_t r = 0; r < num_rules; ++r) {
    if (!reachable[r]) continue;
    for (const Sequence& alt : alternatives_[r]) {
      if (!std::all_of(alt.begin(), alt.end(), item_productive)) continue;
      g.rule_alternatives[r].push_back(static_cast<uint32_t>(g.elements.size()));
      for (const Item& it : alt) {
        g.elements.push_back({it.is_rule ? Grammar::Kind::kRule : Grammar::Kind::kBytes, it.id});
      }
      g.elements.push_back({Grammar::Kind::kEnd, 0});
    }
  }
  return g;
}

}  // namespace vellum::structured
