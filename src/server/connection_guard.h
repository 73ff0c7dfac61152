// Bounds what slow, idle or too many clients can hold of the HTTP server (cpp-httplib 0.11,
// which has neither a total request deadline nor a bound on waiting connections):
//
// - A bounded pool: `num_workers` threads serve connections, at most `max_queued` accepted
//   connections wait for one. Connections beyond that go to a small overflow pool that answers
//   every request on them with 503 at once (newest first, so that a client arriving after a
//   flood of idle connections hears back quickly).
// - A request deadline: a connection that has not delivered a complete request (headers and
//   body) within `request_timeout` of being accepted, or of its previous response, is shut
//   down. A slowloris client sending a byte at a time therefore cannot hold a worker for long.
//   Connections whose request is being handled (a long SSE stream) are never cut.
//
// The watchdog finds the server's connections by scanning the process's sockets for those bound
// to the server's port, and tells handled ones apart by their peer address (begin_request /
// end_request, called by the server's routes and logger).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace vellum::server {

struct ConnectionLimits {
  int num_workers = 64;
  int max_queued = 256;
  std::chrono::milliseconds request_timeout{30'000};
};

class ConnectionGuard {
 public:
  explicit ConnectionGuard(ConnectionLimits limits);
  ~ConnectionGuard();
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // For httplib::Server::new_task_queue: the bounded pool (owned by httplib).
  httplib::TaskQueue* make_task_queue();

  // Starts the watchdog over the connections accepted on `port` (not `listen_fd` itself).
  void watch(int listen_fd, int port);
  void stop();

  // True on a thread of the overflow pool: the request must be answered 503.
  static bool overflowing();

  // A complete request of this peer is being handled (from the route handlers) / its response
  // was written (from the logger).
  void begin_request(const std::string& remote_addr, int remote_port);
  void end_request(const std::string& remote_addr, int remote_port);

  // Connections shut down for missing the request deadline, and connections answered 503.
  int64_t num_timed_out() const;
  int64_t num_overflowed() const;

 private:
  class Pool;
  struct Connection {
    int fd = -1;
    std::chrono::steady_clock::time_point idle_since;  // accepted, or its last response written
    bool busy = false;                                   // a request is being handled
    bool seen = false;                                   // found by the current scan
  };
  void watchdog_loop();
  void scan(std::chrono::steady_clock::time_point now);

  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Connection> connections_;  // by peer "addr:port"
  int listen_fd_ = -1;
  int port_ = 0;
  bool stopping_ = false;
  int64_t num_timed_out_ = 0;
  std::shared_ptr<std::atomic<int64_t>> num_overflowed_;
  std::thread watchdog_;
};

}  // namespace vellum::server
