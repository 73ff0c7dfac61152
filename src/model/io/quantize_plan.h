// What `vellum quantize` will do to a GGUF file, decided before a byte is written: the target
// named as llama-quantize names it, and per tensor the type it gets (llama.cpp's
// src/llama-quant.cpp: tensor_allows_quantization, llama_tensor_get_type and the fallbacks).
//
// Targets (case-insensitive, or llama_ftype's number): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q2_K, Q3_K_M (= Q3_K), Q4_K_M (= Q4_K), Q5_K_M (= Q5_K), Q6_K, IQ4_NL, IQ4_XS.
// llama-quantize's other targets (IQ2_*, IQ3_*, Q3_K_S/L, Q4_K_S, ...) are refused: Vellum cannot
// encode their types or mixes.
//
// Which tensors convert (llama-quantize): names ending in "weight" with two or more dimensions
// of size > 1, except norms, MoE router gates (ffn_gate_inp), position/token-type embeddings,
// Mamba conv1d and a few tiny special tensors; the rest are copied byte for byte.
// The type of a converted tensor:
//   F32 / F16 / BF16 targets, and --pure: that type for every one (with the block fallback
//     below for a quantized pure target).
//   Q2_K, Q3_K_M, Q4_K_M, Q5_K_M: quant_mix.h's llama mixes (attn_v / ffn_down / attn_output
//     rules, output.weight Q6_K), with the layer count and GQA ratio read from the metadata.
//   Q4_0 ... Q8_0, Q6_K, IQ4_NL, IQ4_XS: the target, but output.weight (token_embd.weight when
//     there is no output.weight) Q6_K unless the target is Q8_0 (Q8_0 when its rows do not fit
//     the target's block); IQ4_*: attn_v Q5_K when n_head / n_head_kv >= 4, ffn_down Q5_K in the
//     first n_layer / 8 layers.
//   A type whose block does not divide the rows falls back as quant_mix.h says.
//   --token-embedding-type / --output-tensor-type override token_embd.weight / output.weight.
// Not reproduced (documented gaps): the 8-expert and 70B bumps, the Falcon variants, the fused
// attn_qkv rule, importance matrices, per-tensor --tensor-type patterns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace vellum::gguf {
class GgufFile;
}

namespace vellum::model {

struct QuantizeTarget {
  const char* name;       // llama-quantize's spelling: "Q4_K_M"
  uint32_t file_type;     // llama_ftype, written to general.file_type
  gguf::GgmlType base;    // the type of the matrices no rule moves
  const char* preset;     // the quant_mix.h preset carrying the per-tensor rules
};

// The target named `name` (case-insensitive; or its llama_ftype number, "15"). Throws
// vellum::Error (kInvalidArgument) for a name llama-quantize does not know, kUnsupported for one
// it knows but Vellum cannot produce; both list the supported names.
const QuantizeTarget& find_quantize_target(std::string_view name);
// "F32, F16, BF16, Q8_0, ...".
std::string quantize_target_names();

// A GGML type by its name (case-insensitive: "q8_0", "Q6_K"), for --output-tensor-type and
// --token-embedding-type. Throws kInvalidArgument for an unknown name, kUnsupported for a type
// quantize_row cannot encode.
gguf::GgmlType parse_quantizable_type(std::string_view name);

struct QuantizePlanOptions {
  bool pure = false;                 // one type for every converted tensor, no mix rules
  bool leave_output_tensor = false;  // copy output.weight unchanged
  std::optional<gguf::GgmlType> output_tensor_type;
  std::optional<gguf::GgmlType> token_embedding_type;
};

struct TensorPlan {
  size_t tensor_idx = 0;  // into GgufFile::tensors()
  gguf::GgmlType new_type = gguf::GgmlType::F32;
  bool convert = false;   // false: copied byte for byte (new_type == the source's type)
};

// One entry per tensor of `file`, in file order. Pure: reads only `file`'s metadata and tensor
// table. Throws kInvalidModel when a mix needs {arch}.block_count and the file lacks it,
// kInvalidArgument when an override type's block does not divide a tensor's rows.
std::vector<TensorPlan> plan_quantization(const gguf::GgufFile& file,
                                          const QuantizeTarget& target,
                                          const QuantizePlanOptions& options);

// llama-quantize's rule for which tensors may be converted (name and shape only).
bool tensor_allows_quantization(std::string_view name, const std::vector<int64_t>& shape);

}  // namespace vellum::model
