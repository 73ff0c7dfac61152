#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/check.h"

namespace vellum::tokenizer {

struct RegexSplitter::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

struct MatchData {
  explicit MatchData(const pcre2_code* code)
      : data(pcre2_match_data_create_from_pattern(code, nullptr)) {
    VELLUM_CHECK(data != nullptr, ErrorCode::kOutOfMemory, "PCRE2 could not allocate match data");
  }
  ~MatchData() { pcre2_match_data_free(data); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* data;
};

// Length of the UTF-8 character at `offset` (input is valid UTF-8).
size_t char_len(std::string_view text, size_t offset) {
  const auto lead = static_cast<unsigned char>(text[offset]);
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// Appends the pieces of `piece` split by one regex.
void split_one(const pcre2_code* code, pcre2_match_data* match, std::string_view piece,
               std::vector<std::string_view>& out) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
  size_t start = 0;   // where the next match search begins
  size_t emitted = 0;  // end of the last piece emitted
  while (start < piece.size()) {
    int rc = pcre2_match(code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, match, nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // JIT code backtracks on a small machine stack; the interpreter keeps its state on the
      // heap and handles what the JIT stack cannot.
      rc = pcre2_match(code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       match, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    VELLUM_CHECK(rc >= 0, ErrorCode::kInternal, "PCRE2 match failed with error {}", rc);
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    const size_t match_begin = ovector[0];
    const size_t match_end = ovector[1];
    if (match_end == match_begin) {  // an empty match splits nothing; step over one character
      start = match_begin + (match_begin < piece.size() ? char_len(piece, match_begin) : 1);
      continue;
    }
    if (match_begin > emitted) out.push_back(piece.substr(emitted, match_begin - emitted));
    out.push_back(piece.substr(match_begin, match_end - match_begin));
    emitted = match_end;
    start = match_end;
  }
  if (emitted < piece.size()) out.push_back(piece.substr(emitted));
}

}  // namespace

RegexSplitter::RegexSplitter(std::vector<std::string> patterns) : patterns_(std::move(patterns)) {
  for (const auto& pattern : patterns_) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      VELLUM_THROW(ErrorCode::kInvalidModel,
                   "pre-tokenizer regex does not compile at offset {}: {} (pattern: {})",
                   error_offset, reinterpret_cast<const char*>(message), pattern);
    }
    auto compiled = std::make_unique<Compiled>();
    compiled->code = code;
    // JIT is an optimisation: when it is unavailable, pcre2_match interprets the pattern.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(compiled));
  }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  std::vector<std::string_view> next;
  for (const auto& compiled : compiled_) {
    MatchData match(compiled->code);
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const auto piece : pieces) split_one(compiled->code, match.data, piece, next);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace vellum::tokenizer
