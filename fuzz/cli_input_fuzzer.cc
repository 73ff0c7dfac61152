// The command line's text inputs: sizes (--kv-cache-memory 4GiB) and JSONL prompt lines
// (generate --prompts FILE.jsonl). Each input is a size and a JSONL file at once: a size parses
// to a non-negative count or is refused; every line parses or throws vellum::Error naming the
// line, never a JSON exception or undefined behaviour.
#include <cstdint>
#include <string>
#include <string_view>

#include "cli/jsonl_prompts.h"
#include "common/units.h"
#include "fuzz_util.h"
#include "vellum/status.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto bytes = vellum::parse_byte_size(text); bytes && *bytes < 0) {
    vellum::fuzz::fail("a negative size");
  }
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t end = std::min(text.find('\n', pos), text.size());
    ++line_no;
    try {
      (void)vellum::cli::parse_jsonl_prompt(text.substr(pos, end - pos), vellum::SamplingParams{},
                                            "fuzz.jsonl", line_no);
    } catch (const vellum::Error& e) {
      if (std::string_view(e.what()).find("fuzz.jsonl line") == std::string_view::npos) {
        vellum::fuzz::fail("an error that does not name the line");
      }
    }
    pos = end + 1;
  }
  return 0;
}
