#include "structured/json_pieces.h"

#include <map>

#include "structured/json_schema_numbers.h"

namespace vellum::structured {

JsonPieces::Sequence JsonPieces::ws() {
  if (!any_whitespace_) return {};
  if (ws_ == UINT32_MAX) {
    ws_ = b_.new_rule("ws");
    b_.add_alternative(ws_, {});
    b_.add_alternative(ws_, b_.literal(" "));
    ByteSet indent;
    indent.set(' ');
    indent.set('\t');
    Sequence nl = b_.literal("\n");
    const Sequence spaces = b_.repeat({b_.bytes(indent)}, 0, 20);
    nl.insert(nl.end(), spaces.begin(), spaces.end());
    b_.add_alternative(ws_, std::move(nl));
  }
  return {b_.rule(ws_)};
}

JsonPieces::Sequence JsonPieces::comma() {
  Sequence s = ws();
  const Sequence lit = b_.literal(any_whitespace_ ? "," : ", ");
  s.insert(s.end(), lit.begin(), lit.end());
  const Sequence after = ws();
  s.insert(s.end(), after.begin(), after.end());
  return s;
}

JsonPieces::Sequence JsonPieces::colon() {
  Sequence s = ws();
  const Sequence lit = b_.literal(any_whitespace_ ? ":" : ": ");
  s.insert(s.end(), lit.begin(), lit.end());
  const Sequence after = ws();
  s.insert(s.end(), after.begin(), after.end());
  return s;
}

JsonPieces::Item JsonPieces::string_char() {
  if (char_ == UINT32_MAX) {
    char_ = b_.new_rule("json_char");
    std::vector<std::pair<uint32_t, uint32_t>> plain = {{0x20, '"' - 1}, {'"' + 1, '\\' - 1},
                                                        {'\\' + 1, 0x10FFFF}};
    b_.add_alternative(char_, {b_.code_points(plain)});
    ByteSet escapes;
    for (char c : std::string("\"\\/bfnrt")) escapes.set(static_cast<uint8_t>(c));
    b_.add_alternative(char_, {b_.byte('\\'), b_.bytes(escapes)});
    ByteSet hex;
    for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<uint8_t>(c));
    Sequence u = b_.literal("\\u");
    for (int i = 0; i < 4; ++i) u.push_back(b_.bytes(hex));
    b_.add_alternative(char_, std::move(u));
  }
  return b_.rule(char_);
}

uint32_t JsonPieces::string_rule() {
  if (string_ == UINT32_MAX) {
    string_ = b_.new_rule("json_string");
    Sequence s = b_.literal("\"");
    s.push_back(b_.star({string_char()}));
    append(s, b_.literal("\""));
    b_.add_alternative(string_, std::move(s));
  }
  return string_;
}

JsonPieces::Sequence JsonPieces::integer_body() {
  ByteSet digits;
  for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<uint8_t>(c));
  ByteSet nonzero = digits;
  nonzero.reset('0');
  Sequence s = {b_.optional(b_.literal("-"))};
  Sequence many = {b_.bytes(nonzero)};
  append(many, b_.repeat({b_.bytes(digits)}, 0, kMaxIntegerDigits - 1));
  s.push_back(b_.choice("json_int_digits", {b_.literal("0"), many}));
  return s;
}

uint32_t JsonPieces::integer_rule() {
  if (integer_ == UINT32_MAX) {
    integer_ = b_.new_rule("json_integer");
    b_.add_alternative(integer_, integer_body());
  }
  return integer_;
}

uint32_t JsonPieces::number_rule() {
  if (number_ == UINT32_MAX) {
    number_ = b_.new_rule("json_number");
    ByteSet digits;
    for (char c = '0'; c <= '9'; ++c) digits.set(static_cast<uint8_t>(c));
    Sequence s = integer_body();
    Sequence frac = b_.literal(".");
    append(frac, b_.repeat({b_.bytes(digits)}, 1, kMaxFractionDigits));
    s.push_back(b_.optional(frac));
    ByteSet e;
    e.set('e');
    e.set('E');
    ByteSet sign;
    sign.set('+');
    sign.set('-');
    Sequence exp = {b_.bytes(e), b_.optional({b_.bytes(sign)})};
    // Two exponent digits keep every number within a double's range.
    append(exp, b_.repeat({b_.bytes(digits)}, 1, 2));
    s.push_back(b_.optional(exp));
    b_.add_alternative(number_, std::move(s));
  }
  return number_;
}

uint32_t JsonPieces::value_rule() {
  if (value_ == UINT32_MAX) {
    value_ = b_.new_rule("json_value");
    b_.add_alternative(value_, {b_.rule(object_any_rule())});
    b_.add_alternative(value_, {b_.rule(array_any_rule())});
    b_.add_alternative(value_, {b_.rule(string_rule())});
    b_.add_alternative(value_, {b_.rule(number_rule())});
    for (const char* lit : {"true", "false", "null"}) b_.add_alternative(value_, b_.literal(lit));
  }
  return value_;
}

uint32_t JsonPieces::object_any_rule() {
  if (object_any_ == UINT32_MAX) {
    object_any_ = b_.new_rule("json_object");
    const uint32_t value = value_rule();
    b_.add_alternative(object_any_, object_of({b_.rule(value)}));
  }
  return object_any_;
}

JsonPieces::Sequence JsonPieces::object_of(const Sequence& value) {
  Sequence member = {b_.rule(string_rule())};
  append(member, colon());
  append(member, value);
  Sequence more = comma();
  append(more, member);
  Sequence body = member;
  body.push_back(b_.star(more));
  Sequence s = b_.literal("{");
  append(s, ws());
  s.push_back(b_.optional(body));
  append(s, ws());
  append(s, b_.literal("}"));
  return s;
}

uint32_t JsonPieces::array_any_rule() {
  if (array_any_ == UINT32_MAX) {
    array_any_ = b_.new_rule("json_array");
    b_.add_alternative(array_any_, array_of({b_.rule(value_rule())}, 0, -1));
  }
  return array_any_;
}

JsonPieces::Sequence JsonPieces::array_of(const Sequence& item, int64_t min, int64_t max) {
  Sequence s = b_.literal("[");
  append(s, ws());
  if (max != 0) {
    Sequence more = comma();
    append(more, item);
    Sequence body = item;
    append(body, b_.repeat(more, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1));
    if (min == 0) {
      s.push_back(b_.optional(body));
    } else {
      append(s, body);
    }
  }
  append(s, ws());
  append(s, b_.literal("]"));
  return s;
}


namespace {

// The characters of a JSON string's text (quotes excluded) as written: an escape (\x or \uXXXX)
// or one UTF-8 character each.
std::vector<std::string> json_symbols(const std::string& name) {
  const std::string text = nlohmann::ordered_json(name).dump();
  std::vector<std::string> symbols;
  for (size_t i = 1; i + 1 < text.size();) {
    size_t length = 1;
    const auto lead = static_cast<unsigned char>(text[i]);
    if (text[i] == '\\') {
      length = text[i + 1] == 'u' ? 6 : 2;
    } else if (lead >= 0xF0) {
      length = 4;
    } else if (lead >= 0xE0) {
      length = 3;
    } else if (lead >= 0xC0) {
      length = 2;
    }
    symbols.push_back(text.substr(i, length));
    i += length;
  }
  return symbols;
}

uint32_t first_code_point(const std::string& symbol) {
  const auto lead = static_cast<unsigned char>(symbol[0]);
  if (symbol.size() == 1) return lead;
  uint32_t cp = lead & (symbol.size() == 2 ? 0x1F : symbol.size() == 3 ? 0x0F : 0x07);
  for (size_t i = 1; i < symbol.size(); ++i) cp = (cp << 6) | (static_cast<unsigned char>(symbol[i]) & 0x3F);
  return cp;
}

}  // namespace

JsonPieces::Sequence JsonPieces::string_not_in(const std::vector<std::string>& excluded) {
  if (excluded.empty()) return {b_.rule(string_rule())};
  struct Node {
    std::map<std::string, size_t> children;  // symbol -> node
    bool is_name = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& name : excluded) {
    size_t at = 0;
    for (const std::string& symbol : json_symbols(name)) {
      auto it = trie[at].children.find(symbol);
      if (it == trie[at].children.end()) {
        it = trie[at].children.emplace(symbol, trie.size()).first;
        trie.emplace_back();
      }
      at = it->second;
    }
    trie[at].is_name = true;
  }
  // After a character no name has at this point: any characters, then the closing quote.
  Sequence rest = {b_.star({string_char()})};
  append(rest, b_.literal("\""));
  ByteSet hex;
  for (char c : std::string("0123456789abcdefABCDEF")) hex.set(static_cast<uint8_t>(c));
  // Rules bottom-up (children have larger indices than their parents).
  std::vector<uint32_t> rules(trie.size());
  for (size_t n = trie.size(); n-- > 0;) {
    const Node& node = trie[n];
    rules[n] = b_.new_rule("key_not_in");
    if (!node.is_name) b_.add_alternative(rules[n], b_.literal("\""));
    std::vector<std::pair<uint32_t, uint32_t>> others = {{0x20, '"' - 1}, {'"' + 1, '\\' - 1},
                                                         {'\\' + 1, 0x10FFFF}};
    ByteSet escapes;
    for (char c : std::string("\"\\/bfnrt")) escapes.set(static_cast<uint8_t>(c));
    for (const auto& [symbol, child] : node.children) {
      Sequence via = b_.literal(symbol);
      via.push_back(b_.rule(rules[child]));
      b_.add_alternative(rules[n], std::move(via));
      if (symbol[0] == '\\') {
        if (symbol.size() == 2) escapes.reset(static_cast<uint8_t>(symbol[1]));
        continue;
      }
      // Remove the symbol's code point from the others.
      const uint32_t cp = first_code_point(symbol);
      std::vector<std::pair<uint32_t, uint32_t>> kept;
      for (const auto& [lo, hi] : others) {
        if (cp < lo || cp > hi) {
          kept.emplace_back(lo, hi);
          continue;
        }
        if (lo < cp) kept.emplace_back(lo, cp - 1);
        if (cp < hi) kept.emplace_back(cp + 1, hi);
      }
      others = std::move(kept);
    }
    Sequence plain = {b_.code_points(others)};
    append(plain, rest);
    b_.add_alternative(rules[n], std::move(plain));
    Sequence escape = {b_.byte('\\'), b_.bytes(escapes)};
    append(escape, rest);
    if (escapes.any()) b_.add_alternative(rules[n], std::move(escape));
    Sequence unicode = b_.literal("\\u");
    for (int i = 0; i < 4; ++i) unicode.push_back(b_.bytes(hex));
    append(unicode, rest);
    b_.add_alternative(rules[n], std::move(unicode));
  }
  Sequence out = b_.literal("\"");
  out.push_back(b_.rule(rules[0]));
  return out;
}

JsonPieces::Sequence JsonPieces::literal(const nlohmann::ordered_json& value) {
  if (value.is_object() && !value.empty()) {
    Sequence s = b_.literal("{");
    append(s, ws());
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (!first) append(s, comma());
      first = false;
      append(s, b_.literal(nlohmann::ordered_json(key).dump()));
      append(s, colon());
      append(s, literal(member));
    }
    append(s, ws());
    append(s, b_.literal("}"));
    return s;
  }
  if (value.is_array() && !value.empty()) {
    Sequence s = b_.literal("[");
    append(s, ws());
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) append(s, comma());
      append(s, literal(value[i]));
    }
    append(s, ws());
    append(s, b_.literal("]"));
    return s;
  }
  return b_.literal(value.dump());
}

}  // namespace vellum::structured
