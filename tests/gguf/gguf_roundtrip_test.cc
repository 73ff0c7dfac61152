// GgufWriter -> GgufFile round trips: every value type, nested arrays, tensors, alignment.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <limits>

#include "gguf/gguf.h"
#include "gguf/gguf_print.h"
#include "gguf/gguf_writer.h"
#include "gguf_test_files.h"

namespace vellum::gguf {
namespace {

using testing::read_bytes;
using testing::scratch_path;
using ::testing::HasSubstr;

TEST(GgufRoundTrip, EveryScalarType) {
  GgufWriter w;
  w.set("k.u8", Value(uint8_t{200}));
  w.set("k.i8", Value(int8_t{-100}));
  w.set("k.u16", Value(uint16_t{60000}));
  w.set("k.i16", Value(int16_t{-30000}));
  w.set("k.u32", Value(uint32_t{4000000000u}));
  w.set("k.i32", Value(int32_t{-2000000000}));
  w.set("k.f32", Value(1.5f));
  w.set("k.bool", Value(true));
  w.set("k.string", Value(std::string("h\xc3\xa9llo")));
  w.set("k.empty", Value(std::string()));
  w.set("k.u64", Value(uint64_t{1} << 63));
  w.set("k.i64", Value(int64_t{-(int64_t{1} << 62)}));
  w.set("k.f64", Value(-2.25));
  const auto path = scratch_path("scalars.gguf");
  w.write(path);

  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  ASSERT_EQ(f->metadata().size(), w.metadata().size());
  for (size_t i = 0; i < w.metadata().size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, w.metadata()[i].first);  // file order
    EXPECT_EQ(f->metadata()[i].second, w.metadata()[i].second) << w.metadata()[i].first;
    EXPECT_EQ(f->metadata()[i].second.type(), w.metadata()[i].second.type());
  }
  EXPECT_EQ(f->get_int("k.u8"), 200);
  EXPECT_EQ(f->get_int("k.i8"), -100);
  EXPECT_EQ(f->get_int("k.u16"), 60000);
  EXPECT_EQ(f->get_int("k.i16"), -30000);
  EXPECT_EQ(f->get_int("k.u32"), 4000000000);
  EXPECT_EQ(f->get_int("k.i32"), -2000000000);
  EXPECT_EQ(f->get_float("k.f32"), 1.5);
  EXPECT_EQ(f->get_bool("k.bool"), true);
  EXPECT_EQ(f->get_string("k.string"), "h\xc3\xa9llo");
  EXPECT_EQ(f->get_string("k.empty"), "");
  EXPECT_EQ(f->get_int("k.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(f->get_float("k.f64"), -2.25);
  EXPECT_EQ(f->get_float("k.i32"), -2e9);
  // 2^63 does not fit in int64: present but not representable is an error, not a wrong value.
  EXPECT_THROW((void)f->get_int("k.u64"), Error);
  EXPECT_EQ(f->find("k.u64")->storage(), Value::Storage(uint64_t{1} << 63));
  EXPECT_THROW((void)f->get_bool("k.u8"), Error);
  EXPECT_TRUE(f->tensors().empty());
}

TEST(GgufRoundTrip, EveryArrayTypeAndNestedArrays) {
  GgufWriter w;
  w.set("a.u8", Value(Array(std::vector<uint8_t>{0, 1, 255})));
  w.set("a.i8", Value(Array(std::vector<int8_t>{-128, 0, 127})));
  w.set("a.u16", Value(Array(std::vector<uint16_t>{1, 65535})));
  w.set("a.i16", Value(Array(std::vector<int16_t>{-32768, 32767})));
  w.set("a.u32", Value(Array(std::vector<uint32_t>{7, 4000000000u})));
  w.set("a.i32", Value(Array(std::vector<int32_t>{-5, 6})));
  w.set("a.f32", Value(Array(std::vector<float>{0.5f, -1.0f, 3.25f})));
  w.set("a.bool", Value(Array(std::vector<bool>{true, false, true})));
  w.set("a.string", Value(Array(std::vector<std::string>{"x", "", "\xe2\x96\x81the"})));
  w.set("a.u64", Value(Array(std::vector<uint64_t>{uint64_t{1} << 40})));
  w.set("a.i64", Value(Array(std::vector<int64_t>{-(int64_t{1} << 40)})));
  w.set("a.f64", Value(Array(std::vector<double>{1e100, -0.0})));
  w.set("a.empty", Value(Array(std::vector<float>{})));
  // [[1, 2], ["a"], [[true]], []]
  std::vector<Value> inner_inner{Value(Array(std::vector<bool>{true}))};
  std::vector<Value> nested{Value(Array(std::vector<int32_t>{1, 2})),
                            Value(Array(std::vector<std::string>{"a"})),
                            Value(Array(std::move(inner_inner))),
                            Value(Array(std::vector<uint8_t>{}))};
  w.set("a.nested", Value(Array(std::move(nested))));
  const auto path = scratch_path("arrays.gguf");
  w.write(path);

  const auto f = GgufFile::open(path);
  ASSERT_EQ(f->metadata().size(), w.metadata().size());
  for (size_t i = 0; i < w.metadata().size(); ++i) {
    EXPECT_EQ(f->metadata()[i].first, w.metadata()[i].first);
    EXPECT_EQ(f->metadata()[i].second, w.metadata()[i].second) << w.metadata()[i].first;
  }
  const Array* nested_back = f->find("a.nested")->as_array();
  ASSERT_NE(nested_back, nullptr);
  EXPECT_EQ(nested_back->element_type(), ValueType::kArray);
  ASSERT_EQ(nested_back->size(), 4u);
  EXPECT_EQ(*nested_back->arrays()->at(1).as_array()->strings(), std::vector<std::string>{"a"});

  EXPECT_EQ(f->get_int_array("a.u8"), (std::vector<int32_t>{0, 1, 255}));
  EXPECT_EQ(f->get_int_array("a.i16"), (std::vector<int32_t>{-32768, 32767}));
  EXPECT_EQ(f->get_float_array("a.f32"), (std::vector<float>{0.5f, -1.0f, 3.25f}));
  EXPECT_EQ(f->get_float_array("a.i32"), (std::vector<float>{-5.0f, 6.0f}));
  EXPECT_EQ(f->get_string_array("a.string"),
            (std::vector<std::string>{"x", "", "\xe2\x96\x81the"}));
  EXPECT_TRUE(f->get_float_array("a.empty").empty());
  // 4e9 does not fit in int32; floats are not integers; strings are not numbers.
  EXPECT_THROW((void)f->get_int_array("a.u32"), Error);
  EXPECT_THROW((void)f->get_int_array("a.f32"), Error);
  EXPECT_THROW((void)f->get_float_array("a.string"), Error);
  EXPECT_THROW((void)f->get_string_array("a.i32"), Error);
  EXPECT_THROW((void)f->get_string_array("a.nested"), Error);
}

TEST(GgufRoundTrip, TensorsOwnedViewAndStreamedWithPadding) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  std::vector<uint8_t> a(3 * 4);  // F32 [3]: 12 bytes, forces padding after it
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i + 1);
  std::vector<uint8_t> b(34 * 3);  // Q8_0 [32, 3]
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(255 - i);
  w.add_tensor("a", GgmlType::F32, {3}, a);
  w.add_tensor_view("b", GgmlType::Q8_0, {32, 3}, b);
  // BF16 [5, 7] streamed in three uneven pieces.
  w.add_tensor_stream("c", GgmlType::BF16, {5, 7}, [](TensorSink& sink) {
    std::vector<uint8_t> bytes(70);
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 3);
    sink.write(bytes.data(), 1);
    sink.write(bytes.data() + 1, 40);
    sink.write(bytes.data() + 41, 29);
  });
  // Q4_K [256, 2]: a type Vellum cannot compute with still has the right size.
  w.add_tensor("d", GgmlType::Q4_K, {256, 2}, std::vector<uint8_t>(2 * 144, 9));
  const auto path = scratch_path("tensors.gguf");
  w.write(path);

  const auto f = GgufFile::open(path);
  ASSERT_EQ(f->tensors().size(), 4u);
  EXPECT_EQ(f->data_offset() % 32, 0u);
  for (const TensorInfo& t : f->tensors()) EXPECT_EQ(t.offset % 32, 0u) << t.name;
  EXPECT_EQ(f->tensors()[1].offset, 32u);  // 12 bytes padded to 32
  const TensorInfo* ta = f->find_tensor("a");
  ASSERT_NE(ta, nullptr);
  EXPECT_EQ(ta->shape, std::vector<int64_t>{3});
  EXPECT_EQ(ta->num_elements(), 3);
  ASSERT_EQ(ta->nbytes, a.size());
  EXPECT_EQ(std::memcmp(ta->data, a.data(), a.size()), 0);
  const TensorInfo* tb = f->find_tensor("b");
  EXPECT_EQ(tb->type, GgmlType::Q8_0);
  EXPECT_EQ(tb->shape, (std::vector<int64_t>{32, 3}));
  EXPECT_EQ(std::memcmp(tb->data, b.data(), b.size()), 0);
  const TensorInfo* tc = f->find_tensor("c");
  EXPECT_EQ(tc->type, GgmlType::BF16);
  ASSERT_EQ(tc->nbytes, 70u);
  for (size_t i = 0; i < 70; ++i) ASSERT_EQ(tc->data[i], static_cast<uint8_t>(i * 3)) << i;
  const TensorInfo* td = f->find_tensor("d");
  EXPECT_EQ(td->nbytes, 288u);
  EXPECT_EQ(td->data[287], 9);
  // The file ends with the last tensor padded to the alignment.
  EXPECT_EQ(f->file_size() % 32, 0u);
  EXPECT_EQ(f->file_size(), f->data_offset() + td->offset + 288);
}

TEST(GgufRoundTrip, HonoursCustomAlignment) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  w.add_tensor("x", GgmlType::F32, {1}, std::vector<uint8_t>(4, 1));
  w.add_tensor("y", GgmlType::F32, {1}, std::vector<uint8_t>(4, 2));
  const auto path = scratch_path("align64.gguf");
  w.write(path);
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  EXPECT_EQ(f->find_tensor("y")->offset, 64u);
  EXPECT_EQ(f->find_tensor("y")->data[0], 2);
}

TEST(GgufRoundTrip, SetReplacesInPlaceAndCopiesShareArrays) {
  GgufWriter w;
  w.set_u32("a", 1);
  w.set_u32("b", 2);
  w.set_string("a", "again");
  ASSERT_EQ(w.metadata().size(), 2u);
  EXPECT_EQ(w.metadata()[0].first, "a");
  EXPECT_EQ(*w.metadata()[0].second.as_string(), "again");
  EXPECT_TRUE(w.remove("b"));
  EXPECT_FALSE(w.remove("b"));
  const Value big(Array(std::vector<std::string>(1000, "tok")));
  const Value copy = big;  // O(1): shares the array
  EXPECT_EQ(copy.as_array(), big.as_array());
}

TEST(GgufWriterErrors, RejectsBadTensors) {
  GgufWriter w;
  w.add_tensor("t", GgmlType::F32, {2}, std::vector<uint8_t>(8));
  EXPECT_THROW(w.add_tensor("t", GgmlType::F32, {2}, std::vector<uint8_t>(8)), Error);
  EXPECT_THROW(w.add_tensor("u", GgmlType::F32, {2}, std::vector<uint8_t>(7)), Error);
  EXPECT_THROW(w.add_tensor("v", GgmlType::Q8_0, {31}, std::vector<uint8_t>(34)), Error);
  EXPECT_THROW(w.add_tensor("w", GgmlType::F32, {1, 1, 1, 1, 1}, std::vector<uint8_t>(4)), Error);
  EXPECT_EQ(w.num_tensors(), 1u);
  w.add_tensor_stream("s", GgmlType::F32, {4}, [](TensorSink& sink) {
    const float x = 1.0f;
    sink.write(&x, sizeof(x));  // 4 of 16 bytes
  });
  const auto path = scratch_path("short-stream.gguf");
  try {
    w.write(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("wrote 4 bytes, expected 16"));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
}

// The per-type table of `vellum inspect`: counts and bytes, largest first.
TEST(GgufPrint, TensorTypeTotals) {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.add_tensor("n1", GgmlType::F32, {8}, std::vector<uint8_t>(32, 0));
  w.add_tensor("q1", GgmlType::Q4_K, {256, 2}, std::vector<uint8_t>(2 * 144, 0));
  w.add_tensor("n2", GgmlType::F32, {8}, std::vector<uint8_t>(32, 0));
  w.add_tensor("q2", GgmlType::Q4_K, {256, 1}, std::vector<uint8_t>(144, 0));
  w.add_tensor("v", GgmlType::Q6_K, {256, 1}, std::vector<uint8_t>(210, 0));
  const auto path = scratch_path("types.gguf");
  w.write(path);
  const auto f = GgufFile::open(path);

  const std::vector<TensorTypeTotal> totals = tensor_type_totals(*f);
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[0].type, GgmlType::Q4_K);
  EXPECT_EQ(totals[0].num_tensors, 2);
  EXPECT_EQ(totals[0].bytes, 432u);
  EXPECT_EQ(totals[1].type, GgmlType::Q6_K);
  EXPECT_EQ(totals[1].num_tensors, 1);
  EXPECT_EQ(totals[1].bytes, 210u);
  EXPECT_EQ(totals[2].type, GgmlType::F32);
  EXPECT_EQ(totals[2].num_tensors, 2);
  EXPECT_EQ(totals[2].bytes, 64u);

  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  ASSERT_NE(out, nullptr);
  print_summary(*f, out);
  std::fclose(out);
  const std::string text(buf, len);
  std::free(buf);
  // The table comes after the metadata and before the tensor list.
  const size_t table = text.find("tensor types:");
  ASSERT_NE(table, std::string::npos);
  EXPECT_LT(text.find("general.architecture"), table);
  EXPECT_LT(table, text.find("5 tensors:"));
  // Shares of the 706 bytes.
  EXPECT_THAT(text, HasSubstr("Q4_K            2            432   61.2%"));
  EXPECT_THAT(text, HasSubstr("Q6_K            1            210   29.7%"));
  EXPECT_THAT(text, HasSubstr("F32             2             64    9.1%"));
}

TEST(GgmlTypes, SizesForEveryKnownType) {
  EXPECT_EQ(ggml_type_size(GgmlType::F32), 4u);
  EXPECT_EQ(ggml_type_size(GgmlType::BF16), 2u);
  EXPECT_EQ(ggml_block_size(GgmlType::Q8_0), 32);
  EXPECT_EQ(ggml_type_size(GgmlType::Q8_0), 34u);
  EXPECT_EQ(ggml_block_size(GgmlType::Q6_K), 256);
  EXPECT_EQ(ggml_type_size(GgmlType::Q6_K), 210u);
  EXPECT_STREQ(ggml_type_name(GgmlType::IQ4_XS), "IQ4_XS");
  EXPECT_FALSE(is_known_type(4));
  EXPECT_FALSE(is_known_type(31));
  EXPECT_FALSE(is_known_type(1000));
  int num_known = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    if (!is_known_type(id)) continue;
    ++num_known;
    EXPECT_GT(ggml_block_size(static_cast<GgmlType>(id)), 0) << id;
    EXPECT_GT(ggml_type_size(static_cast<GgmlType>(id)), 0u) << id;
  }
  EXPECT_EQ(num_known, 32);
}

}  // namespace
}  // namespace vellum::gguf
