// UTF-8 coding and Python's str.upper/lower/title/capitalize for the scripts chat content uses
// most: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (other code points are left as they
// are; Python's special cases such as 'ß'.upper() == 'SS' are not reproduced).
#include "tokenizer/jinja/builtins.h"

namespace vellum::jinja {
namespace {

bool in(uint32_t c, uint32_t lo, uint32_t hi) { return c >= lo && c <= hi; }

// Latin Extended-A pairs upper/lower as (even, odd), except these runs that pair (odd, even).
bool odd_upper_run(uint32_t c) { return in(c, 0x139, 0x148) || in(c, 0x179, 0x17E); }
bool no_case_latin_a(uint32_t c) { return c == 0x130 || c == 0x131 || c == 0x138 || c == 0x149 || c == 0x17F; }

uint32_t to_upper(uint32_t c) {
  if (c < 0x80) return in(c, 'a', 'z') ? c - 32 : c;
  if (in(c, 0xE0, 0xFE) && c != 0xF7) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (in(c, 0x100, 0x17F)) {
    if (c == 0x131) return 'I';
    if (c == 0x17F) return 'S';
    if (no_case_latin_a(c)) return c;
    if (odd_upper_run(c)) return c % 2 == 0 ? c - 1 : c;
    return c % 2 == 1 ? c - 1 : c;
  }
  if (c == 0x3C2) return 0x3A3;  // final sigma
  if (in(c, 0x3B1, 0x3C9)) return c - 0x20;
  if (in(c, 0x430, 0x44F)) return c - 0x20;
  if (in(c, 0x450, 0x45F)) return c - 0x50;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c < 0x80) return in(c, 'A', 'Z') ? c + 32 : c;
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (in(c, 0x100, 0x17F)) {
    if (c == 0x130) return 'i';
    if (no_case_latin_a(c)) return c;
    if (odd_upper_run(c)) return c % 2 == 1 ? c + 1 : c;
    return c % 2 == 0 ? c + 1 : c;
  }
  if (in(c, 0x391, 0x3A9) && c != 0x3A2) return c + 0x20;
  if (in(c, 0x410, 0x42F)) return c + 0x20;
  if (in(c, 0x400, 0x40F)) return c + 0x50;
  return c;
}

bool is_cased(uint32_t c) { return to_upper(c) != c || to_lower(c) != c || c == 0xDF; }

// Applies fn(code_point, index) to every code point of text.
template <typename Fn>
std::string map_code_points(std::string_view text, Fn fn) {
  std::string out;
  out.reserve(text.size());
  size_t index = 0;
  for (size_t i = 0; i < text.size();) {
    size_t n = 0;
    const uint32_t c = decode_utf8(text, i, &n);
    if (n == 1 && c >= 0x80) {
      out += text[i];  // invalid byte: keep it as is
    } else {
      append_utf8(out, fn(c, index));
    }
    i += n;
    ++index;
  }
  return out;
}

}  // namespace

uint32_t decode_utf8(std::string_view text, size_t i, size_t* length) {
  const auto c = static_cast<unsigned char>(text[i]);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > text.size()) n = 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) n = 1;  // truncated sequence
  }
  *length = n;
  if (n == 1) return c;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string python_upper(std::string_view text) {
  return map_code_points(text, [](uint32_t c, size_t) { return to_upper(c); });
}

std::string python_lower(std::string_view text) {
  return map_code_points(text, [](uint32_t c, size_t) { return to_lower(c); });
}

std::string python_title(std::string_view text) {
  bool previous_cased = false;
  return map_code_points(text, [&](uint32_t c, size_t) {
    const bool cased = is_cased(c);
    const uint32_t mapped = cased ? (previous_cased ? to_lower(c) : to_upper(c)) : c;
    previous_cased = cased;
    return mapped;
  });
}

std::string python_capitalize(std::string_view text) {
  return map_code_points(text, [](uint32_t c, size_t index) { return index == 0 ? to_upper(c) : to_lower(c); });
}

bool is_word_code_point(uint32_t c) {
  return c >= 0x80 ? is_cased(c) || c >= 0x2E80 : (std::isalnum(static_cast<int>(c)) != 0 || c == '_');
}

}  // namespace vellum::jinja
