// Jinja chat templates: arbitrary bytes as a template, parsed and rendered with a chat context.
// Parse and render either succeed or throw vellum::Error; neither may crash, recurse without
// bound, or run or grow past the renderer's limits (the fuzzer's -timeout and -rss_limit_mb
// catch a template that does).
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"
#include "vellum/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::json context = nlohmann::json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi <b>there</b>"},
      {"role": "assistant", "content": "Hello!",
       "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"x": 1}}}]},
      {"role": "tool", "content": "42"},
      {"role": "user", "content": "\u00dcn\u00efc\u00f6d\u00e9 \u65e5\u672c"}
    ],
    "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": true,
    "n": 5, "s": "Hello World", "xs": [3, 1, 2], "d": {"b": 1, "a": 2}
  })");
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  vellum::jinja::RenderOptions options;
  options.local_time = [] { return std::tm{}; };
  options.max_output_bytes = size_t{1} << 20;
  try {
    const auto tmpl = vellum::jinja::Template::parse(source);
    (void)tmpl.render(context, options);
  } catch (const vellum::Error&) {
  }
  return 0;
}
