#include "stream_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

namespace sluice {

Result<std::unique_ptr<StreamServer>> StreamServer::start(int listen_fd, Handler handler) {
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const std::string why = std::strerror(errno);
    close(listen_fd);
    return make_error("pipe: " + why);
  }
  return std::unique_ptr<StreamServer>(new StreamServer(listen_fd, wake[0], wake[1], std::move(handler)));
}

StreamServer::StreamServer(int listen_fd, int wake_read_fd, int wake_write_fd, Handler handler)
    : listen_fd_(listen_fd),
      wake_read_fd_(wake_read_fd),
      wake_write_fd_(wake_write_fd),
      handler_(std::move(handler)) {
  thread_ = std::thread([this] { serve(); });
}

StreamServer::~StreamServer() {
  const char byte = 0;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
}

void StreamServer::serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_read_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;  // the client gave up already, or fds ran out: try the next one
    handler_(fd);
    close(fd);
  }
}

std::string read_until(int fd, std::string_view end, size_t max_bytes, int timeout_ms,
                       std::string* why) {
  std::string got;
  char buf[512];
  why->clear();
  // One deadline for the whole request, not per read: a client sending a byte at a time
  // must not hold the server for max_bytes timeouts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (got.find(end) == std::string::npos) {
    if (got.size() > max_bytes) {
      *why = "request longer than " + std::to_string(max_bytes) + " bytes";
      return {};
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = left.count() <= 0 ? 0 : poll(&p, 1, int(left.count()));
    if (ready == 0) {
      *why = "no complete request within " + std::to_string(timeout_ms) + " ms";
      return {};
    }
    if (ready < 0) {
      if (errno == EINTR) continue;
      *why = std::string("poll: ") + std::strerror(errno);
      return {};
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got;  // hung up
    got.append(buf, size_t(n));
  }
  if (got.find(end) > max_bytes) {
    *why = "request longer than " + std::to_string(max_bytes) + " bytes";
    return {};
  }
  return got;
}

void send_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(size_t(n));
  }
}

}  // namespace sluice
