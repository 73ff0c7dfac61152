#include "tokenizer/unicode.h"

#include "common/check.h"

namespace vellum::tokenizer {

namespace {

// Valid range of the second byte for a lead byte (Unicode Table 3-7); later bytes are 80..BF.
struct SecondByteRange {
  uint8_t lo;
  uint8_t hi;
};

SecondByteRange second_byte_range(uint8_t lead) {
  if (lead == 0xE0) return {0xA0, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};
  return {0x80, 0xBF};
}

// Sequence length for a valid lead byte, 0 for a byte that cannot start a sequence.
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

std::array<int, 0x180> build_unicode_to_byte() {
  std::array<int, 0x180> table{};
  table.fill(-1);
  const auto& forward = byte_to_unicode();
  for (int b = 0; b < 256; ++b) {
    size_t offset = 0;
    const uint32_t cpt = next_codepoint(forward[b], offset);
    table[cpt] = b;
  }
  return table;
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    const auto lead = static_cast<uint8_t>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    const size_t len = sequence_length(lead);
    if (len == 0 || i + len > n) return false;
    const auto range = second_byte_range(lead);
    const auto second = static_cast<uint8_t>(text[i + 1]);
    if (second < range.lo || second > range.hi) return false;
    for (size_t k = 2; k < len; ++k) {
      const auto c = static_cast<uint8_t>(text[i + k]);
      if (c < 0x80 || c > 0xBF) return false;
    }
    i += len;
  }
  return true;
}

void append_utf8(uint32_t cpt, std::string& out) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

uint32_t next_codepoint(std::string_view text, size_t& offset) {
  const auto lead = static_cast<uint8_t>(text[offset]);
  size_t len = utf8_len_from_lead(lead);
  if (offset + len > text.size()) len = 1;
  uint32_t cpt;
  switch (len) {
    case 1: cpt = lead; break;
    case 2: cpt = lead & 0x1F; break;
    case 3: cpt = lead & 0x0F; break;
    default: cpt = lead & 0x07; break;
  }
  for (size_t k = 1; k < len; ++k) {
    cpt = (cpt << 6) | (static_cast<uint8_t>(text[offset + k]) & 0x3F);
  }
  offset += len;
  return cpt;
}

void Utf8Sanitizer::push_byte(uint8_t byte, std::string& out) {
  if (num_pending_ > 0) {
    bool ok;
    if (num_pending_ == 1) {
      const auto range = second_byte_range(pending_[0]);
      ok = byte >= range.lo && byte <= range.hi;
    } else {
      ok = byte >= 0x80 && byte <= 0xBF;
    }
    if (ok) {
      pending_[num_pending_++] = byte;
      if (num_pending_ == num_expected_) {
        out.append(reinterpret_cast<const char*>(pending_.data()), num_pending_);
        num_pending_ = 0;
      }
      return;
    }
    // The held-back bytes are a maximal ill-formed subpart; `byte` starts afresh.
    out.append(kReplacementChar);
    num_pending_ = 0;
  }
  const size_t len = sequence_length(byte);
  if (len == 1) {
    out.push_back(static_cast<char>(byte));
  } else if (len == 0) {
    out.append(kReplacementChar);
  } else {
    pending_[0] = byte;
    num_pending_ = 1;
    num_expected_ = len;
  }
}

void Utf8Sanitizer::push(std::string_view bytes, std::string& out) {
  for (const char c : bytes) push_byte(static_cast<uint8_t>(c), out);
}

void Utf8Sanitizer::finish(std::string& out) {
  if (num_pending_ > 0) {
    out.append(kReplacementChar);
    num_pending_ = 0;
  }
}

std::string sanitize_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  Utf8Sanitizer sanitizer;
  sanitizer.push(bytes, out);
  sanitizer.finish(out);
  return out;
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> result;
    uint32_t next_extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      const uint32_t cpt = printable ? static_cast<uint32_t>(b) : 0x100 + next_extra++;
      append_utf8(cpt, result[b]);
    }
    return result;
  }();
  return table;
}

int unicode_to_byte(uint32_t cpt) {
  static const std::array<int, 0x180> table = build_unicode_to_byte();
  return cpt < table.size() ? table[cpt] : -1;
}

}  // namespace vellum::tokenizer
