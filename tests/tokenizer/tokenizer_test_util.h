// Helpers for the tokenizer tests: loading the shared vocab files and llama.cpp's test vectors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace vellum::tokenizer::testing {

inline std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& path) {
  const auto file = gguf::GgufFile::open(path);
  return Tokenizer::from_gguf(*file);
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// llama.cpp's test vectors: `.inp` holds inputs, each followed by a line
// "__ggml_vocab_test__"; `.out` one line of space-separated ids per input.
struct VocabTestCase {
  std::string input;
  std::vector<int32_t> expected;
};

inline std::vector<VocabTestCase> read_vocab_test_cases(const std::filesystem::path& gguf_path) {
  const std::string inp = read_file(gguf_path.string() + ".inp");
  const std::string out = read_file(gguf_path.string() + ".out");
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<VocabTestCase> cases;
  size_t start = 0;
  while (start < inp.size()) {
    const size_t end = inp.find(separator, start);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(start, end - start), {}});
    start = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  size_t index = 0;
  while (std::getline(lines, line) && index < cases.size()) {
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) cases[index].expected.push_back(id);
    ++index;
  }
  return cases;
}

}  // namespace vellum::tokenizer::testing
