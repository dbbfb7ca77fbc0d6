#include "socket_backend.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "control_protocol.hpp"
#include "counters_wire.hpp"
#include "rules_loader.hpp"

namespace sluice::ctl {

namespace {

// sluiced answers from a copy it keeps: anything slower than this is a stuck server.
constexpr int kReplyTimeoutMs = 5000;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string> SocketBackend::ask(std::string_view request) const {
  const std::string where = "control socket " + path_ + ": ";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof addr.sun_path)
    return make_error(where + "a socket path must be 1 to " +
                      std::to_string(sizeof addr.sun_path - 1) + " bytes long");
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  Fd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return make_error(where + "socket: " + std::strerror(errno));
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    return make_error(where + "cannot connect: " + std::strerror(errno) +
                      " (is sluiced running with --control " + path_ + "?)");
  }
  std::string line(request);
  line += '\n';
  for (std::string_view rest = line; !rest.empty();) {
    const ssize_t n = send(fd.get(), rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(where + "cannot send: " + std::strerror(errno));
    rest.remove_prefix(size_t(n));
  }
  std::string reply;
  char buf[4096];
  for (;;) {
    pollfd p{fd.get(), POLLIN, 0};
    const int ready = poll(&p, 1, kReplyTimeoutMs);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0)
      return make_error(where + "no reply within " + std::to_string(kReplyTimeoutMs) + " ms");
    const ssize_t n = recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(where + "cannot read the reply: " + std::strerror(errno));
    if (n == 0) break;
    reply.append(buf, size_t(n));
  }
  auto body = control::read_reply(reply);
  if (!body) return make_error("sluiced: " + body.error().message);
  return body;
}

Result<CountersSnapshot> SocketBackend::stats() {
  auto body = ask(control::kStats);
  if (!body) return body.error();
  auto snap = decode_counters(*body);
  if (!snap) return make_error("control socket " + path_ + ": " + snap.error().message);
  return snap;
}

Result<RuleSet> SocketBackend::rules() {
  auto body = ask(control::kRules);
  if (!body) return body.error();
  return load_rules_text(*body, "rules from " + path_);
}

}  // namespace sluice::ctl
