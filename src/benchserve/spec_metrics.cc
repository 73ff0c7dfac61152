#include "benchserve/spec_metrics.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cstdlib>
#include <string>

namespace vellum::benchserve {
namespace {

// The value of a sample line "<prefix>:<name>{labels} <value>" (or without labels).
std::optional<double> sample_value(std::string_view line, std::string_view name) {
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || line.substr(colon + 1, name.size()) != name) {
    return std::nullopt;
  }
  const std::string_view rest = line.substr(colon + 1 + name.size());
  if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) return std::nullopt;
  const size_t space = rest.rfind(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string value(rest.substr(space + 1));
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<SpecDecodeCounts> parse_spec_decode_counts(std::string_view exposition) {
  SpecDecodeCounts counts;
  bool found = false;
  size_t start = 0;
  while (start < exposition.size()) {
    size_t end = exposition.find('\n', start);
    if (end == std::string_view::npos) end = exposition.size();
    const std::string_view line = exposition.substr(start, end - start);
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (auto v = sample_value(line, "spec_decode_num_drafts_total")) {
      counts.num_drafts += *v;
      found = true;
    } else if (auto v2 = sample_value(line, "spec_decode_num_draft_tokens_total")) {
      counts.num_draft_tokens += *v2;
    } else if (auto v3 = sample_value(line, "spec_decode_num_accepted_tokens_total")) {
      counts.num_accepted_tokens += *v3;
    }
  }
  if (!found) return std::nullopt;
  return counts;
}

std::optional<SpecDecodeCounts> fetch_spec_decode_counts(const ClientConfig& config) {
  httplib::Client cli(config.server.scheme_host_port);
  cli.set_connection_timeout(10);
  cli.set_read_timeout(30);
  httplib::Headers headers(config.headers.begin(), config.headers.end());
  if (!config.api_key.empty()) headers.emplace("Authorization", "Bearer " + config.api_key);
  const httplib::Result result = cli.Get(config.server.path_prefix + "/metrics", headers);
  if (!result || result->status != 200) return std::nullopt;
  return parse_spec_decode_counts(result->body);
}

std::string format_spec_decode_line(const SpecDecodeCounts& before,
                                    const SpecDecodeCounts& after) {
  const double drafts = after.num_drafts - before.num_drafts;
  const double draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
  const double accepted = after.num_accepted_tokens - before.num_accepted_tokens;
  return fmt::format(
      "Spec decode: draft acceptance rate {:.1f} %, mean acceptance length {:.2f} ({:.0f} "
      "drafts, {:.0f} draft tokens, {:.0f} accepted; from the server's /metrics)\n",
      draft_tokens > 0 ? 100.0 * accepted / draft_tokens : 0.0,
      drafts > 0 ? 1.0 + accepted / drafts : 0.0, drafts, draft_tokens, accepted);
}

}  // namespace vellum::benchserve
