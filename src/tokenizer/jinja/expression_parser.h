// ExpressionParser: token cursor and Jinja expression grammar, shared by the statement parser
// (parser.cc). Precedence, loosest first: conditional `a if c else b` < or < and < not <
// comparisons/in < + - < ~ < * / // % < ** < unary - + < filters `|f`, tests `is t`,
// calls, attributes and subscripts (the Jinja 3 grammar, so `-3 | abs` is abs(-3)).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "common/check.h"
#include "tokenizer/jinja/ast.h"

namespace vellum::jinja {

// "'%}'", "string 'x'", "end of template": a token as error messages name it.
std::string describe(const Token& token);

class ExpressionParser {
 public:
  explicit ExpressionParser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

 protected:
  static constexpr int kMaxNesting = 200;  // expression and block nesting; deeper is rejected

  // ---- token helpers ----
  const Token& peek(size_t ahead = 0) const {
    const size_t i = pos_ + ahead;
    return i < tokens_.size() ? tokens_[i] : tokens_.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op) const {
    return peek().kind == TokenKind::kOperator && peek().text == op;
  }
  bool at_name(std::string_view name) const {
    return peek().kind == TokenKind::kName && peek().text == name;
  }
  bool accept_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }

  [[noreturn]] void fail(const Token& at, const std::string& what) const {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "template syntax error at line {}, column {}: {}",
                 at.loc.line, at.loc.column, what);
  }
  void expect_op(std::string_view op) {
    if (!accept_op(op)) fail(peek(), fmt::format("expected '{}', got {}", op, describe(peek())));
  }
  std::string expect_name() {
    if (peek().kind != TokenKind::kName) {
      fail(peek(), fmt::format("expected a name, got {}", describe(peek())));
    }
    return next().text;
  }
  // A variable name being assigned: keywords are not allowed.
  std::string expect_target_name() {
    static constexpr std::string_view kKeywords[] = {"in", "if", "else", "and", "or", "not", "is",
                                                     "true", "false", "none", "True", "False", "None"};
    for (const auto keyword : kKeywords) {
      if (at_name(keyword)) fail(peek(), fmt::format("expected a name, got keyword '{}'", keyword));
    }
    return expect_name();
  }
  void expect_block_end(std::string_view statement) {
    if (peek().kind != TokenKind::kBlockEnd) {
      fail(peek(), fmt::format("expected '%}}' to end '{}', got {}", statement, describe(peek())));
    }
    next();
  }

  struct NestingGuard {
    NestingGuard(ExpressionParser& p, const Token& at) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) {
        parser.fail(at, fmt::format("template nested deeper than {} levels", kMaxNesting));
      }
    }
    ~NestingGuard() { --parser.nesting_; }
    ExpressionParser& parser;
  };

  ExprPtr parse_tuple();
  ExprPtr parse_expression();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, ExprPtr (ExpressionParser::*sub)());
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary_with_filters();
  ExprPtr parse_unary(bool with_filters);
  bool starts_test_argument() const;
  ArgList parse_args();
  ExprPtr parse_primary_with_postfix();
  ExprPtr parse_subscript(ExprPtr object);
  int64_t parse_int(const Token& token) const;
  ExprPtr parse_primary();

  int num_loop_references_ = 0;  // NameExpr "loop" created so far (see ForStmt)
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
};

}  // namespace vellum::jinja
