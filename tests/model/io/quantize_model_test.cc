// quantize_model (`vellum quantize`): llama-quantize's per-tensor choices, exact dequantization,
// metadata carried over, and the refusals that leave no output file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/ref/ref_kernels.h"
#include "model/io/make_model.h"
#include "model/io/quantize.h"
#include "model/io/quantize_model.h"
#include "model/model_test_util.h"
#include "model_io_test_util.h"
#include "test_util.h"
#include "vellum/status.h"

namespace vellum::model {
namespace {

using gguf::GgmlType;
using ::testing::HasSubstr;

std::filesystem::path scratch(const std::string& name) { return vellum::testing::temp_dir() / name; }

QuantizeSummary quantize(const std::filesystem::path& in, const std::filesystem::path& out,
                         const std::string& type, bool allow_requantize = false,
                         QuantizePlanOptions plan = {}) {
  QuantizeOptions options;
  options.input = in;
  options.output = out;
  options.type = type;
  options.allow_requantize = allow_requantize;
  options.plan = plan;
  return quantize_model(options);
}

kernels::WeightType kernel_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return kernels::WeightType::kF32;
    case GgmlType::F16: return kernels::WeightType::kF16;
    case GgmlType::Q8_0: return kernels::WeightType::kQ8_0;
    case GgmlType::Q4_0: return kernels::WeightType::kQ4_0;
    case GgmlType::Q4_1: return kernels::WeightType::kQ4_1;
    case GgmlType::Q6_K: return kernels::WeightType::kQ6_K;
    case GgmlType::Q4_K: return kernels::WeightType::kQ4_K;
    case GgmlType::Q5_K: return kernels::WeightType::kQ5_K;
    default: break;
  }
  ADD_FAILURE() << "type not mapped in the test: " << gguf::ggml_type_name(type);
  return kernels::WeightType::kF32;
}

// The tensor's values as ref::dequantize_row gives them, row by row.
std::vector<float> dequantized(const gguf::TensorInfo& t) {
  const int64_t row_size = t.shape[0];
  const int64_t num_rows = t.num_elements() / row_size;
  const size_t row_bytes = t.nbytes / static_cast<size_t>(num_rows);
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  for (int64_t r = 0; r < num_rows; ++r) {
    kernels::ref::dequantize_row(out.data() + r * row_size, t.data + r * row_bytes,
                                 kernel_type(t.type), row_size);
  }
  return out;
}

// Bitwise: an F32 copy must hold exactly what GGML's dequantization gives.
void expect_f32_equals_dequantized(const gguf::TensorInfo& f32, const gguf::TensorInfo& source) {
  ASSERT_EQ(f32.type, GgmlType::F32) << f32.name;
  ASSERT_EQ(f32.shape, source.shape) << f32.name;
  const std::vector<float> want = dequantized(source);
  ASSERT_EQ(f32.nbytes, want.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(f32.data, want.data(), f32.nbytes), 0)
      << f32.name << " differs from dequantize_row of the " << gguf::ggml_type_name(source.type)
      << " source";
}

std::map<std::string, GgmlType> tensor_types(const gguf::GgufFile& file) {
  std::map<std::string, GgmlType> types;
  for (const auto& t : file.tensors()) types[t.name] = t.type;
  return types;
}

TEST(QuantizeModel, F32ToQ8_0ToF32IsExactAndCarriesMetadata) {
  const auto f32 = testing::make_tiny("q-src-f32.gguf", "f32", 7);
  const auto q8 = scratch("q-tiny-q8_0.gguf");
  const auto back = scratch("q-tiny-back-f32.gguf");
  const QuantizeSummary s = quantize(f32, q8, "q8_0");
  EXPECT_STREQ(s.target->name, "Q8_0");
  EXPECT_GT(s.num_converted, 0);
  EXPECT_LT(s.output_bytes, s.input_bytes);

  const auto src = gguf::GgufFile::open(f32);
  const auto mid = gguf::GgufFile::open(q8);
  EXPECT_EQ(mid->get_int("general.file_type"), 7);
  EXPECT_EQ(mid->get_int("general.quantization_version"), 2);
  // Every input key, in the input's order, with its value (but file_type).
  ASSERT_GE(mid->metadata().size(), src->metadata().size());
  for (size_t i = 0; i < src->metadata().size(); ++i) {
    EXPECT_EQ(mid->metadata()[i].first, src->metadata()[i].first);
    if (src->metadata()[i].first != "general.file_type") {
      EXPECT_TRUE(mid->metadata()[i].second == src->metadata()[i].second)
          << src->metadata()[i].first;
    }
  }
  ASSERT_EQ(mid->tensors().size(), src->tensors().size());
  for (size_t i = 0; i < src->tensors().size(); ++i) {
    const gguf::TensorInfo& a = src->tensors()[i];
    const gguf::TensorInfo& b = mid->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    // Norms (1-D) stay F32 and byte-identical; every matrix, output included, is Q8_0 encoded
    // by GGML's reference quantizer.
    if (a.shape.size() == 1) {
      EXPECT_EQ(b.type, GgmlType::F32) << a.name;
      EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name;
      continue;
    }
    ASSERT_EQ(b.type, GgmlType::Q8_0) << a.name;
    std::vector<uint8_t> want(b.nbytes);
    quantize_row(GgmlType::Q8_0, reinterpret_cast<const float*>(a.data), a.num_elements(),
                 want.data());
    EXPECT_EQ(std::memcmp(want.data(), b.data, b.nbytes), 0) << a.name;
  }

  // Q8_0 -> F32 dequantizes: refused without allow_requantize, as llama-quantize does.
  try {
    quantize(q8, back, "F32");
    ADD_FAILURE() << "dequantizing a Q8_0 file without allow_requantize succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("requantizing from type Q8_0 is disabled"));
    EXPECT_THAT(e.what(), HasSubstr("--allow-requantize"));
  }
  EXPECT_FALSE(std::filesystem::exists(back));

  quantize(q8, back, "f32", true);
  const auto out = gguf::GgufFile::open(back);
  EXPECT_EQ(out->get_int("general.file_type"), 0);
  for (size_t i = 0; i < mid->tensors().size(); ++i) {
    expect_f32_equals_dequantized(out->tensors()[i], mid->tensors()[i]);
  }
}

TEST(QuantizeModel, LegacyTypeOutputRuleAndOverrides) {
  const auto f32 = testing::make_tiny("q-src-f32-2.gguf", "f32", 3);
  const auto q4 = scratch("q-tiny-q4_0.gguf");
  quantize(f32, q4, "Q4_0");
  auto types = tensor_types(*gguf::GgufFile::open(q4));
  // llama-quantize: output.weight Q6_K, falling back to Q8_0 on rows (128) not a multiple of 256.
  EXPECT_EQ(types["output.weight"], GgmlType::Q8_0);
  EXPECT_EQ(types["token_embd.weight"], GgmlType::Q4_0);
  EXPECT_EQ(types["blk.0.attn_q.weight"], GgmlType::Q4_0);
  EXPECT_EQ(types["blk.0.attn_norm.weight"], GgmlType::F32);

  QuantizePlanOptions plan;
  plan.output_tensor_type = parse_quantizable_type("f16");
  plan.token_embedding_type = parse_quantizable_type("q8_0");
  const auto overridden = scratch("q-tiny-q4_0-overrides.gguf");
  quantize(f32, overridden, "2", false, plan);  // llama_ftype 2 = Q4_0
  types = tensor_types(*gguf::GgufFile::open(overridden));
  EXPECT_EQ(types["output.weight"], GgmlType::F16);
  EXPECT_EQ(types["token_embd.weight"], GgmlType::Q8_0);
  EXPECT_EQ(types["blk.3.ffn_down.weight"], GgmlType::Q4_0);

  plan = {};
  plan.pure = true;
  const auto pure = scratch("q-tiny-q4_0-pure.gguf");
  quantize(f32, pure, "q4_0", false, plan);
  EXPECT_EQ(tensor_types(*gguf::GgufFile::open(pure))["output.weight"], GgmlType::Q4_0);
}

TEST(QuantizeModel, Q4_K_MMixMatchesMakeModelMix) {
  MakeModelOptions make;
  make.shape = "tiny-k";  // rows of 256, tied embeddings, 8 layers
  make.seed = 5;
  make.dtype = "f32";
  make.output = scratch("q-tiny-k-f32.gguf");
  make_model(make);
  make.dtype = "q4_k_m";
  make.output = scratch("q-tiny-k-made-q4_k_m.gguf");
  make_model(make);
  const auto quantized = scratch("q-tiny-k-q4_k_m.gguf");
  quantize(scratch("q-tiny-k-f32.gguf"), quantized, "Q4_K");  // Q4_K = Q4_K_M
  const auto file = gguf::GgufFile::open(quantized);
  EXPECT_EQ(file->get_int("general.file_type"), 15);
  EXPECT_EQ(tensor_types(*file), tensor_types(*gguf::GgufFile::open(make.output)));
  EXPECT_EQ(tensor_types(*file)["token_embd.weight"], GgmlType::Q6_K);  // tied: the LM head
}

TEST(QuantizeModel, ProgressLinePerTensor) {
  const auto f32 = testing::make_tiny("q-src-f32-3.gguf", "f32", 4);
  QuantizeOptions options;
  options.input = f32;
  options.output = scratch("q-tiny-progress.gguf");
  options.type = "Q8_0";
  std::vector<std::string> lines;
  options.on_tensor = [&](const QuantizeTensorReport& r) {
    lines.push_back(format_tensor_report(r));
  };
  const QuantizeSummary s = quantize_model(options);
  ASSERT_EQ(static_cast<int>(lines.size()), s.num_tensors);
  EXPECT_THAT(lines.front(),
              ::testing::MatchesRegex(R"(\[   1/  ..\] +token_embd\.weight - \[  128, +[0-9]+, +1, +1\], type = +F32, converting to Q8_0 \.\. size = +[0-9.]+ MiB -> +[0-9.]+ MiB)"));
  bool saw_copy = false;
  for (const std::string& line : lines) {
    if (line.find("attn_norm") != std::string::npos) {
      saw_copy = true;
      EXPECT_THAT(line, ::testing::MatchesRegex(R"(.*type = +F32, size = +[0-9.]+ MiB)"));
    }
  }
  EXPECT_TRUE(saw_copy);
}

void expect_error(const QuantizeOptions& options, ErrorCode code, const std::string& text) {
  try {
    quantize_model(options);
    ADD_FAILURE() << "expected an error containing '" << text << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(text));
  }
  if (options.output != options.input) {
    EXPECT_FALSE(std::filesystem::exists(options.output)) << options.output;
    auto tmp = options.output;
    tmp += ".tmp";
    EXPECT_FALSE(std::filesystem::exists(tmp));
  }
}

TEST(QuantizeModel, BadInputIsAClearErrorAndNoOutput) {
  const auto f32 = testing::make_tiny("q-src-f32-4.gguf", "f32", 2);
  QuantizeOptions options;
  options.input = f32;
  options.output = scratch("q-never.gguf");
  std::filesystem::remove(options.output);

  options.type = "Q9_9";
  expect_error(options, ErrorCode::kInvalidArgument, "unknown quantization type 'Q9_9'");
  options.type = "iq2_xxs";
  expect_error(options, ErrorCode::kUnsupported, "Q4_K_M (15)");
  options.type = "Q4_K_S";
  expect_error(options, ErrorCode::kUnsupported, "Vellum cannot encode");

  options.type = "Q8_0";
  options.input = scratch("q-missing.gguf");
  expect_error(options, ErrorCode::kIo, "q-missing.gguf");

  const auto corrupt = scratch("q-corrupt.gguf");
  std::ofstream(corrupt, std::ios::binary) << "GGUF\x03garbage";
  options.input = corrupt;
  expect_error(options, ErrorCode::kInvalidModel, "q-corrupt.gguf");

  options.input = f32;
  options.output = f32;
  expect_error(options, ErrorCode::kInvalidArgument, "is the input file");
  EXPECT_NO_THROW(gguf::GgufFile::open(f32));  // untouched

  EXPECT_THROW(parse_quantizable_type("IQ2_XXS"), Error);
  EXPECT_THROW(parse_quantizable_type("nope"), Error);
  EXPECT_EQ(parse_quantizable_type("q6_k"), GgmlType::Q6_K);
  EXPECT_EQ(find_quantize_target("q5_k").file_type, 17u);
  EXPECT_EQ(find_quantize_target("32").base, GgmlType::BF16);

  // An override whose block does not divide the rows (128) is refused, not silently changed.
  options.output = scratch("q-never.gguf");
  options.plan.output_tensor_type = GgmlType::Q6_K;
  expect_error(options, ErrorCode::kInvalidArgument, "not a multiple of Q6_K's block");
}

// The real SmolLM2 Q4_1 file to F32: every value what GGML's dequantization gives, and the engine
// loads the copy. About a second: 540 MB written.
TEST(QuantizeModelReal, SmolLM2Q4_1ToF32) {
  VELLUM_REQUIRE_REAL_MODEL(q4_1, "SmolLM2-135M-Instruct.Q4_1.gguf");
  const auto f32 = scratch("SmolLM2-135M-Instruct.F32.gguf");
  quantize(q4_1, f32, "F32", true);
  const auto src = gguf::GgufFile::open(q4_1);
  const auto out = gguf::GgufFile::open(f32);
  EXPECT_EQ(out->get_int("general.file_type"), 0);
  ASSERT_EQ(out->tensors().size(), src->tensors().size());
  for (const gguf::TensorInfo& t : out->tensors()) EXPECT_EQ(t.type, GgmlType::F32) << t.name;
  for (const char* name : {"token_embd.weight", "blk.0.attn_q.weight", "blk.7.ffn_down.weight",
                           "blk.29.attn_v.weight", "output_norm.weight"}) {
    const gguf::TensorInfo* a = src->find_tensor(name);
    const gguf::TensorInfo* b = out->find_tensor(name);
    ASSERT_NE(a, nullptr) << name;
    ASSERT_NE(b, nullptr) << name;
    expect_f32_equals_dequantized(*b, *a);
  }
  EXPECT_NE(vellum::testing::load_test_model(f32), nullptr);
  std::filesystem::remove(f32);
}

}  // namespace
}  // namespace vellum::model
