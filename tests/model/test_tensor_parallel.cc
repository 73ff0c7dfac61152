// Tensor and pipeline parallelism in the model layer, without MPI: the ranks are threads of this
// process joined by an in-memory Communicator, each with its own DecoderModel share and KV
// cache. Their logits (gathered on rank 0) must match the whole model's within f32 rounding, on
// every generated architecture, with chunked prefill and decode steps. Also the cutting rules
// and their error messages.
#include <gtest/gtest.h>
#include <omp.h>

#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "model/io/make_model.h"
#include "model/tensor_parallel.h"
#include "model_test_util.h"
#include "test_util.h"

namespace vellum {
namespace {

constexpr int32_t kBlockSize = 8;

// The shared state of one group of threads.
struct ThreadGroup {
  explicit ThreadGroup(int n) : size(n), barrier(n), slots(n), values(n) {}
  int size;
  std::barrier<> barrier;
  std::vector<const void*> slots;
  std::vector<int64_t> values;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail;  // (src, dst, tag)
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size; }
  std::string describe_rank(int rank) const override { return "thread " + std::to_string(rank); }
  void all_reduce_sum(float* data, int64_t count) override {
    group_.slots[rank_] = data;
    group_.barrier.arrive_and_wait();
    if (rank_ == 0) {
      for (int r = 1; r < group_.size; ++r) {
        const auto* part = static_cast<const float*>(group_.slots[r]);
        for (int64_t i = 0; i < count; ++i) data[i] += part[i];
      }
    }
    group_.barrier.arrive_and_wait();
    if (rank_ != 0) std::memcpy(data, group_.slots[0], sizeof(float) * count);
    group_.barrier.arrive_and_wait();
  }
  void gather(const float* send, std::span<const int64_t> counts, float* recv,
              int root) override {
    group_.slots[rank_] = send;
    group_.barrier.arrive_and_wait();
    if (rank_ == root) {
      for (int r = 0; r < group_.size; ++r) {
        std::memcpy(recv, group_.slots[r], sizeof(float) * counts[r]);
        recv += counts[r];
      }
    }
    group_.barrier.arrive_and_wait();
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    group_.slots[rank_] = data;
    group_.barrier.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, group_.slots[root], bytes);
    group_.barrier.arrive_and_wait();
  }
  void wait_for_broadcast(void* data, int64_t bytes, int root, double) override {
    broadcast(data, bytes, root);
  }
  void send(const void* data, int64_t bytes, int dst, int tag) override {
    {
      std::lock_guard lock(group_.mu);
      const auto* p = static_cast<const char*>(data);
      group_.mail[{rank_, dst, tag}].emplace_back(p, p + bytes);
    }
    group_.cv.notify_all();
  }
  void recv(void* data, int64_t bytes, int src, int tag) override {
    std::unique_lock lock(group_.mu);
    auto& box = group_.mail[{src, rank_, tag}];
    group_.cv.wait(lock, [&] { return !box.empty(); });
    ASSERT_EQ(static_cast<int64_t>(box.front().size()), bytes);
    std::memcpy(data, box.front().data(), bytes);
    box.pop_front();
  }
  int64_t all_min(int64_t value) override {
    group_.values[rank_] = value;
    group_.barrier.arrive_and_wait();
    const int64_t m = *std::min_element(group_.values.begin(), group_.values.end());
    group_.barrier.arrive_and_wait();
    return m;
  }
  void set_timeout(double) override {}
  // A receive starts when it is waited for (mail is kept until then).
  Ticket start_recv(void* data, int64_t bytes, int src, int tag) override {
    pending_[next_ticket_] = {data, bytes, src, tag};
    return next_ticket_++;
  }
  void wait(Ticket ticket) override {
    const auto it = pending_.find(ticket);
    ASSERT_NE(it, pending_.end());
    const PendingRecv p = it->second;
    pending_.erase(it);
    recv(p.data, p.bytes, p.src, p.tag);
  }
  Ticket start_broadcast(const void*, int64_t, int) override {
    ADD_FAILURE() << "the model does not start broadcasts";
    return 0;
  }

 private:
  struct PendingRecv {
    void* data;
    int64_t bytes;
    int src;
    int tag;
  };
  ThreadGroup& group_;
  int rank_;
  std::map<Ticket, PendingRecv> pending_;
  Ticket next_ticket_ = 1;
};

std::vector<int32_t> make_tokens(uint32_t seed, size_t n, int64_t vocab) {
  std::vector<int32_t> tokens{1};
  while (tokens.size() < n) {
    seed = seed * 1664525u + 1013904223u;
    tokens.push_back(3 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(vocab - 3)));
  }
  return tokens;
}

// Logits of every position of each sequence, `chunk` tokens per sequence per step (rank 0's;
// the other ranks' output is empty).
std::vector<float> run(model::Model& m, const std::vector<std::vector<int32_t>>& seqs,
                       int32_t chunk, bool holds_logits) {
  const int64_t vocab = m.config().vocab_size;
  model::KvCache cache(m.kv_cache_shape(kBlockSize, kernels::KvType::kF32), 64);
  testing::SequenceBlocks blocks(kBlockSize);
  std::vector<int32_t> done(seqs.size(), 0);
  std::vector<float> out;
  for (;;) {
    model::ForwardBatch batch;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int32_t n = std::min<int32_t>(chunk, static_cast<int32_t>(seqs[s].size()) - done[s]);
      if (n == 0) continue;
      blocks.reserve(s, done[s] + n);
      batch.add_sequence(seqs[s].data() + done[s], n, done[s], blocks.table(s).data(),
                         static_cast<int32_t>(blocks.table(s).size()), kBlockSize, n);
      done[s] += n;
    }
    if (batch.num_tokens() == 0) break;
    batch.finalize();
    std::vector<float> logits(static_cast<size_t>(batch.num_logits() * vocab));
    m.forward(batch, cache, logits.data());
    if (holds_logits) out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

// Runs tp x pp ranks as threads (world rank = stage * tp + tp_rank); returns rank 0's logits.
std::vector<float> run_parallel(const std::filesystem::path& path, int tp, int pp,
                                const std::vector<std::vector<int32_t>>& seqs, int32_t chunk) {
  std::vector<std::unique_ptr<ThreadGroup>> tp_groups, pp_groups;
  for (int s = 0; s < pp; ++s) tp_groups.push_back(std::make_unique<ThreadGroup>(tp));
  for (int t = 0; t < tp; ++t) pp_groups.push_back(std::make_unique<ThreadGroup>(pp));
  std::vector<float> result;
  std::vector<std::string> errors(static_cast<size_t>(tp * pp));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < tp * pp; ++rank) {
    threads.emplace_back([&, rank] {
      omp_set_num_threads(1);
      const int stage = rank / tp;
      const int tp_rank = rank % tp;
      ThreadCommunicator tp_comm(*tp_groups[stage], tp_rank);
      ThreadCommunicator pp_comm(*pp_groups[tp_rank], stage);
      try {
        model::ModelLoadOptions options;
        options.precision = kernels::MatmulPrecision::kF32;
        options.parallel = {&tp_comm, &pp_comm};
        auto m = model::load_model(gguf::GgufFile::open(path), options);
        std::vector<float> logits = run(*m, seqs, chunk, rank == 0);
        if (rank == 0) result = std::move(logits);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return result;
}

struct Case {
  std::string shape;
  std::string dtype;
};

class ParallelDecoder : public ::testing::TestWithParam<Case> {};

TEST_P(ParallelDecoder, SharesGiveTheWholeModelsLogits) {
  model::MakeModelOptions options;
  options.shape = GetParam().shape;
  options.dtype = GetParam().dtype;
  options.seed = 11;
  options.output = testing::temp_dir() / ("tp-" + options.shape + "-" + options.dtype + ".gguf");
  model::make_model(options);
  auto whole = testing::load_test_model(options.output, kernels::MatmulPrecision::kF32);
  const int64_t vocab = whole->config().vocab_size;
  const std::vector<std::vector<int32_t>> seqs = {make_tokens(1, 29, vocab),
                                                  make_tokens(2, 11, vocab)};
  const std::vector<float> want = run(*whole, seqs, 4, true);
  double scale = 0.0;
  for (float v : want) scale = std::max(scale, static_cast<double>(std::abs(v)));
  for (auto [tp, pp] : {std::pair{2, 1}, {1, 2}, {2, 2}}) {
    const std::vector<float> got = run_parallel(options.output, tp, pp, seqs, 4);
    ASSERT_EQ(got.size(), want.size()) << "tp " << tp << " pp " << pp;
    double max_diff = 0.0;
    size_t worst = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const double d = std::abs(static_cast<double>(got[i]) - want[i]);
      if (d > max_diff) {
        max_diff = d;
        worst = i;
      }
    }
    // Pipeline stages compute exactly what one process does; tensor-parallel partial sums round
    // differently (f32, sums of 64-192 products per rank).
    const double tolerance = tp == 1 ? 0.0 : 1e-4 * std::max(1.0, scale);
    EXPECT_LE(max_diff, tolerance) << GetParam().shape << " " << GetParam().dtype << " tp " << tp
                                   << " pp " << pp << ": worst logit " << worst << " (row "
                                   << worst / vocab << ", token " << worst % vocab << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ParallelDecoder,
    ::testing::Values(Case{"tiny", "f32"}, Case{"tiny", "q8_0"}, Case{"tiny", "q4_0"},
                      Case{"tiny-qwen2", "f32"}, Case{"tiny-qwen3", "f32"},
                      Case{"tiny-gemma2", "f32"}, Case{"tiny-gemma3", "f32"},
                      Case{"tiny-phi3", "f32"}, Case{"tiny-mixtral", "f32"},
                      Case{"tiny-qwen3moe", "f32"}),
    [](const ::testing::TestParamInfo<Case>& param) {
      std::string name = param.param.shape + "_" + param.param.dtype;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

TEST(TensorParallel, SplitRangeCoversEveryItemOnce) {
  for (int64_t n : {1, 7, 877, 4096}) {
    for (int parts : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const model::Range r = model::split_range(n, parts, i);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.count, n / parts + 1);
        EXPECT_GE(r.count, n / parts);
        next = r.end();
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(TensorParallel, SizesThatDoNotDivideTheModelAreRefusedNamingTheOnesThatWork) {
  model::ModelConfig c;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.intermediate_size = 96;
  c.num_layers = 3;
  EXPECT_NO_THROW(model::check_parallel_shape(c, 4, 3));
  try {
    model::check_parallel_shape(c, 3, 1);
    FAIL() << "TP=3 with 8 heads should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sizes that work for this model: 1, 2, 4"),
              std::string::npos)
        << e.what();
  }
  try {
    model::check_parallel_shape(c, 1, 4);
    FAIL() << "4 stages of 3 layers should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("larger than the model's 3 layers"), std::string::npos)
        << e.what();
  }
}

TEST(TensorParallel, QuantizedRowsAreCutOnlyBetweenBlocks) {
  // A Q8_0 matrix (blocks of 32): 64 columns split in 2 is fine, in 4 (16 each) is not.
  // (All-zero bytes are valid Q8_0 blocks: scale 0.)
  std::vector<uint8_t> q(kernels::weight_row_bytes(kernels::WeightType::kQ8_0, 64) * 4, 0);
  EXPECT_NO_THROW(model::pack_column_slice(q.data(), kernels::WeightType::kQ8_0, 4, 64, {32, 32},
                                           2, "w", kernels::MatmulPrecision::kAuto));
  try {
    model::pack_column_slice(q.data(), kernels::WeightType::kQ8_0, 4, 64, {16, 16}, 4, "w",
                             kernels::MatmulPrecision::kAuto);
    FAIL() << "a cut inside a Q8_0 block should be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocks of 32 elements that cannot be cut"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vellum

namespace vellum {
namespace {

TEST(TensorParallel, PipelineStagesKeepTheirLayersShareOfTheKvLayout) {
  // Gemma-style: 5 sliding layers, then a full one, twice (12 layers, hybrid groups).
  std::vector<bool> sliding;
  for (int i = 0; i < 12; ++i) sliding.push_back(i % 6 != 5);
  const model::KvCacheLayout full = model::KvCacheLayout::hybrid(sliding, 512);
  ASSERT_GT(full.num_groups(), 1);
  int64_t slots_seen = 0;
  for (int stage = 0; stage < 2; ++stage) {
    const model::Range layers = model::split_range(12, 2, stage);
    const model::KvCacheLayout part = model::stage_layout(full, layers);
    EXPECT_EQ(part.group_windows, full.group_windows);  // every stage gets every group's tables
    ASSERT_EQ(part.num_layers(), layers.count);
    std::vector<int> slot_of_full(static_cast<size_t>(full.num_slots), -1);
    for (int64_t l = 0; l < layers.count; ++l) {
      const auto global = static_cast<size_t>(layers.begin + l);
      EXPECT_EQ(part.layer_group[static_cast<size_t>(l)], full.layer_group[global]);
      const int slot = part.layer_slot[static_cast<size_t>(l)];
      ASSERT_GE(slot, 0);
      ASSERT_LT(slot, part.num_slots);
      // Layers that share a slot in the model share it in the stage, and only those.
      int& seen = slot_of_full[static_cast<size_t>(full.layer_slot[global])];
      if (seen < 0) seen = slot;
      EXPECT_EQ(seen, slot);
    }
    slots_seen += part.num_slots;
  }
  EXPECT_GE(slots_seen, full.num_slots);
}

}  // namespace
}  // namespace vellum
