#include "server/openai_protocol.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

namespace vellum::server {
namespace {

using nlohmann::ordered_json;

// Thrown inside this file only; the parse_* functions turn it into their return value.
struct RequestError {
  ApiError error;
};

[[noreturn]] void fail_type(const std::string& key, const char* expected) {
  throw RequestError{ApiError::invalid_request(fmt::format("'{}' must be {}", key, expected), key)};
}

[[noreturn]] void fail_value(std::string message, const std::string& key) {
  throw RequestError{ApiError::bad_request(std::move(message), key)};
}

std::optional<int64_t> as_integer(const ordered_json& value) {
  if (value.is_number_unsigned()) {
    const auto v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    // Pydantic's lax mode takes 2.0 for an int, but not 2.5.
    const double v = value.get<double>();
    if (std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9.0e18) {
      return static_cast<int64_t>(v);
    }
  }
  return std::nullopt;
}

int32_t as_token_id(const ordered_json& value, const std::string& key) {
  const auto v = as_integer(value);
  if (!v || *v < std::numeric_limits<int32_t>::min() || *v > std::numeric_limits<int32_t>::max()) {
    fail_type(key, "a list of token ids (integers)");
  }
  return static_cast<int32_t>(*v);
}

// Typed access to the fields of one JSON object. A field that is absent or null reads as nullopt;
// one of the wrong type fails the request with "Bad Request" naming the field.
class Fields {
 public:
  explicit Fields(const ordered_json& object) : object_(object) {}

  const ordered_json* find(const char* key) const {
    const auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }
  // Given at all, null included.
  bool present(const char* key) const { return object_.contains(key); }
  const ordered_json& body() const { return object_; }

  std::optional<int64_t> integer(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    const auto i = as_integer(*v);
    if (!i) fail_type(key, "an integer");
    return i;
  }
  std::optional<double> number(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number()) fail_type(key, "a number");
    return v->get<double>();
  }
  std::optional<bool> boolean(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean()) fail_type(key, "a boolean");
    return v->get<bool>();
  }
  std::optional<std::string> string(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string()) fail_type(key, "a string");
    return v->get<std::string>();
  }
  // A string or a list of strings.
  std::optional<std::vector<std::string>> strings(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
    if (!v->is_array()) fail_type(key, "a string or a list of strings");
    std::vector<std::string> out;
    for (const auto& item : *v) {
      if (!item.is_string()) fail_type(key, "a string or a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  std::optional<std::vector<int32_t>> token_ids(const char* key) const {
    const ordered_json* v = find(key);
    if (v == nullptr) return std::nullopt;
    if (!v->is_array()) fail_type(key, "a list of token ids (integers)");
    std::vector<int32_t> out;
    out.reserve(v->size());
    for (const auto& item : *v) out.push_back(as_token_id(item, key));
    return out;
  }
  const ordered_json* object(const char* key) const {
    const ordered_json* v = find(key);
    if (v != nullptr && !v->is_object()) fail_type(key, "an object");
    return v;
  }
  const ordered_json* array(const char* key) const {
    const ordered_json* v = find(key);
    if (v != nullptr && !v->is_array()) fail_type(key, "a list");
    return v;
  }

 private:
  const ordered_json& object_;
};

template <typename T>
void set_if(std::optional<T> value, T& field) {
  if (value) field = *value;
}

ordered_json parse_body(const std::string& body) {
  ordered_json j;
  try {
    j = ordered_json::parse(body);
  } catch (const ordered_json::exception& e) {
    // parse_error for bad syntax, out_of_range for a number no double holds (1E400).
    throw RequestError{ApiError::invalid_request(
        fmt::format("The request body is not valid JSON: {}", e.what()))};
  }
  if (!j.is_object()) {
    throw RequestError{ApiError::invalid_request("The request body must be a JSON object")};
  }
  return j;
}

std::map<int32_t, float> parse_logit_bias(const ordered_json& bias) {
  std::map<int32_t, float> out;
  // Every bad key is named at once (vLLM), so a client fixes them in one go.
  std::vector<std::string> bad_keys;
  for (const auto& [key, value] : bias.items()) {
    int64_t id = 0;
    const char* end = key.data() + key.size();
    const auto [ptr, ec] = std::from_chars(key.data(), end, id);
    if (ec != std::errc() || ptr != end || key.empty() ||
        id < std::numeric_limits<int32_t>::min() || id > std::numeric_limits<int32_t>::max()) {
      bad_keys.push_back("'" + key + "'");
      continue;
    }
    if (!value.is_number()) {
      fail_value(fmt::format("logit_bias: the bias of token {} must be a number, got {}", key,
                             value.dump()),
                 "logit_bias");
    }
    // The API clamps each bias to [-100, 100] (vLLM's to_sampling_params).
    out[static_cast<int32_t>(id)] =
        static_cast<float>(std::clamp(value.get<double>(), -100.0, 100.0));
  }
  if (!bad_keys.empty()) {
    fail_value(fmt::format("logit_bias keys must be token ids (integers as strings); not token "
                           "ids: {}",
                           fmt::join(bad_keys, ", ")),
               "logit_bias");
  }
  return out;
}

// Fields and validators shared by completions and chat completions.
void parse_generation_fields(const Fields& f, GenerationRequest& r) {
  r.model = f.string("model");
  SamplingParams& p = r.params;
  set_if(f.integer("n"), p.n);
  // Like vLLM V1, no best_of: refused rather than ignored.
  if (auto best_of = f.integer("best_of"); best_of && *best_of > 1) {
    fail_value(fmt::format("best_of={} is not supported (as in vLLM V1); ask for n samples "
                           "and rank them by their logprobs instead.",
                           *best_of),
               "best_of");
  }
  set_if(f.number("presence_penalty"), p.presence_penalty);
  set_if(f.number("frequency_penalty"), p.frequency_penalty);
  set_if(f.number("repetition_penalty"), p.repetition_penalty);
  set_if(f.number("temperature"), p.temperature);
  set_if(f.number("top_p"), p.top_p);
  set_if(f.integer("top_k"), p.top_k);
  set_if(f.number("min_p"), p.min_p);
  if (auto seed = f.integer("seed")) p.seed = *seed;
  set_if(f.strings("stop"), p.stop);
  set_if(f.token_ids("stop_token_ids"), p.stop_token_ids);
  set_if(f.boolean("ignore_eos"), p.ignore_eos);
  set_if(f.integer("min_tokens"), p.min_tokens);
  set_if(f.boolean("include_stop_str_in_output"), p.include_stop_str_in_output);
  set_if(f.boolean("skip_special_tokens"), p.skip_special_tokens);
  set_if(f.boolean("spaces_between_special_tokens"), p.spaces_between_special_tokens);
  if (const ordered_json* bias = f.object("logit_bias")) p.logit_bias = parse_logit_bias(*bias);
  if (auto allowed = f.token_ids("allowed_token_ids")) p.allowed_token_ids = std::move(*allowed);
  if (f.has("bad_words")) {
    if (!f.find("bad_words")->is_array()) fail_type("bad_words", "a list of strings");
    set_if(f.strings("bad_words"), p.bad_words);
  }
  if (auto prompt_logprobs = f.integer("prompt_logprobs")) {
    if (*prompt_logprobs < 0 && *prompt_logprobs != -1) {
      fail_value("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs");
    }
    p.prompt_logprobs = *prompt_logprobs;
  }
  if (auto truncate = f.integer("truncate_prompt_tokens")) {
    if (*truncate < -1) {
      fail_value(fmt::format("truncate_prompt_tokens must be -1 or at least 1, got {}.", *truncate),
                 "truncate_prompt_tokens");
    }
    p.truncate_prompt_tokens = *truncate;
  }
  if (auto side = f.string("truncation_side")) {
    if (*side != "left" && *side != "right") {
      fail_value(fmt::format("truncation_side must be \"left\" or \"right\", got \"{}\"", *side),
                 "truncation_side");
    }
    r.truncate_from_right = *side == "right";
  }
  // vLLM's logprobs of named tokens: not computed by Vellum's sampler yet; refused rather than
  // answered without them.
  if (f.has("logprob_token_ids")) {
    fail_value("logprob_token_ids is not supported: ask for top logprobs (logprobs / "
               "top_logprobs) instead",
               "logprob_token_ids");
  }
  set_if(f.boolean("use_beam_search"), p.use_beam_search);
  set_if(f.number("length_penalty"), p.length_penalty);

  set_if(f.boolean("stream"), r.stream);
  if (const ordered_json* options = f.object("stream_options")) {
    if (!r.stream) {
      fail_value("Stream options can only be defined when `stream=True`.", "stream_options");
    }
    const Fields o(*options);
    set_if(o.boolean("include_usage"), r.stream_options.include_usage);
    set_if(o.boolean("continuous_usage_stats"), r.stream_options.continuous_usage_stats);
  }
  if (r.stream && p.prompt_logprobs) {
    fail_value("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
  }
  if (r.stream && p.use_beam_search) {
    fail_value("Streaming is not currently supported with beam search", "stream");
  }
  if (auto priority = f.integer("priority")) {
    if (*priority < std::numeric_limits<int>::min() ||
        *priority > std::numeric_limits<int>::max()) {
      fail_value("priority is out of range", "priority");
    }
    r.priority = static_cast<int>(*priority);
  }
  r.request_id = f.string("request_id");
  r.cache_salt = f.string("cache_salt");
  if (r.cache_salt && r.cache_salt->empty()) {
    fail_value("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
  }
  set_if(f.boolean("echo"), r.echo);
  set_if(f.boolean("return_token_ids"), r.return_token_ids);
  set_if(f.boolean("return_tokens_as_token_ids"), r.return_tokens_as_token_ids);

  if (auto error = parse_structured_outputs(f.body(), p)) throw RequestError{std::move(*error)};
}

Prompt parse_token_prompt(const ordered_json& ids) {
  std::vector<int32_t> tokens;
  tokens.reserve(ids.size());
  for (const auto& id : ids) tokens.push_back(as_token_id(id, "prompt"));
  return tokens;
}

std::vector<Prompt> parse_prompts(const Fields& f) {
  const ordered_json* prompt = f.find("prompt");
  constexpr const char* kMissing = "Either prompt or prompt_embeds must be provided and non-empty.";
  if (f.has("prompt_embeds")) {
    throw RequestError{ApiError::not_implemented("prompt_embeds is not supported by this server",
                                                 "prompt_embeds")};
  }
  if (prompt == nullptr) fail_value(kMissing, "prompt");
  if (prompt->is_string()) return {prompt->get<std::string>()};
  if (!prompt->is_array()) {
    fail_type("prompt", "a string, a list of strings, a list of token ids or a list of lists of "
                        "token ids");
  }
  if (prompt->empty()) fail_value(kMissing, "prompt");
  const ordered_json& first = prompt->front();
  if (first.is_number()) return {parse_token_prompt(*prompt)};
  std::vector<Prompt> prompts;
  for (const auto& item : *prompt) {
    if (item.is_string() && first.is_string()) {
      prompts.emplace_back(item.get<std::string>());
    } else if (item.is_array() && first.is_array()) {
      if (item.empty()) fail_value(kMissing, "prompt");
      prompts.push_back(parse_token_prompt(item));
    } else {
      fail_type("prompt", "a string, a list of strings, a list of token ids or a list of lists "
                          "of token ids");
    }
  }
  return prompts;
}

// Text of a message's content: a string, or the text parts of a list joined by newlines (vLLM's
// "string" content format).
std::string content_text(const ordered_json& content) {
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) fail_type("messages", "a list of messages with string or list content");
  std::string text;
  bool first = true;
  for (const auto& part : content) {
    if (!part.is_object()) {
      fail_type("messages", "a list of messages whose content parts have a 'type'");
    }
    const Fields p(part);
    const auto type = p.string("type");
    if (!type) fail_type("messages", "a list of messages whose content parts have a 'type'");
    if (*type != "text") {
      throw RequestError{ApiError::not_implemented(
          fmt::format("content parts of type '{}' are not supported by this server", *type),
          "messages")};
    }
    const auto part_text = p.string("text");
    if (!part_text) fail_type("messages", "a list of messages whose text parts have 'text'");
    if (!first) text += "\n";
    text += *part_text;
    first = false;
  }
  return text;
}

// Normalizes the messages for the template (list content flattened to text), keeping every other
// field and the key order. Returns the messages and the last one's role and content.
ordered_json parse_messages(const ordered_json& messages, std::string& last_role,
                            std::string& last_content) {
  if (!messages.is_array()) fail_type("messages", "a list of messages");
  if (messages.empty()) fail_value("messages must not be empty", "messages");
  ordered_json out = ordered_json::array();
  for (const auto& message : messages) {
    if (!message.is_object()) fail_type("messages", "a list of message objects");
    const Fields m(message);
    const auto role = m.string("role");
    if (!role) fail_type("messages", "a list of messages that each have a 'role'");
    ordered_json copy = message;
    if (message.contains("content")) {
      last_content = content_text(message["content"]);
      if (message["content"].is_array()) copy["content"] = last_content;
    } else {
      last_content.clear();
    }
    last_role = *role;
    out.push_back(std::move(copy));
  }
  return out;
}

// The template arguments of a chat request (shared by chat completions and /tokenize).
ChatTemplateRequest parse_chat_template_fields(const Fields& f, std::string& last_role,
                                               std::string& last_content) {
  ChatTemplateRequest chat;
  const ordered_json* messages = f.find("messages");
  if (messages == nullptr) fail_type("messages", "a list of messages (the field is required)");
  chat.messages_json = parse_messages(*messages, last_role, last_content).dump();
  set_if(f.boolean("add_generation_prompt"), chat.add_generation_prompt);
  set_if(f.boolean("continue_final_message"), chat.continue_final_message);
  if (chat.add_generation_prompt && chat.continue_final_message) {
    fail_value("Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
               "continue_final_message");
  }
  if (const ordered_json* tools = f.array("tools")) chat.tools_json = tools->dump();
  set_if(f.string("chat_template"), chat.chat_template);
  ordered_json kwargs = ordered_json::object();
  if (const ordered_json* extra = f.object("chat_template_kwargs")) kwargs = *extra;
  if (const ordered_json* documents = f.array("documents")) kwargs["documents"] = *documents;
  if (!kwargs.empty()) chat.kwargs_json = kwargs.dump();
  return chat;
}

template <typename T, typename Fn>
Parsed<T> parse_with(const std::string& body, Fn&& fill) {
  try {
    const ordered_json j = parse_body(body);
    T request;
    fill(Fields(j), request);
    return request;
  } catch (const RequestError& e) {
    return e.error;
  }
}

// A completion or chat request, starting from the model's sampling defaults.
template <typename T, typename Fn>
Parsed<T> parse_generation_with(const std::string& body, const SamplingParams& defaults,
                                Fn&& fill) {
  return parse_with<T>(body, [&](const Fields& f, T& r) {
    SamplingParams& p = r.params;
    p.temperature = defaults.temperature;
    p.top_p = defaults.top_p;
    p.top_k = defaults.top_k;
    p.min_p = defaults.min_p;
    p.repetition_penalty = defaults.repetition_penalty;
    fill(f, r);
  });
}

}  // namespace

Parsed<CompletionRequest> parse_completion_request(const std::string& body,
                                                   const SamplingParams& defaults) {
  return parse_generation_with<CompletionRequest>(
      body, defaults, [](const Fields& f, CompletionRequest& r) {
    parse_generation_fields(f, r);
    r.prompts = parse_prompts(f);
    SamplingParams& p = r.params;
    // CompletionRequest.max_tokens defaults to 16; an explicit null means "up to the context".
    p.max_tokens = f.present("max_tokens") ? f.integer("max_tokens") : std::optional<int64_t>(16);
    r.logprobs = f.integer("logprobs");
    if (r.logprobs && *r.logprobs < 0) {
      fail_value("`logprobs` must be a positive value.", "logprobs");
    }
    p.logprobs = r.logprobs;
    if (r.echo && !p.prompt_logprobs) p.prompt_logprobs = r.logprobs;
    // echo with max_tokens = 0 returns the prompt only; vLLM still generates one token.
    if (r.echo && p.max_tokens == 0) {
      r.echo_only = true;
      p.max_tokens = 1;
    }
  });
}

// kv_transfer_params: only prompt_token_ids, the ids a prefill server rendered; the other keys
// steer a KV connector (disaggregated prefill), which Vellum does not have.
std::optional<std::vector<int32_t>> parse_kv_transfer_params(const Fields& f) {
  const ordered_json* params = f.find("kv_transfer_params");
  if (params == nullptr) return std::nullopt;
  if (!params->is_object()) fail_type("kv_transfer_params", "an object");
  std::optional<std::vector<int32_t>> ids;
  for (const auto& [key, value] : params->items()) {
    const std::string name = "kv_transfer_params." + key;
    if (key != "prompt_token_ids") {
      fail_value(fmt::format("{} is not supported: Vellum has no KV connector (disaggregated "
                             "prefill); only prompt_token_ids is",
                             name),
                 name);
    }
    if (value.is_null()) continue;
    if (!value.is_array() || value.empty()) fail_type(name, "a non-empty list of token ids");
    ids.emplace();
    for (const auto& id : value) ids->push_back(as_token_id(id, name));
  }
  return ids;
}

Parsed<ChatCompletionRequest> parse_chat_completion_request(const std::string& body,
                                                            const SamplingParams& defaults) {
  return parse_generation_with<ChatCompletionRequest>(
      body, defaults, [](const Fields& f, ChatCompletionRequest& r) {
    r.add_special_tokens = false;  // the chat template writes the special tokens itself
    parse_generation_fields(f, r);
    set_if(f.boolean("add_special_tokens"), r.add_special_tokens);
    std::string last_role;
    std::string last_content;
    r.chat = parse_chat_template_fields(f, last_role, last_content);
    r.response_role = r.chat.add_generation_prompt ? "assistant" : last_role;
    if (r.echo && last_role == r.response_role) r.echo_text = last_content;

    if (auto error = parse_tool_fields(f.body(), r.tools)) throw RequestError{std::move(*error)};

    SamplingParams& p = r.params;
    // max_completion_tokens wins over the deprecated max_tokens; neither: up to the context.
    p.max_tokens = f.integer("max_completion_tokens");
    if (!p.max_tokens) p.max_tokens = f.integer("max_tokens");
    set_if(f.boolean("logprobs"), r.logprobs);
    r.top_logprobs = f.integer("top_logprobs");
    if (r.top_logprobs) {
      if (*r.top_logprobs < 0 && *r.top_logprobs != -1) {
        fail_value("`top_logprobs` must be a positive value or -1.", "top_logprobs");
      }
      if (*r.top_logprobs != 0 && !r.logprobs) {
        fail_value("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs");
      }
    }
    if (r.logprobs) p.logprobs = r.top_logprobs.value_or(0);
    r.forwarded_prompt_token_ids = parse_kv_transfer_params(f);
  });
}

Parsed<TokenizeRequest> parse_tokenize_request(const std::string& body) {
  return parse_with<TokenizeRequest>(body, [](const Fields& f, TokenizeRequest& r) {
    r.model = f.string("model");
    set_if(f.boolean("return_token_strs"), r.return_token_strs);
    if (f.has("messages")) {
      std::string last_role;
      std::string last_content;
      r.chat = parse_chat_template_fields(f, last_role, last_content);
      r.add_special_tokens = false;
    } else {
      r.prompt = f.string("prompt");
      if (!r.prompt) fail_type("prompt", "a string (or give 'messages')");
    }
    set_if(f.boolean("add_special_tokens"), r.add_special_tokens);
  });
}

Parsed<DetokenizeRequest> parse_detokenize_request(const std::string& body) {
  return parse_with<DetokenizeRequest>(body, [](const Fields& f, DetokenizeRequest& r) {
    r.model = f.string("model");
    auto tokens = f.token_ids("tokens");
    if (!tokens) fail_type("tokens", "a list of token ids (the field is required)");
    for (int32_t id : *tokens) {
      if (id < 0) fail_value(fmt::format("token ids must be non-negative, got {}", id), "tokens");
    }
    r.tokens = std::move(*tokens);
  });
}

}  // namespace vellum::server
