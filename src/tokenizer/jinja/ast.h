// Abstract syntax tree of a parsed template. Built once by the parser, immutable afterwards,
// so one tree is rendered concurrently by many threads. Every node keeps its source location
// for error messages. Nodes are owned by their parent through std::unique_ptr.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/value.h"

namespace vellum::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Unevaluated arguments of a call, filter or test: f(a, b, key=c).
struct ArgList {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  enum class Kind {
    kLiteral, kName, kList, kDict, kGetAttr, kGetItem, kSlice, kCall, kFilter, kTest,
    kUnary, kBinary, kConditional
  };
  Expr(Kind k, SourceLoc l) : kind(k), loc(l) {}
  virtual ~Expr() = default;
  Kind kind;
  SourceLoc loc;
};

struct LiteralExpr : Expr {
  LiteralExpr(SourceLoc l, Value v) : Expr(Kind::kLiteral, l), value(std::move(v)) {}
  Value value;  // none/bool/int/float/string only: shared read-only across renders
};

struct NameExpr : Expr {
  NameExpr(SourceLoc l, std::string n) : Expr(Kind::kName, l), name(std::move(n)) {}
  std::string name;
};

struct ListExpr : Expr {  // [a, b], or a tuple (a, b) when is_tuple
  explicit ListExpr(SourceLoc l, bool tuple = false) : Expr(Kind::kList, l), is_tuple(tuple) {}
  std::vector<ExprPtr> items;
  bool is_tuple;
};

struct DictExpr : Expr {
  explicit DictExpr(SourceLoc l) : Expr(Kind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> entries;
};

struct GetAttrExpr : Expr {  // object.name
  GetAttrExpr(SourceLoc l, ExprPtr o, std::string n)
      : Expr(Kind::kGetAttr, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct GetItemExpr : Expr {  // object[index]
  GetItemExpr(SourceLoc l, ExprPtr o, ExprPtr i)
      : Expr(Kind::kGetItem, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;
};

struct SliceExpr : Expr {  // object[start:stop:step], each bound optional (nullptr)
  SliceExpr(SourceLoc l, ExprPtr o) : Expr(Kind::kSlice, l), object(std::move(o)) {}
  ExprPtr object;
  ExprPtr start, stop, step;
};

struct CallExpr : Expr {  // callee(args); callee `x.name` is a method call when x has one
  CallExpr(SourceLoc l, ExprPtr c) : Expr(Kind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  ArgList args;
};

struct FilterExpr : Expr {  // operand | name(args)
  FilterExpr(SourceLoc l, ExprPtr o, std::string n)
      : Expr(Kind::kFilter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;  // nullptr inside `{% filter %}` blocks (the block's output is the operand)
  std::string name;
  ArgList args;
};

struct TestExpr : Expr {  // operand is [not] name(args)
  TestExpr(SourceLoc l, ExprPtr o, std::string n, bool neg)
      : Expr(Kind::kTest, l), operand(std::move(o)), name(std::move(n)), negated(neg) {}
  ExprPtr operand;
  std::string name;
  bool negated;
  ArgList args;
};

struct UnaryExpr : Expr {  // op: "not", "-", "+"
  UnaryExpr(SourceLoc l, std::string o, ExprPtr e)
      : Expr(Kind::kUnary, l), op(std::move(o)), operand(std::move(e)) {}
  std::string op;
  ExprPtr operand;
};

struct BinaryExpr : Expr {  // op: and or in "not in" == != < <= > >= + - * / // % ** ~
  BinaryExpr(SourceLoc l, std::string o, ExprPtr a, ExprPtr b)
      : Expr(Kind::kBinary, l), op(std::move(o)), left(std::move(a)), right(std::move(b)) {}
  std::string op;
  ExprPtr left, right;
};

struct ConditionalExpr : Expr {  // then_expr if condition else else_expr
  ConditionalExpr(SourceLoc l, ExprPtr c, ExprPtr t, ExprPtr e)
      : Expr(Kind::kConditional, l),
        condition(std::move(c)), then_expr(std::move(t)), else_expr(std::move(e)) {}
  ExprPtr condition, then_expr;
  ExprPtr else_expr;  // nullptr: undefined when the condition is false
};

struct Stmt {
  enum class Kind {
    kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kBreak,
    kContinue, kScope
  };
  Stmt(Kind k, SourceLoc l) : kind(k), loc(l) {}
  virtual ~Stmt() = default;
  Kind kind;
  SourceLoc loc;
};

struct TextStmt : Stmt {
  TextStmt(SourceLoc l, std::string t) : Stmt(Kind::kText, l), text(std::move(t)) {}
  std::string text;
};

struct OutputStmt : Stmt {  // {{ expr }}
  OutputStmt(SourceLoc l, ExprPtr e) : Stmt(Kind::kOutput, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {  // if/elif…/else
  explicit IfStmt(SourceLoc l) : Stmt(Kind::kIf, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body else_body;
};

// An assignment target: `x`, `a, b` (unpacking) or `ns.attr` (namespace attribute).
struct Target {
  std::vector<std::string> names;
  std::string attribute;  // non-empty: names[0] is the namespace, this the attribute
};

struct ForStmt : Stmt {
  explicit ForStmt(SourceLoc l) : Stmt(Kind::kFor, l) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`; nullptr if absent
  bool recursive = false;
  bool uses_loop_variable = true;  // false: the body never names `loop`, so it is not built
  Body body;
  Body else_body;  // rendered when no item passed the filter
};

struct SetStmt : Stmt {  // {% set target = value %}
  explicit SetStmt(SourceLoc l) : Stmt(Kind::kSet, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {  // {% set target %}body{% endset %}
  explicit SetBlockStmt(SourceLoc l) : Stmt(Kind::kSetBlock, l) {}
  Target target;
  Body body;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(SourceLoc l) : Stmt(Kind::kMacro, l) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default nullptr when none
  Body body;
};

struct CallBlockStmt : Stmt {  // {% call(params) macro(args) %}body{% endcall %}
  explicit CallBlockStmt(SourceLoc l) : Stmt(Kind::kCallBlock, l) {}
  std::vector<std::pair<std::string, ExprPtr>> caller_params;
  ExprPtr call;  // a CallExpr
  Body body;     // what `caller()` renders
};

struct FilterBlockStmt : Stmt {  // {% filter name(args) %}body{% endfilter %}
  explicit FilterBlockStmt(SourceLoc l) : Stmt(Kind::kFilterBlock, l) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;  // applied left to right, operand nullptr
  Body body;
};

struct ScopeStmt : Stmt {  // a body rendered as is: {% generation %}…{% endgeneration %}
  explicit ScopeStmt(SourceLoc l) : Stmt(Kind::kScope, l) {}
  Body body;
};

struct SimpleStmt : Stmt {  // break / continue
  SimpleStmt(Kind k, SourceLoc l) : Stmt(k, l) {}
};

}  // namespace vellum::jinja
