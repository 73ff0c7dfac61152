// Template: a parsed Jinja template (the subset Hugging Face chat templates use), rendered with
// Jinja2's semantics under HF's settings (trim_blocks, lstrip_blocks, loop controls, immutable
// sandbox, HF's tojson, raise_exception and strftime_now globals).
//
//   auto tmpl = vellum::jinja::Template::parse(source);        // throws on syntax errors
//   std::string text = tmpl.render({{"messages", messages}});  // throws on render errors
//
// Parse once, render many: a Template is immutable after parse(), cheap to copy (it shares the
// syntax tree), and render() is const and safe to call from many threads at once.
// Errors are vellum::Error(ErrorCode::kInvalidArgument) whose message names the template line
// and column: "template syntax error at line 3, column 14: …", "template render error at line
// 7, column 5: …", and for the template's own raise_exception(msg): "template raised an error
// at line 2, column 36: msg".
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/value.h"

namespace vellum::jinja {

struct Stmt;

struct RenderOptions {
  // Broken-down local time for strftime_now(format). Empty: the machine's local time now.
  // Tests pass a fixed time so renders are deterministic.
  std::function<std::tm()> local_time;
  // Rendering fails (instead of exhausting memory) when the output grows past this.
  size_t max_output_bytes = size_t{64} << 20;
};

class Template {
 public:
  static Template parse(std::string_view source);

  // context: a JSON object whose keys become template variables. nlohmann::json stores object
  // keys sorted; pass a Value built from nlohmann::ordered_json to keep insertion order (it
  // matters for `tojson` of tool schemas and for iterating dicts).
  std::string render(const nlohmann::json& context, const RenderOptions& options = {}) const;
  std::string render(const Value& context, const RenderOptions& options = {}) const;

 private:
  using Body = std::vector<std::unique_ptr<Stmt>>;
  explicit Template(std::shared_ptr<const Body> body) : body_(std::move(body)) {}
  std::shared_ptr<const Body> body_;  // shared, immutable
};

}  // namespace vellum::jinja
