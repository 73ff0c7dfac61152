// The flat, varlen batch one engine step hands to the model (DESIGN.md §1, §3).
//
// Every scheduled request contributes a run of consecutive tokens: a prefill chunk or one decode
// token. Runs are concatenated in sequence order. Built by the engine's model runner from the
// scheduler's decisions and the KV cache manager's block tables; read-only to the model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vellum::model {

// The block tables of one KV cache group (KvCacheLayout): layers of the group write and read the
// KV cache through them.
struct KvGroupTables {
  std::vector<int64_t> slot_mapping;  // (num_tokens) block_id * block_size + offset; <0 = skip
  std::vector<int32_t> block_tables;  // (num_seqs, max_blocks_per_seq), padded with block 0
  int32_t max_blocks_per_seq = 0;
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;        // (num_tokens)
  std::vector<int32_t> positions;        // (num_tokens) position of each token in its sequence
  std::vector<KvGroupTables> kv_groups;  // (num KV cache groups)
  std::vector<int32_t> seq_lens;         // (num_seqs) tokens in the cache after this step
  std::vector<int32_t> query_start_loc;  // (num_seqs + 1) offsets of each run in token_ids
  std::vector<int32_t> logits_indices;   // flat token indices whose logits are returned, in order

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_seqs() const { return static_cast<int64_t>(seq_lens.size()); }
  int64_t num_logits() const { return static_cast<int64_t>(logits_indices.size()); }
  int32_t max_seq_len() const {
    int32_t m = 0;
    for (int32_t len : seq_lens) m = len > m ? len : m;
    return m;
  }

  void clear() {
    token_ids.clear();
    positions.clear();
    kv_groups.clear();
    seq_lens.clear();
    query_start_loc.clear();
    logits_indices.clear();
  }

  // Appends one sequence's run. group_block_ids: the sequence's block table in each KV cache
  // group (its blocks in order; the same number of groups for every sequence); num_cached: tokens
  // of this sequence already in the cache before this run; the run's tokens occupy positions
  // [num_cached, num_cached + num_new_tokens). Logits are returned for the last num_logits tokens
  // of the run (1 to sample the next token, the whole run for prompt logprobs). Rows of
  // block_tables are padded after all sequences are added (finalize()).
  void add_sequence(const int32_t* tokens, int32_t num_new_tokens, int32_t num_cached,
                    std::span<const std::span<const int32_t>> group_block_ids, int32_t block_size,
                    int32_t num_logits);
  // Single-group form: block_ids[0, num_blocks) is the table of the only group.
  void add_sequence(const int32_t* tokens, int32_t num_new_tokens, int32_t num_cached,
                    const int32_t* block_ids, int32_t num_blocks, int32_t block_size,
                    int32_t num_logits);
  // Pads block_tables to (num_seqs, max_blocks_per_seq). Call once after the last add_sequence.
  void finalize();

 private:
  std::vector<std::vector<std::vector<int32_t>>> pending_tables_;  // [group][seq]
};

}  // namespace vellum::model
