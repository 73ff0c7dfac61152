#include "tokenizer/jinja/interpreter.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <vector>

#include "common/check.h"
#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

constexpr int kMaxCallDepth = 100;                 // nested macro calls
constexpr int64_t kMaxIterations = 10'000'000;     // loop iterations + macro calls per render

// Variables of one scope. Jinja scopes: the template, each for loop, each macro call.
// A child holds its parent; values never hold frames strongly (macros keep a weak_ptr), so
// frames make no reference cycles. Namespaces can (`{% set ns.me = ns %}`, `ns.l = [ns]`): the
// renderer keeps a weak handle to each one it made and empties those still alive at the end.
struct Frame {
  std::shared_ptr<Frame> parent;
  Object vars;

  const Value* lookup(std::string_view name) const {
    for (const Frame* f = this; f != nullptr; f = f->parent.get()) {
      if (const Value* v = f->vars.find(name)) return v;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { kNormal, kBreak, kContinue };

FramePtr child_of(const FramePtr& parent) {
  auto frame = std::make_shared<Frame>();
  frame->parent = parent;
  return frame;
}

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options) : options_(options) {}
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  ~Renderer() {
    // Only namespaces are mutable, so every reference cycle runs through one: emptying them all
    // frees whatever the render built, cycles included. The live ones are pinned first, so
    // emptying one never frees another that the loop has yet to reach.
    std::vector<std::shared_ptr<Object>> alive;
    for (const auto& handle : namespaces_) {
      if (auto ns = handle.lock()) alive.push_back(std::move(ns));
    }
    for (const auto& ns : alive) ns->entries.clear();
  }

  std::string run(const Body& body, const Value& context) {
    auto globals = std::make_shared<Frame>();
    add_globals(globals->vars);
    if (context.is_object()) {
      for (const auto& [key, value] : context.as_object().entries) globals->vars.set(key, value);
    } else if (!context.is_undefined() && !context.is_none()) {
      VELLUM_THROW(ErrorCode::kInvalidArgument,
                   "template context must be a JSON object of variables, got {}", context.type_name());
    }
    std::string out;
    exec_body(body, child_of(globals), out);
    return out;
  }

 private:
  // ---- errors ----
  [[noreturn]] static void rethrow_located(SourceLoc loc) {
    try {
      throw;
    } catch (const RaisedError& e) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "template raised an error at line {}, column {}: {}",
                   loc.line, loc.column, e.what());
    } catch (const RenderError& e) {
      VELLUM_THROW(ErrorCode::kInvalidArgument, "template render error at line {}, column {}: {}",
                   loc.line, loc.column, e.what());
    }
  }

  void count_iteration() {
    if (++num_iterations_ > kMaxIterations) {
      throw RenderError("template exceeded 10,000,000 loop iterations and macro calls");
    }
  }

  void append(std::string& out, std::string_view text) const {
    if (out.size() + text.size() > options_.max_output_bytes) {
      throw RenderError(fmt::format("rendered output exceeds the {} byte limit", options_.max_output_bytes));
    }
    out += text;
  }

  // ---- statements ----
  Flow exec_body(const Body& body, const FramePtr& frame, std::string& out) {
    for (const auto& stmt : body) {
      const Flow flow = exec(*stmt, frame, out);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec(const Stmt& stmt, const FramePtr& frame, std::string& out) {
    try {
      return exec_impl(stmt, frame, out);
    } catch (const RenderError&) {
      rethrow_located(stmt.loc);
    }
  }

  Flow exec_impl(const Stmt& stmt, const FramePtr& frame, std::string& out) {
    switch (stmt.kind) {
      case Stmt::Kind::kText: append(out, static_cast<const TextStmt&>(stmt).text); break;
      case Stmt::Kind::kOutput:
        append(out, eval(*static_cast<const OutputStmt&>(stmt).expr, frame).to_output());
        break;
      case Stmt::Kind::kIf: {
        const auto& s = static_cast<const IfStmt&>(stmt);
        for (const auto& [condition, body] : s.branches) {
          if (eval(*condition, frame).truthy()) return exec_body(body, frame, out);
        }
        return exec_body(s.else_body, frame, out);
      }
      case Stmt::Kind::kFor: exec_for(static_cast<const ForStmt&>(stmt), frame, out); break;
      case Stmt::Kind::kSet: {
        const auto& s = static_cast<const SetStmt&>(stmt);
        assign(s.target, eval(*s.value, frame), *frame);
        break;
      }
      case Stmt::Kind::kSetBlock: {
        const auto& s = static_cast<const SetBlockStmt&>(stmt);
        std::string captured;
        exec_body(s.body, frame, captured);
        assign(s.target, Value(std::move(captured)), *frame);
        break;
      }
      case Stmt::Kind::kMacro: {
        const auto& s = static_cast<const MacroStmt&>(stmt);
        frame->vars.set(s.name, make_macro(s, frame));
        break;
      }
      case Stmt::Kind::kCallBlock: exec_call_block(static_cast<const CallBlockStmt&>(stmt), frame, out); break;
      case Stmt::Kind::kFilterBlock: {
        const auto& s = static_cast<const FilterBlockStmt&>(stmt);
        std::string captured;
        exec_body(s.body, frame, captured);
        Value value(std::move(captured));
        for (const auto& filter : s.filters) {
          value = apply_filter(filter->name, value, eval_args(filter->args, frame));
        }
        append(out, value.to_output());
        break;
      }
      case Stmt::Kind::kScope: return exec_body(static_cast<const ScopeStmt&>(stmt).body, frame, out);
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  static void assign(const Target& target, const Value& value, Frame& frame) {
    if (!target.attribute.empty()) {
      const Value* ns = frame.lookup(target.names[0]);
      if (ns == nullptr || !ns->is_namespace()) {
        throw RenderError(fmt::format(
            "cannot set '{}.{}': '{}' is {}, not a namespace (create it with namespace(...))",
            target.names[0], target.attribute, target.names[0],
            ns == nullptr ? "undefined" : ns->type_name()));
      }
      ns->namespace_attributes().set(target.attribute, value);
      return;
    }
    if (target.names.size() == 1) {
      frame.vars.set(target.names[0], value);
      return;
    }
    const Array items = iterate(value);
    if (items.size() != target.names.size()) {
      throw RenderError(fmt::format("cannot unpack {} values into {} names", items.size(),
                                    target.names.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) frame.vars.set(target.names[i], items[i]);
  }

  void exec_for(const ForStmt& s, const FramePtr& frame, std::string& out) {
    if (s.recursive) throw RenderError("recursive for loops are not supported");
    Array items = iterate(eval(*s.iterable, frame));
    FramePtr loop_frame = child_of(frame);
    if (s.filter) {  // the filter runs first, so loop.length counts only the kept items
      Array kept;
      for (Value& item : items) {
        count_iteration();
        assign(s.target, item, *loop_frame);
        if (eval(*s.filter, loop_frame).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      exec_body(s.else_body, frame, out);
      return;
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      count_iteration();
      const auto idx = static_cast<size_t>(i);
      assign(s.target, items[idx], *loop_frame);
      if (!s.uses_loop_variable) {
        if (exec_body(s.body, loop_frame, out) == Flow::kBreak) break;
        continue;
      }
      Object loop;
      loop.entries.reserve(12);
      loop.entries.emplace_back("index", Value(i + 1));
      loop.entries.emplace_back("index0", Value(i));
      loop.entries.emplace_back("revindex", Value(length - i));
      loop.entries.emplace_back("revindex0", Value(length - i - 1));
      loop.entries.emplace_back("first", Value(i == 0));
      loop.entries.emplace_back("last", Value(i == length - 1));
      loop.entries.emplace_back("length", Value(length));
      loop.entries.emplace_back("depth", Value(int64_t{1}));
      loop.entries.emplace_back("depth0", Value(int64_t{0}));
      loop.entries.emplace_back("previtem", i > 0 ? items[idx - 1] : Value::undefined("loop.previtem"));
      loop.entries.emplace_back("nextitem", i + 1 < length ? items[idx + 1] : Value::undefined("loop.nextitem"));
      loop.entries.emplace_back("cycle", Value::callable("loop.cycle", [i](const CallArgs& args) {
        if (args.positional.empty()) throw RenderError("loop.cycle() needs at least one value");
        return args.positional[static_cast<size_t>(i) % args.positional.size()];
      }));
      loop_frame->vars.set("loop", Value::object(std::move(loop)));
      if (exec_body(s.body, loop_frame, out) == Flow::kBreak) break;
    }
  }

  void exec_call_block(const CallBlockStmt& s, const FramePtr& frame, std::string& out) {
    const auto& call = static_cast<const CallExpr&>(*s.call);
    std::weak_ptr<Frame> weak = frame;
    Value caller = Value::callable("caller", [this, &s, weak](const CallArgs& args) {
      FramePtr parent = weak.lock();
      if (!parent) throw RenderError("caller() used after its call block ended");
      FramePtr body_frame = child_of(parent);
      bind_params("caller", s.caller_params, args, body_frame);
      std::string captured;
      exec_body(s.body, body_frame, captured);
      return Value(std::move(captured));
    });
    const Value callee = eval(*call.callee, frame);
    if (!callee.is_callable()) throw RenderError("'{% call %}' needs a macro to call");
    CallArgs args = eval_args(call.args, frame);
    args.keyword.emplace_back("caller", std::move(caller));
    append(out, invoke(callee, args).to_output());
  }

  // ---- macros ----
  void bind_params(const std::string& name, const std::vector<std::pair<std::string, ExprPtr>>& params,
                   const CallArgs& args, const FramePtr& frame) {
    if (args.positional.size() > params.size()) {
      throw RenderError(fmt::format("macro '{}' takes {} arguments, {} given", name, params.size(),
                                    args.positional.size()));
    }
    for (const auto& [key, value] : args.keyword) {
      // (Not captured by the lambda: clang 14 cannot capture structured bindings.)
      const std::string& name_given = key;
      const bool known = std::any_of(params.begin(), params.end(),
                                     [&](const auto& p) { return p.first == name_given; });
      if (key == "caller" && !known) {
        frame->vars.set("caller", value);
      } else if (!known) {
        throw RenderError(fmt::format("macro '{}' has no parameter named '{}'", name, key));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const auto& [param, default_expr] = params[i];
      const Value* given = args.get(i, param);
      if (given != nullptr) {
        frame->vars.set(param, *given);
      } else if (default_expr) {
        frame->vars.set(param, eval(*default_expr, frame));
      } else {
        frame->vars.set(param, Value::undefined(fmt::format("'{}' is undefined", param)));
      }
    }
  }

  Value make_macro(const MacroStmt& m, const FramePtr& defining) {
    std::weak_ptr<Frame> weak = defining;
    return Value::callable(m.name, [this, &m, weak](const CallArgs& args) {
      FramePtr parent = weak.lock();
      if (!parent) throw RenderError(fmt::format("macro '{}' called after its scope ended", m.name));
      FramePtr frame = child_of(parent);
      bind_params(m.name, m.params, args, frame);
      std::string out;
      exec_body(m.body, frame, out);
      return Value(std::move(out));
    });
  }

  Value invoke(const Value& callee, const CallArgs& args) {
    count_iteration();
    if (call_depth_ >= kMaxCallDepth) {
      throw RenderError(fmt::format("calls nested deeper than {} (runaway macro recursion?)", kMaxCallDepth));
    }
    ++call_depth_;
    struct Restore {
      int& depth;
      ~Restore() { --depth; }
    } restore{call_depth_};
    return callee.as_callable().fn(args);
  }

  // ---- expressions ----
  CallArgs eval_args(const ArgList& list, const FramePtr& frame) {
    CallArgs args;
    args.positional.reserve(list.positional.size());
    for (const auto& e : list.positional) args.positional.push_back(eval(*e, frame));
    for (const auto& [key, e] : list.keyword) args.keyword.emplace_back(key, eval(*e, frame));
    return args;
  }

  Value eval(const Expr& expr, const FramePtr& frame) {
    try {
      return eval_impl(expr, frame);
    } catch (const RenderError&) {
      rethrow_located(expr.loc);
    }
  }

  Value eval_impl(const Expr& expr, const FramePtr& frame) {
    switch (expr.kind) {
      case Expr::Kind::kLiteral: return static_cast<const LiteralExpr&>(expr).value;
      case Expr::Kind::kName: {
        const auto& name = static_cast<const NameExpr&>(expr).name;
        const Value* v = frame->lookup(name);
        return v != nullptr ? *v : Value::undefined(fmt::format("'{}' is undefined", name));
      }
      case Expr::Kind::kList: {
        const auto& list = static_cast<const ListExpr&>(expr);
        Array items;
        for (const auto& item : list.items) items.push_back(eval(*item, frame));
        return list.is_tuple ? Value::tuple(std::move(items)) : Value::array(std::move(items));
      }
      case Expr::Kind::kDict: {
        Object object;
        for (const auto& [key_expr, value_expr] : static_cast<const DictExpr&>(expr).entries) {
          const Value key = eval(*key_expr, frame);
          if (!key.is_string()) throw RenderError(fmt::format("dict keys must be strings, got {}", key.type_name()));
          object.set(key.as_string(), eval(*value_expr, frame));
        }
        return Value::object(std::move(object));
      }
      case Expr::Kind::kGetAttr: {
        const auto& e = static_cast<const GetAttrExpr&>(expr);
        return get_attribute(eval(*e.object, frame), e.name);
      }
      case Expr::Kind::kGetItem: {
        const auto& e = static_cast<const GetItemExpr&>(expr);
        const Value object = eval(*e.object, frame);
        return get_item(object, eval(*e.index, frame));
      }
      case Expr::Kind::kSlice: {
        const auto& e = static_cast<const SliceExpr&>(expr);
        const Value object = eval(*e.object, frame);
        const auto bound = [&](const ExprPtr& b) { return b ? eval(*b, frame) : Value(); };
        return slice_value(object, bound(e.start), bound(e.stop), bound(e.step));
      }
      case Expr::Kind::kCall: {
        const auto& e = static_cast<const CallExpr&>(expr);
        const Value callee = eval(*e.callee, frame);
        if (!callee.is_callable()) {
          throw RenderError(callee.is_undefined() && !callee.as_string().empty()
                                ? fmt::format("cannot call an undefined value: {}", callee.as_string())
                                : fmt::format("a value of type '{}' is not callable", callee.type_name()));
        }
        return invoke(callee, eval_args(e.args, frame));
      }
      case Expr::Kind::kFilter: {
        const auto& e = static_cast<const FilterExpr&>(expr);
        const Value operand = eval(*e.operand, frame);
        return apply_filter(e.name, operand, eval_args(e.args, frame));
      }
      case Expr::Kind::kTest: {
        const auto& e = static_cast<const TestExpr&>(expr);
        const Value operand = eval(*e.operand, frame);
        return Value(apply_test(e.name, operand, eval_args(e.args, frame)) != e.negated);
      }
      case Expr::Kind::kUnary: {
        const auto& e = static_cast<const UnaryExpr&>(expr);
        return unary_op(e.op, eval(*e.operand, frame));
      }
      case Expr::Kind::kBinary: {
        const auto& e = static_cast<const BinaryExpr&>(expr);
        Value left = eval(*e.left, frame);
        if (e.op == "and") return left.truthy() ? eval(*e.right, frame) : left;
        if (e.op == "or") return left.truthy() ? left : eval(*e.right, frame);
        const Value right = eval(*e.right, frame);
        // Chains like 'a' + role + '\n' + content build one string instead of one per step.
        if (left.is_string() && (e.op == "~" || (e.op == "+" && right.is_string()))) {
          const std::string tail = e.op == "~" ? right.to_output() : std::string();
          const std::string& piece = e.op == "~" ? tail : right.as_string();
          if (left.as_string().size() + piece.size() > kMaxStringBytes) {
            throw RenderError("string is larger than 64 MiB");
          }
          left.append_string(piece);
          return left;
        }
        return binary_op(e.op, left, right);
      }
      case Expr::Kind::kConditional: {
        const auto& e = static_cast<const ConditionalExpr&>(expr);
        if (eval(*e.condition, frame).truthy()) return eval(*e.then_expr, frame);
        return e.else_expr ? eval(*e.else_expr, frame) : Value::undefined("conditional without else");
      }
    }
    throw RenderError("unknown expression kind");
  }

  // ---- globals ----
  void add_globals(Object& globals) {
    globals.set("range", Value::callable("range", [](const CallArgs& args) {
      std::vector<int64_t> bounds;
      for (const Value& v : args.positional) {
        if (!v.is_int()) throw RenderError("range() arguments must be integers");
        bounds.push_back(v.as_int());
      }
      if (bounds.empty() || bounds.size() > 3) throw RenderError("range() takes 1 to 3 integer arguments");
      const int64_t start = bounds.size() > 1 ? bounds[0] : 0;
      const int64_t stop = bounds.size() > 1 ? bounds[1] : bounds[0];
      const int64_t step = bounds.size() > 2 ? bounds[2] : 1;
      if (step == 0) throw RenderError("range() step must not be zero");
      Array out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= kMaxRangeLength) throw RenderError("range() longer than 1048576 items");
        out.emplace_back(i);
        if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
      }
      return Value::array(std::move(out));
    }));
    const auto make_object = [](const CallArgs& args, const char* what) {
      Object object;
      if (!args.positional.empty()) {
        if (args.positional.size() > 1 || !args.positional[0].is_object()) {
          throw RenderError(fmt::format("{}() takes one dict and keyword arguments", what));
        }
        object = args.positional[0].as_object();
      }
      for (const auto& [key, value] : args.keyword) object.set(key, value);
      return object;
    };
    globals.set("dict", Value::callable("dict", [make_object](const CallArgs& args) {
      return Value::object(make_object(args, "dict"));
    }));
    globals.set("namespace", Value::callable("namespace", [this, make_object](const CallArgs& args) {
      Value ns = Value::make_namespace(make_object(args, "namespace"));
      remember_namespace(ns);
      return ns;
    }));
    globals.set("raise_exception", Value::callable("raise_exception", [](const CallArgs& args) -> Value {
      throw RaisedError(args.positional.empty() ? std::string("raise_exception() called")
                                                : args.positional[0].to_output());
    }));
    globals.set("strftime_now", Value::callable("strftime_now", [this](const CallArgs& args) {
      if (args.positional.size() != 1 || !args.positional[0].is_string()) {
        throw RenderError("strftime_now() takes one format string");
      }
      std::tm tm{};
      if (options_.local_time) {
        tm = options_.local_time();
      } else {
        const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
        localtime_r(&now, &tm);
      }
      const std::string& format = args.positional[0].as_string();
      if (format.size() > 256) throw RenderError("strftime_now() format longer than 256 bytes");
      char buffer[2048];
      const size_t n = std::strftime(buffer, sizeof(buffer), format.c_str(), &tm);
      return Value(std::string(buffer, n));
    }));
  }

  void remember_namespace(const Value& ns) {
    // Forget the ones already freed whenever the list doubles, so a loop that makes a
    // namespace per iteration keeps memory bounded by the live ones.
    if (namespaces_.size() >= 2 * namespaces_live_hint_) {
      std::erase_if(namespaces_, [](const std::weak_ptr<Object>& h) { return h.expired(); });
      namespaces_live_hint_ = std::max<size_t>(namespaces_.size(), 16);
    }
    namespaces_.push_back(ns.namespace_handle());
  }

  const RenderOptions& options_;
  std::vector<std::weak_ptr<Object>> namespaces_;
  size_t namespaces_live_hint_ = 16;
  int call_depth_ = 0;
  int64_t num_iterations_ = 0;
};

}  // namespace

std::string render_body(const Body& body, const Value& context, const RenderOptions& options) {
  return Renderer(options).run(body, context);
}

}  // namespace vellum::jinja
