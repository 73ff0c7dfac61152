// UTF-8 helpers for the tokenizers: sequence lengths, validation, a streaming sanitizer that
// replaces ill-formed bytes with U+FFFD, and GPT-2's byte-to-unicode mapping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vellum::tokenizer {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD
inline constexpr std::string_view kSpmSpace = "\xE2\x96\x81";        // U+2581 '▁'

// Length of the UTF-8 sequence that starts with `lead`, judged from its high nibble only
// (continuation bytes count as 1). This is llama.cpp's `unicode_len_utf8`; the SPM and BPE
// symbol splitters use it so that invalid input splits the same way.
inline size_t utf8_len_from_lead(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

bool is_valid_utf8(std::string_view text);

// Appends the UTF-8 encoding of `cpt` (must be <= 0x10FFFF).
void append_utf8(uint32_t cpt, std::string& out);

// Decodes the code point at `offset` of valid UTF-8 and advances `offset`.
uint32_t next_codepoint(std::string_view text, size_t& offset);

// Streaming UTF-8 sanitizer. Valid sequences pass through; every maximal ill-formed subpart
// (Unicode §3.9, the "substitution of maximal subparts" practice that Python's
// `errors="replace"` also follows) becomes one U+FFFD. An incomplete sequence at the end of
// what has been pushed so far is held back until more bytes arrive or finish() is called, so
// pushing a byte string in any number of pieces yields exactly the same output.
class Utf8Sanitizer {
 public:
  void push(std::string_view bytes, std::string& out);
  // Flushes a held-back incomplete sequence as one U+FFFD.
  void finish(std::string& out);
  size_t num_pending() const { return num_pending_; }

 private:
  void push_byte(uint8_t byte, std::string& out);

  std::array<uint8_t, 4> pending_{};
  size_t num_pending_ = 0;
  size_t num_expected_ = 0;  // total length of the sequence being collected
};

// Replaces ill-formed UTF-8 with U+FFFD (one per maximal subpart).
std::string sanitize_utf8(std::string_view bytes);

// GPT-2 byte-level BPE: every byte maps to one printable code point (printable Latin-1 bytes to
// themselves, the rest to U+0100 + n), so that token texts are valid UTF-8 without spaces.
// The string is the UTF-8 encoding of that code point.
const std::array<std::string, 256>& byte_to_unicode();
// The inverse: the byte for a code point of that alphabet, or -1 when it is not one.
int unicode_to_byte(uint32_t cpt);

}  // namespace vellum::tokenizer
