#include "structured/json_schema_numbers.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "common/check.h"

namespace vellum::structured {
namespace {

constexpr int64_t kLargestCapped = 999'999'999'999'999'999;  // kMaxIntegerDigits nines

// A bound on a magnitude (a non-negative value): integer part and fraction digits.
struct Magnitude {
  int64_t integer = 0;
  std::string fraction;  // no trailing zeros
  bool inclusive = true;
};

std::string group(const std::string& regex) {
  return regex.find('|') == std::string::npos ? regex : "(?:" + regex + ")";
}

std::string join(const std::vector<std::string>& alternatives) {
  std::string out;
  for (const std::string& a : alternatives) out += (out.empty() ? "" : "|") + a;
  return out;
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return std::string(1, lo);
  if (lo == '0' && hi == '9') return "\\d";
  return fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t count) {
  if (count == 0) return "";
  if (count == 1) return "\\d";
  return fmt::format("\\d{{{}}}", count);
}

// Digit strings of one length n with lo <= x <= hi (both of length n; inner parts may start with
// zeros): the first digit splits the range into a low edge, a full middle and a high edge.
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return lo;
  const size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) return lo.substr(0, 1) + group(same_length_range(lo.substr(1), hi.substr(1)));
  const bool lo_rest_is_min = std::all_of(lo.begin() + 1, lo.end(), [](char c) { return c == '0'; });
  const bool hi_rest_is_max = std::all_of(hi.begin() + 1, hi.end(), [](char c) { return c == '9'; });
  std::vector<std::string> alternatives;
  const char first_full = static_cast<char>(lo[0] + (lo_rest_is_min ? 0 : 1));
  const char last_full = static_cast<char>(hi[0] - (hi_rest_is_max ? 0 : 1));
  if (!lo_rest_is_min) {
    alternatives.push_back(lo.substr(0, 1) +
                           group(same_length_range(lo.substr(1), std::string(rest, '9'))));
  }
  if (first_full <= last_full) alternatives.push_back(digit_class(first_full, last_full) + any_digits(rest));
  if (!hi_rest_is_max) {
    alternatives.push_back(hi.substr(0, 1) +
                           group(same_length_range(std::string(rest, '0'), hi.substr(1))));
  }
  return join(alternatives);
}

int64_t power_of_ten(size_t exponent) {
  int64_t p = 1;
  for (size_t i = 0; i < exponent; ++i) p *= 10;
  return p;
}

// Non-negative integers in [lo, hi] written without leading zeros; lo <= hi.
std::string non_negative_range(int64_t lo, int64_t hi) {
  const size_t lo_len = std::to_string(lo).size();
  const size_t hi_len = std::to_string(hi).size();
  std::vector<std::string> alternatives;
  for (size_t len = lo_len; len <= hi_len; ++len) {
    const int64_t from = len == lo_len ? lo : power_of_ten(len - 1);
    const int64_t to = len == hi_len ? hi : power_of_ten(len) - 1;
    alternatives.push_back(same_length_range(std::to_string(from), std::to_string(to)));
  }
  return join(alternatives);
}

// Fractions ("." digits, or none for .0) at least (strictly: above) 0.F.
std::string fraction_at_least(const std::string& fraction, bool strict, int max_digits) {
  const std::string any = fmt::format("\\d{{0,{}}}", max_digits);
  const std::string some_nonzero = any + "[1-9]" + any;
  if (fraction.empty()) {
    return strict ? "\\." + some_nonzero : fmt::format("(?:\\.\\d{{1,{}}})?", max_digits);
  }
  std::vector<std::string> alternatives;
  for (size_t k = 0; k < fraction.size(); ++k) {
    if (fraction[k] == '9') continue;
    alternatives.push_back(fraction.substr(0, k) +
                           digit_class(static_cast<char>(fraction[k] + 1), '9') + any);
  }
  alternatives.push_back(fraction + (strict ? some_nonzero : any));
  return "\\.(?:" + join(alternatives) + ")";
}

// Fractions at most (strictly: below) 0.F; nullopt when none is (strictly below 0).
std::optional<std::string> fraction_at_most(const std::string& fraction, bool strict,
                                            int max_digits) {
  const std::string any = fmt::format("\\d{{0,{}}}", max_digits);
  if (fraction.empty()) {
    if (strict) return std::nullopt;
    return fmt::format("(?:\\.0{{1,{}}})?", max_digits);
  }
  std::vector<std::string> alternatives;
  for (size_t k = 0; k < fraction.size(); ++k) {
    // Digits that stop after F's first k (k >= 1) are below F: its remaining digits are not all 0.
    if (k > 0) alternatives.push_back(fraction.substr(0, k));
    if (fraction[k] > '0') {
      alternatives.push_back(fraction.substr(0, k) +
                             digit_class('0', static_cast<char>(fraction[k] - 1)) + any);
    }
  }
  if (!strict) alternatives.push_back(fraction + fmt::format("0{{0,{}}}", max_digits));
  return "(?:\\.(?:" + join(alternatives) + "))?";
}

// Magnitudes (integer part "." fraction) within [lo, hi]; hi absent: unbounded. Empty when none.
std::string magnitude_range(const Magnitude& lo, const std::optional<Magnitude>& hi,
                            int max_fraction_digits) {
  const std::string any_fraction = fmt::format("(?:\\.\\d{{1,{}}})?", max_fraction_digits);
  const int64_t top = hi ? hi->integer : kLargestCapped;
  std::vector<std::string> alternatives;
  if (hi && lo.integer == hi->integer) {
    const bool lower_is_integer = lo.fraction.empty() && lo.inclusive;
    if (!lower_is_integer) {
      VELLUM_THROW(ErrorCode::kInvalidArgument,
                   "numeric bounds with fractional parts within one unit of each other (between "
                   "{} and {}) are not supported; widen one of them to an integer",
                   lo.integer, hi->integer);
    }
    if (auto fraction = fraction_at_most(hi->fraction, !hi->inclusive, max_fraction_digits)) {
      alternatives.push_back(std::to_string(lo.integer) + *fraction);
    }
    return join(alternatives);
  }
  if (hi && lo.integer > hi->integer) return "";
  alternatives.push_back(std::to_string(lo.integer) +
                         fraction_at_least(lo.fraction, !lo.inclusive, max_fraction_digits));
  const int64_t middle_last = hi ? top - 1 : top;
  if (lo.integer + 1 <= middle_last) {
    alternatives.push_back(group(non_negative_range(lo.integer + 1, middle_last)) + any_fraction);
  }
  if (hi) {
    if (auto fraction = fraction_at_most(hi->fraction, !hi->inclusive, max_fraction_digits)) {
      alternatives.push_back(std::to_string(hi->integer) + *fraction);
    }
  }
  return join(alternatives);
}

bool is_zero(const DecimalBound& b) { return b.integer_digits == "0" && b.fraction_digits.empty(); }

Magnitude magnitude_of(const DecimalBound& b) {
  return Magnitude{std::stoll(b.integer_digits), b.fraction_digits, b.inclusive};
}

bool fits(const DecimalBound& b) {
  return b.integer_digits.size() <= static_cast<size_t>(kMaxIntegerDigits);
}

}  // namespace

std::optional<DecimalBound> parse_decimal_bound(const std::string& text, bool inclusive) {
  DecimalBound out;
  out.inclusive = inclusive;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '-') {
    out.negative = true;
    ++pos;
  }
  std::string digits;
  int64_t point = -1;  // digits before the decimal point
  for (; pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'); ++pos) {
    if (text[pos] == '.') {
      point = static_cast<int64_t>(digits.size());
    } else {
      digits += text[pos];
    }
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
    const int64_t exponent = std::stoll(text.substr(pos + 1));
    if (exponent > 64 || exponent < -64) return std::nullopt;
    point += exponent;
    pos = text.size();
  }
  if (pos != text.size() || digits.empty()) return std::nullopt;
  while (point <= 0) {
    digits.insert(digits.begin(), '0');
    ++point;
  }
  while (static_cast<int64_t>(digits.size()) < point) digits += '0';
  out.integer_digits = digits.substr(0, static_cast<size_t>(point));
  out.fraction_digits = digits.substr(static_cast<size_t>(point));
  out.integer_digits.erase(0, std::min(out.integer_digits.find_first_not_of('0'),
                                       out.integer_digits.size() - 1));
  while (!out.fraction_digits.empty() && out.fraction_digits.back() == '0') {
    out.fraction_digits.pop_back();
  }
  if (out.fraction_digits.size() > static_cast<size_t>(kMaxFractionDigits)) return std::nullopt;
  if (is_zero(out)) out.negative = false;
  return out;
}

std::optional<std::pair<int64_t, int64_t>> integer_bounds(const NumericBounds& bounds) {
  int64_t lo = -kLargestCapped;
  int64_t hi = kLargestCapped;
  if (const auto& b = bounds.lower) {
    if (!fits(*b)) {
      if (!b->negative) return std::nullopt;
    } else {
      const int64_t integer = std::stoll(b->integer_digits);
      const bool exact = b->fraction_digits.empty();
      lo = b->negative ? -integer + (exact && !b->inclusive ? 1 : 0)
                       : integer + (!exact || !b->inclusive ? 1 : 0);
    }
  }
  if (const auto& b = bounds.upper) {
    if (!fits(*b)) {
      if (b->negative) return std::nullopt;
    } else {
      const int64_t integer = std::stoll(b->integer_digits);
      const bool exact = b->fraction_digits.empty();
      hi = b->negative ? -integer - (!exact || !b->inclusive ? 1 : 0)
                       : integer - (exact && !b->inclusive ? 1 : 0);
    }
  }
  lo = std::max(lo, -kLargestCapped);
  hi = std::min(hi, kLargestCapped);
  if (lo > hi) return std::nullopt;
  return std::make_pair(lo, hi);
}

std::string integer_range_regex(const NumericBounds& bounds) {
  const auto range = integer_bounds(bounds);
  if (!range) return "";
  const auto [lo, hi] = *range;
  std::vector<std::string> alternatives;
  if (lo < 0) alternatives.push_back("-" + group(non_negative_range(std::max<int64_t>(1, -hi), -lo)));
  if (hi >= 0) alternatives.push_back(non_negative_range(std::max<int64_t>(lo, 0), hi));
  return join(alternatives);
}

std::string number_range_regex(const NumericBounds& bounds, int max_fraction_digits) {
  std::optional<DecimalBound> lower = bounds.lower;
  std::optional<DecimalBound> upper = bounds.upper;
  // Bounds beyond the digit caps: a far lower bound is no bound, a far upper one likewise.
  if (lower && !fits(*lower)) {
    if (!lower->negative) return "";
    lower.reset();
  }
  if (upper && !fits(*upper)) {
    if (upper->negative) return "";
    upper.reset();
  }
  std::vector<std::string> alternatives;
  // x < 0, written "-" y: y above -upper (above 0 when upper is not negative), up to -lower.
  if (!lower || lower->negative) {
    Magnitude y_lo{0, "", false};
    if (upper && upper->negative) y_lo = magnitude_of(*upper);
    std::optional<Magnitude> y_hi;
    if (lower) y_hi = magnitude_of(*lower);
    const std::string negative = magnitude_range(y_lo, y_hi, max_fraction_digits);
    if (!negative.empty()) alternatives.push_back("-" + group(negative));
  }
  // x >= 0.
  const bool has_non_negative = !upper || !upper->negative;
  if (has_non_negative && !(upper && is_zero(*upper) && !upper->inclusive)) {
    Magnitude x_lo{0, "", true};
    if (lower && !lower->negative) x_lo = magnitude_of(*lower);
    std::optional<Magnitude> x_hi;
    if (upper) x_hi = magnitude_of(*upper);
    const std::string non_negative = magnitude_range(x_lo, x_hi, max_fraction_digits);
    if (!non_negative.empty()) alternatives.push_back(non_negative);
  }
  return join(alternatives);
}

GrammarBuilder::Sequence integer_multiples(GrammarBuilder& builder, int64_t divisor) {
  VELLUM_CHECK(divisor >= 1 && divisor <= kMaxMultipleOfDivisor, ErrorCode::kInvalidArgument,
               "multipleOf {} is outside the supported range [1, {}]", divisor,
               kMaxMultipleOfDivisor);
  // remainder[r]: the digits still to come after a prefix whose value is r mod divisor.
  std::vector<uint32_t> remainder(static_cast<size_t>(divisor));
  for (auto& rule : remainder) rule = builder.new_rule("multiple_of");
  for (int64_t r = 0; r < divisor; ++r) {
    if (r == 0) builder.add_alternative(remainder[0], {});
    for (int digit = 0; digit <= 9; ++digit) {
      const int64_t next = (r * 10 + digit) % divisor;
      builder.add_alternative(remainder[static_cast<size_t>(r)],
                              {builder.byte(static_cast<uint8_t>('0' + digit)),
                               builder.rule(remainder[static_cast<size_t>(next)])});
    }
  }
  std::vector<GrammarBuilder::Sequence> magnitudes = {builder.literal("0")};
  for (int digit = 1; digit <= 9; ++digit) {
    magnitudes.push_back({builder.byte(static_cast<uint8_t>('0' + digit)),
                          builder.rule(remainder[static_cast<size_t>(digit % divisor)])});
  }
  GrammarBuilder::Sequence out = {builder.optional(builder.literal("-"))};
  out.push_back(builder.choice("multiple_of", std::move(magnitudes)));
  return out;
}

}  // namespace vellum::structured
