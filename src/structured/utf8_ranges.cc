#include "structured/utf8_ranges.h"

#include <algorithm>

namespace vellum::structured {
namespace {

size_t encoded_length(uint32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000) return 3;
  return 4;
}

std::string encode(uint32_t cp) {
  std::string out;
  append_utf8(cp, &out);
  return out;
}

// [lo, hi] share one encoded length here.
void split(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out) {
  const size_t n = encoded_length(lo);
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = encode(lo);
  const std::string b = encode(hi);
  Utf8Sequence seq;
  for (size_t i = 0; i < n; ++i) {
    seq.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  }
  out->push_back(std::move(seq));
}

}  // namespace

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool next_code_point(std::string_view text, size_t* pos, uint32_t* cp) {
  const auto at = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const size_t i = *pos;
  const uint8_t b0 = at(i);
  size_t n;
  uint32_t value;
  if (b0 < 0x80) {
    n = 1;
    value = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    value = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    value = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    value = b0 & 0x07;
  } else {
    return false;
  }
  if (i + n > text.size()) return false;
  for (size_t k = 1; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return false;
    value = (value << 6) | (at(i + k) & 0x3F);
  }
  if (encoded_length(value) != n || value > kMaxCodePoint ||
      (value >= 0xD800 && value <= 0xDFFF)) {
    return false;
  }
  *cp = value;
  *pos = i + n;
  return true;
}

std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<Utf8Sequence> out;
  hi = std::min(hi, kMaxCodePoint);
  // Pieces of one encoded length, surrogates removed.
  const uint32_t bounds[][2] = {
      {0, 0x7F}, {0x80, 0x7FF}, {0x800, 0xD7FF}, {0xE000, 0xFFFF}, {0x10000, kMaxCodePoint}};
  for (const auto& b : bounds) {
    const uint32_t a = std::max(lo, b[0]);
    const uint32_t z = std::min(hi, b[1]);
    if (a <= z) split(a, z, &out);
  }
  return out;
}

}  // namespace vellum::structured
