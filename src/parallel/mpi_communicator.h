// Communicator over MPI (Open MPI: shared memory inside a host, TCP between hosts), and the
// process-wide MPI session.
//
// Every operation is built from non-blocking point-to-point messages that are polled against a
// deadline (MpiCommunicator::Options::timeout_seconds), so a rank that died or stopped answering is
// reported by name (vellum::Error) instead of hanging the job. all_reduce_sum is a reduce-scatter
// and an all-gather: each rank sums one slice of the payload in rank order and sends it to the
// others, so every rank's result is bit-identical (and equal from run to run) and each rank moves
// 2 (size - 1) / size of the payload, as in a ring.
//
// Thread-safety: MPI is initialised with MPI_THREAD_SERIALIZED; one thread at a time may use
// MPI (in Vellum: the engine core thread after start-up).
#pragma once

#include <mpi.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/communicator.h"

namespace vellum::parallel {

// True when this process was started by mpirun/mpiexec (Open MPI's environment), so MPI must be
// initialised. Plain `vellum ...` runs never touch MPI.
bool launched_by_mpirun();

// MPI_Init_thread / MPI_Finalize for main(). abort() ends every rank of the job at once
// (MPI_Abort), for errors after which peers may be waiting on this process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  [[noreturn]] static void abort(int exit_code);

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
};

// Whether MPI is initialised in this process (an MpiSession is alive).
bool mpi_active();

class MpiCommunicator final : public Communicator {
 public:
  struct Options {
    double timeout_seconds = 60.0;  // per operation; a peer slower than this is reported dead
    std::string rank_name = "rank";  // in errors: "<rank_name> 1 did not answer ..."
  };
  // Takes ownership of `comm` (freed unless it is MPI_COMM_WORLD).
  MpiCommunicator(MPI_Comm comm, Options options);
  ~MpiCommunicator() override;

  // The group of all ranks of the job.
  static std::unique_ptr<MpiCommunicator> world(Options options);
  // The group of the ranks with the same `color` (MPI_Comm_split), ordered by world rank.
  std::unique_ptr<MpiCommunicator> split(int color, Options options) const;
  // Number of ranks of this group on this host (MPI_Comm_split_type shared memory).
  int num_ranks_on_host() const;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe_rank(int rank) const override;
  void all_reduce_sum(float* data, int64_t count) override;
  void gather(const float* send, std::span<const int64_t> counts, float* recv, int root) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void wait_for_broadcast(void* data, int64_t bytes, int root, double timeout_seconds) override;
  void send(const void* data, int64_t bytes, int dst, int tag) override;
  void recv(void* data, int64_t bytes, int src, int tag) override;
  Ticket start_broadcast(const void* data, int64_t bytes, int root) override;
  Ticket start_recv(void* data, int64_t bytes, int src, int tag) override;
  void wait(Ticket ticket) override;
  int64_t all_min(int64_t value) override;
  void set_timeout(double seconds) override { options_.timeout_seconds = seconds; }
  CommunicatorStats stats() const override { return stats_; }

 private:
  // Waits for every request; peers[i] is the rank requests[i] talks to (for the error message).
  // timeout_seconds <= 0: no deadline.
  void wait_all(std::vector<MPI_Request>& requests, const std::vector<int>& peers,
                const char* what, double timeout_seconds);
  void broadcast_impl(void* data, int64_t bytes, int root, double timeout_seconds);

  MPI_Comm comm_ = MPI_COMM_NULL;
  Options options_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;
  std::vector<float> reduce_buffer_;  // all-reduce: every rank's copy of this rank's slice
  std::vector<MPI_Request> requests_;
  std::vector<int> peers_;
  // The transfers start_*() began and wait() has not finished, by ticket.
  struct Pending {
    std::vector<MPI_Request> requests;
    std::vector<int> peers;
    const char* what = "";
  };
  std::map<Ticket, Pending> pending_;
  Ticket next_ticket_ = 1;
  CommunicatorStats stats_;
};

}  // namespace vellum::parallel
