// Communicator: the collective and point-to-point operations tensor and pipeline parallelism need
// (DESIGN.md §2, the multi-process seam), over the ranks of one group. The model and engine layers
// call these without knowing how bytes move; src/parallel implements them over MPI, and
// SingleProcessCommunicator is the group of one process (every collective is a no-op or a copy).
//
// Failure model: no call waits forever on a peer unless asked to. An operation that a peer does not
// complete within the group's timeout throws vellum::Error naming that rank, so a dead or stopped
// rank ends the job with a clear message instead of a hang. wait_for_broadcast() (a worker idling
// until rank 0 sends the next step or a keep-alive) takes its own deadline.
//
// Thread-safety: one thread at a time per communicator (the engine core thread).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/check.h"

namespace vellum {

// Cumulative cost of the collectives, for benchmarks. The time includes waiting for the slowest
// rank to arrive.
struct CommunicatorStats {
  int64_t num_all_reduces = 0;
  int64_t all_reduce_bytes = 0;  // payload of this rank's all-reduces
  double all_reduce_seconds = 0.0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // How this group's ranks are named in errors, e.g. "tensor-parallel rank".
  virtual std::string describe_rank(int rank) const = 0;

  // data (count floats) := the sum of every rank's data. Each element's sum runs in rank order
  // (((r0 + r1) + r2) + ...) on one rank (the owner of its slice) and the result is sent to the
  // others, so every rank holds bit-identical values and a run is reproducible.
  virtual void all_reduce_sum(float* data, int64_t count) = 0;

  // Rank `root` receives the concatenation of every rank's `send` (counts[r] floats from rank r)
  // in `recv` (sum of counts floats); other ranks may pass recv = nullptr.
  virtual void gather(const float* send, std::span<const int64_t> counts, float* recv,
                      int root) = 0;

  // bytes of data from `root` to every rank.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Like broadcast on a receiving rank, but waits up to timeout_seconds (0: without a deadline)
  // instead of the group's timeout: an idle worker waiting for rank 0's next message.
  virtual void wait_for_broadcast(void* data, int64_t bytes, int root, double timeout_seconds) = 0;

  virtual void send(const void* data, int64_t bytes, int dst, int tag) = 0;
  virtual void recv(void* data, int64_t bytes, int src, int tag) = 0;

  // Non-blocking forms, for pipeline stages that keep several batches in flight: start_*()
  // begins the transfer and returns at once; wait(ticket) waits for it (within the group's
  // timeout, like the blocking forms). The buffer must stay untouched until then, and every
  // ticket must be waited for exactly once. start_broadcast() is the root's side of
  // broadcast(): the other ranks receive it with broadcast() or wait_for_broadcast(), in the
  // order the root sent its broadcasts.
  using Ticket = int64_t;
  virtual Ticket start_broadcast(const void* data, int64_t bytes, int root) = 0;
  virtual Ticket start_recv(void* data, int64_t bytes, int src, int tag) = 0;
  virtual void wait(Ticket ticket) = 0;

  // Minimum of one value over all ranks (start-up agreement, e.g. the KV block count).
  virtual int64_t all_min(int64_t value) = 0;

  // How long an operation may wait for a peer before it reports the peer dead (seconds).
  virtual void set_timeout(double seconds) = 0;

  virtual CommunicatorStats stats() const { return {}; }
};

// The group of one process: collectives are identities.
class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe_rank(int rank) const override { return "rank " + std::to_string(rank); }
  void all_reduce_sum(float*, int64_t) override {}
  void gather(const float* send, std::span<const int64_t> counts, float* recv, int) override {
    if (recv != send) {
      for (int64_t i = 0; i < counts[0]; ++i) recv[i] = send[i];
    }
  }
  void broadcast(void*, int64_t, int) override {}
  void wait_for_broadcast(void*, int64_t, int, double) override {}
  void send(const void*, int64_t, int, int) override {
    VELLUM_THROW(ErrorCode::kInternal, "send() in a single-process group");
  }
  void recv(void*, int64_t, int, int) override {
    VELLUM_THROW(ErrorCode::kInternal, "recv() in a single-process group");
  }
  Ticket start_broadcast(const void*, int64_t, int) override { return 0; }
  Ticket start_recv(void*, int64_t, int, int) override {
    VELLUM_THROW(ErrorCode::kInternal, "start_recv() in a single-process group");
  }
  void wait(Ticket) override {}
  int64_t all_min(int64_t value) override { return value; }
  void set_timeout(double) override {}
};

}  // namespace vellum
