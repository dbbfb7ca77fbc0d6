#include "control_server.hpp"

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
  std::unique_ptr<ControlServer> control(new ControlServer(path, std::move(rules_yaml)));
  auto server = StreamServer::start(fd, [c = control.get()](int client) { c->serve_one(client); });
  if (!server) {
    unlink(path.c_str());
    return make_error("--control: " + server.error().message);
  }
  control->server_ = std::move(server).value();
  return control;
}

ControlServer::~ControlServer() {
  server_.reset();
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
  std::string request = read_until(fd, "\n", control::kMaxRequestBytes, kRequestTimeoutMs, &why);
  if (!why.empty()) return send_all(fd, control::error_reply(why));
  if (const size_t nl = request.find('\n'); nl != std::string::npos) request.resize(nl);
  if (!request.empty() && request.back() == '\r') request.pop_back();
  send_all(fd, request.empty() ? control::error_reply("empty request") : answer(request));
}

}  // namespace sluice
