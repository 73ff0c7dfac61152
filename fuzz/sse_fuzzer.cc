// The bench-serve client's SSE parser: arbitrary bytes as a response body, fed whole and in
// chunks of every size the first byte picks. The events must not depend on the chunking.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "benchserve/sse_parser.h"
#include "fuzz_util.h"

namespace {

std::vector<vellum::benchserve::SseEvent> parse(std::string_view body, size_t chunk) {
  vellum::benchserve::SseParser parser;
  std::vector<vellum::benchserve::SseEvent> events;
  for (size_t pos = 0; pos < body.size(); pos += chunk) {
    for (auto& e : parser.feed(body.substr(pos, chunk))) events.push_back(std::move(e));
  }
  if (auto last = parser.finish()) events.push_back(std::move(*last));
  return events;
}

bool same(const std::vector<vellum::benchserve::SseEvent>& a,
          const std::vector<vellum::benchserve::SseEvent>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.event == y.event && x.data == y.data;
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t chunk = 1 + data[0] % 17;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto whole = parse(body, std::max<size_t>(1, body.size()));
  if (!same(whole, parse(body, chunk))) vellum::fuzz::fail("events depend on the chunking");
  if (!same(whole, parse(body, 1))) vellum::fuzz::fail("events depend on the chunking");
  return 0;
}
