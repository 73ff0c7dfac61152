#include "cli/jsonl_prompts.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/check.h"

namespace vellum::cli {
namespace {

using nlohmann::json;

class LineFields {
 public:
  LineFields(const json& line, std::string_view source, size_t line_no)
      : line_(line), source_(source), line_no_(line_no) {}

  const json* find(const char* key) const {
    const auto it = line_.find(key);
    return it == line_.end() || it->is_null() ? nullptr : &*it;
  }

  [[noreturn]] void fail(const char* key, std::string_view expected) const {
    VELLUM_THROW(ErrorCode::kInvalidArgument, "{} line {}: '{}' must be {}", source_, line_no_,
                 key, expected);
  }

  // An integer in [lo, hi] (a float with an integral value is accepted, as Python's json does).
  template <typename Int>
  void integer(const char* key, Int& field, int64_t lo = std::numeric_limits<Int>::min(),
               int64_t hi = std::numeric_limits<Int>::max()) const {
    const json* v = find(key);
    if (v == nullptr) return;
    field = static_cast<Int>(as_integer(*v, key, lo, hi));
  }

  template <typename Float>
  void number(const char* key, Float& field) const {
    const json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number()) fail(key, "a number");
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
      fail(key, "a finite number");
    }
    field = static_cast<Float>(d);
  }

  int64_t as_integer(const json& v, const char* key, int64_t lo, int64_t hi) const {
    const std::string expected = fmt::format("an integer in [{}, {}]", lo, hi);
    if (v.is_number_integer()) {
      if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi)) {
        fail(key, expected);
      }
      const int64_t i = v.get<int64_t>();
      if (i < lo || i > hi) fail(key, expected);
      return i;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) &&
          d <= static_cast<double>(hi)) {
        return static_cast<int64_t>(d);
      }
    }
    fail(key, expected);
  }

  std::vector<std::string> strings(const char* key) const {
    const json* v = find(key);
    if (v->is_string()) return {v->get<std::string>()};
    if (!v->is_array()) fail(key, "a string or a list of strings");
    std::vector<std::string> out;
    for (const json& item : *v) {
      if (!item.is_string()) fail(key, "a string or a list of strings");
      out.push_back(item.get<std::string>());
    }
    return out;
  }

  std::vector<int32_t> token_ids(const char* key) const {
    const json* v = find(key);
    if (!v->is_array()) fail(key, "a list of token ids");
    std::vector<int32_t> out;
    for (const json& item : *v) {
      out.push_back(static_cast<int32_t>(as_integer(item, key, 0, std::numeric_limits<int32_t>::max())));
    }
    return out;
  }

 private:
  const json& line_;
  std::string_view source_;
  size_t line_no_;
};

}  // namespace

std::optional<JsonlPrompt> parse_jsonl_prompt(std::string_view text, const SamplingParams& defaults,
                                              std::string_view source, size_t line_no) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return std::nullopt;
  JsonlPrompt out;
  out.line = json::parse(text, nullptr, false);
  VELLUM_CHECK(!out.line.is_discarded(), ErrorCode::kInvalidArgument,
               "{} line {}: not valid JSON (one JSON object per line)", source, line_no);
  const json& line = out.line;
  VELLUM_CHECK(line.is_object() && (line.contains("prompt") || line.contains("prompt_token_ids")),
               ErrorCode::kInvalidArgument,
               "{} line {}: each line must be an object with \"prompt\" (or \"prompt_token_ids\") "
               "and optional sampling fields",
               source, line_no);
  const LineFields f(line, source, line_no);
  if (const json* prompt = f.find("prompt")) {
    if (!prompt->is_string()) f.fail("prompt", "a string (or give \"prompt_token_ids\")");
    out.prompt = prompt->get<std::string>();
  } else if (f.find("prompt_token_ids") != nullptr) {
    out.prompt = f.token_ids("prompt_token_ids");
  } else {
    f.fail("prompt", "a string");
  }

  SamplingParams& p = out.params;
  p = defaults;
  f.number("temperature", p.temperature);
  f.number("top_p", p.top_p);
  f.integer("top_k", p.top_k);
  f.number("min_p", p.min_p);
  f.integer("n", p.n);
  f.integer("min_tokens", p.min_tokens);
  f.number("presence_penalty", p.presence_penalty);
  f.number("frequency_penalty", p.frequency_penalty);
  f.number("repetition_penalty", p.repetition_penalty);
  if (f.find("max_tokens") != nullptr) {
    int64_t max_tokens = 0;
    f.integer("max_tokens", max_tokens);
    p.max_tokens = max_tokens;
  }
  if (f.find("seed") != nullptr) {
    int64_t seed = 0;
    f.integer("seed", seed);
    p.seed = seed;
  }
  if (const json* ignore_eos = f.find("ignore_eos")) {
    if (!ignore_eos->is_boolean()) f.fail("ignore_eos", "true or false");
    p.ignore_eos = ignore_eos->get<bool>();
  }
  if (const json* beam = f.find("use_beam_search")) {
    if (!beam->is_boolean()) f.fail("use_beam_search", "true or false");
    p.use_beam_search = beam->get<bool>();
  }
  if (f.find("stop") != nullptr) p.stop = f.strings("stop");
  if (f.find("stop_token_ids") != nullptr) p.stop_token_ids = f.token_ids("stop_token_ids");
  return out;
}

}  // namespace vellum::cli
