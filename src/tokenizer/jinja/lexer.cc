#include "tokenizer/jinja/lexer.h"

#include <algorithm>
#include <cctype>

#include "common/check.h"
#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Jinja normalises newlines and drops one trailing newline before lexing.
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool strip_next_text = false;  // the previous tag ended with '-'
    while (pos_ <= src_.size()) {
      const size_t tag = find_tag_start(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      if (strip_next_text) {
        const size_t first = std::find_if_not(text.begin(), text.end(), is_space) - text.begin();
        text.erase(0, first);
      }
      if (tag == src_.size()) {
        emit_text(std::move(text), pos_);
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+' && kind != '{') {
        lstrip_block(text, tag);
      }
      emit_text(std::move(text), pos_);
      size_t content = tag + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      if (kind == '#') {
        pos_ = lex_comment(tag, content, strip_next_text);
      } else {
        pos_ = lex_tag(tag, content, kind == '%', strip_next_text);
      }
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", loc_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourceLoc loc_at(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line_idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    return SourceLoc{static_cast<int>(line_idx + 1),
                     static_cast<int>(offset - line_starts_[line_idx] + 1)};
  }

  [[noreturn]] void fail(size_t offset, const std::string& what) const {
    const SourceLoc loc = loc_at(offset);
    VELLUM_THROW(ErrorCode::kInvalidArgument, "template syntax error at line {}, column {}: {}",
                 loc.line, loc.column, what);
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return src_.size();
  }

  // lstrip_blocks: drop spaces/tabs between the start of the line and a block/comment tag.
  void lstrip_block(std::string& text, size_t tag) const {
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    const size_t text_begin = tag - text.size();
    const bool line_starting = newline != std::string::npos || text_begin == 0 ||
                               src_[text_begin - 1] == '\n';
    if (!line_starting) return;
    for (size_t i = line_begin; i < text.size(); ++i) {
      if (text[i] != ' ' && text[i] != '\t') return;
    }
    text.erase(line_begin);
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), loc_at(offset)});
  }

  // After a tag's closing delimiter at `end`: '-' strips the following whitespace (done on
  // the next text), otherwise trim_blocks drops one newline after block and comment tags.
  size_t after_tag(size_t end, char modifier, bool is_block, bool& strip_next_text) const {
    strip_next_text = modifier == '-';
    if (is_block && modifier != '-' && modifier != '+' && end < src_.size() && src_[end] == '\n') {
      return end + 1;
    }
    return end;
  }

  size_t lex_comment(size_t tag, size_t content, bool& strip_next_text) {
    const size_t close = src_.find("#}", content);
    if (close == std::string::npos) fail(tag, "comment '{#' is never closed with '#}'");
    const char modifier = close > content ? src_[close - 1] : '\0';
    return after_tag(close + 2, modifier == '-' || modifier == '+' ? modifier : '\0', true,
                     strip_next_text);
  }

  size_t lex_tag(size_t tag, size_t content, bool is_block, bool& strip_next_text) {
    const std::string_view close = is_block ? "%}" : "}}";
    tokens_.push_back(Token{is_block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin,
                            is_block ? "{%" : "{{", loc_at(tag)});
    const size_t first_token = tokens_.size();
    size_t i = content;
    std::string open_brackets;  // "}}" inside a dict literal does not close the tag
    while (true) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size()) {
        fail(tag, fmt::format("'{}' tag is never closed with '{}'", is_block ? "{%" : "{{", close));
      }
      std::string_view rest = std::string_view(src_).substr(i);
      if (open_brackets.empty()) {
        char modifier = '\0';
        if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) modifier = rest[0];
        if (modifier != '\0' || rest.substr(0, 2) == close) {
          tokens_.push_back(Token{is_block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd,
                                  std::string(close), loc_at(i)});
          const size_t end = i + 2 + (modifier != '\0' ? 1 : 0);
          if (is_block && tokens_.size() == first_token + 2 &&
              tokens_[first_token].kind == TokenKind::kName &&
              tokens_[first_token].text == "raw") {
            return lex_raw(tag, end, modifier, strip_next_text);
          }
          return after_tag(end, modifier, is_block, strip_next_text);
        }
      }
      const SourceLoc loc = loc_at(i);
      const char c = rest[0];
      if (is_name_start(c)) {
        size_t n = 1;
        while (n < rest.size() && is_name_char(rest[n])) ++n;
        tokens_.push_back(Token{TokenKind::kName, std::string(rest.substr(0, n)), loc});
        i += n;
      } else if (is_digit(c)) {
        i += lex_number(rest, loc);
      } else if (c == '\'' || c == '"') {
        i += lex_string(rest, i);
      } else {
        static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
        size_t n = 0;
        for (const auto op : kTwoChar) {
          if (rest.substr(0, 2) == op) n = 2;
        }
        if (n == 0 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) != std::string_view::npos) {
          n = 1;
        }
        if (n == 0) fail(i, fmt::format("unexpected character '{}' inside a tag", c));
        if (c == '(' || c == '[' || c == '{') open_brackets += c == '(' ? ')' : (c == '[' ? ']' : '}');
        if ((c == ')' || c == ']' || c == '}') && !open_brackets.empty()) {
          if (open_brackets.back() != c) {
            fail(i, fmt::format("unexpected '{}' (expected '{}')", c, open_brackets.back()));
          }
          open_brackets.pop_back();
        }
        tokens_.push_back(Token{TokenKind::kOperator, std::string(rest.substr(0, n)), loc});
        i += n;
      }
    }
  }

  // `{% raw %}` was just lexed: everything up to `{% endraw %}` is text.
  size_t lex_raw(size_t tag, size_t end, char modifier, bool& strip_next_text) {
    tokens_.resize(tokens_.size() - 3);  // drop {% raw %}
    size_t body = after_tag(end, modifier, true, strip_next_text);
    size_t search = body;
    while (true) {
      const size_t open = src_.find("{%", search);
      if (open == std::string::npos) fail(tag, "'{% raw %}' is never closed with '{% endraw %}'");
      size_t j = open + 2;
      const bool strip_before = j < src_.size() && src_[j] == '-';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      j += 6;
      while (j < src_.size() && is_space(src_[j])) ++j;
      char close_modifier = '\0';
      if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) close_modifier = src_[j++];
      if (src_.compare(j, 2, "%}") != 0) fail(open, "malformed '{% endraw %}' tag");
      std::string text = src_.substr(body, open - body);
      if (strip_next_text) {
        text.erase(0, std::find_if_not(text.begin(), text.end(), is_space) - text.begin());
      }
      if (strip_before) {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      }
      emit_text(std::move(text), body);
      return after_tag(j + 2, close_modifier, true, strip_next_text);
    }
  }

  size_t lex_number(std::string_view rest, SourceLoc loc) {
    size_t n = 0;
    while (n < rest.size() && is_digit(rest[n])) ++n;
    bool is_float = false;
    if (n + 1 < rest.size() && rest[n] == '.' && is_digit(rest[n + 1])) {
      is_float = true;
      ++n;
      while (n < rest.size() && is_digit(rest[n])) ++n;
    }
    if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
      size_t m = n + 1;
      if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
      if (m < rest.size() && is_digit(rest[m])) {
        is_float = true;
        n = m;
        while (n < rest.size() && is_digit(rest[n])) ++n;
      }
    }
    tokens_.push_back(Token{is_float ? TokenKind::kFloat : TokenKind::kInteger,
                            std::string(rest.substr(0, n)), loc});
    return n;
  }

  // Python string escapes; an unknown escape keeps its backslash, as Python does.
  size_t lex_string(std::string_view rest, size_t offset) {
    const char quote = rest[0];
    std::string value;
    size_t n = 1;
    while (true) {
      if (n >= rest.size()) fail(offset, "string literal is never closed");
      const char c = rest[n];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        ++n;
        continue;
      }
      if (n + 1 >= rest.size()) fail(offset, "string literal is never closed");
      const char e = rest[n + 1];
      n += 2;
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '0': value += '\0'; break;
        case '\\': value += '\\'; break;
        case '\'': value += '\''; break;
        case '"': value += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t num_digits = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (n + num_digits > rest.size()) fail(offset + n, "truncated escape in string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < num_digits; ++k) {
            const char h = rest[n + k];
            if (!std::isxdigit(static_cast<unsigned char>(h))) {
              fail(offset + n, fmt::format("invalid \\{} escape in string literal", e));
            }
            cp = cp * 16 + static_cast<uint32_t>(is_digit(h) ? h - '0' : (std::tolower(h) - 'a' + 10));
          }
          if (cp > 0x10FFFF) fail(offset + n, "escape names a code point above U+10FFFF");
          append_utf8(value, cp);
          n += num_digits;
          break;
        }
        default:
          value += '\\';
          value += e;
      }
    }
    tokens_.push_back(Token{TokenKind::kString, std::move(value), loc_at(offset)});
    return n + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace vellum::jinja
