#include <gtest/gtest.h>

#include "common/units.h"

namespace vellum {
namespace {

TEST(Units, ParsesBinaryAndDecimalSizes) {
  EXPECT_EQ(parse_byte_size("4GiB"), int64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("4g"), int64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("512 MiB"), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB"), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("2GB"), int64_t{2000000000});
  EXPECT_EQ(parse_byte_size("1024"), 1024);
  EXPECT_EQ(parse_byte_size("10kb"), 10000);
}

TEST(Units, RejectsMalformedSizes) {
  EXPECT_FALSE(parse_byte_size(""));
  EXPECT_FALSE(parse_byte_size("GiB"));
  EXPECT_FALSE(parse_byte_size("4 parsecs"));
  EXPECT_FALSE(parse_byte_size("-4GiB"));
  EXPECT_FALSE(parse_byte_size("1.2.3G"));
}

TEST(Units, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t{3} << 29), "1.50 GiB");
}

}  // namespace
}  // namespace vellum
