// ModelRunner: turns the scheduler's decisions into one flat varlen batch (DESIGN.md §1), applies
// the KV block copies and swaps the KV cache manager asked for, and runs the model.
//
// Owns the KV cache bytes (device pools and the host swap pools) and the logits buffer.
// Thread-safety: engine core thread only.
//
// Multi-process (tensor / pipeline parallel): every rank has a ModelRunner over its share of the
// model and its own KV cache (its heads, its layers; the same block ids everywhere). On world rank
// 0 each call first broadcasts what it is about to do (block moves, the step's sequences) to the
// other ranks, whose run_worker_loop() replays it on theirs; the forward pass then runs on all
// ranks together and the logits come back on rank 0.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common/communicator.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/model.h"

namespace vellum::engine {

// One sequence's run in the step.
struct RunnerSequence {
  std::span<const int32_t> new_tokens;  // tokens to compute this step
  int32_t num_computed_tokens = 0;      // tokens already in the cache before this step
  std::span<const std::vector<int32_t>> group_block_ids;  // its block table in each KV group
  int32_t num_logits = 0;               // logits for the last num_logits new tokens
};

struct BlockMove {
  int32_t src = 0;
  int32_t dst = 0;
};

class ModelRunner {
 public:
  // control: the world group (rank 0 drives); null for a single process. Must outlive the runner.
  // pipeline_stages: how many steps launch() may keep in flight on rank 0 (1: none overlap).
  ModelRunner(model::Model& model, const model::KvCacheShape& shape, int64_t num_blocks,
              int64_t num_host_blocks, Communicator* control = nullptr, int pipeline_stages = 1);
  // On rank 0 of a parallel run: collects the steps still in flight and tells the other ranks to
  // leave run_worker_loop(), unless a communication already failed (then the job is ending
  // anyway).
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Block moves of a step, applied before its forward pass in this order: swap_out (device ->
  // host; the freed device blocks may be reused by this very step), swap_in (host -> device), then
  // the copy-on-write copies inside the device pools.
  void apply_block_copies(std::span<const BlockMove> copies);
  void swap_out(std::span<const BlockMove> moves);
  void swap_in(std::span<const BlockMove> moves);

  // Runs the step. Returns logits (num_logits_total, vocab), rows in sequence order, valid until
  // the next call (on rank 0; other ranks' are unspecified).
  std::span<float> execute(std::span<const RunnerSequence> sequences) {
    launch(sequences);
    return collect();
  }

  // execute() in two halves, so that pipeline stages overlap: on rank 0 of a pipeline-parallel
  // run launch() returns once the first stage's layers ran, while the later stages go on with
  // the step, and the engine may schedule and launch the next one. collect() waits for the
  // logits of the oldest step launched and not yet collected and returns them (as execute()
  // does; valid until max_in_flight() more steps are launched). Steps are collected in launch
  // order; block moves (apply_block_copies, swaps) between them reach every stage in call order.
  // Without pipeline stages launch() runs the whole step.
  void launch(std::span<const RunnerSequence> sequences);
  std::span<float> collect();
  // How many launched steps may be uncollected: the number of pipeline stages on rank 0 of a
  // pipeline-parallel run, else 1.
  int max_in_flight() const { return static_cast<int>(in_flight_.size()); }
  int num_in_flight() const { return num_in_flight_; }

  // On rank 0 of a parallel run: tells the idle workers that rank 0 is alive (no-op otherwise).
  void keep_alive();
  // True on rank 0 of a parallel run (the rank whose calls the others replay).
  bool drives() const {
    return control_ != nullptr && control_->size() > 1 && control_->rank() == 0;
  }

  // Ranks other than 0: replays what rank 0 broadcasts until it sends shutdown. The first message
  // may take rank 0's start-up (first_wait_seconds); after it, a silence longer than
  // idle_timeout_seconds means rank 0 died or stopped (an idle rank 0 sends keep-alives), and
  // the worker throws vellum::Error saying so, which ends the job.
  void run_worker_loop(double first_wait_seconds, double idle_timeout_seconds);

  // Benchmarks: the time of one all-reduce of `count` floats over all ranks, started together
  // (each round waits for every rank first, so it measures the transfer, not the ranks' skew).
  // Median over `rounds`, in seconds, on rank 0; 0 without parallelism.
  double probe_all_reduce(int64_t count, int rounds);

  int64_t vocab_size() const { return model_.config().vocab_size; }
  const model::KvCacheShape& kv_shape() const { return cache_.shape(); }
  int64_t num_blocks() const { return cache_.num_blocks(); }

 private:
  model::Model& model_;
  model::KvCache cache_;
  std::optional<model::KvCache> host_cache_;  // swap tier; absent when num_host_blocks == 0
  model::ForwardBatch batch_;
  // A launched step: its logits (filled by the last stage) and, on rank 0, the step message the
  // other ranks are still receiving.
  struct InFlight {
    std::vector<float> logits;
    size_t num_logits_floats = 0;
    std::vector<int32_t> payload;
    std::optional<Communicator::Ticket> payload_sent;
  };
  std::vector<InFlight> in_flight_;  // a ring of max_in_flight() slots
  int oldest_in_flight_ = 0;
  int num_in_flight_ = 0;
  std::vector<int32_t> src_ids_, dst_ids_;

  enum class Op : int64_t {
    kSwapOut = 1, kSwapIn, kCopy, kExecute, kShutdown, kProbeAllReduce, kKeepAlive
  };
  double do_probe_all_reduce(int64_t count, int rounds);
  // Rank 0: sends the op and its payload to the other ranks.
  void broadcast_op(Op op, std::span<const int32_t> payload);
  // Encodes moves / sequences into payload_ (int32 words).
  void encode_moves(std::span<const BlockMove> moves);
  void encode_sequences(std::span<const RunnerSequence> sequences);
  void do_apply_block_copies(std::span<const BlockMove> copies);
  void do_swap_out(std::span<const BlockMove> moves);
  void do_swap_in(std::span<const BlockMove> moves);
  // Builds the batch and starts the model on it; the logits go to `slot`.
  void do_launch(std::span<const RunnerSequence> sequences, InFlight& slot);

  Communicator* control_ = nullptr;
  bool control_failed_ = false;  // a broadcast or step failed: peers may be gone
  std::vector<int32_t> payload_;
  std::vector<BlockMove> moves_;               // worker: decoded moves
  std::vector<RunnerSequence> sequences_;      // worker: decoded sequences
  std::vector<std::vector<std::vector<int32_t>>> worker_tables_;  // worker: [seq][group] ids
  std::vector<std::span<const int32_t>> tables_;  // one sequence's group tables
};

}  // namespace vellum::engine
