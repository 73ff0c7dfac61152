#include "benchserve/response_stream.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <utility>

namespace vellum::benchserve {

namespace {

// The message of an OpenAI-style error object ({"error": {"message": ...}} or {"error": "..."}).
std::string error_text(const nlohmann::json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object() && error.contains("message") && error["message"].is_string()) {
    return error["message"].get<std::string>();
  }
  return error.dump();
}

}  // namespace

ResponseStreamTracker::ResponseStreamTracker(ApiKind kind, double start_time) : kind_(kind) {
  out_.start_time = start_time;
  last_content_time_ = start_time;
}

void ResponseStreamTracker::on_bytes(std::string_view bytes, double now) {
  for (const SseEvent& event : parser_.feed(bytes)) on_event(event, now);
}

RequestOutput ResponseStreamTracker::finish(double now) {
  if (std::optional<SseEvent> last = parser_.finish()) on_event(*last, now);
  out_.latency = last_content_time_ - out_.start_time;
  out_.output_tokens = usage_completion_tokens_ > 0 ? usage_completion_tokens_
                                                    : num_content_chunks_;
  if (out_.error.empty() && !got_content_) {
    out_.error = "the stream ended without a content chunk (no 'choices'), so TTFT is unknown";
  }
  out_.success = out_.error.empty();
  return std::move(out_);
}

void ResponseStreamTracker::fail(std::string message) {
  if (out_.error.empty()) out_.error = std::move(message);
}

void ResponseStreamTracker::on_event(const SseEvent& event, double now) {
  if (event.data == "[DONE]") return;
  const nlohmann::json chunk = nlohmann::json::parse(event.data, nullptr, false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    fail("the stream sent a chunk that is not a JSON object: " + event.data.substr(0, 200));
    return;
  }
  if (event.event == "error" || chunk.contains("error")) {
    fail("error event in the stream: " + error_text(chunk.contains("error") ? chunk["error"] : chunk));
    return;
  }
  const auto choices = chunk.find("choices");
  if (choices != chunk.end() && choices->is_array() && !choices->empty()) {
    if (!got_content_) {
      out_.ttft = now - out_.start_time;
      got_content_ = true;
    } else {
      out_.itl.push_back(now - last_content_time_);
    }
    last_content_time_ = now;
    ++num_content_chunks_;
    const nlohmann::json& choice = (*choices)[0];
    const nlohmann::json* text = nullptr;
    if (kind_ == ApiKind::kCompletions) {
      if (choice.contains("text")) text = &choice["text"];
    } else if (choice.contains("delta") && choice["delta"].is_object() &&
               choice["delta"].contains("content")) {
      text = &choice["delta"]["content"];
    }
    if (text != nullptr && text->is_string()) out_.generated_text += text->get<std::string>();
  }
  const auto usage = chunk.find("usage");
  if (usage != chunk.end() && usage->is_object() && usage->contains("completion_tokens") &&
      (*usage)["completion_tokens"].is_number_integer()) {
    usage_completion_tokens_ = (*usage)["completion_tokens"].get<int64_t>();
  }
}

}  // namespace vellum::benchserve
