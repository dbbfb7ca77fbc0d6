// A listening stream socket served by a thread of its own, one connection at a time: the
// part sluiced's control socket and its metrics endpoint share. The owner supplies the
// listening socket and what to do with each accepted connection; destruction stops the
// thread (a connection being served is finished first) and closes the socket.
//
// One at a time on purpose: the servers answer from a copy of the counters in microseconds,
// and a client that stalls is cut off after a timeout (read_until), so no client can hold
// a thread or memory for long, and nothing here can ever delay a packet.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <thread>

#include "result.hpp"

namespace sluice {

class StreamServer {
 public:
  using Handler = std::function<void(int fd)>;
  // Takes ownership of `listen_fd` (bound and listening). Errors: no pipe for the stop signal.
  static Result<std::unique_ptr<StreamServer>> start(int listen_fd, Handler handler);
  ~StreamServer();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

 private:
  StreamServer(int listen_fd, int wake_read_fd, int wake_write_fd, Handler handler);
  void serve();

  const int listen_fd_;
  const int wake_read_fd_, wake_write_fd_;  // a byte written here ends serve()
  const Handler handler_;
  std::thread thread_;
};

// What a client sent until `end` appeared (end included), or an empty result with *why set:
// it sent more than max_bytes first, or had not finished within timeout_ms (in all, however
// it trickles). If it hung up first, *why is empty and the result is what it sent.
std::string read_until(int fd, std::string_view end, size_t max_bytes, int timeout_ms,
                       std::string* why);

// Sends all of `text`; a client that went away is not an error worth reporting.
void send_all(int fd, std::string_view text);

}  // namespace sluice
