// Whether the client of the HTTP request being served has closed its connection.
//
// cpp-httplib 0.11 neither hands a handler its socket nor tells a non-streaming handler that the
// client went away, and a streaming write only fails once the peer has reset the connection. To
// abort a request while it waits, prefills or decodes, the server finds the request's socket by
// its address pair among the process's descriptors (the handling thread owns the connection for
// the whole call, so the descriptor cannot be reused meanwhile) and probes it with a non-blocking
// MSG_PEEK read: 0 bytes (the peer's FIN) or a reset means the client is gone; pending bytes (a
// pipelined request) or EAGAIN mean it is still there.
#pragma once

#include <string>

namespace vellum::server {

class PeerConnection {
 public:
  PeerConnection() = default;

  // The socket connected to remote_addr:remote_port on local_port, or one that is never found
  // (closed() stays false, and only a failed write detects a disconnect).
  static PeerConnection find(const std::string& remote_addr, int remote_port, int local_port);

  bool found() const { return fd_ >= 0; }
  // Thread-compatible; cheap (one non-blocking recv).
  bool closed() const;

 private:
  explicit PeerConnection(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace vellum::server
