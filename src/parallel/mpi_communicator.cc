#include "parallel/mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/check.h"

namespace vellum::parallel {
namespace {

// Message tags; every operation uses its own so that a late message of one kind is never taken
// for another. send()/recv() tags are offset past these.
constexpr int kTagReduce = 1;
constexpr int kTagReduceResult = 2;
constexpr int kTagBroadcast = 3;
constexpr int kTagGather = 4;
constexpr int kTagMin = 5;
constexpr int kTagUser = 100;

// MPI counts are int: larger messages go as several chunks.
constexpr int64_t kChunkBytes = int64_t{1} << 30;

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  VELLUM_THROW(ErrorCode::kInternal, "MPI {} failed: {}", what, std::string(text, len));
}

void post_send(std::vector<MPI_Request>& requests, std::vector<int>& peers, const void* data,
               int64_t bytes, int dst, int tag, MPI_Comm comm) {
  const auto* p = static_cast<const char*>(data);
  for (int64_t off = 0; off < bytes || (off == 0 && bytes == 0); off += kChunkBytes) {
    const int n = static_cast<int>(std::min(kChunkBytes, bytes - off));
    requests.emplace_back();
    check_mpi(MPI_Isend(p + off, n, MPI_BYTE, dst, tag, comm, &requests.back()), "Isend");
    peers.push_back(dst);
    if (bytes == 0) break;
  }
}

void post_recv(std::vector<MPI_Request>& requests, std::vector<int>& peers, void* data,
               int64_t bytes, int src, int tag, MPI_Comm comm) {
  auto* p = static_cast<char*>(data);
  for (int64_t off = 0; off < bytes || (off == 0 && bytes == 0); off += kChunkBytes) {
    const int n = static_cast<int>(std::min(kChunkBytes, bytes - off));
    requests.emplace_back();
    check_mpi(MPI_Irecv(p + off, n, MPI_BYTE, src, tag, comm, &requests.back()), "Irecv");
    peers.push_back(src);
    if (bytes == 0) break;
  }
}

}  // namespace

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_RANK") != nullptr;
}

bool mpi_active() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized != 0 && finalized == 0;
}

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "Init_thread");
  VELLUM_CHECK(provided >= MPI_THREAD_SERIALIZED, ErrorCode::kUnsupported,
               "the MPI library offers thread level {}, Vellum needs MPI_THREAD_SERIALIZED",
               provided);
  // Errors come back as return codes (turned into vellum::Error) instead of killing the job
  // silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::abort(int exit_code) {
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, Options options)
    : comm_(comm), options_(std::move(options)) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  world_ranks_.resize(static_cast<size_t>(size_));
  check_mpi(MPI_Allgather(&world_rank, 1, MPI_INT, world_ranks_.data(), 1, MPI_INT, comm_),
            "Allgather");
}

MpiCommunicator::~MpiCommunicator() {
  if (comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL && mpi_active()) MPI_Comm_free(&comm_);
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::world(Options options) {
  return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD, std::move(options));
}

std::unique_ptr<MpiCommunicator> MpiCommunicator::split(int color, Options options) const {
  MPI_Comm sub = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(comm_, color, rank_, &sub), "Comm_split");
  return std::make_unique<MpiCommunicator>(sub, std::move(options));
}

int MpiCommunicator::num_ranks_on_host() const {
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local),
            "Comm_split_type");
  int n = 1;
  MPI_Comm_size(local, &n);
  MPI_Comm_free(&local);
  return n;
}

std::string MpiCommunicator::describe_rank(int rank) const {
  const int world_rank = world_ranks_[static_cast<size_t>(rank)];
  if (world_rank == rank) return fmt::format("{} {}", options_.rank_name, rank);
  return fmt::format("{} {} (world rank {})", options_.rank_name, rank, world_rank);
}

void MpiCommunicator::wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers,
                               const char* what, double timeout_seconds) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Spin first (a step's collectives arrive within microseconds), then yield, then sleep with a
  // growing pause so that an idle worker does not hold a core.
  int64_t polls = 0;
  auto pause = std::chrono::microseconds(10);
  while (true) {
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                          MPI_STATUSES_IGNORE),
              what);
    if (done != 0) return;
    ++polls;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (timeout_seconds > 0 && waited > timeout_seconds) {
      std::vector<std::string> missing;
      for (size_t i = 0; i < requests.size(); ++i) {
        int complete = 0;
        if (requests[i] != MPI_REQUEST_NULL) {
          MPI_Test(&requests[i], &complete, MPI_STATUS_IGNORE);
        } else {
          complete = 1;
        }
        if (complete == 0) {
          std::string name = describe_rank(peers[i]);
          if (std::find(missing.begin(), missing.end(), name) == missing.end()) {
            missing.push_back(std::move(name));
          }
        }
      }
      if (missing.empty()) return;  // completed while the process was descheduled
      VELLUM_THROW(ErrorCode::kIo,
                   "{} did not answer within {:.0f} s ({}): it died or stopped responding; the "
                   "parallel job cannot continue (raise --distributed-timeout if ranks are only "
                   "slow)",
                   fmt::join(missing, ", "), timeout_seconds, what);
    }
    if (polls < 2000) continue;
    if (waited < 0.002) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

void MpiCommunicator::all_reduce_sum(float* data, int64_t count) {
  if (size_ == 1 || count == 0) return;
  const auto start = std::chrono::steady_clock::now();
  const int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  ++stats_.num_all_reduces;
  stats_.all_reduce_bytes += bytes;
  struct Timer {
    CommunicatorStats& stats;
    std::chrono::steady_clock::time_point start;
    ~Timer() {
      stats.all_reduce_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
  } timer{stats_, start};
  // Reduce-scatter, then all-gather: rank r owns slice r of the payload, receives that slice
  // from every peer, sums it in rank order (((r0 + r1) + r2) + ...) and sends the sum to all.
  // Every element is summed in the same order on one rank, so the ranks hold bit-identical
  // values and a run is reproducible, while each rank moves 2 (size - 1) / size of the payload
  // (not one rank the whole payload 2 (size - 1) times, as a reduce at rank 0 would).
  auto slice_begin = [&](int r) { return count * r / size_; };
  const int64_t my_begin = slice_begin(rank_);
  const int64_t my_count = slice_begin(rank_ + 1) - my_begin;
  reduce_buffer_.resize(static_cast<size_t>(size_ * my_count));  // every rank's copy of my slice
  requests_.clear();
  peers_.clear();
  for (int r = 0; r < size_; ++r) {
    const int64_t n = slice_begin(r + 1) - slice_begin(r);
    if (r == rank_) continue;
    if (my_count > 0) {
      post_recv(requests_, peers_, reduce_buffer_.data() + r * my_count, my_count * 4, r,
                kTagReduce, comm_);
    }
    if (n > 0) post_send(requests_, peers_, data + slice_begin(r), n * 4, r, kTagReduce, comm_);
  }
  wait_all(requests_, peers_, "all-reduce", options_.timeout_seconds);
  float* mine = data + my_begin;
  std::memcpy(reduce_buffer_.data() + rank_ * my_count, mine, static_cast<size_t>(my_count) * 4);
  std::memcpy(mine, reduce_buffer_.data(), static_cast<size_t>(my_count) * 4);
  for (int r = 1; r < size_; ++r) {
    const float* part = reduce_buffer_.data() + r * my_count;
#pragma omp parallel for schedule(static) if (my_count > 65536)
    for (int64_t i = 0; i < my_count; ++i) mine[i] += part[i];
  }
  requests_.clear();
  peers_.clear();
  for (int r = 0; r < size_; ++r) {
    const int64_t n = slice_begin(r + 1) - slice_begin(r);
    if (r == rank_) continue;
    if (my_count > 0) post_send(requests_, peers_, mine, my_count * 4, r, kTagReduceResult, comm_);
    if (n > 0) {
      post_recv(requests_, peers_, data + slice_begin(r), n * 4, r, kTagReduceResult, comm_);
    }
  }
  wait_all(requests_, peers_, "all-reduce", options_.timeout_seconds);
}

void MpiCommunicator::gather(const float* send, std::span<const int64_t> counts, float* recv,
                             int root) {
  VELLUM_ASSERT(static_cast<int>(counts.size()) == size_);
  requests_.clear();
  peers_.clear();
  if (rank_ != root) {
    post_send(requests_, peers_, send, counts[static_cast<size_t>(rank_)] * 4, root, kTagGather,
              comm_);
    wait_all(requests_, peers_, "gather", options_.timeout_seconds);
    return;
  }
  int64_t offset = 0;
  for (int r = 0; r < size_; ++r) {
    const int64_t n = counts[static_cast<size_t>(r)];
    if (r == rank_) {
      if (recv + offset != send) std::memcpy(recv + offset, send, static_cast<size_t>(n) * 4);
    } else {
      post_recv(requests_, peers_, recv + offset, n * 4, r, kTagGather, comm_);
    }
    offset += n;
  }
  wait_all(requests_, peers_, "gather", options_.timeout_seconds);
}

void MpiCommunicator::broadcast_impl(void* data, int64_t bytes, int root, double timeout_seconds) {
  if (size_ == 1) return;
  requests_.clear();
  peers_.clear();
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r) {
      if (r != root) post_send(requests_, peers_, data, bytes, r, kTagBroadcast, comm_);
    }
  } else {
    post_recv(requests_, peers_, data, bytes, root, kTagBroadcast, comm_);
  }
  wait_all(requests_, peers_, "broadcast", timeout_seconds);
}

void MpiCommunicator::broadcast(void* data, int64_t bytes, int root) {
  broadcast_impl(data, bytes, root, options_.timeout_seconds);
}

void MpiCommunicator::wait_for_broadcast(void* data, int64_t bytes, int root,
                                         double timeout_seconds) {
  broadcast_impl(data, bytes, root, rank_ == root ? options_.timeout_seconds : timeout_seconds);
}

void MpiCommunicator::send(const void* data, int64_t bytes, int dst, int tag) {
  requests_.clear();
  peers_.clear();
  post_send(requests_, peers_, data, bytes, dst, kTagUser + tag, comm_);
  wait_all(requests_, peers_, "send", options_.timeout_seconds);
}

void MpiCommunicator::recv(void* data, int64_t bytes, int src, int tag) {
  requests_.clear();
  peers_.clear();
  post_recv(requests_, peers_, data, bytes, src, kTagUser + tag, comm_);
  wait_all(requests_, peers_, "receive", options_.timeout_seconds);
}

Communicator::Ticket MpiCommunicator::start_broadcast(const void* data, int64_t bytes, int root) {
  VELLUM_CHECK(rank_ == root, ErrorCode::kInternal,
               "start_broadcast() is the root's side; rank {} is not the root {}", rank_, root);
  Pending& p = pending_[next_ticket_];
  p.what = "broadcast";
  for (int r = 0; r < size_; ++r) {
    if (r != root) post_send(p.requests, p.peers, data, bytes, r, kTagBroadcast, comm_);
  }
  return next_ticket_++;
}

Communicator::Ticket MpiCommunicator::start_recv(void* data, int64_t bytes, int src, int tag) {
  Pending& p = pending_[next_ticket_];
  p.what = "receive";
  post_recv(p.requests, p.peers, data, bytes, src, kTagUser + tag, comm_);
  return next_ticket_++;
}

void MpiCommunicator::wait(Ticket ticket) {
  auto it = pending_.find(ticket);
  VELLUM_CHECK(it != pending_.end(), ErrorCode::kInternal,
               "wait() on ticket {}, which is not pending", ticket);
  // Forgotten even when the wait throws: the job is ending then.
  Pending p = std::move(it->second);
  pending_.erase(it);
  wait_all(p.requests, p.peers, p.what, options_.timeout_seconds);
}

int64_t MpiCommunicator::all_min(int64_t value) {
  if (size_ == 1) return value;
  requests_.clear();
  peers_.clear();
  if (rank_ == 0) {
    std::vector<int64_t> values(static_cast<size_t>(size_), value);
    for (int r = 1; r < size_; ++r) {
      post_recv(requests_, peers_, &values[static_cast<size_t>(r)], 8, r, kTagMin, comm_);
    }
    wait_all(requests_, peers_, "agreement", options_.timeout_seconds);
    value = *std::min_element(values.begin(), values.end());
  } else {
    post_send(requests_, peers_, &value, 8, 0, kTagMin, comm_);
    wait_all(requests_, peers_, "agreement", options_.timeout_seconds);
  }
  broadcast(&value, 8, 0);
  return value;
}

}  // namespace vellum::parallel
