#include "gguf_test_files.h"

#include <fstream>
#include <iterator>

#include "test_util.h"

namespace vellum::gguf::testing {

GgufWriter make_small_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_f32("llama.rope.freq_base", 10000.0f);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hello"});
  w.set_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  std::vector<uint8_t> f32(4 * 3 * 4), f16(8 * 2), q8(2 * 2 * 34);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = static_cast<uint8_t>(i * 7 + 1);
  for (size_t i = 0; i < f16.size(); ++i) f16[i] = static_cast<uint8_t>(i * 5 + 2);
  for (size_t i = 0; i < q8.size(); ++i) q8[i] = static_cast<uint8_t>(i * 3 + 3);
  w.add_tensor("a.weight", GgmlType::F32, {4, 3}, f32);
  w.add_tensor("b.weight", GgmlType::F16, {8}, f16);
  w.add_tensor("c.weight", GgmlType::Q8_0, {64, 2}, q8);
  return w;
}

void write_small_file(const std::filesystem::path& path) { make_small_writer().write(path); }

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::filesystem::path scratch_path(const std::string& name) {
  return ::vellum::testing::temp_dir() / name;
}

}  // namespace vellum::gguf::testing
