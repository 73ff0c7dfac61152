// Hugging Face model directories: make-model --format hf against the GGUF of the same seeded
// weights (identical tensors and logits, every architecture), sharded checkpoints, rope scaling
// from config.json, and the clear errors for bad directories and files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "model/forward_batch.h"
#include "model/io/hf_config.h"
#include "model/io/make_model.h"
#include "model/io/model_files.h"
#include "model/io/safetensors.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "model/model_test_util.h"
#include "test_util.h"

namespace vellum::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

fs::path scratch(const std::string& name) {
  const fs::path dir = ::vellum::testing::temp_dir() / name;
  fs::remove_all(dir);
  return dir;
}

fs::path make(const std::string& shape, const std::string& dtype, const std::string& format,
              const fs::path& output, uint64_t seed = 7) {
  MakeModelOptions o;
  o.shape = shape;
  o.dtype = dtype;
  o.format = format;
  o.seed = seed;
  o.output = output;
  make_model(o);
  return output;
}

// Logits of a 20-token prompt (every position) and then 3 decode steps, concatenated.
std::vector<float> run_logits(const fs::path& path, kernels::MatmulPrecision precision) {
  std::unique_ptr<Model> m = load_model(open_model_files(path), ModelLoadOptions{precision});
  const int64_t vocab = m->config().vocab_size;
  constexpr int32_t kBlock = 16;
  KvCache cache(m->kv_cache_shape(kBlock, kernels::KvType::kF32), 8);
  ::vellum::testing::SequenceBlocks blocks(kBlock);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 23; ++i) tokens.push_back(1 + (i * 37) % static_cast<int32_t>(vocab - 1));
  std::vector<float> all;
  int32_t done = 0;
  for (int32_t n : {20, 1, 1, 1}) {
    blocks.reserve(0, done + n);
    ForwardBatch batch;
    batch.add_sequence(tokens.data() + done, n, done, blocks.table(0).data(),
                       static_cast<int32_t>(blocks.table(0).size()), kBlock, n);
    batch.finalize();
    std::vector<float> logits(static_cast<size_t>(batch.num_logits() * vocab));
    m->forward(batch, cache, logits.data());
    all.insert(all.end(), logits.begin(), logits.end());
    done += n;
  }
  return all;
}

struct ShapeCase {
  const char* shape;
  const char* dtype;
};

class HfMakeModel : public ::testing::TestWithParam<ShapeCase> {};

// The GGUF and the HF directory of one seed hold the same weights: the same canonical tensors
// bit for bit, hence identical logits.
TEST_P(HfMakeModel, GgufAndHfCopiesGiveIdenticalLogits) {
  const ShapeCase& p = GetParam();
  const std::string tag = std::string(p.shape) + "-" + p.dtype;
  const fs::path gguf_path = make(p.shape, p.dtype, "gguf", scratch(tag + ".gguf"));
  const fs::path dir = make(p.shape, p.dtype, "hf", scratch(tag + "-hf"));
  ASSERT_TRUE(fs::exists(dir / "config.json"));
  ASSERT_TRUE(fs::exists(dir / "generation_config.json"));
  ASSERT_TRUE(fs::exists(dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / ".make-model.tmp.gguf"));

  const ModelFiles hf = open_model_files(dir);
  const ModelFiles gg = open_model_files(gguf_path);
  EXPECT_EQ(hf.config.architecture, gg.config.architecture);
  EXPECT_EQ(hf.config.layer_is_sliding, gg.config.layer_is_sliding);
  EXPECT_EQ(hf.config.attention_scale, gg.config.attention_scale);
  EXPECT_EQ(hf.weights->tensors().size(), gg.weights->tensors().size());
  for (const gguf::TensorInfo& t : gg.weights->tensors()) {
    const gguf::TensorInfo* o = hf.weights->find_tensor(t.name);
    ASSERT_NE(o, nullptr) << tag << ": " << t.name;
    EXPECT_EQ(o->type, t.type) << tag << ": " << t.name;
    EXPECT_EQ(o->shape, t.shape) << tag << ": " << t.name;
    ASSERT_EQ(o->nbytes, t.nbytes) << tag << ": " << t.name;
    EXPECT_EQ(std::memcmp(o->data, t.data, t.nbytes), 0) << tag << ": " << t.name;
  }
  for (auto precision : {kernels::MatmulPrecision::kAuto, kernels::MatmulPrecision::kF32}) {
    const std::vector<float> a = run_logits(gguf_path, precision);
    const std::vector<float> b = run_logits(dir, precision);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
        << tag << ": logits differ between the GGUF and the HF copy";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, HfMakeModel,
    ::testing::Values(ShapeCase{"tiny", "f16"}, ShapeCase{"tiny", "bf16"},
                      ShapeCase{"tiny", "f32"}, ShapeCase{"tiny-qwen2", "f16"},
                      ShapeCase{"tiny-qwen3", "f16"}, ShapeCase{"tiny-gemma2", "f16"},
                      ShapeCase{"tiny-gemma3", "bf16"}, ShapeCase{"tiny-phi3", "f16"},
                      ShapeCase{"tiny-mixtral", "f16"}, ShapeCase{"tiny-qwen3moe", "f16"}),
    [](const ::testing::TestParamInfo<ShapeCase>& param_info) {
      std::string n = std::string(param_info.param.shape) + "_" + param_info.param.dtype;
      for (char& c : n) {
        if (c == '-') c = '_';
      }
      return n;
    });

TEST(HfMakeModel, QuantizedDtypeIsRefused) {
  try {
    make("tiny", "q4_0", "hf", scratch("q4-hf"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("--format hf"));
    EXPECT_THAT(e.what(), HasSubstr("f16"));
  }
}

// --- helpers to write (possibly broken) directories ---------------------------------------------

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}
void write_json(const fs::path& path, const json& j) { std::ofstream(path) << j.dump(2); }

struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// An independent minimal safetensors writer (not the product's), so the reader is tested
// against the format rather than against itself.
void write_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors) {
  json header = json::object();
  size_t offset = 0;
  for (const RawTensor& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  const std::string text = header.dump();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t len = text.size();
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << text;
  for (const RawTensor& t : tensors) {
    out.write(reinterpret_cast<const char*>(t.bytes.data()),
              static_cast<std::streamsize>(t.bytes.size()));
  }
}

std::vector<RawTensor> read_tensors(const fs::path& path) {
  std::vector<RawTensor> out;
  const auto file = SafetensorsFile::open(path);
  for (const SafetensorsTensor& t : file->tensors()) {
    out.push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.nbytes}});
  }
  return out;
}

// A fresh tiny llama HF directory named `name`.
fs::path tiny_hf(const std::string& name) { return make("tiny", "f16", "hf", scratch(name)); }

std::string load_error(const fs::path& path) {
  try {
    open_model_files(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(HfDirectory, ShardedCheckpointLoadsLikeOneFile) {
  const fs::path dir = tiny_hf("sharded");
  std::vector<RawTensor> tensors = read_tensors(dir / "model.safetensors");
  const ModelFiles single = open_model_files(dir);
  const std::vector<float> expected = run_logits(dir, kernels::MatmulPrecision::kAuto);
  fs::remove(dir / "model.safetensors");
  const size_t half = tensors.size() / 2;
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  std::vector<RawTensor> a(tensors.begin(), tensors.begin() + static_cast<ptrdiff_t>(half));
  std::vector<RawTensor> b(tensors.begin() + static_cast<ptrdiff_t>(half), tensors.end());
  const std::string sa = "model-00001-of-00002.safetensors";
  const std::string sb = "model-00002-of-00002.safetensors";
  for (const RawTensor& t : a) index["weight_map"][t.name] = sa;
  for (const RawTensor& t : b) index["weight_map"][t.name] = sb;
  write_safetensors(dir / sa, a);
  write_safetensors(dir / sb, b);
  write_json(dir / "model.safetensors.index.json", index);
  const ModelFiles sharded = open_model_files(dir);
  EXPECT_EQ(sharded.weights->tensors().size(), single.weights->tensors().size());
  const std::vector<float> got = run_logits(dir, kernels::MatmulPrecision::kAuto);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);

  // The index and the shards must agree.
  json moved = index;
  moved["weight_map"][a.front().name] = sb;
  write_json(dir / "model.safetensors.index.json", moved);
  EXPECT_THAT(load_error(dir), HasSubstr("does not match the index"));
  json missing = index;
  missing["weight_map"]["model.extra.weight"] = "model-00003-of-00003.safetensors";
  write_json(dir / "model.safetensors.index.json", missing);
  EXPECT_THAT(load_error(dir), HasSubstr("model-00003-of-00003.safetensors"));
  EXPECT_THAT(load_error(dir), HasSubstr("missing"));
  json unlisted = index;
  unlisted["weight_map"].erase(b.back().name);
  write_json(dir / "model.safetensors.index.json", unlisted);
  EXPECT_THAT(load_error(dir), HasSubstr("not listed in"));
}

TEST(HfDirectory, MissingFilesAreNamed) {
  const fs::path dir = tiny_hf("missing");
  fs::remove(dir / "model.safetensors");
  EXPECT_THAT(load_error(dir), HasSubstr("model.safetensors"));
  fs::remove(dir / "config.json");
  EXPECT_THAT(load_error(dir), HasSubstr("config.json"));
  EXPECT_THAT(load_error(scratch("does-not-exist")), HasSubstr("does not exist"));
  EXPECT_THAT(load_error(scratch("empty-dir") / ""), HasSubstr("does not exist"));
}

TEST(HfDirectory, LoadFormatMustMatchThePath) {
  const fs::path dir = tiny_hf("format");
  EXPECT_THROW(open_model_files(dir, LoadFormat::kGguf), Error);
  const fs::path gguf_path = make("tiny", "f16", "gguf", scratch("format.gguf"));
  EXPECT_THROW(open_model_files(gguf_path, LoadFormat::kSafetensors), Error);
  EXPECT_EQ(parse_load_format("safetensors"), LoadFormat::kSafetensors);
  EXPECT_THROW(parse_load_format("pt"), Error);
}

TEST(HfDirectory, ConfigProblemsAreRefusedNamingTheKey) {
  const fs::path dir = tiny_hf("config");
  const json good = read_json(dir / "config.json");
  const auto with = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    write_json(dir / "config.json", j);
    return load_error(dir);
  };
  EXPECT_THAT(with([](json& j) { j["architectures"] = {"GPT2LMHeadModel"}; }),
              AllOf(HasSubstr("GPT2LMHeadModel"), HasSubstr("LlamaForCausalLM")));
  EXPECT_THAT(with([](json& j) { j.erase("architectures"); }), HasSubstr("architectures"));
  EXPECT_THAT(with([](json& j) {
                j["quantization_config"] = {{"quant_method", "gptq"}, {"bits", 4}};
              }),
              HasSubstr("'gptq'"));
  EXPECT_THAT(with([](json& j) { j["quantization_config"] = {{"quant_method", "awq"}}; }),
              HasSubstr("'awq'"));
  EXPECT_THAT(with([](json& j) {
                j["quantization_config"] = {{"quant_method", "compressed-tensors"}};
              }),
              HasSubstr("compressed-tensors"));
  EXPECT_THAT(with([](json& j) { j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2}}; }),
              HasSubstr("'dynamic'"));
  EXPECT_THAT(with([](json& j) { j["rope_scaling"] = {{"rope_type", "longrope"}}; }),
              HasSubstr("LongRoPE"));
  EXPECT_THAT(with([](json& j) { j["hidden_act"] = "gelu"; }), HasSubstr("'gelu'"));
  EXPECT_THAT(with([](json& j) { j["mlp_bias"] = true; }), HasSubstr("mlp_bias"));
  EXPECT_THAT(with([](json& j) { j.erase("hidden_size"); }), HasSubstr("hidden_size"));
  EXPECT_THAT(with([](json& j) { j["num_key_value_heads"] = 3; }), HasSubstr("multiple"));
  // A config that does not match the weights: the tensor and its file are named.
  const std::string shape_error = with([](json& j) { j["intermediate_size"] = 256; });
  EXPECT_THAT(shape_error, HasSubstr("model.safetensors"));
  EXPECT_THAT(shape_error, HasSubstr("gate_proj.weight"));
  EXPECT_THAT(shape_error, HasSubstr("[384, 128]"));
  // Biases the config does not ask for are tensors the decoder would ignore: refused.
  EXPECT_THAT(with([](json& j) { j["attention_bias"] = true; }), HasSubstr("q_proj.bias"));
  write_json(dir / "config.json", good);
  EXPECT_NO_THROW(open_model_files(dir));
}

TEST(HfDirectory, TensorProblemsAreRefusedNamingTheTensorAndFile) {
  const fs::path dir = tiny_hf("tensors");
  const std::vector<RawTensor> good = read_tensors(dir / "model.safetensors");
  const auto with = [&](const std::function<void(std::vector<RawTensor>&)>& edit) {
    std::vector<RawTensor> t = good;
    edit(t);
    write_safetensors(dir / "model.safetensors", t);
    return load_error(dir);
  };
  EXPECT_THAT(with([](auto& t) { t.push_back({"model.extra.weight", "F32", {1}, {0, 0, 0, 0}}); }),
              AllOf(HasSubstr("model.extra.weight"), HasSubstr("not used")));
  EXPECT_THAT(with([](auto& t) { t.erase(t.begin() + 3); }), HasSubstr("is missing"));
  EXPECT_THAT(with([](auto& t) {
                for (RawTensor& r : t) {
                  if (r.name.ends_with("q_proj.weight")) {
                    r.dtype = "I8";
                    r.shape[1] *= 2;
                  }
                }
              }),
              AllOf(HasSubstr("dtype I8"), HasSubstr("q_proj.weight")));
  // rotary_emb.inv_freq buffers of older checkpoints are skipped, as transformers does.
  EXPECT_THAT(with([](auto& t) {
                t.push_back({"model.layers.0.self_attn.rotary_emb.inv_freq", "F32", {1},
                             {0, 0, 0, 0}});
              }),
              "no error");
}

TEST(Safetensors, CorruptFilesAreRefused) {
  const fs::path path = scratch("corrupt.safetensors");
  const auto write_raw = [&](const std::string& header, size_t data_bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << std::string(data_bytes, '\0');
  };
  const auto error = [&]() -> std::string {
    try {
      SafetensorsFile::open(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(error(), "no error");
  write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4);
  EXPECT_THAT(error(), HasSubstr("truncated"));
  write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 12);
  EXPECT_THAT(error(), HasSubstr("trailing"));
  write_raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8);
  EXPECT_THAT(error(), HasSubstr("should hold 12 bytes"));
  write_raw(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8);
  EXPECT_THAT(error(), HasSubstr("unknown dtype 'Q4'"));
  write_raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            12);
  EXPECT_THAT(error(), HasSubstr("gap"));
  write_raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", 8);
  EXPECT_THAT(error(), HasSubstr("not valid JSON"));
  write_raw("[1,2]", 0);
  EXPECT_THAT(error(), HasSubstr("not a JSON object"));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    const uint64_t len = 1ull << 40;
    out.write(reinterpret_cast<const char*>(&len), 8);
  }
  EXPECT_THAT(error(), HasSubstr("header length"));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << "abc";
  }
  EXPECT_THAT(error(), HasSubstr("not a safetensors file"));
}

TEST(HfConfig, RopeScalingAndWindows) {
  const fs::path dir = scratch("config-only");
  fs::create_directories(dir);
  json j = {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 256},
            {"intermediate_size", 512}, {"num_hidden_layers", 2}, {"num_attention_heads", 4},
            {"num_key_value_heads", 2}, {"vocab_size", 100}, {"max_position_embeddings", 4096},
            {"rope_theta", 500000.0},
            {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                              {"high_freq_factor", 4.0},
                              {"original_max_position_embeddings", 8192}}}};
  write_json(dir / "config.json", j);
  ModelConfig c = read_hf_config(dir).config;
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_EQ(c.rope_scaling.factor, 32.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position, 8192);
  EXPECT_EQ(c.rope_inv_freq(nullptr), c.rope_inv_freq(llama3_rope_factors(c.rope_scaling, 500000.0f, 64).data()));
  EXPECT_EQ(c.sliding_window, 0);

  // Mistral: every layer slides.
  j["architectures"] = {"MistralForCausalLM"};
  j["sliding_window"] = 4096;
  j["rope_scaling"] = nullptr;
  write_json(dir / "config.json", j);
  c = read_hf_config(dir).config;
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, true}));

  // Qwen2: only with use_sliding_window, from max_window_layers on.
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = false;
  write_json(dir / "config.json", j);
  EXPECT_EQ(read_hf_config(dir).config.sliding_window, 0);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 1;
  write_json(dir / "config.json", j);
  c = read_hf_config(dir).config;
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{false, true}));

  // Gemma 3: sliding_window_pattern without layer_types, rope_local_base_freq, linear scaling.
  j = {{"architectures", {"Gemma3ForCausalLM"}}, {"hidden_size", 256},
       {"intermediate_size", 512}, {"num_hidden_layers", 6}, {"num_attention_heads", 4},
       {"num_key_value_heads", 1}, {"head_dim", 64}, {"vocab_size", 100},
       {"max_position_embeddings", 4096}, {"sliding_window", 512},
       {"sliding_window_pattern", 3}, {"query_pre_attn_scalar", 256},
       {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}};
  write_json(dir / "config.json", j);
  c = read_hf_config(dir).config;
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, true, false, true, true, false}));
  EXPECT_EQ(c.rope_theta, 1e6f);
  EXPECT_EQ(c.rope_theta_swa, 10000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_EQ(c.attention_scale, 1.0f / 16.0f);
  EXPECT_TRUE(c.tie_word_embeddings);
  // Gemma 2 defaults: softcaps 50 / 30, alternating layers starting with a sliding one.
  j["architectures"] = {"Gemma2ForCausalLM"};
  j.erase("sliding_window_pattern");
  j.erase("rope_scaling");
  write_json(dir / "config.json", j);
  c = read_hf_config(dir).config;
  EXPECT_EQ(c.attn_logit_softcap, 50.0f);
  EXPECT_EQ(c.final_logit_softcap, 30.0f);
  EXPECT_EQ(c.layer_is_sliding, (std::vector<bool>{true, false, true, false, true, false}));
  j["layer_types"] = {"full_attention", "chunked_attention", "full_attention",
                      "full_attention", "full_attention", "full_attention"};
  write_json(dir / "config.json", j);
  EXPECT_THROW(read_hf_config(dir), Error);
}

}  // namespace
}  // namespace vellum::model
