// Chat templates: render a conversation with the model's Jinja chat template the way Hugging
// Face's apply_chat_template does (variables messages, add_generation_prompt, bos_token,
// eos_token, tools, plus any extra keyword variables such as enable_thinking).
//
// The template text comes from GGUF `tokenizer.chat_template`, tokenizer_config.json
// `chat_template` (a string, or a list of {name, template} — see select_chat_template), or a
// file given with --chat-template (load_chat_template_file).
#pragma once

#include <ctime>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tokenizer/jinja/template.h"

namespace vellum::jinja {

struct ChatTemplateOptions {
  bool add_generation_prompt = false;  // end with the header that starts the assistant's turn
  // Leave the final (assistant) message open so the model continues it: the prompt is cut right
  // after that message's text, as transformers' continue_final_message does. Excludes
  // add_generation_prompt.
  bool continue_final_message = false;
  std::string bos_token;               // the model's BOS/EOS text, e.g. "<s>" / "</s>"
  std::string eos_token;
  // ordered_json keeps the caller's key order, which `tools | tojson` prints (as Python does);
  // a nlohmann::json assigned here converts implicitly, with its keys sorted.
  nlohmann::ordered_json tools;          // array of tool schemas; null → `tools` is none
  nlohmann::ordered_json extra_context;  // object of extra variables, e.g. {"enable_thinking": false}
  std::function<std::tm()> local_time;  // clock for strftime_now; empty → local time now
};

// A parsed chat template: parse once, apply many times, from many threads (apply is const).
class ChatTemplate {
 public:
  static ChatTemplate parse(std::string_view source) { return ChatTemplate(Template::parse(source)); }

  // messages: array of {"role": …, "content": …, …} objects, passed to the template as is.
  // The ordered_json overload keeps each message's key order (visible to `message | tojson`).
  std::string apply(const nlohmann::json& messages, const ChatTemplateOptions& options) const;
  std::string apply(const nlohmann::ordered_json& messages, const ChatTemplateOptions& options) const;

 private:
  explicit ChatTemplate(Template tmpl) : template_(std::move(tmpl)) {}
  template <typename Json>
  std::string apply_impl(const Json& messages, const ChatTemplateOptions& options) const;
  Template template_;
};

// Parses template_source and applies it once. Throws vellum::Error(kInvalidArgument) naming the
// template line for syntax and render errors (see Template).
std::string apply_chat_template(const std::string& template_source, const nlohmann::json& messages,
                                const ChatTemplateOptions& options);
std::string apply_chat_template(const std::string& template_source,
                                const nlohmann::ordered_json& messages,
                                const ChatTemplateOptions& options);

// The template text of a `chat_template` field: a string as is; for a list of
// {"name", "template"} entries the "tool_use" one when has_tools and it exists, else "default".
// Throws vellum::Error(kInvalidModel) when the field has neither shape or no usable entry.
std::string select_chat_template(const nlohmann::json& chat_template_field, bool has_tools);

// Reads a --chat-template file. Throws vellum::Error(kIo) naming the path when unreadable.
std::string load_chat_template_file(const std::string& path);

}  // namespace vellum::jinja
