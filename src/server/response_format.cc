#include "server/response_format.h"

#include <algorithm>
#include <cmath>

namespace vellum::server {

using json = nlohmann::ordered_json;

namespace {

// OpenAI writes -inf logprobs as -9999.0 (JSON has no infinity).
double clamp_logprob(float logprob) {
  if (std::isnan(logprob)) return -9999.0;
  return std::max(static_cast<double>(logprob), -9999.0);
}

json utf8_bytes(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

int64_t num_code_points(const std::string& text) {
  int64_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;  // continuation bytes are 10xxxxxx
  return count;
}

json header_json(const ResponseHeader& header) {
  return json{{"id", header.id},
              {"object", header.object},
              {"created", header.created},
              {"model", header.model}};
}

json usage_json(const Usage& usage) {
  json j{{"prompt_tokens", usage.prompt_tokens},
         {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
         {"completion_tokens", usage.completion_tokens},
         {"prompt_tokens_details", nullptr}};
  if (usage.cached_tokens) j["prompt_tokens_details"] = {{"cached_tokens", *usage.cached_tokens}};
  return j;
}

std::vector<std::pair<int32_t, float>> ranked_logprobs(const TokenLogprobs& position,
                                                       int64_t num_top) {
  std::vector<std::pair<int32_t, float>> ranked;
  ranked.reserve(position.top.size() + 1);
  ranked.emplace_back(position.token_id, position.logprob);
  for (const auto& entry : position.top) {
    if (entry.first != position.token_id) ranked.push_back(entry);
  }
  if (num_top >= 0 && ranked.size() > static_cast<size_t>(num_top)) {
    ranked.resize(static_cast<size_t>(num_top));
  }
  return ranked;
}

json completion_logprobs_json(const std::vector<int32_t>& token_ids,
                              const std::vector<const TokenLogprobs*>& positions, int64_t num_top,
                              int64_t initial_text_offset, const TokenTextFn& token_text) {
  json text_offset = json::array();
  json token_logprobs = json::array();
  json tokens = json::array();
  json top_logprobs = json::array();
  int64_t offset = initial_text_offset;
  for (size_t i = 0; i < token_ids.size(); ++i) {
    const std::string token = token_text(token_ids[i]);
    const TokenLogprobs* position = i < positions.size() ? positions[i] : nullptr;
    tokens.push_back(token);
    if (position == nullptr) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
    } else {
      token_logprobs.push_back(clamp_logprob(position->logprob));
      // The chosen token plus num_top alternatives; a dict, so equal texts collapse.
      json top = json::object();
      for (const auto& [id, logprob] :
           ranked_logprobs(*position, num_top < 0 ? -1 : num_top + 1)) {
        const std::string text = token_text(id);
        if (!top.contains(text)) top[text] = clamp_logprob(logprob);
      }
      top_logprobs.push_back(std::move(top));
    }
    text_offset.push_back(offset);
    offset += num_code_points(token);
  }
  return json{{"text_offset", std::move(text_offset)},
              {"token_logprobs", std::move(token_logprobs)},
              {"tokens", std::move(tokens)},
              {"top_logprobs", std::move(top_logprobs)}};
}

json chat_logprobs_json(const std::vector<TokenLogprobs>& positions, int64_t num_top,
                        const TokenTextFn& token_text) {
  json content = json::array();
  for (const TokenLogprobs& position : positions) {
    const std::string token = token_text(position.token_id);
    json top = json::array();
    if (num_top != 0) {
      for (const auto& [id, logprob] : ranked_logprobs(position, num_top)) {
        const std::string text = token_text(id);
        top.push_back(
            {{"token", text}, {"logprob", clamp_logprob(logprob)}, {"bytes", utf8_bytes(text)}});
      }
    }
    content.push_back({{"token", token},
                       {"logprob", clamp_logprob(position.logprob)},
                       {"bytes", utf8_bytes(token)},
                       {"top_logprobs", std::move(top)}});
  }
  return json{{"content", std::move(content)}};
}

json prompt_logprobs_json(const std::vector<TokenLogprobs>& positions,
                          const TokenTextFn& token_text) {
  json out = json::array();
  out.push_back(nullptr);
  for (const TokenLogprobs& position : positions) {
    json entry = json::object();
    auto add = [&](int32_t id, float logprob, int64_t rank) {
      const std::string key = std::to_string(id);
      if (entry.contains(key)) return;
      entry[key] = {{"logprob", clamp_logprob(logprob)},
                    {"rank", rank},
                    {"decoded_token", token_text(id)}};
    };
    add(position.token_id, position.logprob, position.rank);
    for (size_t k = 0; k < position.top.size(); ++k) {
      add(position.top[k].first, position.top[k].second, static_cast<int64_t>(k) + 1);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

json stop_reason_json(const CompletionOutput& output) {
  if (output.stop_reason_text) return *output.stop_reason_text;
  if (output.stop_reason_token) return *output.stop_reason_token;
  return nullptr;
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string sse_event(const json& data) { return "data: " + dump_json(data) + "\n\n"; }

}  // namespace vellum::server
