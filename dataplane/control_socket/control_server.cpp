#include "control_server.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control_protocol.hpp"
#include "counters_wire.hpp"

namespace sluice {

namespace {

// How long one client may take to send its request line: it holds up the clients behind it.
constexpr int kRequestTimeoutMs = 1000;

std::string errno_text() { return std::strerror(errno); }

bool fill_address(const std::string& path, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.c_str(), path.size() + 1);
  return true;
}

// Whether a process accepts connections at `addr` now.
bool someone_listens(const sockaddr_un& addr) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const bool listens = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return listens;
}

// Reads one request line from fd: the text before '\n' (or before the end, if the client shut
// its side down without one). Empty with *why set when there is no request to answer.
std::string read_request(int fd, std::string* why) {
  std::string line;
  char buf[256];
  while (line.find('\n') == std::string::npos) {
    if (line.size() > control::kMaxRequestBytes) {
      *why = "request longer than " + std::to_string(control::kMaxRequestBytes) + " bytes";
      return {};
    }
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, kRequestTimeoutMs);
    if (ready == 0) {
      *why = "no request line within " + std::to_string(kRequestTimeoutMs) + " ms";
      return {};
    }
    if (ready < 0) {
      if (errno == EINTR) continue;
      *why = "poll: " + errno_text();
      return {};
    }
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    line.append(buf, size_t(n));
  }
  if (const size_t nl = line.find('\n'); nl != std::string::npos) line.resize(nl);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > control::kMaxRequestBytes) {
    *why = "request longer than " + std::to_string(control::kMaxRequestBytes) + " bytes";
    return {};
  }
  if (line.empty()) *why = "empty request";
  return line;
}

void send_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the client went away: nothing to tell it
    text.remove_prefix(size_t(n));
  }
}

}  // namespace

Result<std::unique_ptr<ControlServer>> ControlServer::start(const std::string& path,
                                                            std::string rules_yaml) {
  sockaddr_un addr;
  if (!fill_address(path, &addr))
    return make_error("--control " + path + ": a socket path must be 1 to " +
                      std::to_string(sizeof addr.sun_path - 1) + " bytes long");
  // Its directory, if missing (the default /run/sluice/ after a reboot): private to root.
  if (const size_t slash = path.rfind('/'); slash != std::string::npos && slash != 0) {
    const std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return make_error("--control " + path + ": cannot create " + dir + ": " + errno_text());
  }
  struct stat st{};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return make_error("--control " + path + ": exists and is not a socket");
    if (someone_listens(addr))
      return make_error("--control " + path + ": another process (another sluiced?) listens there");
    unlink(path.c_str());  // stale: left by a process that did not stop cleanly
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("--control: socket: " + errno_text());
  // Mode 0600 from the start (SPEC §4): no moment at which others could connect.
  const mode_t old_mask = umask(0177);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0 || listen(fd, 16) != 0) {
    const std::string why = std::strerror(bound != 0 ? bind_errno : errno);
    close(fd);
    if (bound == 0) unlink(path.c_str());
    return make_error("--control " + path + ": cannot listen: " + why);
  }
  int wake[2];
  if (pipe2(wake, O_CLOEXEC) != 0) {
    const std::string why = errno_text();
    close(fd);
    unlink(path.c_str());
    return make_error("--control: pipe: " + why);
  }
  return std::unique_ptr<ControlServer>(new ControlServer(path, fd, wake, std::move(rules_yaml)));
}

ControlServer::ControlServer(std::string path, int listen_fd, int wake_fd[2], std::string rules_yaml)
    : path_(std::move(path)),
      listen_fd_(listen_fd),
      wake_read_fd_(wake_fd[0]),
      wake_write_fd_(wake_fd[1]),
      rules_yaml_(std::move(rules_yaml)) {
  thread_ = std::thread([this] { serve(); });
}

ControlServer::~ControlServer() {
  const char byte = 0;
  while (write(wake_write_fd_, &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  close(listen_fd_);
  close(wake_read_fd_);
  close(wake_write_fd_);
  unlink(path_.c_str());
}

void ControlServer::publish(const CountersSnapshot& snap) {
  std::string text = encode_counters(snap);
  std::lock_guard lock(mu_);
  counters_text_ = std::move(text);
  published_ = true;
}

std::string ControlServer::answer(std::string_view request) const {
  if (request == control::kStats) {
    std::lock_guard lock(mu_);
    if (!published_) return control::error_reply("the dataplane is not set up yet");
    return control::ok_reply(counters_text_);
  }
  if (request == control::kRules) return control::ok_reply(rules_yaml_);
  std::string shown(request.substr(0, 64));
  return control::error_reply("unknown request \"" + shown + "\" (sluiced answers: " +
                              std::string(control::kStats) + ", " + std::string(control::kRules) +
                              "; rules change only by restarting it with another --config)");
}

void ControlServer::serve_one(int fd) const {
  std::string why;
  const std::string request = read_request(fd, &why);
  send_all(fd, why.empty() ? answer(request) : control::error_reply(why));
}

void ControlServer::serve() {
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
    serve_one(fd);
    close(fd);
  }
}

}  // namespace sluice
