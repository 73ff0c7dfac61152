// Loading a model with a tensor type this build cannot run: the error names the file, the
// tensor, its type and the supported types, and says what to do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "model/io/make_model.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "model_io_test_util.h"
#include "test_util.h"
#include "vellum/status.h"

namespace vellum::model {
namespace {

using ::testing::HasSubstr;

// The tiny-k model (q8_0) with blk.1.ffn_down.weight ([768, 256]: rows of 3 blocks of 256, not
// fused with another matrix) stored as `type`; the bytes are zeros, a valid block of every type.
std::filesystem::path with_ffn_down_as(gguf::GgmlType type, const std::string& file_name) {
  MakeModelOptions options;
  options.shape = "tiny-k";
  options.dtype = "q8_0";
  options.output = ::vellum::testing::temp_dir() / "load-errors-base.gguf";
  make_model(options);
  const size_t bytes = 256 * 3 * gguf::ggml_type_size(type);
  return testing::rewrite(
      options.output, file_name,
      [&](gguf::GgufWriter& w) {
        w.add_tensor("blk.1.ffn_down.weight", type, {768, 256}, std::vector<uint8_t>(bytes, 0));
      },
      "blk.1.ffn_down.weight");
}

class UnsupportedTensorType : public ::testing::TestWithParam<gguf::GgmlType> {};

TEST_P(UnsupportedTensorType, ErrorNamesTensorTypeAndSupportedList) {
  const gguf::GgmlType type = GetParam();
  const std::string type_name = gguf::ggml_type_name(type);
  const auto path = with_ffn_down_as(type, "unsupported-" + type_name + ".gguf");
  try {
    (void)::vellum::testing::load_test_model(path);
    FAIL() << "a " << type_name << " tensor loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    const std::string msg = e.what();
    EXPECT_THAT(msg, HasSubstr(path.filename().string()));
    EXPECT_THAT(msg, HasSubstr("tensor 'blk.1.ffn_down.weight' has type " + type_name));
    EXPECT_THAT(msg, HasSubstr("F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
                               "Q5_K, Q6_K, IQ4_NL, IQ4_XS"));
    EXPECT_THAT(msg, HasSubstr("re-quantize"));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, UnsupportedTensorType,
                         ::testing::Values(gguf::GgmlType::IQ2_XXS, gguf::GgmlType::TQ1_0,
                                           gguf::GgmlType::IQ3_S, gguf::GgmlType::Q8_K),
                         [](const auto& test_info) {
                           return std::string(gguf::ggml_type_name(test_info.param));
                         });

// The same file with the tensor in a supported type loads (the rewrite itself is sound).
TEST(UnsupportedTensorType, SameFileWithASupportedTypeLoads) {
  const auto path = with_ffn_down_as(gguf::GgmlType::Q4_K, "supported-q4_k.gguf");
  const auto model = ::vellum::testing::load_test_model(path);
  EXPECT_EQ(model->config().num_layers, 8);
  EXPECT_THAT(model->config().weight_type_summary, HasSubstr("Q4_K x 1"));
}

}  // namespace
}  // namespace vellum::model
