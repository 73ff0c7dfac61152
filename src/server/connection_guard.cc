#include "server/connection_guard.h"

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <vector>

namespace vellum::server {
namespace {

thread_local bool t_overflowing = false;

constexpr std::chrono::milliseconds kScanInterval{250};
constexpr int kNumOverflowWorkers = 4;

// "addr:port" of a sockaddr, with the address as httplib writes Request::remote_addr.
std::string peer_key(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), serv,
                  sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return {};
  }
  return std::string(host) + ":" + serv;
}

int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  }
  return -1;
}

// The peer of a connected socket bound to `port`, or "" for anything else.
std::string connection_peer(int fd, int port) {
  sockaddr_storage local{};
  socklen_t local_len = sizeof(local);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return {};
  if (port_of(local) != port) return {};
  sockaddr_storage peer{};
  socklen_t peer_len = sizeof(peer);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return {};
  return peer_key(peer, peer_len);
}

}  // namespace

// Fixed workers over a bounded FIFO; the overflow goes to a few threads that take the newest
// connection first and answer it 503 (see overflowing()).
class ConnectionGuard::Pool : public httplib::TaskQueue {
 public:
  Pool(size_t num_workers, size_t max_queued, std::shared_ptr<std::atomic<int64_t>> overflowed)
      : max_queued_(max_queued), overflowed_(std::move(overflowed)) {
    for (size_t i = 0; i < num_workers; ++i) threads_.emplace_back([this] { work(false); });
    for (int i = 0; i < kNumOverflowWorkers; ++i) threads_.emplace_back([this] { work(true); });
  }
  ~Pool() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      if (queued_.size() < max_queued_) {
        queued_.push_back(std::move(fn));
      } else {
        overflow_.push_back(std::move(fn));
        overflowed_->fetch_add(1);
      }
    }
    cv_.notify_all();
  }

  // Runs what is queued, then joins the threads (as httplib's ThreadPool does).
  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      if (shut_down_) return;
      shut_down_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

 private:
  void work(bool overflow) {
    t_overflowing = overflow;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        auto& tasks = overflow ? overflow_ : queued_;
        cv_.wait(lock, [&] { return shut_down_ || !tasks.empty(); });
        if (tasks.empty()) return;  // shut down and drained
        if (overflow) {
          fn = std::move(tasks.back());
          tasks.pop_back();
        } else {
          fn = std::move(tasks.front());
          tasks.pop_front();
        }
      }
      fn();
    }
  }

  const size_t max_queued_;
  std::shared_ptr<std::atomic<int64_t>> overflowed_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queued_;
  std::deque<std::function<void()>> overflow_;
  bool shut_down_ = false;
  std::vector<std::thread> threads_;
};

ConnectionGuard::ConnectionGuard(ConnectionLimits limits)
    : limits_(limits), num_overflowed_(std::make_shared<std::atomic<int64_t>>(0)) {}

ConnectionGuard::~ConnectionGuard() { stop(); }

httplib::TaskQueue* ConnectionGuard::make_task_queue() {
  return new Pool(static_cast<size_t>(std::max(1, limits_.num_workers)),
                  static_cast<size_t>(std::max(0, limits_.max_queued)), num_overflowed_);
}

bool ConnectionGuard::overflowing() { return t_overflowing; }

void ConnectionGuard::watch(int listen_fd, int port) {
  std::lock_guard lock(mu_);
  if (watchdog_.joinable() || stopping_) return;
  listen_fd_ = listen_fd;
  port_ = port;
  watchdog_ = std::thread([this] { watchdog_loop(); });
}

void ConnectionGuard::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void ConnectionGuard::begin_request(const std::string& remote_addr, int remote_port) {
  std::lock_guard lock(mu_);
  Connection& c = connections_[remote_addr + ":" + std::to_string(remote_port)];
  c.busy = true;
}

void ConnectionGuard::end_request(const std::string& remote_addr, int remote_port) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(remote_addr + ":" + std::to_string(remote_port));
  if (it == connections_.end()) return;
  it->second.busy = false;
  it->second.idle_since = std::chrono::steady_clock::now();
}

int64_t ConnectionGuard::num_timed_out() const {
  std::lock_guard lock(mu_);
  return num_timed_out_;
}

int64_t ConnectionGuard::num_overflowed() const { return num_overflowed_->load(); }

void ConnectionGuard::watchdog_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    scan(std::chrono::steady_clock::now());
    lock.lock();
    cv_.wait_for(lock, kScanInterval, [&] { return stopping_; });
  }
}

void ConnectionGuard::scan(std::chrono::steady_clock::time_point now) {
  // The server's connections, found without holding the lock (one syscall pair per socket).
  struct Found {
    int fd;
    std::string peer;
    bool unread;  // bytes wait in the socket: nobody is reading it (it waits for a thread)
  };
  std::vector<Found> found;
  if (DIR* dir = opendir("/proc/self/fd")) {
    const int own_fd = dirfd(dir);
    while (const dirent* entry = readdir(dir)) {
      char* end = nullptr;
      const long fd = std::strtol(entry->d_name, &end, 10);
      if (end == entry->d_name || *end != '\0' || fd == own_fd || fd == listen_fd_) continue;
      std::string peer = connection_peer(static_cast<int>(fd), port_);
      if (peer.empty()) continue;
      int num_unread = 0;
      ::ioctl(static_cast<int>(fd), FIONREAD, &num_unread);
      found.push_back({static_cast<int>(fd), std::move(peer), num_unread > 0});
    }
    closedir(dir);
  }

  std::vector<std::pair<int, std::string>> expired;
  {
    std::lock_guard lock(mu_);
    for (auto& [key, c] : connections_) c.seen = false;
    for (const auto& [fd, peer, unread] : found) {
      Connection& c = connections_[peer];
      if (c.fd != fd) {  // a socket not seen before (its entry may come from begin_request)
        if (c.fd >= 0) c.busy = false;
        c.fd = fd;
        c.idle_since = now;
      }
      c.seen = true;
      // Waiting in the queue is not the client's fault: its deadline starts when a thread
      // reads it. (A thread reads a slow client's bytes as they come, leaving none unread.)
      if (unread) c.idle_since = now;
      if (!c.busy && now - c.idle_since > limits_.request_timeout) expired.emplace_back(fd, peer);
    }
    // Gone; but an entry begin_request made after the sockets were listed stays.
    std::erase_if(connections_, [](const auto& kv) {
      return !kv.second.seen && (kv.second.fd >= 0 || !kv.second.busy);
    });
  }

  for (const auto& [fd, peer] : expired) {
    // The fd may have been closed and reused since the scan: cut it only if it is still the
    // same connection.
    if (connection_peer(fd, port_) != peer) continue;
    {
      std::lock_guard lock(mu_);
      ++num_timed_out_;
      connections_.erase(peer);
    }
    ::shutdown(fd, SHUT_RDWR);
  }
}

}  // namespace vellum::server
