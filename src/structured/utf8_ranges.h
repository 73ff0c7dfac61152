// UTF-8 encoding of code point ranges as sequences of byte ranges (the construction of RE2 and
// Rust's utf8-ranges): [lo, hi] becomes a few sequences such as [E0][A0-BF][80-BF], so a
// character class compiles to byte sets the byte-level automaton can step through.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vellum::structured {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// One sequence: the i-th byte lies in [first, second] of element i.
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

// The sequences whose concatenation spells exactly the scalar values in [lo, hi] (surrogates
// D800–DFFF excluded). lo > hi gives none.
std::vector<Utf8Sequence> utf8_sequences(uint32_t lo, uint32_t hi);

// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void append_utf8(uint32_t cp, std::string* out);

// Decodes the code point at text[*pos], advancing *pos; false for ill-formed UTF-8.
bool next_code_point(std::string_view text, size_t* pos, uint32_t* cp);

}  // namespace vellum::structured
