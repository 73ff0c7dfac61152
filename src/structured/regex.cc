#include "structured/regex.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/check.h"
#include "structured/utf8_ranges.h"

namespace vellum::structured {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
using Sequence = GrammarBuilder::Sequence;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges negate(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalize(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

bool contains(const Ranges& r, uint32_t cp) {
  return std::any_of(r.begin(), r.end(), [&](const auto& p) { return p.first <= cp && cp <= p.second; });
}

Ranges minus(const Ranges& r, const Ranges& removed) {
  Ranges out;
  const Ranges keep = negate(removed);
  for (const auto& [a, b] : normalize(r)) {
    for (const auto& [c, d] : keep) {
      const uint32_t lo = std::max(a, c);
      const uint32_t hi = std::min(b, d);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  }
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

class RegexParser {
 public:
  RegexParser(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options)
      : b_(b), text_(pattern), options_(options) {}

  Sequence parse() {
    if (peek('^')) ++pos_;
    Sequence seq = parse_alternation(0);
    if (pos_ < text_.size()) fail("unbalanced ')'");
    return seq;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "invalid regex {:?}: {} at position {}",
                 std::string(text_), what, pos_);
  }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool at_end() const { return pos_ >= text_.size(); }

  Sequence parse_alternation(int depth) {
    if (depth > b_.limits().max_nesting) {
      fail(fmt::format("groups nest deeper than {}", b_.limits().max_nesting));
    }
    std::vector<Sequence> alternatives;
    alternatives.push_back(parse_concat(depth));
    while (peek('|')) {
      ++pos_;
      // Each top-level alternative may be anchored on its own (^a$|^b$): the match is whole.
      if (depth == 0 && peek('^')) ++pos_;
      alternatives.push_back(parse_concat(depth));
    }
    if (alternatives.size() == 1) return std::move(alternatives[0]);
    return {b_.choice("regex_alternation", std::move(alternatives))};
  }

  Sequence parse_concat(int depth) {
    Sequence seq;
    while (!at_end() && !peek('|') && !peek(')')) {
      const bool ends_alternative =
          pos_ + 1 == text_.size() || (depth == 0 && text_[pos_ + 1] == '|');
      if (peek('$') && ends_alternative) {
        ++pos_;
        break;
      }
      Sequence atom = parse_atom(depth);
      atom = parse_quantifier(std::move(atom));
      seq.insert(seq.end(), atom.begin(), atom.end());
    }
    return seq;
  }

  Sequence parse_quantifier(Sequence atom) {
    while (!at_end()) {
      int64_t min = 0;
      int64_t max = -1;
      const size_t start = pos_;
      const char c = text_[pos_];
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        min = 1;
        ++pos_;
      } else if (c == '?') {
        max = 1;
        ++pos_;
      } else if (c == '{') {
        if (!parse_braces(&min, &max)) return atom;  // a literal '{', as Python reads it
      } else {
        return atom;
      }
      if (peek('?')) ++pos_;  // lazy: the same strings
      if (peek('+')) fail("possessive quantifiers are not supported");
      if (start == pos_) return atom;
      if (min == 0 && max == -1) {
        atom = {b_.star(atom)};
      } else if (min == 1 && max == -1) {
        atom = b_.plus(atom);
      } else if (min == 0 && max == 1) {
        atom = {b_.optional(atom)};
      } else {
        const size_t expanded = b_.expanded_size(atom) * static_cast<size_t>(std::max(min, max));
        if (expanded > b_.limits().max_elements) {
          fail(fmt::format("the repetition expands to {} grammar elements, more than {}; use "
                           "smaller bounds",
                           expanded, b_.limits().max_elements));
        }
        try {
          atom = b_.repeat(atom, min, max);
        } catch (const Error& e) {
          fail(e.what());
        }
      }
    }
    return atom;
  }

  // {n}, {n,}, {n,m}, {,m}; false (position unchanged) when this is not a quantifier.
  bool parse_braces(int64_t* min, int64_t* max) {
    size_t p = pos_ + 1;
    auto number = [&](int64_t* out) {
      const size_t begin = p;
      int64_t v = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        v = std::min<int64_t>(v * 10 + (text_[p] - '0'), int64_t{1} << 40);
        ++p;
      }
      *out = v;
      return p > begin;
    };
    int64_t lo = 0;
    int64_t hi = -1;
    const bool has_lo = number(&lo);
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(&hi)) hi = -1;
      if (!has_lo && hi < 0) return false;
    } else {
      if (!has_lo) return false;
      hi = lo;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    pos_ = p + 1;
    if (hi >= 0 && hi < lo) fail("the repetition minimum exceeds the maximum");
    *min = lo;
    *max = hi;
    return true;
  }

  uint32_t next_code_point() {
    uint32_t cp = 0;
    if (!structured::next_code_point(text_, &pos_, &cp)) fail("ill-formed UTF-8");
    return cp;
  }

  uint32_t hex(size_t digits) {
    if (pos_ + digits > text_.size()) fail("truncated hex escape");
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
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
    return v;
  }

  // After a backslash: a set of code points. in_class: \b is a backspace there.
  Ranges parse_escape(bool in_class) {
    if (at_end()) fail("trailing backslash");
    const char c = text_[pos_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return negate(kDigit);
      case 'w': return kWord;
      case 'W': return negate(kWord);
      case 's': return kSpace;
      case 'S': return negate(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': {
        uint32_t v;
        if (peek('{')) {
          ++pos_;
          const size_t end = text_.find('}', pos_);
          if (end == std::string_view::npos || end == pos_ || end - pos_ > 6) fail("bad \\x{...}");
          v = hex(end - pos_);
          ++pos_;
        } else {
          v = hex(2);
        }
        if (v > kMaxCodePoint) fail("code point out of range");
        return {{v, v}};
      }
      case 'u': {
        const uint32_t v = hex(4);
        return {{v, v}};
      }
      case 'U': {
        const uint32_t v = hex(8);
        if (v > kMaxCodePoint) fail("code point out of range");
        return {{v, v}};
      }
      case 'b':
        if (in_class) return {{'\b', '\b'}};
        fail("word boundaries (\\b) are not supported");
      case 'B': fail("word boundaries (\\B) are not supported");
      case 'A':
      case 'Z':
      case 'z': fail(fmt::format("anchor \\{} is not supported (the pattern always matches the "
                                 "whole output)", c));
      case 'p':
      case 'P': fail("Unicode property classes (\\p{...}) are not supported");
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
          fail(fmt::format("unknown escape \\{}", c));
        }
        --pos_;
        const uint32_t cp = next_code_point();
        return {{cp, cp}};
    }
  }

  Ranges parse_class() {
    // After '['.
    bool negated = false;
    if (peek('^')) {
      negated = true;
      ++pos_;
    }
    Ranges ranges;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek(']') && !first) {
        ++pos_;
        break;
      }
      if (peek('[') && pos_ + 1 < text_.size() && text_[pos_ + 1] == ':') {
        fail("POSIX classes such as [:alpha:] are not supported");
      }
      first = false;
      Ranges item;
      bool single = false;
      uint32_t lo = 0;
      if (peek('\\')) {
        ++pos_;
        item = parse_escape(true);
        single = item.size() == 1 && item[0].first == item[0].second;
        lo = item[0].first;
      } else {
        lo = next_code_point();
        item = {{lo, lo}};
        single = true;
      }
      if (single && peek('-') && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        if (peek('\\')) {
          ++pos_;
          const Ranges r = parse_escape(true);
          if (r.size() != 1 || r[0].first != r[0].second) fail("bad character range");
          hi = r[0].first;
        } else {
          hi = next_code_point();
        }
        if (hi < lo) fail("bad character range (the end is before the start)");
        item = {{lo, hi}};
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    return negated ? negate(ranges) : normalize(ranges);
  }

  Sequence chars(const Ranges& ranges) {
    if (ranges.empty()) fail("the character class matches no character");
    if (options_.json_string) return {json_string_chars(b_, ranges)};
    const Ranges n = normalize(ranges);
    if (n.size() == 1 && n[0].first == n[0].second) {
      std::string s;
      append_utf8(n[0].first, &s);
      return b_.literal(s);
    }
    return {b_.code_points(n)};
  }

  Sequence parse_atom(int depth) {
    const char c = text_[pos_];
    switch (c) {
      case '(': {
        ++pos_;
        if (peek('?')) {
          ++pos_;
          if (peek(':')) {
            ++pos_;
          } else if (peek('P') && pos_ + 1 < text_.size() && text_[pos_ + 1] == '<') {
            const size_t end = text_.find('>', pos_);
            if (end == std::string_view::npos) fail("unterminated group name");
            pos_ = end + 1;
          } else if (peek('<') && pos_ + 1 < text_.size() && text_[pos_ + 1] != '=' &&
                     text_[pos_ + 1] != '!') {
            const size_t end = text_.find('>', pos_);
            if (end == std::string_view::npos) fail("unterminated group name");
            pos_ = end + 1;
          } else if (peek('=') || peek('!') || peek('<')) {
            fail("lookaround assertions are not supported");
          } else {
            fail("inline flags and other (?...) groups are not supported");
          }
        }
        Sequence inner = parse_alternation(depth + 1);
        if (!peek(')')) fail("missing ')'");
        ++pos_;
        return inner;
      }
      case ')': fail("unbalanced ')'");
      case '*':
      case '+':
      case '?': fail("nothing to repeat");
      case '[': {
        ++pos_;
        return chars(parse_class());
      }
      case '.': {
        ++pos_;
        return chars(negate({{'\n', '\n'}}));
      }
      case '\\': {
        ++pos_;
        return chars(parse_escape(false));
      }
      case '^': fail("'^' is only supported at the start of the pattern");
      case '$': fail("'$' is only supported at the end of the pattern");
      default: {
        const uint32_t cp = next_code_point();
        return chars({{cp, cp}});
      }
    }
  }

  GrammarBuilder& b_;
  std::string_view text_;
  RegexOptions options_;
  size_t pos_ = 0;
};

}  // namespace

GrammarBuilder::Item json_string_chars(GrammarBuilder& b, Ranges ranges) {
  ranges = normalize(std::move(ranges));
  const Ranges special = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  std::vector<Sequence> alternatives;
  const Ranges plain = minus(ranges, special);
  if (!plain.empty()) alternatives.push_back({b.code_points(plain)});
  for (uint32_t cp = 0; cp < 0x20; ++cp) {
    if (!contains(ranges, cp)) continue;
    switch (cp) {
      case '\n': alternatives.push_back(b.literal("\\n")); break;
      case '\t': alternatives.push_back(b.literal("\\t")); break;
      case '\r': alternatives.push_back(b.literal("\\r")); break;
      case '\b': alternatives.push_back(b.literal("\\b")); break;
      case '\f': alternatives.push_back(b.literal("\\f")); break;
      default: alternatives.push_back(b.literal(fmt::format("\\u{:04x}", cp))); break;
    }
  }
  if (contains(ranges, '"')) alternatives.push_back(b.literal("\\\""));
  if (contains(ranges, '\\')) alternatives.push_back(b.literal("\\\\"));
  if (alternatives.size() == 1 && alternatives[0].size() == 1) return alternatives[0][0];
  return b.choice("json_char", std::move(alternatives));
}

Sequence compile_regex(GrammarBuilder& builder, std::string_view pattern,
                       const RegexOptions& options) {
  return RegexParser(builder, pattern, options).parse();
}

}  // namespace vellum::structured
