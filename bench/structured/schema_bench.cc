// JSONSchemaBench and MaskBench drivers for Vellum's grammar engine (no LLM involved).
//
//   schema_bench accept DATA_DIR [--spec-defaults] [--ignore-unenforceable] [--errors FILE]
//     DATA_DIR: jsonschemabench's data/ (one folder per subset, one schema per file). Compiles
//     each schema as `vellum serve` would (ConstraintSpec kJsonSchema) and prints, per subset,
//     the accepted count and compile time p50 / p99 / max; --errors writes one refusal per line.
//   schema_bench maskbench MASKBENCH_DATA_DIR VOCAB_GGUF [--every N] [--strict]
//     Each file holds a schema and valid / invalid instances. The instance is serialized as
//     Python's json.dumps does (", " and ": "), tokenized with the GGUF's tokenizer, and driven
//     token by token through a Matcher: a token outside the mask rejects, and the instance is
//     accepted only when every token is allowed and the end is. Prints wrong accepts / rejects
//     on compiled schemas, compile p50/p99 and per-token time of sync + mask p50/p99.
//     Schemas compile with JSON Schema's own defaults (JsonGrammarOptions::spec_defaults),
//     unless --strict.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "structured/constraint.h"
#include "tokenizer/tokenizer.h"
#include "vellum/status.h"

namespace {

using namespace vellum::structured;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const auto idx = static_cast<size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(idx, values.size() - 1)];
}

bool has_flag(int argc, char** argv, const std::string& flag) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i] == flag) return true;
  }
  return false;
}

std::string flag_value(int argc, char** argv, const std::string& flag, std::string fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == flag) return argv[i + 1];
  }
  return fallback;
}

std::vector<fs::path> sorted_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int run_accept(int argc, char** argv) {
  const fs::path data = argv[2];
  ConstraintSpec spec;
  spec.kind = ConstraintKind::kJsonSchema;
  spec.spec_defaults = has_flag(argc, argv, "--spec-defaults");
  spec.ignore_unenforceable = has_flag(argc, argv, "--ignore-unenforceable");
  std::ofstream errors;
  if (const std::string path = flag_value(argc, argv, "--errors", ""); !path.empty()) errors.open(path);
  std::vector<fs::path> subsets;
  for (const auto& entry : fs::directory_iterator(data)) {
    if (entry.is_directory()) subsets.push_back(entry.path());
  }
  std::sort(subsets.begin(), subsets.end());
  size_t total = 0;
  size_t total_accepted = 0;
  std::vector<double> all_ms;
  std::printf("| subset | schemas | accepted | %% | compile p50 ms | p99 ms | max ms |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|\n");
  for (const fs::path& subset : subsets) {
    size_t num = 0;
    size_t accepted = 0;
    std::vector<double> ms;
    for (const fs::path& file : sorted_files(subset)) {
      spec.text = read_file(file);
      if (!nlohmann::json::accept(spec.text)) continue;  // the benchmark's own unparsable files
      ++num;
      const auto start = Clock::now();
      try {
        compile_constraint(spec);
        ms.push_back(ms_since(start));
        ++accepted;
      } catch (const vellum::Error& e) {
        if (errors.is_open()) errors << subset.filename().string() << "/" << file.filename().string() << "\t" << e.what() << "\n";
      }
    }
    total += num;
    total_accepted += accepted;
    all_ms.insert(all_ms.end(), ms.begin(), ms.end());
    std::printf("| %s | %zu | %zu | %.1f | %.2f | %.2f | %.2f |\n", subset.filename().c_str(), num,
                accepted, 100.0 * static_cast<double>(accepted) / static_cast<double>(std::max<size_t>(num, 1)),
                percentile(ms, 0.5), percentile(ms, 0.99), ms.empty() ? 0.0 : *std::max_element(ms.begin(), ms.end()));
  }
  std::printf("| **all** | %zu | %zu | %.1f | %.2f | %.2f | %.2f |\n", total, total_accepted,
              100.0 * static_cast<double>(total_accepted) / static_cast<double>(std::max<size_t>(total, 1)),
              percentile(all_ms, 0.5), percentile(all_ms, 0.99),
              all_ms.empty() ? 0.0 : *std::max_element(all_ms.begin(), all_ms.end()));
  return 0;
}

// Python's json.dumps(value, ensure_ascii=False): ", " and ": " separators.
std::string python_dumps(const nlohmann::ordered_json& value) {
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      out += (first ? "" : ", ") + nlohmann::ordered_json(key).dump() + ": " + python_dumps(member);
      first = false;
    }
    return out + "}";
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + python_dumps(value[i]);
    return out + "]";
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d == static_cast<double>(static_cast<int64_t>(d)) && std::abs(d) < 1e16) {
      return std::to_string(static_cast<int64_t>(d)) + ".0";
    }
  }
  return value.dump();
}

bool allowed(std::span<const uint64_t> mask, int32_t id) {
  return (mask[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1;
}

int run_maskbench(int argc, char** argv) {
  const fs::path data = argv[2];
  const auto tokenizer = vellum::tokenizer::Tokenizer::from_gguf(*vellum::gguf::GgufFile::open(argv[3]));
  std::vector<std::string> bytes(static_cast<size_t>(tokenizer->vocab_size()));
  for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) bytes[static_cast<size_t>(id)] = tokenizer->token_to_piece(id);
  auto vocab = std::make_shared<const TokenVocabulary>(std::move(bytes), tokenizer->eog_ids(),
                                                       tokenizer->vocab_size());
  const int32_t end_id = tokenizer->eog_ids().front();
  const size_t every = std::stoul(flag_value(argc, argv, "--every", "1"));
  const bool strict = has_flag(argc, argv, "--strict");
  std::ofstream wrong;
  if (const std::string path = flag_value(argc, argv, "--wrong", ""); !path.empty()) wrong.open(path);
  vellum::tokenizer::EncodeOptions encode_options;
  encode_options.add_special = false;
  size_t num_schemas = 0, num_compiled = 0, num_valid = 0, num_invalid = 0;
  size_t wrong_accepts = 0, wrong_rejects = 0, num_tokens = 0;
  std::vector<double> compile_ms, token_us;
  const std::vector<fs::path> files = sorted_files(data);
  for (size_t f = 0; f < files.size(); f += every) {
    nlohmann::ordered_json doc;
    try {
      doc = nlohmann::ordered_json::parse(read_file(files[f]));
    } catch (const std::exception&) {
      continue;
    }
    if (!doc.contains("tests") || doc["tests"].empty()) continue;
    ++num_schemas;
    ConstraintSpec spec;
    spec.kind = ConstraintKind::kJsonSchema;
    spec.text = doc["schema"].dump();
    spec.spec_defaults = !strict;
    std::shared_ptr<CompiledGrammar> grammar;
    const auto start = Clock::now();
    try {
      grammar = std::make_shared<CompiledGrammar>(compile_constraint(spec), GrammarLimits{}, vocab);
    } catch (const vellum::Error&) {
      continue;
    }
    compile_ms.push_back(ms_since(start));
    ++num_compiled;
    for (size_t t = 0; t < doc["tests"].size(); ++t) {
      const auto& test = doc["tests"][t];
      const bool valid = test.value("valid", false);
      (valid ? num_valid : num_invalid) += 1;
      const std::vector<int32_t> tokens = tokenizer->encode(python_dumps(test["data"]), encode_options);
      Matcher matcher(grammar);
      bool accepted = true;
      size_t i = 0;
      std::string why;
      for (; i <= tokens.size(); ++i) {
        const auto step = Clock::now();
        matcher.sync(std::span(tokens).first(i));
        const auto mask = matcher.mask();
        token_us.push_back(ms_since(step) * 1000.0);
        ++num_tokens;
        const int32_t next = i < tokens.size() ? tokens[i] : end_id;
        if (!allowed(mask, next)) {
          accepted = false;
          why = matcher.error() + " " + grammar->automaton().limit_error();
          break;
        }
      }
      if (accepted != valid) {
        (valid ? wrong_rejects : wrong_accepts) += 1;
        if (wrong.is_open()) {
          wrong << files[f].filename().string() << "\ttest " << t << "\t"
                << (valid ? "wrong reject at token " + std::to_string(i) : "wrong accept") << "\t"
                << why << "\t"
                << python_dumps(test["data"]).substr(0, 300) << "\n";
        }
      }
    }
  }
  std::printf("schemas with tests: %zu, compiled: %zu (%.1f %%)\n", num_schemas, num_compiled,
              100.0 * static_cast<double>(num_compiled) / static_cast<double>(std::max<size_t>(num_schemas, 1)));
  std::printf("instances on compiled schemas: %zu valid, %zu invalid\n", num_valid, num_invalid);
  std::printf("wrong accepts: %zu, wrong rejects: %zu\n", wrong_accepts, wrong_rejects);
  std::printf("compile ms (incl. matcher setup): p50 %.2f p99 %.2f max %.2f\n",
              percentile(compile_ms, 0.5), percentile(compile_ms, 0.99),
              compile_ms.empty() ? 0.0 : *std::max_element(compile_ms.begin(), compile_ms.end()));
  std::printf("per token (sync + mask), %zu tokens: p50 %.1f us p99 %.1f us max %.1f us\n", num_tokens,
              percentile(token_us, 0.5), percentile(token_us, 0.99),
              token_us.empty() ? 0.0 : *std::max_element(token_us.begin(), token_us.end()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "accept" && argc >= 3) return run_accept(argc, argv);
  if (mode == "maskbench" && argc >= 4) return run_maskbench(argc, argv);
  std::fprintf(stderr,
               "usage: schema_bench accept DATA_DIR [--spec-defaults] [--ignore-unenforceable] "
               "[--errors FILE]\n"
               "       schema_bench maskbench MASKBENCH_DATA_DIR VOCAB_GGUF [--every N] [--strict] "
               "[--wrong FILE]\n");
  return 2;
}
