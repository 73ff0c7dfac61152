#include "engine/parallel_setup.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "common/check.h"
#include "common/logging.h"
#include "engine/model_runner.h"
#include "parallel/mpi_communicator.h"

namespace vellum::engine {
namespace {

// Model loading can take minutes on big models and the ranks do not finish it together: the
// start-up agreement waits this long for the slowest.
constexpr double kStartupTimeoutSeconds = 900.0;
constexpr int kStartupErrorTag = 7;
constexpr size_t kMaxErrorBytes = 2048;

}  // namespace

int world_rank() {
  if (!parallel::mpi_active()) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

ParallelGroups make_parallel_groups(const ParallelConfig& config) {
  const int tp = config.tensor_parallel_size;
  const int pp = config.pipeline_parallel_size;
  VELLUM_CHECK(tp >= 1 && pp >= 1, ErrorCode::kInvalidArgument,
               "--tensor-parallel-size ({}) and --pipeline-parallel-size ({}) must be at least 1",
               tp, pp);
  VELLUM_CHECK(config.distributed_timeout_seconds > 0, ErrorCode::kInvalidArgument,
               "--distributed-timeout must be positive (seconds), got {}",
               config.distributed_timeout_seconds);
  const int needed = tp * pp;
  ParallelGroups groups;
  groups.step_timeout_seconds = config.distributed_timeout_seconds;
  int world_size = 1;
  if (parallel::mpi_active()) MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (!parallel::mpi_active() || (world_size == 1 && needed == 1)) {
    VELLUM_CHECK(needed == 1, ErrorCode::kInvalidArgument,
                 "--tensor-parallel-size {} x --pipeline-parallel-size {} needs {} processes: "
                 "launch with `mpirun -np {} vellum ...` (as root add --allow-run-as-root; with "
                 "more ranks than cores add --oversubscribe)",
                 tp, pp, needed, needed);
    groups.world = std::make_unique<SingleProcessCommunicator>();
    groups.tp = std::make_unique<SingleProcessCommunicator>();
    groups.pp = std::make_unique<SingleProcessCommunicator>();
    return groups;
  }
  VELLUM_CHECK(world_size == needed, ErrorCode::kInvalidArgument,
               "mpirun started {} processes but --tensor-parallel-size {} x "
               "--pipeline-parallel-size {} = {}; launch with `mpirun -np {}` or change the sizes",
               world_size, tp, pp, needed, needed);
  parallel::MpiCommunicator::Options options;
  options.timeout_seconds = kStartupTimeoutSeconds;
  options.rank_name = "rank";
  auto world = parallel::MpiCommunicator::world(options);
  const int rank = world->rank();
  options.rank_name = "tensor-parallel rank";
  auto tp_group = world->split(rank / tp, options);  // the ranks of one stage
  options.rank_name = "pipeline stage";
  auto pp_group = world->split(rank % tp, options);  // one rank per stage
  groups.num_ranks_on_host = world->num_ranks_on_host();
  groups.world = std::move(world);
  groups.tp = std::move(tp_group);
  groups.pp = std::move(pp_group);
  return groups;
}

KvBudget agree_kv_budget(ParallelGroups& groups, const CacheConfig& cache, int64_t bytes_per_block,
                         int64_t max_model_len, int64_t max_num_seqs,
                         std::span<const int64_t> group_windows,
                         int64_t max_num_batched_tokens, int64_t required_blocks,
                         const std::string& local_error) {
  Communicator& world = *groups.world;
  KvBudget budget;
  std::string error = local_error;
  // Rank 0 decides whether the run needs a fixed cache (a benchmark); the other ranks follow.
  if (groups.parallel()) world.broadcast(&required_blocks, sizeof(required_blocks), 0);
  try {
    if (!error.empty()) {
      // This rank could not load its share; the agreement carries the error to rank 0.
    } else if (required_blocks > 0) {
      budget.num_blocks = required_blocks;
      budget.bytes_per_block = bytes_per_block;
    } else {
      CacheConfig local = cache;
      // Ranks on one host share its memory: each takes its part of the default fraction.
      if (local.kv_cache_memory_bytes <= 0 && local.num_blocks_override <= 0 &&
          groups.num_ranks_on_host > 1) {
        const double fraction = local.kv_cache_fraction > 0 ? local.kv_cache_fraction : 0.5;
        local.kv_cache_fraction = fraction / groups.num_ranks_on_host;
      }
      budget = plan_kv_cache(local, bytes_per_block, max_model_len, max_num_seqs, group_windows,
                             max_num_batched_tokens);
    }
  } catch (const Error& e) {
    if (!groups.parallel()) throw;
    error = e.what();
  }
  if (!groups.parallel()) {
    VELLUM_CHECK(error.empty(), ErrorCode::kInvalidModel, "{}", error);
    return budget;
  }

  // Errors travel to rank 0 first, so that it can name the rank in its message.
  std::array<char, kMaxErrorBytes> message{};
  std::strncpy(message.data(), error.c_str(), message.size() - 1);
  std::string first_error;
  if (world.rank() == 0) {
    if (!error.empty()) first_error = "rank 0: " + error;
    for (int r = 1; r < world.size(); ++r) {
      std::array<char, kMaxErrorBytes> theirs{};
      world.recv(theirs.data(), static_cast<int64_t>(theirs.size()), r, kStartupErrorTag);
      if (theirs[0] != '\0' && first_error.empty()) {
        first_error = "rank " + std::to_string(r) + ": " + std::string(theirs.data());
      }
    }
  } else {
    world.send(message.data(), static_cast<int64_t>(message.size()), 0, kStartupErrorTag);
  }
  const int64_t blocks = world.all_min(error.empty() ? budget.num_blocks : -1);
  const int64_t host_blocks = world.all_min(error.empty() ? budget.num_host_blocks : -1);
  if (blocks < 0 || host_blocks < 0) {
    if (world.rank() == 0) VELLUM_THROW(ErrorCode::kOutOfMemory, "{}", first_error);
    if (!error.empty()) VELLUM_THROW(ErrorCode::kOutOfMemory, "{}", error);
    VELLUM_THROW(ErrorCode::kOutOfMemory, "start-up failed on another rank (rank 0 reports it)");
  }
  if (required_blocks > 0 && blocks < required_blocks) {
    VELLUM_THROW(ErrorCode::kOutOfMemory,
                 "a rank's KV cache budget holds {} blocks, fewer than the {} this run needs; "
                 "raise --kv-cache-memory",
                 blocks, required_blocks);
  }
  if (blocks != budget.num_blocks && world.rank() == 0) {
    VELLUM_LOG_INFO("KV cache: {} blocks, the smallest budget of the {} ranks", blocks - 1,
                    world.size());
  }
  budget.num_blocks = blocks;
  budget.num_host_blocks = host_blocks;
  budget.bytes_per_block = bytes_per_block;
  // From here on a step's messages must arrive promptly.
  groups.world->set_timeout(groups.step_timeout_seconds);
  groups.tp->set_timeout(groups.step_timeout_seconds);
  groups.pp->set_timeout(groups.step_timeout_seconds);
  return budget;
}

int run_worker(const EngineConfig& config) {
  ParallelGroups groups = make_parallel_groups(config.parallel);
  configure_threads(config.parallel.num_threads);
  LoadedModel loaded;
  std::string load_error;
  try {
    loaded = load_model_file(config.model, groups.model_parallel());
  } catch (const std::bad_alloc&) {
    load_error = "out of memory while loading this rank's share of the model; it does not fit "
                 "in this host's memory: use more ranks (hosts) or a smaller weight type";
  } catch (const std::exception& e) {
    load_error = e.what();
  }
  // A rank that could not load still takes part in the agreement, which carries its error to
  // rank 0.
  int64_t max_model_len = 1;
  model::KvCacheShape shape;  // this rank's heads and layers, the model's KV cache groups
  shape.block_size = config.cache.block_size;
  if (load_error.empty()) {
    try {
      max_model_len = resolve_max_model_len(config.model, loaded.model->config());
      shape = loaded.model->kv_cache_shape(config.cache.block_size,
                                           parse_kv_cache_dtype(config.cache),
                                           !config.cache.disable_hybrid_kv_cache_manager);
    } catch (const Error& e) {
      load_error = e.what();
    }
  }
  const KvBudget budget = agree_kv_budget(
      groups, config.cache, load_error.empty() ? shape.bytes_per_block() : 1, max_model_len,
      config.scheduler.max_num_seqs, shape.layout.group_windows,
      config.scheduler.max_num_batched_tokens, 0, load_error);
  ModelRunner runner(*loaded.model, shape, budget.num_blocks, budget.num_host_blocks,
                     groups.world.get());
  runner.run_worker_loop(kStartupTimeoutSeconds, groups.step_timeout_seconds);
  return 0;
}

}  // namespace vellum::engine
