#include "tokenizer/jinja/parser.h"

#include <initializer_list>

#include "common/check.h"
#include "tokenizer/jinja/expression_parser.h"

namespace vellum::jinja {
namespace {

class Parser : public ExpressionParser {
 public:
  using ExpressionParser::ExpressionParser;

  Body parse() { return parse_body({}, nullptr); }

 private:
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
    const int num_loop_references = num_loop_references_;
    std::string end;
    stmt->body = parse_body({"else", "endfor"}, &end, &keyword);
    stmt->uses_loop_variable = num_loop_references_ != num_loop_references;
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

  int loop_depth_ = 0;  // enclosing for loops, for break/continue (reset inside macros)
};

}  // namespace

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

}  // namespace vellum::jinja
