#include "tokenizer/jinja/chat_template.h"

#include <fstream>
#include <sstream>

#include "common/check.h"
#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {

namespace {

// transformers' continue_final_message: find the last message's text (its last text part for
// multimodal content) in the prompt and drop everything the template appended after it. When
// the template trimmed the message, cut after the trimmed text.
template <typename Json>
void cut_after_final_message(std::string& prompt, const Json& messages) {
  VELLUM_CHECK(!messages.empty(), ErrorCode::kInvalidArgument,
               "continue_final_message needs at least one message to continue");
  const Json content = messages.back().contains("content") ? messages.back()["content"] : Json();
  std::string final_text;
  bool found = false;
  if (content.is_string()) {
    final_text = content.template get<std::string>();
    found = true;
  } else if (content.is_array()) {
    for (auto it = content.rbegin(); it != content.rend() && !found; ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string()) {
        final_text = (*it)["text"].template get<std::string>();
        found = true;
      }
    }
  }
  VELLUM_CHECK(found, ErrorCode::kInvalidArgument,
               "continue_final_message is set but the final message has no text content to continue");
  const std::string stripped = python_strip(final_text, Value(), true, true);
  const std::string lstripped = python_strip(final_text, Value(), true, false);
  const size_t at = prompt.rfind(stripped);
  VELLUM_CHECK(at != std::string::npos, ErrorCode::kInvalidArgument,
               "continue_final_message is set but the final message does not appear in the rendered "
               "prompt: the chat template changes it; check the template and the final message");
  if (prompt.compare(at, lstripped.size(), lstripped) == 0) {
    prompt.resize(at + lstripped.size());  // the template kept the message's trailing space
  } else {
    prompt.resize(at + stripped.size());
  }
}

}  // namespace

template <typename Json>
std::string ChatTemplate::apply_impl(const Json& messages, const ChatTemplateOptions& options) const {
  VELLUM_CHECK(messages.is_array(), ErrorCode::kInvalidArgument,
               "chat messages must be a JSON array of {{\"role\", \"content\"}} objects, got {}",
               messages.type_name());
  VELLUM_CHECK(!(options.continue_final_message && options.add_generation_prompt),
               ErrorCode::kInvalidArgument,
               "continue_final_message and add_generation_prompt cannot both be set: the first "
               "continues the last message, the second starts a new assistant turn");
  VELLUM_CHECK(options.tools.is_null() || options.tools.is_array(), ErrorCode::kInvalidArgument,
               "chat template tools must be a JSON array of tool schemas or null, got {}",
               options.tools.type_name());
  VELLUM_CHECK(options.extra_context.is_null() || options.extra_context.is_object(),
               ErrorCode::kInvalidArgument,
               "chat template extra context must be a JSON object of variables, got {}",
               options.extra_context.type_name());
  // Same variables as transformers' render_jinja_template: extra keyword variables first, then
  // the fixed ones (HF passes tools=None explicitly, so `tools is defined` holds, `tools` is none).
  Object context;
  if (options.extra_context.is_object()) {
    for (auto it = options.extra_context.begin(); it != options.extra_context.end(); ++it) {
      context.set(it.key(), Value::from_json(it.value()));
    }
  }
  context.set("messages", Value::from_json(messages));
  context.set("tools", Value::from_json(options.tools));
  context.set("add_generation_prompt", Value(options.add_generation_prompt));
  context.set("bos_token", Value(options.bos_token));
  context.set("eos_token", Value(options.eos_token));
  RenderOptions render_options;
  render_options.local_time = options.local_time;
  std::string prompt = template_.render(Value::object(std::move(context)), render_options);
  if (options.continue_final_message) cut_after_final_message(prompt, messages);
  return prompt;
}

std::string ChatTemplate::apply(const nlohmann::json& messages, const ChatTemplateOptions& options) const {
  return apply_impl(messages, options);
}

std::string ChatTemplate::apply(const nlohmann::ordered_json& messages,
                                const ChatTemplateOptions& options) const {
  return apply_impl(messages, options);
}

std::string apply_chat_template(const std::string& template_source, const nlohmann::json& messages,
                                const ChatTemplateOptions& options) {
  return ChatTemplate::parse(template_source).apply(messages, options);
}

std::string apply_chat_template(const std::string& template_source,
                                const nlohmann::ordered_json& messages,
                                const ChatTemplateOptions& options) {
  return ChatTemplate::parse(template_source).apply(messages, options);
}

std::string select_chat_template(const nlohmann::json& field, bool has_tools) {
  if (field.is_string()) return field.get<std::string>();
  VELLUM_CHECK(field.is_array(), ErrorCode::kInvalidModel,
               "chat_template must be a string or a list of {{\"name\", \"template\"}} objects, "
               "got {}", field.type_name());
  const nlohmann::json* fallback = nullptr;
  const nlohmann::json* tool_use = nullptr;
  for (const auto& entry : field) {
    VELLUM_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                     entry["name"].is_string() && entry["template"].is_string(),
                 ErrorCode::kInvalidModel,
                 "each chat_template list entry must be {{\"name\": str, \"template\": str}}");
    if (entry["name"] == "default") fallback = &entry["template"];
    if (entry["name"] == "tool_use") tool_use = &entry["template"];
  }
  if (has_tools && tool_use != nullptr) return tool_use->get<std::string>();
  VELLUM_CHECK(fallback != nullptr, ErrorCode::kInvalidModel,
               "chat_template list has no 'default' entry{}; pass --chat-template FILE",
               has_tools ? " and no 'tool_use' entry" : "");
  return fallback->get<std::string>();
}

std::string load_chat_template_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  VELLUM_CHECK(file.good(), ErrorCode::kIo,
               "cannot open chat template file '{}': check the --chat-template path", path);
  std::ostringstream text;
  text << file.rdbuf();
  VELLUM_CHECK(!file.bad(), ErrorCode::kIo, "error reading chat template file '{}'", path);
  return text.str();
}

}  // namespace vellum::jinja
