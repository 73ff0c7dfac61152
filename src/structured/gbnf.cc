#include "structured/gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "common/check.h"
#include "structured/utf8_ranges.h"

namespace vellum::structured {
namespace {

using Sequence = GrammarBuilder::Sequence;
using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class GbnfParser {
 public:
  GbnfParser(GrammarBuilder& b, std::string_view text) : b_(b), text_(text) {}

  uint32_t parse() {
    skip();
    while (!at_end()) {
      const size_t start = pos_;
      const std::string name = parse_name();
      skip();
      if (text_.substr(pos_, 3) != "::=") {
        pos_ = start;
        fail(fmt::format("expected '::=' after the rule name '{}'", name));
      }
      pos_ += 3;
      skip();
      const uint32_t rule = rule_id(name);
      if (!defined_.insert(name).second) fail(fmt::format("rule '{}' is defined twice", name));
      for (Sequence& alt : parse_alternatives(0)) b_.add_alternative(rule, std::move(alt));
      skip();
      if (!at_end() && peek(')')) fail("unbalanced ')'");
    }
    for (const auto& [name, id] : rules_) {
      if (!defined_.contains(name)) {
        VELLUM_THROW(ErrorCode::kInvalidArgument,
                     "grammar rule '{}' is used but never defined; define it with '{} ::= ...'",
                     name, name);
      }
    }
    const auto root = rules_.find("root");
    VELLUM_CHECK(root != rules_.end(), ErrorCode::kInvalidArgument,
                 "the grammar has no 'root' rule; the start rule must be named root "
                 "(root ::= ...)");
    return root->second;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1;
    size_t column = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    VELLUM_THROW(ErrorCode::kInvalidArgument, "invalid grammar at line {}, column {}: {}", line,
                 column, what);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  void skip() {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_id(const std::string& name) {
    auto it = rules_.find(name);
    if (it == rules_.end()) it = rules_.emplace(name, b_.new_rule(name)).first;
    return it->second;
  }

  // True when the text at pos_ starts the next rule: a name followed by "::=".
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < text_.size() && is_name_char(text_[p])) ++p;
    if (p == pos_) return false;
    while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t' || text_[p] == '\n' ||
                                text_[p] == '\r')) {
      ++p;
    }
    return text_.substr(p, 3) == "::=";
  }

  std::vector<Sequence> parse_alternatives(int depth) {
    if (depth > b_.limits().max_nesting) {
      fail(fmt::format("groups nest deeper than {}", b_.limits().max_nesting));
    }
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_sequence(depth));
    while (peek('|')) {
      ++pos_;
      skip();
      alternatives.push_back(parse_sequence(depth));
    }
    return alternatives;
  }

  Sequence parse_sequence(int depth) {
    Sequence seq;
    while (true) {
      skip();
      if (at_end() || peek('|') || peek(')') || at_rule_start()) break;
      Sequence atom = parse_atom(depth);
      atom = parse_postfix(std::move(atom));
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
    return seq;
  }

  Sequence parse_postfix(Sequence atom) {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '*') {
        ++pos_;
        atom = {b_.star(atom)};
      } else if (c == '+') {
        ++pos_;
        atom = b_.plus(atom);
      } else if (c == '?') {
        ++pos_;
        atom = {b_.optional(atom)};
      } else if (c == '{') {
        ++pos_;
        auto number = [&]() -> std::optional<int64_t> {
          skip();
          const size_t start = pos_;
          int64_t v = 0;
          while (!at_end() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            v = std::min<int64_t>(v * 10 + (text_[pos_] - '0'), int64_t{1} << 40);
            ++pos_;
          }
          skip();
          if (pos_ == start) return std::nullopt;
          return v;
        };
        const auto lo = number();
        if (!lo) fail("expected a number after '{'");
        int64_t hi = *lo;
        if (peek(',')) {
          ++pos_;
          const auto h = number();
          hi = h ? *h : -1;
        }
        if (!peek('}')) fail("expected '}'");
        ++pos_;
        if (hi >= 0 && hi < *lo) fail("the repetition minimum exceeds the maximum");
        try {
          atom = b_.repeat(atom, *lo, hi);
        } catch (const Error& e) {
          fail(e.what());
        }
      } else {
        break;
      }
    }
    return atom;
  }

  uint32_t hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      if (at_end()) fail("truncated escape");
      const char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        fail("bad hex digit in escape");
      }
    }
    if (v > kMaxCodePoint) fail("code point out of range");
    return v;
  }

  // One character of a string or class, escapes decoded.
  uint32_t parse_char() {
    if (at_end()) fail("unexpected end of grammar");
    if (text_[pos_] == '\\') {
      ++pos_;
      if (at_end()) fail("trailing backslash");
      const char c = text_[pos_++];
      switch (c) {
        case 'n': return '\n';
        case 't': return '\t';
        case 'r': return '\r';
        case '\\': return '\\';
        case '"': return '"';
        case '\'': return '\'';
        case '[': return '[';
        case ']': return ']';
        case '-': return '-';
        case '^': return '^';
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default: fail(fmt::format("unknown escape \\{}", c));
      }
    }
    uint32_t cp = 0;
    if (!next_code_point(text_, &pos_, &cp)) fail("ill-formed UTF-8");
    return cp;
  }

  Sequence parse_atom(int depth) {
    const char c = text_[pos_];
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (!peek('"')) {
        if (at_end()) fail("unterminated string");
        append_utf8(parse_char(), &bytes);
      }
      ++pos_;
      return b_.literal(bytes);
    }
    if (c == '[') {
      ++pos_;
      bool negated = false;
      if (peek('^')) {
        negated = true;
        ++pos_;
      }
      Ranges ranges;
      while (!peek(']')) {
        if (at_end()) fail("unterminated character class");
        const uint32_t lo = parse_char();
        uint32_t hi = lo;
        if (peek('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
          ++pos_;
          hi = parse_char();
          if (hi < lo) fail("bad character range (the end is before the start)");
        }
        ranges.emplace_back(lo, hi);
      }
      ++pos_;
      if (negated) {
        std::sort(ranges.begin(), ranges.end());
        Ranges inverse;
        uint32_t next = 0;
        for (const auto& [lo, hi] : ranges) {
          if (lo > next) inverse.emplace_back(next, lo - 1);
          next = std::max(next, hi + 1);
        }
        if (next <= kMaxCodePoint) inverse.emplace_back(next, kMaxCodePoint);
        ranges = std::move(inverse);
      }
      if (ranges.empty()) fail("the character class matches no character");
      return {b_.code_points(ranges)};
    }
    if (c == '.') {
      ++pos_;
      return {b_.code_points({{0, kMaxCodePoint}})};
    }
    if (c == '(') {
      ++pos_;
      skip();
      std::vector<Sequence> alternatives = parse_alternatives(depth + 1);
      skip();
      if (!peek(')')) fail("missing ')'");
      ++pos_;
      if (alternatives.size() == 1) return std::move(alternatives[0]);
      return {b_.choice("group", std::move(alternatives))};
    }
    if (is_name_char(c)) return {b_.rule(rule_id(parse_name()))};
    fail(fmt::format("unexpected character '{}'", c));
  }

  GrammarBuilder& b_;
  std::string_view text_;
  size_t pos_ = 0;
  std::map<std::string, uint32_t> rules_;
  std::set<std::string> defined_;
};

}  // namespace

uint32_t compile_gbnf(GrammarBuilder& builder, std::string_view text) {
  return GbnfParser(builder, text).parse();
}

}  // namespace vellum::structured
