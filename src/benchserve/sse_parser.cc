#include "benchserve/sse_parser.h"

namespace vellum::benchserve {

std::vector<SseEvent> SseParser::feed(std::string_view bytes) {
  std::vector<SseEvent> out;
  while (!bytes.empty()) {
    const size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      partial_line_.append(bytes);
      break;
    }
    std::string_view line = bytes.substr(0, newline);
    bytes.remove_prefix(newline + 1);
    if (!partial_line_.empty()) {
      partial_line_.append(line);
      line = partial_line_;
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    process_line(line, out);
    partial_line_.clear();
  }
  return out;
}

std::optional<SseEvent> SseParser::finish() {
  std::vector<SseEvent> out;
  if (!partial_line_.empty()) {
    std::string line = std::move(partial_line_);
    partial_line_.clear();
    if (!line.empty() && line.back() == '\r') line.pop_back();
    process_line(line, out);
  }
  process_line("", out);
  if (out.empty()) return std::nullopt;
  return std::move(out.back());
}

void SseParser::process_line(std::string_view line, std::vector<SseEvent>& out) {
  if (line.empty()) {
    if (has_data_) out.push_back(std::move(pending_));
    pending_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value =
      colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) pending_.data += '\n';
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  }
}

}  // namespace vellum::benchserve
