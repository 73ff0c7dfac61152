// Malformed templates and failing renders: every one is a vellum::Error(kInvalidArgument) whose
// message names the template line (and column), never a crash or a hang.
#include <gtest/gtest.h>

#include <random>

#include "jinja_test_util.h"
#include "tokenizer/jinja/chat_template.h"
#include "vellum/status.h"

namespace vellum::jinja {
namespace {

using nlohmann::json;
using testing::render;

// The message of the vellum::Error that rendering `source` throws.
std::string error_message(std::string_view source, const json& context = json::object(),
                          const RenderOptions& options = {}) {
  try {
    Template::parse(source).render(context, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-vellum exception: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error for: " << source;
  return "";
}

#define EXPECT_ERROR(source, ...)                                           \
  do {                                                                      \
    const std::string message_ = error_message(source);                     \
    for (const char* part : {__VA_ARGS__}) {                                \
      EXPECT_NE(message_.find(part), std::string::npos)                     \
          << "expected '" << part << "' in: " << message_;                  \
    }                                                                       \
  } while (0)

TEST(JinjaSyntaxErrorTest, UnclosedBlocksNameTheOpeningLine) {
  EXPECT_ERROR("line one\n{% if x %}\nbody\n", "syntax error", "'if' at line 2 is never closed",
               "{% endif %}");
  EXPECT_ERROR("{% for m in messages %}\n{{ m }}", "'for' at line 1 is never closed", "{% endfor %}");
  EXPECT_ERROR("\n\n{% macro m() %}x", "'macro' at line 3");
  EXPECT_ERROR("{% set x %}abc", "'set' at line 1", "{% endset %}");
}

TEST(JinjaSyntaxErrorTest, StrayAndUnknownTags) {
  EXPECT_ERROR("a\n\n{% endfor %}", "line 3, column 4", "unexpected '{% endfor %}'");
  EXPECT_ERROR("{% if a %}{% else %}{% elif b %}{% endif %}", "line 1, column 24", "elif");
  EXPECT_ERROR("x\n{% frobnicate %}", "line 2, column 4", "unknown statement 'frobnicate'");
  EXPECT_ERROR("{% break %}", "'break' outside of a for loop");
  EXPECT_ERROR("{% %}", "expected a statement name");
}

TEST(JinjaSyntaxErrorTest, MalformedExpressions) {
  EXPECT_ERROR("x\n{{ 1 + }}", "line 2, column 8", "expected an expression");
  EXPECT_ERROR("{{ x y }}", "line 1, column 6", "expected '}}'");
  EXPECT_ERROR("{{ 'abc }}", "line 1, column 4", "string literal is never closed");
  EXPECT_ERROR("ok\n\n  {{ x ", "line 3, column 3", "'{{' tag is never closed");
  EXPECT_ERROR("{# comment", "comment '{#' is never closed");
  EXPECT_ERROR("{{ x ; y }}", "line 1, column 6", "unexpected character ';'");
  EXPECT_ERROR("{{ [1, 2 }}", "line 1, column 10", "unexpected '}' (expected ']')");
  EXPECT_ERROR("{{ {'a' 1} }}", "expected ':'");
  EXPECT_ERROR("{% for x in %}{% endfor %}", "expected an expression");
  EXPECT_ERROR("{% for in xs %}{% endfor %}", "expected a name");
  EXPECT_ERROR("{% set = 1 %}", "expected a name");
  EXPECT_ERROR("{% macro m(a %}{% endmacro %}", "unexpected '}' (expected ')')");
  EXPECT_ERROR("{{ x) }}", "expected '}}' to end an expression, got ')'");
  EXPECT_ERROR("{{ f(a=1, 2) }}", "positional argument follows keyword argument");
  EXPECT_ERROR("{{ 99999999999999999999 }}", "out of range");
  EXPECT_ERROR("{{ x | }}", "expected a name");
  EXPECT_ERROR("{{ 'a' if }}", "expected an expression");
  EXPECT_ERROR("{% raw %}never closed", "'{% raw %}' is never closed");
}

TEST(JinjaSyntaxErrorTest, DeepNestingIsRejectedNotACrash) {
  EXPECT_ERROR("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}", "nested deeper");
  EXPECT_ERROR("{{ " + std::string(5000, '-') + "1 }}", "nested deeper");
  std::string blocks;
  for (int i = 0; i < 1000; ++i) blocks += "{% if true %}";
  EXPECT_ERROR(blocks, "nested deeper");
}

TEST(JinjaRenderErrorTest, NamesTheLineAndWhatWasWrong) {
  EXPECT_ERROR("a\n\n{{ x | nofilter }}", "render error at line 3, column 8", "unknown filter 'nofilter'");
  EXPECT_ERROR("{{ 1 is nothing }}", "unknown test 'nothing'");
  EXPECT_ERROR("\n{{ foo.bar }}", "line 2", "'foo' is undefined");
  EXPECT_ERROR("{{ foo['bar'] }}", "'foo' is undefined");
  EXPECT_ERROR("{{ nofunc() }}", "'nofunc' is undefined");
  EXPECT_ERROR("{{ 1 + 'a' }}", "unsupported operand types for +: 'int' and 'string'");
  EXPECT_ERROR("{{ 1 / 0 }}", "division by zero");
  EXPECT_ERROR("{{ 1 < 'a' }}", "not supported between");
  EXPECT_ERROR("{{ 'a' in 1 }}", "not iterable");
  EXPECT_ERROR("x\n{% for x in 5 %}{% endfor %}", "line 2", "'int' object is not iterable");
  EXPECT_ERROR("{% set x = 1 %}{% set x.a = 2 %}", "not a namespace");
  EXPECT_ERROR("{% set a, b = [1] %}", "cannot unpack 1 values into 2 names");
  EXPECT_ERROR("{{ [1].append(2) }}", "immutable");
  EXPECT_ERROR("{{ 'abc'[::0] }}", "slice step cannot be zero");
  EXPECT_ERROR("{{ none | tojson }}{{ range | tojson }}", "not JSON serializable");
  EXPECT_ERROR("{{ 'x'.split('') }}", "must not be empty");
  EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "takes 1 arguments, 2 given");
  EXPECT_ERROR("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}", "no parameter named 'b'");
  EXPECT_ERROR("{% for x in xs recursive %}{% endfor %}", "recursive for loops are not supported");
  EXPECT_ERROR("{{ 9223372036854775807 + 1 }}", "integer overflow");
}

TEST(JinjaRenderErrorTest, RaiseExceptionCarriesTheTemplateMessage) {
  const std::string message = error_message(
      "{% for m in messages %}\n  {% if m.role == 'tool' %}\n    {{ raise_exception('Unsupported role: ' ~ m.role) }}\n"
      "  {% endif %}\n{% endfor %}",
      {{"messages", json::parse(R"([{"role": "user"}, {"role": "tool"}])")}});
  EXPECT_NE(message.find("template raised an error at line 3, column 8: Unsupported role: tool"),
            std::string::npos)
      << message;
}

TEST(JinjaRenderErrorTest, RunawayTemplatesStopWithAnError) {
  EXPECT_ERROR("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "calls nested deeper than 100");
  EXPECT_ERROR("{{ range(100000000) }}", "range() longer than");
  EXPECT_ERROR("{{ 'x' * 100000000000 }}", "larger than 64 MiB");
  RenderOptions small;
  small.max_output_bytes = 100;
  const std::string message = error_message("{% for i in range(1000) %}xxxx{% endfor %}", json::object(), small);
  EXPECT_NE(message.find("exceeds the 100 byte limit"), std::string::npos) << message;
}

TEST(JinjaRenderErrorTest, ContextMustBeAnObject) {
  EXPECT_THROW(Template::parse("x").render(json::array()), Error);
}

// Property: every truncation and byte mutation of the family templates parses and renders to
// either a prompt or a vellum::Error — never a crash, another exception type or a hang.
TEST(JinjaFuzzTest, TruncatedAndMutatedTemplatesFailCleanly) {
  const json messages = json::parse(R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                        {"role": "assistant", "content": "a"}, {"role": "user", "content": "v"}])");
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  options.local_time = testing::fixed_local_time;
  const char* files[] = {"llama2.jinja", "llama3.jinja", "mistral_v3.jinja", "mistral_v7.jinja",
                         "qwen25.jinja", "qwen3.jinja",  "chatml.jinja",     "phi3.jinja",
                         "gemma.jinja",  "smollm.jinja", "deepseek.jinja"};
  std::mt19937 rng(1234);
  size_t num_runs = 0;
  size_t num_errors = 0;
  const auto try_render = [&](const std::string& source) {
    ++num_runs;
    try {
      apply_chat_template(source, messages, options);
    } catch (const Error& e) {
      ++num_errors;
      ASSERT_NE(std::string(e.what()).find("line "), std::string::npos) << e.what();
    }
  };
  const std::string specials = "{}%#-+()[]'\"|.,:~=!<>\\\n ";
  for (const char* file : files) {
    const std::string source = testing::read_test_template(file);
    for (size_t cut = 0; cut < source.size(); cut += 3) try_render(source.substr(0, cut));
    for (int i = 0; i < 150; ++i) {
      std::string mutated = source;
      const int num_edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < num_edits; ++e) {
        const size_t at = rng() % mutated.size();
        switch (rng() % 3) {
          case 0: mutated[at] = specials[rng() % specials.size()]; break;
          case 1: mutated.erase(at, 1 + rng() % 8); break;
          default: mutated.insert(at, 1, specials[rng() % specials.size()]);
        }
        if (mutated.empty()) mutated = "x";
      }
      try_render(mutated);
    }
  }
  // Most damaged templates must be rejected (a cut inside plain text can still be valid).
  EXPECT_GT(num_errors * 2, num_runs) << num_errors << " errors in " << num_runs << " runs";
}

}  // namespace
}  // namespace vellum::jinja
