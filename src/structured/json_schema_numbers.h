// Numeric JSON Schema keywords (minimum, maximum, exclusiveMinimum, exclusiveMaximum,
// multipleOf) as regular expressions over a number's JSON text, for compile_regex.
//
// Bounds are exact: an integer range becomes a digit-by-digit alternation (as llguidance and
// xgrammar build them: [0, 120] is `\d|[1-9]\d|1[01]\d|120`), and a decimal bound compares the
// integer part as a range and the fraction digit by digit. Bounded numbers are written without an
// exponent (the grammar cannot compare 1.5e3 with 1499 digit by digit); unbounded ones keep it.
// Integer multipleOf k is a remainder automaton over the digits (k rules); a number multipleOf
// 10^-d limits the fraction to d digits.
//
// Goals: the language is exactly the set of values within the bounds, up to the digit caps below
// (kMaxIntegerDigits / kMaxFractionDigits, which keep every value a double can hold).
// Non-goals: bounds that are not plain decimals (1e400), multipleOf that is neither an integer
// nor a power of ten, multipleOf combined with a range of more than kMaxEnumeratedMultiples
// values; each is refused with an error naming it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "structured/grammar.h"

namespace vellum::structured {

// Digits of an integer part: every value fits in an int64.
inline constexpr int kMaxIntegerDigits = 18;
inline constexpr int kMaxFractionDigits = 17;
inline constexpr int64_t kMaxEnumeratedMultiples = 512;

// A bound as its decimal digits: value = sign * integer_digits.fraction_digits.
struct DecimalBound {
  bool negative = false;
  std::string integer_digits;   // no leading zeros; "0" for zero
  std::string fraction_digits;  // no trailing zeros; may be empty
  bool inclusive = true;
};

struct NumericBounds {
  std::optional<DecimalBound> lower;
  std::optional<DecimalBound> upper;
};

// Parses the text of a JSON number into a bound; nullopt when it is not a plain decimal within
// the digit caps (an exponent is expanded when it stays within them).
std::optional<DecimalBound> parse_decimal_bound(const std::string& number_text, bool inclusive);

// The integers within `bounds` as [lo, hi] (a decimal bound rounded inward, clamped to the digit
// caps); nullopt when none lies within them.
std::optional<std::pair<int64_t, int64_t>> integer_bounds(const NumericBounds& bounds);

// A regex for the JSON integers within `bounds` (a decimal bound is rounded inward). Empty
// string when no integer lies within them.
std::string integer_range_regex(const NumericBounds& bounds);

// A regex for the JSON numbers within `bounds`, with at most `max_fraction_digits` fraction
// digits. Empty when none lies within them. Throws vellum::Error (kInvalidArgument) for the two
// bounds within one unit that are both fractional (e.g. 0.25 ≤ x ≤ 0.75), which it does not
// express.
std::string number_range_regex(const NumericBounds& bounds, int max_fraction_digits);

// The JSON integers that are multiples of `divisor` (in [1, kMaxMultipleOfDivisor]), as a
// remainder automaton: one rule per remainder, each digit moving to (10 r + digit) mod divisor.
inline constexpr int64_t kMaxMultipleOfDivisor = 10000;
GrammarBuilder::Sequence integer_multiples(GrammarBuilder& builder, int64_t divisor);

}  // namespace vellum::structured
