// Lexer: template source → tokens, applying Jinja's whitespace control the way Hugging Face
// renders chat templates (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False):
//   - `{%- … -%}`, `{{- … -}}`, `{#- … -#}` strip all whitespace before/after the tag;
//   - trim_blocks: the first newline after a block or comment tag is removed (`+%}` keeps it);
//   - lstrip_blocks: spaces and tabs from the start of a line up to a block or comment tag are
//     removed (`{%+` keeps them); variable tags `{{ }}` are never trimmed implicitly;
//   - "\r\n" and "\r" become "\n", and one trailing newline of the source is dropped.
// Comments produce no tokens. `{% raw %}…{% endraw %}` becomes one text token.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vellum::jinja {

struct SourceLoc {
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
};

enum class TokenKind {
  kText,           // literal template text (whitespace control already applied)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier or keyword
  kString,         // string literal, escapes decoded
  kInteger,
  kFloat,
  kOperator,       // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
  kEnd,            // end of source
};

struct Token {
  TokenKind kind;
  std::string text;
  SourceLoc loc;
};

// Throws vellum::Error(kInvalidArgument) naming the line and column of unclosed tags, unclosed
// strings and characters that cannot start a token.
std::vector<Token> tokenize(std::string_view source);

}  // namespace vellum::jinja
