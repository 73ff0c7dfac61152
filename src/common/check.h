// VELLUM_CHECK / VELLUM_THROW: raise vellum::Error with a formatted message.
//
//   VELLUM_CHECK(n > 0, ErrorCode::kInvalidArgument, "n must be positive, got {}", n);
//
// The message should say what was wrong and what to do about it.
#pragma once

#include <fmt/format.h>

#include "vellum/status.h"

#define VELLUM_THROW(code, ...) throw ::vellum::Error((code), ::fmt::format(__VA_ARGS__))

#define VELLUM_CHECK(cond, code, ...)   \
  do {                                  \
    if (!(cond)) [[unlikely]] {         \
      VELLUM_THROW((code), __VA_ARGS__); \
    }                                   \
  } while (0)

// Internal invariant: a failure is a bug in Vellum, not in the caller's input.
#define VELLUM_ASSERT(cond)                                                                \
  do {                                                                                     \
    if (!(cond)) [[unlikely]] {                                                            \
      VELLUM_THROW(::vellum::ErrorCode::kInternal, "internal invariant failed: {} ({}:{})", \
                   #cond, __FILE__, __LINE__);                                             \
    }                                                                                      \
  } while (0)

// Invariant checks (check_invariants() after every mutation): debug builds, and any build with
// -DVELLUM_INVARIANTS=ON (CMake), which scripts/test.sh uses for its test runs.
#if defined(NDEBUG) && !defined(VELLUM_INVARIANTS)
#define VELLUM_DEBUG_ONLY(stmt) \
  do {                          \
  } while (0)
#else
#define VELLUM_DEBUG_ONLY(stmt) \
  do {                          \
    stmt;                       \
  } while (0)
#endif
