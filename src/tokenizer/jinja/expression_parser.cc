#include "tokenizer/jinja/expression_parser.h"

#include <charconv>

#include "common/check.h"

namespace vellum::jinja {

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kText: return "template text";
    case TokenKind::kString: return fmt::format("string '{}'", token.text);
    default: return fmt::format("'{}'", token.text);
  }
}


// expression [, expression]* : a bare tuple becomes a list
ExprPtr ExpressionParser::parse_tuple() {
  const SourceLoc loc = peek().loc;
  ExprPtr first = parse_expression();
  if (!at_op(",")) return first;
  auto list = std::make_unique<ListExpr>(loc, true);
  list->items.push_back(std::move(first));
  while (accept_op(",")) {
    if (peek().kind == TokenKind::kBlockEnd || peek().kind == TokenKind::kVariableEnd ||
        at_op(")")) {
      break;  // trailing comma: (1,)
    }
    list->items.push_back(parse_expression());
  }
  return list;
}

ExprPtr ExpressionParser::parse_expression() {
  NestingGuard guard(*this, peek());
  ExprPtr expr = parse_or();
  while (at_name("if")) {
    const SourceLoc loc = next().loc;
    ExprPtr condition = parse_or();
    ExprPtr else_expr;
    if (accept_name("else")) else_expr = parse_expression();
    expr = std::make_unique<ConditionalExpr>(loc, std::move(condition), std::move(expr),
                                             std::move(else_expr));
  }
  return expr;
}

ExprPtr ExpressionParser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    const SourceLoc loc = next().loc;
    left = std::make_unique<BinaryExpr>(loc, "or", std::move(left), parse_and());
  }
  return left;
}

ExprPtr ExpressionParser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    const SourceLoc loc = next().loc;
    left = std::make_unique<BinaryExpr>(loc, "and", std::move(left), parse_not());
  }
  return left;
}

ExprPtr ExpressionParser::parse_not() {
  if (at_name("not")) {
    NestingGuard guard(*this, peek());
    const SourceLoc loc = next().loc;
    return std::make_unique<UnaryExpr>(loc, "not", parse_not());
  }
  return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
  ExprPtr left = parse_math1();
  while (true) {
    const Token& t = peek();
    std::string op;
    if (t.kind == TokenKind::kOperator &&
        (t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" ||
         t.text == ">" || t.text == ">=")) {
      op = t.text;
      next();
    } else if (at_name("in")) {
      op = "in";
      next();
    } else if (at_name("not") && peek(1).kind == TokenKind::kName && peek(1).text == "in") {
      op = "not in";
      next();
      next();
    } else {
      return left;
    }
    left = std::make_unique<BinaryExpr>(t.loc, op, std::move(left), parse_math1());
  }
}

ExprPtr ExpressionParser::parse_binary_level(std::initializer_list<std::string_view> ops, ExprPtr (ExpressionParser::*sub)()) {
  ExprPtr left = (this->*sub)();
  while (true) {
    bool matched = false;
    for (const auto op : ops) {
      if (at_op(op)) {
        const SourceLoc loc = next().loc;
        left = std::make_unique<BinaryExpr>(loc, std::string(op), std::move(left), (this->*sub)());
        matched = true;
        break;
      }
    }
    if (!matched) return left;
  }
}
ExprPtr ExpressionParser::parse_math1() { return parse_binary_level({"+", "-"}, &ExpressionParser::parse_concat); }
ExprPtr ExpressionParser::parse_concat() { return parse_binary_level({"~"}, &ExpressionParser::parse_math2); }
ExprPtr ExpressionParser::parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &ExpressionParser::parse_pow); }
ExprPtr ExpressionParser::parse_pow() { return parse_binary_level({"**"}, &ExpressionParser::parse_unary_with_filters); }

ExprPtr ExpressionParser::parse_unary_with_filters() { return parse_unary(true); }

ExprPtr ExpressionParser::parse_unary(bool with_filters) {
  NestingGuard guard(*this, peek());
  ExprPtr expr;
  if (at_op("-") || at_op("+")) {
    const Token& op = next();
    expr = std::make_unique<UnaryExpr>(op.loc, op.text, parse_unary(false));
  } else {
    expr = parse_primary_with_postfix();
  }
  if (!with_filters) return expr;
  while (true) {
    if (at_op("|")) {
      next();
      const Token& name = peek();
      auto filter = std::make_unique<FilterExpr>(name.loc, std::move(expr), expect_name());
      if (at_op("(")) filter->args = parse_args();
      expr = std::move(filter);
    } else if (at_name("is")) {
      next();
      const bool negated = accept_name("not");
      const Token& name = peek();
      auto test = std::make_unique<TestExpr>(name.loc, std::move(expr), expect_name(), negated);
      if (at_op("(")) {
        test->args = parse_args();
      } else if (starts_test_argument()) {
        test->args.positional.push_back(parse_primary_with_postfix());
      }
      expr = std::move(test);
    } else {
      return expr;
    }
  }
}

bool ExpressionParser::starts_test_argument() const {
  const Token& t = peek();
  if (t.kind == TokenKind::kName) {
    return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" &&
           t.text != "is" && t.text != "in" && t.text != "not";
  }
  return t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
         t.kind == TokenKind::kFloat || at_op("[") || at_op("{");
}

ArgList ExpressionParser::parse_args() {
  ArgList args;
  expect_op("(");
  bool first = true;
  while (!accept_op(")")) {
    if (!first) {
      expect_op(",");
      if (accept_op(")")) break;
    }
    first = false;
    if (peek().kind == TokenKind::kName && peek(1).kind == TokenKind::kOperator &&
        peek(1).text == "=") {
      std::string key = next().text;
      next();
      args.keyword.emplace_back(std::move(key), parse_expression());
    } else {
      if (!args.keyword.empty()) fail(peek(), "positional argument follows keyword argument");
      args.positional.push_back(parse_expression());
    }
  }
  return args;
}

ExprPtr ExpressionParser::parse_primary_with_postfix() {
  ExprPtr expr = parse_primary();
  while (true) {
    if (at_op(".")) {
      next();
      const Token& name = peek();
      if (name.kind == TokenKind::kInteger) {  // foo.0 is foo[0]
        next();
        expr = std::make_unique<GetItemExpr>(
            name.loc, std::move(expr),
            std::make_unique<LiteralExpr>(name.loc, Value(parse_int(name))));
        continue;
      }
      expr = std::make_unique<GetAttrExpr>(name.loc, std::move(expr), expect_name());
    } else if (at_op("[")) {
      expr = parse_subscript(std::move(expr));
    } else if (at_op("(")) {
      const SourceLoc loc = expr->loc;  // errors point at the callee, not at '('
      auto call = std::make_unique<CallExpr>(loc, std::move(expr));
      call->args = parse_args();
      expr = std::move(call);
    } else {
      return expr;
    }
  }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr object) {
  const SourceLoc loc = next().loc;  // [
  ExprPtr first;
  if (!at_op(":")) first = parse_expression();
  if (accept_op("]")) return std::make_unique<GetItemExpr>(loc, std::move(object), std::move(first));
  auto slice = std::make_unique<SliceExpr>(loc, std::move(object));
  slice->start = std::move(first);
  expect_op(":");
  if (!at_op(":") && !at_op("]")) slice->stop = parse_expression();
  if (accept_op(":") && !at_op("]")) slice->step = parse_expression();
  expect_op("]");
  return slice;
}

int64_t ExpressionParser::parse_int(const Token& token) const {
  int64_t value = 0;
  const auto result =
      std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
  if (result.ec != std::errc()) fail(token, fmt::format("integer '{}' is out of range", token.text));
  return value;
}

ExprPtr ExpressionParser::parse_primary() {
  NestingGuard guard(*this, peek());
  const Token& token = next();
  switch (token.kind) {
    case TokenKind::kName: {
      const std::string& n = token.text;
      if (n == "true" || n == "True") return std::make_unique<LiteralExpr>(token.loc, Value(true));
      if (n == "false" || n == "False") return std::make_unique<LiteralExpr>(token.loc, Value(false));
      if (n == "none" || n == "None") return std::make_unique<LiteralExpr>(token.loc, Value::none());
      if (n == "in" || n == "if" || n == "else" || n == "and" || n == "or" || n == "is" || n == "not") {
        fail(token, fmt::format("expected an expression, got keyword '{}'", n));
      }
      if (n == "loop") ++num_loop_references_;
    return std::make_unique<NameExpr>(token.loc, n);
    }
    case TokenKind::kString: {
      std::string text = token.text;
      while (peek().kind == TokenKind::kString) text += next().text;  // "a" "b" == "ab"
      return std::make_unique<LiteralExpr>(token.loc, Value(std::move(text)));
    }
    case TokenKind::kInteger: return std::make_unique<LiteralExpr>(token.loc, Value(parse_int(token)));
    case TokenKind::kFloat: {
      double value = 0;
      std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
      return std::make_unique<LiteralExpr>(token.loc, Value(value));
    }
    case TokenKind::kOperator:
      if (token.text == "(") {
        if (accept_op(")")) return std::make_unique<ListExpr>(token.loc, true);  // ()
        ExprPtr inner = parse_tuple();
        expect_op(")");
        return inner;
      }
      if (token.text == "[") {
        auto list = std::make_unique<ListExpr>(token.loc);
        while (!accept_op("]")) {
          if (!list->items.empty()) {
            expect_op(",");
            if (accept_op("]")) break;
          }
          list->items.push_back(parse_expression());
        }
        return list;
      }
      if (token.text == "{") {
        auto dict = std::make_unique<DictExpr>(token.loc);
        while (!accept_op("}")) {
          if (!dict->entries.empty()) {
            expect_op(",");
            if (accept_op("}")) break;
          }
          ExprPtr key = parse_expression();
          expect_op(":");
          dict->entries.emplace_back(std::move(key), parse_expression());
        }
        return dict;
      }
      break;
    default: break;
  }
  fail(token, fmt::format("expected an expression, got {}", describe(token)));
}

}  // namespace vellum::jinja
