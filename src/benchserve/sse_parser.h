// Incremental parser for a text/event-stream (server-sent events) response body.
//
// Bytes arrive in arbitrary pieces: an event, a line or a "\r\n" may be split across feeds.
// Lines end with "\n" or "\r\n"; an event ends at a blank line; "data:" lines (one optional
// space after the colon) are joined with "\n"; "event:" names the event; comment lines
// (starting with ':') and other fields are skipped. Not thread-safe: one parser per stream.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vellum::benchserve {

struct SseEvent {
  std::string event;  // the "event:" field, empty when absent (a plain message)
  std::string data;   // the joined "data:" lines, e.g. a JSON chunk or "[DONE]"
};

class SseParser {
 public:
  // Consumes bytes; returns the events they complete, in order. Events without data lines are
  // not returned.
  std::vector<SseEvent> feed(std::string_view bytes);

  // At the end of the stream: the last event if the stream ended without its blank line.
  std::optional<SseEvent> finish();

 private:
  void process_line(std::string_view line, std::vector<SseEvent>& out);

  std::string partial_line_;  // bytes after the last line break seen
  SseEvent pending_;          // fields of the event being read
  bool has_data_ = false;     // pending_ has at least one data line
};

}  // namespace vellum::benchserve
