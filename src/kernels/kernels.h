// Vellum's CPU kernels: pure functions on raw pointers, dims, strides and caller-owned
// workspace. No allocation on the hot path, no exceptions, no model or request types.
//
// Every kernel has a scalar reference in kernels/ref/ that reads like llama2.c and ISA versions
// (AVX2, AVX-512, AVX512-BF16, AMX) chosen once at run time from cpu::selected_isa(); VELLUM_ISA
// forces a lower one. Tests compare each path with the reference (tests/kernels/).
//
// Layout conventions: row-major; a "row stride" is in elements; token-major activations
// [num_tokens, ...]. OpenMP parallelises inside a kernel where it pays.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vellum::kernels {

// Storage type of a weight matrix or embedding table (GGML layouts, quant_types.h).
enum class WeightType : uint8_t {
  kF32, kF16, kBF16, kQ8_0,
  kQ4_0, kQ4_1, kQ5_0, kQ5_1,
  kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K,
  kIQ4_NL, kIQ4_XS,
};
inline constexpr int kNumWeightTypes = 15;

// Storage type of the paged KV cache. A cache row is the head_dim values of one (token, kv head):
//   kF32 / kF16 / kBF16: head_dim values;
//   kQ8_0: head_dim / 32 GGML block_q8_0 blocks (an f16 scale d, then 32 int8 q; x = d * q),
//          byte for byte llama.cpp's q8_0 cache type. head_dim must be a multiple of 32.
//   kQ4_0: head_dim / 32 GGML block_q4_0 blocks (an f16 scale d, then 16 bytes: value j in the
//          low nibble of byte j, value j + 16 in its high nibble; x = d * (q - 8)), llama.cpp's
//          q4_0. head_dim must be a multiple of 32.
//   kFp8E4M3 / kFp8E5M2: an f32 scale s for the row (per token and head), then head_dim OCP fp8
//          bytes f (E4M3: max 448, no infinities; E5M2: max 57344); x = s * f. vLLM's fp8 types.
// A quantized row's scales sit inside it, so a block of rows moves (swap, copy-on-write) as
// plain bytes, and its scale of element e lies at a place that depends on e only, not head_dim.
enum class KvType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0, kFp8E4M3, kFp8E5M2 };

// Bytes of one cache row of head_dim values (see KvType).
size_t kv_row_bytes(KvType type, int64_t head_dim);
// Values per scale block (1 for the float types): head_dim must be a multiple of it.
int64_t kv_block_elems(KvType type);
bool kv_type_is_quantized(KvType type);
// Whether the vector attention kernels have a compiled path for K as k_type with V as v_type:
// one type for both, or any K with a bf16, f16 or q8_0 V. Other pairs run the scalar reference;
// the engine refuses them.
bool kv_type_pair_supported(KvType k_type, KvType v_type);
// Bytes of one row of `n` elements (n a multiple of the type's block size: 32 for Q4_0 ... Q8_0
// and IQ4_NL, 256 for the K types and IQ4_XS).
size_t weight_row_bytes(WeightType type, int64_t n);
// Elements per block of `type` (1 for the float types).
int64_t weight_block_elems(WeightType type);

// ---- Elementwise and normalisation -------------------------------------------------------

// out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight[:]   (out may alias x)
// x, out: (n_rows, dim) contiguous; weight: (dim)
void rms_norm(float* out, const float* x, const float* weight, int64_t n_rows, int64_t dim,
              float eps);

// The residual add and the next norm in one pass per row (the row stays in cache):
// x += delta, then out = rms_norm(x) (as rms_norm; out may alias x or delta). Bitwise the same
// as add_inplace then rms_norm.
void add_rms_norm(float* x, const float* delta, float* out, const float* weight, int64_t n_rows,
                  int64_t dim, float eps);

// out[i] = silu(gate[i]) * up[i]; out may alias gate or up.
void silu_mul(float* out, const float* gate, const float* up, int64_t n);

// out[i] = gelu_tanh(gate[i]) * up[i] (GeGLU: Gemma, ...), GELU with the tanh approximation
// gelu_tanh(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))); out may alias gate or up.
void gelu_tanh_mul(float* out, const float* gate, const float* up, int64_t n);

// x[i] += y[i]
void add_inplace(float* x, const float* y, int64_t n);

// Rotary embedding, GGML "normal" mode (what llama-architecture GGUF files expect: Q/K were
// permuted at conversion so that adjacent pairs (x[2i], x[2i+1]) rotate together).
// x: (num_tokens, num_heads, head_dim) with a row stride between tokens (elements), modified in
// place. positions: (num_tokens). inv_freq: (rot_dim / 2), already divided by any per-dimension
// frequency factors (Llama-3 rope scaling); dims at and past rot_dim are left as they are.
// angle(t, i) = positions[t] * inv_freq[i].
void rope_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                  int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                  const float* inv_freq);

// Rotary embedding, GGML "NEOX" mode (GPT-NeoX, Qwen2, Phi, Gemma, ...): pair i is
// (x[i], x[i + rot_dim / 2]), i < rot_dim / 2. Arguments and angles as rope_inplace.
void rope_neox_inplace(float* x, int64_t token_stride, int64_t num_tokens, int64_t num_heads,
                       int64_t head_dim, int64_t rot_dim, const int32_t* positions,
                       const float* inv_freq);

// x[r, :] := H x[r, :] for each of num_rows rows of n values (row stride `stride`), H the
// orthonormal Walsh-Hadamard matrix of order n (a power of two; H = H^T = H^-1). Rotating both
// q and k leaves q . k unchanged, and spreads an outlier dimension of k over all n values before
// a 4-bit cache quantizes them (llama.cpp's attention rotation). One scalar version for every ISA:
// n log2 n additions per row, a few thousand per token, nothing beside the projections.
void hadamard_rotate(float* x, int64_t stride, int64_t num_rows, int64_t n);

// out[t, :] = dequantized row ids[t] of table (n_rows_table, dim) stored as `type`.
void get_rows(float* out, const void* table, WeightType type, int64_t dim, const int32_t* ids,
              int64_t num_ids);

// ---- Paged KV cache ----------------------------------------------------------------------
//
// Per layer, the K and V pools are each (num_blocks, num_kv_heads, block_size) cache rows of
// their KvType (kv_row_bytes each; K and V may differ). A token's slot is
// block_id * block_size + offset in block.

// Writes new K and V rows into their slots, quantizing them for the quantized types (the same
// bytes on every ISA: one shared quantizer). k, v: (num_tokens, num_kv_heads, head_dim) with
// token strides k_stride / v_stride (elements). A slot < 0 means padding: skip that token.
void reshape_and_cache(const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                       void* k_cache, void* v_cache, const int64_t* slot_mapping,
                       int64_t num_tokens, int64_t num_kv_heads, int64_t head_dim,
                       int64_t block_size, KvType k_type, KvType v_type);

// Whether paged_attention may spread one work item's keys over threads (split-K, "flash-decoding":
// a long decode context shared by all threads instead of running on one). The output is bitwise
// the same whichever is chosen. kAuto splits when there are fewer than 4 work items (a sequence's
// query tokens × kv heads, in groups of up to 16 rows) per thread, more than one thread, and some
// item has more than 512 keys. kAlways splits whenever the workspace allows, on one thread too and
// when every item fits one partition; kNever never splits; both are for tests and benchmarks.
// Batches of 4 or more items per thread are never split (that bounds the workspace).
enum class AttentionSplit : uint8_t { kAuto, kNever, kAlways };

struct PagedAttentionParams {
  int64_t num_seqs = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;   // num_heads % num_kv_heads == 0 (GQA/MQA)
  int64_t head_dim = 0;
  int64_t block_size = 0;
  int64_t max_blocks_per_seq = 0;  // row length of block_tables
  float scale = 1.0f;              // usually 1/sqrt(head_dim)
  KvType k_type = KvType::kF32;  // storage of the K pool
  KvType v_type = KvType::kF32;  // storage of the V pool
  // Sliding window (0 = none): the query at position p attends to key positions
  // max(0, p - sliding_window + 1) .. p only, and never reads the blocks before them (a
  // sliding-window KV manager may have freed them: their block-table entries can be anything).
  int64_t sliding_window = 0;
  // Attention logit softcap (0 = none, Gemma 2): s = softcap * tanh(s / softcap) on the scaled
  // scores, before the softmax.
  float logit_softcap = 0.0f;
  AttentionSplit split = AttentionSplit::kAuto;
};

// Varlen causal attention over the paged cache for a flat batch mixing prefill chunks and decode
// tokens. Sequence s owns query tokens [query_start_loc[s], query_start_loc[s+1]) and has
// seq_lens[s] tokens in the cache in total (earlier context + these new tokens, already written
// by reshape_and_cache). Query token j of s sits at position seq_lens[s] - q_len_s + j and
// attends to cache positions [0, that position].
// out: (num_tokens, num_heads, head_dim) contiguous. q: same shape with token stride q_stride.
// block_tables: (num_seqs, max_blocks_per_seq) int32. workspace: at least
// paged_attention_workspace_bytes(params, max_seq_len, num_threads) bytes, 64-byte aligned, where
// max_seq_len >= every seq_lens[s] and num_threads >= threads::max_threads() in the calling thread.
//
// Each output row is bitwise the same whatever else is in the batch, however the work is split
// and on however many threads (for a given ISA): a row's keys are summed in tiles and partitions
// at fixed absolute positions, and the partitions' partial results merged in order.
void paged_attention(float* out, const float* q, int64_t q_stride, const void* k_cache,
                     const void* v_cache, const int32_t* block_tables, const int32_t* seq_lens,
                     const int32_t* query_start_loc, const PagedAttentionParams& params,
                     void* workspace);
// Workspace: (num_seqs + 1) int64 work-item offsets, plus, for splitting, one partial result per
// 512-key partition of up to 4 · num_threads - 1 items of up to 16 rows: about
// 4 · num_threads · ceil(max_seq_len / 512) · 16 · (head_dim + 2) floats. For head_dim 64 that is
// 1.9 MB at 2 threads and 32K tokens, and grows linearly in both (17 MB at 16 threads).
size_t paged_attention_workspace_bytes(const PagedAttentionParams& params, int64_t max_seq_len,
                                       int num_threads);

// Copies whole blocks inside one pool: for each i, block dst[i] := block src[i].
// pool: num_blocks * block_bytes bytes.
void copy_blocks(void* pool, int64_t block_bytes, const int32_t* src, const int32_t* dst,
                 int64_t num_pairs);
// Copies whole blocks between two pools (device <-> host swap): dst_pool[dst[i]] := src_pool[src[i]].
void swap_blocks(void* dst_pool, const void* src_pool, int64_t block_bytes, const int32_t* src,
                 const int32_t* dst, int64_t num_pairs);

}  // namespace vellum::kernels
