// The process groups of a tensor- and pipeline-parallel run (DESIGN.md §2, the executor seam),
// and the start-up agreement between ranks.
//
// Layout (vLLM's): world rank = stage * tensor_parallel_size + tp_rank. World rank 0 runs the
// scheduler, the KV cache manager, sampling and the HTTP server, and broadcasts each step to the
// other ranks (ModelRunner); every rank runs its share of the forward pass.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/communicator.h"
#include "engine/model_setup.h"
#include "model/model_parallel.h"
#include "vellum/config.h"

namespace vellum::engine {

struct ParallelGroups {
  std::unique_ptr<Communicator> world;  // every rank; rank 0 drives the steps
  std::unique_ptr<Communicator> tp;     // the ranks of this rank's pipeline stage
  std::unique_ptr<Communicator> pp;     // one rank per stage with this rank's tp index
  int num_ranks_on_host = 1;
  double step_timeout_seconds = 60.0;

  bool parallel() const { return world->size() > 1; }
  model::ModelParallel model_parallel() const { return {tp.get(), pp.get()}; }
};

// Validates --tensor-parallel-size / --pipeline-parallel-size against the processes mpirun
// started (error naming both and the mpirun command line to use) and builds the groups. Without
// MPI and with sizes of 1: groups of one process.
ParallelGroups make_parallel_groups(const ParallelConfig& config);

// The world rank of this process (0 without MPI).
int world_rank();

// Every rank proposes the KV budget its own memory allows (`local`, or the error that planning
// it raised); all ranks get the smallest. A rank whose plan failed makes every rank throw, rank
// 0 with that rank's message ("rank 1: the KV cache ... cannot hold ..."). required_blocks > 0:
// the caller needs at least that many blocks (a benchmark's fixed cache). local_error: this rank
// failed before it could plan (its model share did not load); the message reaches rank 0.
// Afterwards the groups' timeouts are the step timeout (--distributed-timeout).
// group_windows and max_num_batched_tokens as plan_kv_cache takes them.
KvBudget agree_kv_budget(ParallelGroups& groups, const CacheConfig& cache, int64_t bytes_per_block,
                         int64_t max_model_len, int64_t max_num_seqs,
                         std::span<const int64_t> group_windows,
                         int64_t max_num_batched_tokens, int64_t required_blocks = 0,
                         const std::string& local_error = {});

// The body of every rank other than 0: loads this rank's share of the model, agrees on the KV
// budget and runs the steps rank 0 broadcasts until it sends shutdown. Returns the exit code.
int run_worker(const EngineConfig& config);

}  // namespace vellum::engine
