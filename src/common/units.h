// Parsing and printing of byte sizes ("4GiB", "512MB", "1.5G", "1073741824").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vellum {

// Binary (KiB, MiB, GiB, TiB; K/M/G/T alone are binary too, as in vLLM's swap-space GiB) and
// decimal (KB, MB, GB, TB) suffixes, case-insensitive, optional "B". nullopt if malformed.
std::optional<int64_t> parse_byte_size(std::string_view text);

// "1.50 GiB"-style human-readable size.
std::string format_bytes(int64_t bytes);

}  // namespace vellum
