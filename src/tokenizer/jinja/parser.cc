#include "tokenizer/jinja/parser.h"

#include <charconv>
#include <initializer_list>

#include "common/check.h"

namespace vellum::jinja {
namespace {

constexpr int kMaxNesting = 200;  // expression and block nesting; deeper input is rejected

std::string describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kEnd: return "end of template";
    case TokenKind::kText: return "template text";
    case TokenKind::kString: return fmt::format("string '{}'", token.text);
    default: return fmt::format("'{}'", token.text);
  }
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_body({}, nullptr);
    return body;
  }

 private:
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
    NestingGuard(Parser& p, const Token& at) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) {
        parser.fail(at, fmt::format("template nested deeper than {} levels", kMaxNesting));
      }
    }
    ~NestingGuard() { --parser.nesting_; }
    Parser& parser;
  };

  // ---- statements ----

  // Parses until `{% <one of end_names>` (left unconsumed, the name returned in *end_name) or
  // the end of the template (allowed only when end_names is empty).
  Body parse_body(std::initializer_list<std::string_view> end_names, std::string* end_name,
                  const Token* opener = nullptr) {
    Body body;
    while (true) {
      const Token& token = peek();
      switch (token.kind) {
        case TokenKind::kEnd:
          if (end_names.size() == 0) return body;
          fail(token, fmt::format("unexpected end of template: '{}' at line {} is never closed "
                                  "(expected '{{% {} %}}')",
                                  opener->text, opener->loc.line, *(end_names.end() - 1)));
        case TokenKind::kText:
          body.push_back(std::make_unique<TextStmt>(token.loc, token.text));
          next();
          break;
        case TokenKind::kVariableBegin: {
          next();
          auto expr = parse_expression();
          if (peek().kind != TokenKind::kVariableEnd) {
            fail(peek(), fmt::format("expected '}}}}' to end an expression, got {}",
                                     describe(peek())));
          }
          next();
          body.push_back(std::make_unique<OutputStmt>(token.loc, std::move(expr)));
          break;
        }
        case TokenKind::kBlockBegin: {
          const Token& keyword = peek(1);
          for (const auto name : end_names) {
            if (keyword.kind == TokenKind::kName && keyword.text == name) {
              next();  // {%
              next();  // the end name
              *end_name = std::string(name);
              return body;
            }
          }
          NestingGuard guard(*this, keyword);
          body.push_back(parse_statement());
          break;
        }
        default: fail(token, fmt::format("unexpected {}", describe(token)));
      }
    }
  }

  StmtPtr parse_statement() {
    next();  // {%
    const Token& keyword = peek();
    if (keyword.kind != TokenKind::kName) {
      fail(keyword, fmt::format("expected a statement name after '{{%', got {}", describe(keyword)));
    }
    const std::string name = next().text;
    if (name == "if") return parse_if(keyword);
    if (name == "for") return parse_for(keyword);
    if (name == "set") return parse_set(keyword);
    if (name == "macro") return parse_macro(keyword);
    if (name == "call") return parse_call_block(keyword);
    if (name == "filter") return parse_filter_block(keyword);
    if (name == "generation") {
      expect_block_end(name);
      auto stmt = std::make_unique<ScopeStmt>(keyword.loc);
      std::string end;
      stmt->body = parse_body({"endgeneration"}, &end, &keyword);
      expect_block_end(end);
      return stmt;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail(keyword, fmt::format("'{}' outside of a for loop", name));
      expect_block_end(name);
      return std::make_unique<SimpleStmt>(
          name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, keyword.loc);
    }
    if (name == "elif" || name == "else" || name.rfind("end", 0) == 0) {
      fail(keyword, fmt::format("unexpected '{{% {} %}}' with no matching open block", name));
    }
    fail(keyword, fmt::format("unknown statement '{}'", name));
  }

  StmtPtr parse_if(const Token& keyword) {
    auto stmt = std::make_unique<IfStmt>(keyword.loc);
    std::string end = "elif";
    while (end == "elif") {
      auto condition = parse_expression();
      expect_block_end("if");
      Body body = parse_body({"elif", "else", "endif"}, &end, &keyword);
      stmt->branches.emplace_back(std::move(condition), std::move(body));
    }
    if (end == "else") {
      expect_block_end("else");
      stmt->else_body = parse_body({"endif"}, &end, &keyword);
    }
    expect_block_end(end);
    return stmt;
  }

  Target parse_target(bool allow_attribute) {
    Target target;
    const bool parenthesized = accept_op("(");
    target.names.push_back(expect_target_name());
    if (allow_attribute && accept_op(".")) {
      target.attribute = expect_name();
      return target;
    }
    while (accept_op(",")) {
      if (peek().kind != TokenKind::kName) break;  // trailing comma
      target.names.push_back(expect_target_name());
    }
    if (parenthesized) expect_op(")");
    return target;
  }

  StmtPtr parse_for(const Token& keyword) {
    auto stmt = std::make_unique<ForStmt>(keyword.loc);
    stmt->target = parse_target(false);
    if (!accept_name("in")) fail(peek(), fmt::format("expected 'in' in for loop, got {}", describe(peek())));
    stmt->iterable = parse_or();
    if (accept_name("if")) stmt->filter = parse_expression();
    if (accept_name("recursive")) stmt->recursive = true;
    expect_block_end("for");
    ++loop_depth_;
    std::string end;
    stmt->body = parse_body({"else", "endfor"}, &end, &keyword);
    --loop_depth_;
    if (end == "else") {
      expect_block_end("else");
      stmt->else_body = parse_body({"endfor"}, &end, &keyword);
    }
    expect_block_end(end);
    return stmt;
  }

  StmtPtr parse_set(const Token& keyword) {
    Target target = parse_target(true);
    if (accept_op("=")) {
      auto stmt = std::make_unique<SetStmt>(keyword.loc);
      stmt->target = std::move(target);
      stmt->value = parse_tuple();
      expect_block_end("set");
      return stmt;
    }
    auto stmt = std::make_unique<SetBlockStmt>(keyword.loc);
    stmt->target = std::move(target);
    expect_block_end("set");
    std::string end;
    stmt->body = parse_body({"endset"}, &end, &keyword);
    expect_block_end(end);
    return stmt;
  }

  std::vector<std::pair<std::string, ExprPtr>> parse_params() {
    std::vector<std::pair<std::string, ExprPtr>> params;
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      std::string param = expect_name();
      ExprPtr default_value;
      if (accept_op("=")) default_value = parse_expression();
      params.emplace_back(std::move(param), std::move(default_value));
    }
    return params;
  }

  StmtPtr parse_macro(const Token& keyword) {
    auto stmt = std::make_unique<MacroStmt>(keyword.loc);
    stmt->name = expect_name();
    stmt->params = parse_params();
    expect_block_end("macro");
    const int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    stmt->body = parse_body({"endmacro"}, &end, &keyword);
    loop_depth_ = saved_loop_depth;
    expect_block_end(end);
    return stmt;
  }

  StmtPtr parse_call_block(const Token& keyword) {
    auto stmt = std::make_unique<CallBlockStmt>(keyword.loc);
    if (at_op("(")) stmt->caller_params = parse_params();
    stmt->call = parse_primary_with_postfix();
    if (stmt->call->kind != Expr::Kind::kCall) fail(keyword, "'{% call %}' needs a macro call");
    expect_block_end("call");
    std::string end;
    stmt->body = parse_body({"endcall"}, &end, &keyword);
    expect_block_end(end);
    return stmt;
  }

  StmtPtr parse_filter_block(const Token& keyword) {
    auto stmt = std::make_unique<FilterBlockStmt>(keyword.loc);
    do {
      const Token& name = peek();
      auto filter = std::make_unique<FilterExpr>(name.loc, nullptr, expect_name());
      if (at_op("(")) filter->args = parse_args();
      stmt->filters.push_back(std::move(filter));
    } while (accept_op("|"));
    expect_block_end("filter");
    std::string end;
    stmt->body = parse_body({"endfilter"}, &end, &keyword);
    expect_block_end(end);
    return stmt;
  }

  // ---- expressions ----

  // expression [, expression]* : a bare tuple becomes a list
  ExprPtr parse_tuple() {
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

  ExprPtr parse_expression() {
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

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const SourceLoc loc = next().loc;
      left = std::make_unique<BinaryExpr>(loc, "or", std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const SourceLoc loc = next().loc;
      left = std::make_unique<BinaryExpr>(loc, "and", std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      NestingGuard guard(*this, peek());
      const SourceLoc loc = next().loc;
      return std::make_unique<UnaryExpr>(loc, "not", parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_binary_level(std::initializer_list<std::string_view> ops, ExprPtr (Parser::*sub)()) {
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
  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }
  ExprPtr parse_concat() { return parse_binary_level({"~"}, &Parser::parse_math2); }
  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_with_filters); }

  ExprPtr parse_unary_with_filters() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filters) {
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

  bool starts_test_argument() const {
    const Token& t = peek();
    if (t.kind == TokenKind::kName) {
      return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" &&
             t.text != "is" && t.text != "in" && t.text != "not";
    }
    return t.kind == TokenKind::kString || t.kind == TokenKind::kInteger ||
           t.kind == TokenKind::kFloat || at_op("[") || at_op("{");
  }

  ArgList parse_args() {
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

  ExprPtr parse_primary_with_postfix() {
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

  ExprPtr parse_subscript(ExprPtr object) {
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

  int64_t parse_int(const Token& token) const {
    int64_t value = 0;
    const auto result =
        std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
    if (result.ec != std::errc()) fail(token, fmt::format("integer '{}' is out of range", token.text));
    return value;
  }

  ExprPtr parse_primary() {
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

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace vellum::jinja
