// make_model: files that load back, match the generator exactly, are deterministic, and copy
// vocabularies faithfully.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/half.h"
#include "gguf/gguf.h"
#include "model/io/make_model.h"
#include "model/io/model_config.h"
#include "model/io/random_weights.h"
#include "model_io_test_util.h"
#include "test_util.h"

namespace vellum::model {
namespace {

using testing::make_tiny;
using ::testing::HasSubstr;

std::vector<uint8_t> file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct DtypeCase {
  const char* dtype;
  gguf::GgmlType type;
  int64_t file_type;
};

class MakeModelDtype : public ::testing::TestWithParam<DtypeCase> {};

TEST_P(MakeModelDtype, LoadsBackValidatesAndMatchesGenerator) {
  const DtypeCase& p = GetParam();
  const auto path = make_tiny(std::string("tiny-") + p.dtype + ".gguf", p.dtype, 42);
  const auto file = gguf::GgufFile::open(path);
  const ModelConfig c = ModelConfig::from_gguf(*file);  // validates every tensor shape
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->get_int("general.file_type"), p.file_type);
  EXPECT_EQ(file->get_int("general.alignment"), 32);
  EXPECT_EQ(file->get_int("general.quantization_version").has_value(),
            p.type == gguf::GgmlType::Q8_0);
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(file->get_int("tokenizer.ggml.bos_token_id"), 1);
  EXPECT_EQ(file->get_int("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(file->get_bool("tokenizer.ggml.add_bos_token"), true);
  // 3 + 4 * 9 + output_norm + output (untied)
  ASSERT_EQ(file->tensors().size(), 1u + 4u * 9u + 2u);

  for (const gguf::TensorInfo& t : file->tensors()) {
    const bool is_norm = t.name.ends_with("norm.weight");
    EXPECT_EQ(t.type, is_norm ? gguf::GgmlType::F32 : p.type) << t.name;
    // Bytes are exactly what the generator produces for this (seed, tensor).
    const RandomTensorSpec spec{42, stream_id(t.name), is_norm ? 1.0f : 0.0f, 0.02f};
    std::vector<uint8_t> expected(t.nbytes);
    generate_random(spec, t.type, 0, t.num_elements(), expected.data());
    ASSERT_EQ(std::memcmp(expected.data(), t.data, t.nbytes), 0) << t.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, MakeModelDtype,
                         ::testing::Values(DtypeCase{"f32", gguf::GgmlType::F32, 0},
                                           DtypeCase{"f16", gguf::GgmlType::F16, 1},
                                           DtypeCase{"bf16", gguf::GgmlType::BF16, 32},
                                           DtypeCase{"q8_0", gguf::GgmlType::Q8_0, 7}),
                         [](const auto& test_info) { return std::string(test_info.param.dtype); });

// The generator's values are the same across dtypes: f16/bf16/q8_0 files hold the f32 file's
// values rounded (or quantized) -- an independent check of the conversions and of Q8_0.
TEST(MakeModel, DtypesHoldTheSameValues) {
  const auto f32 = gguf::GgufFile::open(make_tiny("same-f32.gguf", "f32", 7));
  const auto f16 = gguf::GgufFile::open(make_tiny("same-f16.gguf", "f16", 7));
  const auto bf16 = gguf::GgufFile::open(make_tiny("same-bf16.gguf", "bf16", 7));
  const auto q8 = gguf::GgufFile::open(make_tiny("same-q8.gguf", "q8_0", 7));
  const char* name = "blk.1.ffn_up.weight";
  const gguf::TensorInfo* t32 = f32->find_tensor(name);
  const auto* x = reinterpret_cast<const float*>(t32->data);
  const int64_t n = t32->num_elements();
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h, b;
    std::memcpy(&h, f16->find_tensor(name)->data + 2 * i, 2);
    std::memcpy(&b, bf16->find_tensor(name)->data + 2 * i, 2);
    ASSERT_EQ(h, float_to_fp16(x[i])) << i;
    ASSERT_EQ(b, float_to_bf16(x[i])) << i;
    sum += x[i];
    sum_sq += double(x[i]) * x[i];
  }
  const double mean = sum / n, stddev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(stddev, 0.02, 0.0005);
  // Q8_0: per block d = max|x| / 127 (as f16), q = round(x / d); so |x - d*q| <= d/2 (+ f16
  // rounding of d) and the largest element of each block maps to +-127.
  const auto* blocks = reinterpret_cast<const uint8_t*>(q8->find_tensor(name)->data);
  for (int64_t b = 0; b < n / 32; ++b) {
    BlockQ8_0 block;
    std::memcpy(&block, blocks + b * sizeof(BlockQ8_0), sizeof(BlockQ8_0));
    const float d = fp16_to_float(block.d);
    float amax = 0;
    int max_q = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max(amax, std::fabs(x[b * 32 + i]));
      max_q = std::max(max_q, std::abs(static_cast<int>(block.qs[i])));
      ASSERT_NEAR(d * block.qs[i], x[b * 32 + i], 0.5f * d + 127 * d * 1e-3f) << b << " " << i;
    }
    ASSERT_NEAR(d, amax / 127.0f, amax / 127.0f * 1e-3f);
    ASSERT_EQ(max_q, 127);
  }
  // Norm weights are 1 +- a little.
  const auto* norm = reinterpret_cast<const float*>(f32->find_tensor("blk.0.attn_norm.weight")->data);
  for (int i = 0; i < 128; ++i) EXPECT_NEAR(norm[i], 1.0f, 0.1f);
}

TEST(MakeModel, DeterministicForASeed) {
  const auto a = file_bytes(make_tiny("det-a.gguf", "q8_0", 5));
  const auto b = file_bytes(make_tiny("det-b.gguf", "q8_0", 5));
  const auto c = file_bytes(make_tiny("det-c.gguf", "q8_0", 6));
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  EXPECT_NE(a, c);
}

TEST(MakeModel, BuiltinVocabCoversBytesAndWords) {
  const auto file = gguf::GgufFile::open(make_tiny("vocab-builtin.gguf"));
  const auto* tokens = file->find_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  const std::vector<int32_t> types = file->get_int_array("tokenizer.ggml.token_type");
  const std::vector<float> scores = file->get_float_array("tokenizer.ggml.scores");
  ASSERT_EQ(types.size(), tokens->size());
  ASSERT_EQ(scores.size(), tokens->size());
  EXPECT_GT(tokens->size(), 500u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    EXPECT_EQ((*tokens)[3 + b], name);
    EXPECT_EQ(types[3 + b], 6);
  }
  const std::string the = "\xe2\x96\x81the";
  const auto it = std::find(tokens->begin(), tokens->end(), the);
  ASSERT_NE(it, tokens->end());
  // Every prefix of a word piece is itself a piece with a higher score (merges reach it).
  const auto index_of = [&](const std::string& s) {
    return std::find(tokens->begin(), tokens->end(), s) - tokens->begin();
  };
  EXPECT_GT(scores[index_of("\xe2\x96\x81th")], scores[index_of(the)]);
  EXPECT_GT(scores[index_of("\xe2\x96\x81t")], scores[index_of("\xe2\x96\x81th")]);
  EXPECT_EQ(file->get_int("llama.vocab_size"), static_cast<int64_t>(tokens->size()));
  EXPECT_EQ(file->find_tensor("token_embd.weight")->shape[1], static_cast<int64_t>(tokens->size()));
}

TEST(MakeModel, CopiesVocabFromAnotherFile) {
  VELLUM_REQUIRE_MODEL_FILE(vocab_path, "vocab/ggml-vocab-llama-spm.gguf");
  MakeModelOptions options;
  options.shape = "tiny";
  options.dtype = "bf16";
  options.vocab_from = vocab_path;
  options.output = ::vellum::testing::temp_dir() / "vocab-copied.gguf";
  make_model(options);
  const auto made = gguf::GgufFile::open(options.output);
  const auto vocab = gguf::GgufFile::open(vocab_path);
  std::vector<std::pair<std::string, gguf::Value>> expected, got;
  for (const auto& kv : vocab->metadata()) {
    if (kv.first.starts_with("tokenizer.")) expected.push_back(kv);
  }
  for (const auto& kv : made->metadata()) {
    if (kv.first.starts_with("tokenizer.")) got.push_back(kv);
  }
  ASSERT_GT(expected.size(), 5u);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, expected[i].first);
    EXPECT_TRUE(got[i].second == expected[i].second) << got[i].first;
  }
  const ModelConfig c = ModelConfig::from_gguf(*made);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(made->find_tensor("token_embd.weight")->shape, (std::vector<int64_t>{128, 32000}));
}

TEST(MakeModel, RejectsBadOptions) {
  MakeModelOptions options;
  options.output = ::vellum::testing::temp_dir() / "bad.gguf";
  options.shape = "huge";
  EXPECT_THROW(make_model(options), Error);
  options.shape = "tiny";
  options.dtype = "q4_0";
  try {
    make_model(options);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown weight dtype 'q4_0'"));
  }
  options.dtype = "f32";
  options.vocab_from = ::vellum::testing::temp_dir() / "no-such-vocab.gguf";
  EXPECT_THROW(make_model(options), Error);
  EXPECT_FALSE(std::filesystem::exists(options.output));
}

// Values do not depend on how a tensor is cut into pieces.
TEST(RandomWeights, RangeIndependentOfSlicing) {
  const RandomTensorSpec spec{3, stream_id("x"), 0.0f, 1.0f};
  const int64_t n = 3 * 4096 + 64;
  std::vector<float> whole(n), pieces(n);
  generate_random(spec, gguf::GgmlType::F32, 0, n,
                  reinterpret_cast<uint8_t*>(whole.data()));
  int64_t at = 0;
  for (int64_t len : {32, 4000, 64, 8192, 64}) {
    generate_random(spec, gguf::GgmlType::F32, at, len,
                    reinterpret_cast<uint8_t*>(pieces.data() + at));
    at += len;
  }
  ASSERT_EQ(at, n);
  EXPECT_EQ(whole, pieces);
}

// gguf's own Python reader (llama.cpp's gguf-py) as an independent check, when installed.
TEST(MakeModel, ReadableByPythonGguf) {
  if (std::system("python3 -c 'import gguf' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 gguf package not installed (Debian 12 does not ship python3-gguf)";
  }
  const auto path = make_tiny("py-check.gguf", "q8_0", 9);
  const std::string cmd =
      "python3 -c \"import gguf,sys; r=gguf.GGUFReader(sys.argv[1]); "
      "assert len(r.tensors)==39, len(r.tensors); "
      "t={x.name: x for x in r.tensors}; "
      "assert t['blk.0.attn_q.weight'].tensor_type==gguf.GGMLQuantizationType.Q8_0; "
      "assert bytes(r.fields['general.architecture'].parts[-1])==b'llama'\" " +
      path.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace vellum::model
