// The real GGUF files in ../shared/models open and show the keys and tensors they should.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "gguf/gguf.h"
#include "gguf/gguf_print.h"
#include "test_util.h"

namespace vellum::gguf {
namespace {

using ::testing::HasSubstr;

TEST(GgufRealFiles, Stories260K) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto file = GgufFile::open(path);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(file->get_int("llama.block_count"), 5);
  EXPECT_EQ(file->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(file->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores").size(), 512u);
  EXPECT_EQ(file->get_int_array("tokenizer.ggml.token_type").size(), 512u);
  ASSERT_GT(file->tensors().size(), 0u);

  const TensorInfo* embd = file->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::F32);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{64, 512}));
  EXPECT_EQ(embd->nbytes, 64u * 512u * 4u);
  EXPECT_EQ(embd->data, file->tensors().front().data + embd->offset - file->tensors().front().offset);
  // Tensor data lies inside the file after the data section start.
  for (const TensorInfo& t : file->tensors()) {
    EXPECT_EQ(t.offset % file->alignment(), 0u) << t.name;
    EXPECT_LE(file->data_offset() + t.offset + t.nbytes, file->file_size()) << t.name;
    EXPECT_EQ(file->find_tensor(t.name), &t);
  }
  EXPECT_EQ(file->find_tensor("no.such.tensor"), nullptr);
}

TEST(GgufRealFiles, TinyRandomHasBigVocab) {
  VELLUM_REQUIRE_MODEL_FILE(path, "llama-2-tiny-random.gguf");
  const auto file = GgufFile::open(path);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  const std::vector<std::string>* tokens = file->find_string_array("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[1], "<s>");
  // Despite models/README.md, this file has no rope_freqs tensor: 12 tensors, f16 matrices.
  EXPECT_EQ(file->get_int("llama.rope.dimension_count"), 4);
  ASSERT_EQ(file->tensors().size(), 12u);
  EXPECT_EQ(file->find_tensor("output.weight")->type, GgmlType::F16);
  EXPECT_EQ(file->find_tensor("output.weight")->shape, (std::vector<int64_t>{8, 32000}));
}

TEST(GgufRealFiles, LlamaBpeVocabOnly) {
  VELLUM_REQUIRE_MODEL_FILE(path, "vocab/ggml-vocab-llama-bpe.gguf");
  const auto file = GgufFile::open(path);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens").size(), 128256u);
  EXPECT_GT(file->get_string_array("tokenizer.ggml.merges").size(), 100000u);
  EXPECT_TRUE(file->tensors().empty());
}

TEST(GgufRealFiles, TypedGetterRejectsWrongType) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto file = GgufFile::open(path);
  EXPECT_EQ(file->get_int("no.such.key"), std::nullopt);
  EXPECT_TRUE(file->get_string_array("no.such.key").empty());
  try {
    (void)file->get_int("general.architecture");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("general.architecture"));
    EXPECT_THAT(e.what(), HasSubstr("expected an integer"));
  }
  EXPECT_THROW((void)file->get_float_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW((void)file->get_string("llama.block_count"), Error);
  // Integer keys coerce to float.
  EXPECT_EQ(file->get_float("llama.block_count"), 5.0);
}

TEST(GgufRealFiles, PrintSummaryListsKeysAndTensors) {
  VELLUM_REQUIRE_MODEL_FILE(path, "stories260K.gguf");
  const auto file = GgufFile::open(path);
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* out = open_memstream(&buf, &len);
  ASSERT_NE(out, nullptr);
  print_summary(*file, out);
  std::fclose(out);
  const std::string text(buf, len);
  std::free(buf);
  EXPECT_THAT(text, HasSubstr("GGUF v3"));
  EXPECT_THAT(text, HasSubstr("general.architecture = \"llama\""));
  EXPECT_THAT(text, HasSubstr("array[string]"));
  EXPECT_THAT(text, HasSubstr("tokenizer.ggml.tokens = [string; 512] [\"<unk>\""));
  EXPECT_THAT(text, HasSubstr("token_embd.weight"));
  EXPECT_THAT(text, HasSubstr("[64, 512]"));
}

}  // namespace
}  // namespace vellum::gguf
