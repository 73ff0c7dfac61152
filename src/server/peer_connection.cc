#include "server/peer_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace vellum::server {
namespace {

// Address and port of a socket address, as cpp-httplib prints them (numeric host).
bool address_of(const sockaddr_storage& addr, std::string& host, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    if (inet_ntop(AF_INET, &in.sin_addr, text, sizeof(text)) == nullptr) return false;
    port = ntohs(in.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    if (inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof(text)) == nullptr) return false;
    port = ntohs(in6.sin6_port);
  } else {
    return false;
  }
  host = text;
  return true;
}

bool matches(int fd, const std::string& remote_addr, int remote_port, int local_port) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!address_of(addr, host, port) || port != local_port) return false;
  len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return false;
  if (!address_of(addr, host, port)) return false;
  return port == remote_port && host == remote_addr;
}

}  // namespace

PeerConnection PeerConnection::find(const std::string& remote_addr, int remote_port,
                                    int local_port) {
  if (remote_port < 0 || local_port < 0) return PeerConnection();
  // A keep-alive connection comes back to the same thread with the same descriptor.
  thread_local int last_fd = -1;
  if (last_fd >= 0 && matches(last_fd, remote_addr, remote_port, local_port)) {
    return PeerConnection(last_fd);
  }
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return PeerConnection();
  int found = -1;
  const int dir_fd = dirfd(dir);
  while (const dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dir_fd) continue;
    if (matches(static_cast<int>(fd), remote_addr, remote_port, local_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  if (found >= 0) last_fd = found;
  return PeerConnection(found);
}

bool PeerConnection::closed() const {
  if (fd_ < 0) return false;
  char byte = 0;
  const ssize_t n = recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n > 0) return false;
  return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace vellum::server
