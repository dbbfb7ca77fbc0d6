#include "control_server.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>


namespace sluice {

namespace {

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
                                                            RuleSet startup_rules,
                                                            RulesTarget* target,
                                                            ControlLimits limits) {
  sockaddr_un addr;
  if (!fill_address(path, &addr))
    return make_error("--control " + path + ": a socket path must be 1 to " +
                      std::to_string(sizeof addr.sun_path - 1) + " bytes long");
  // Its directories, each one missing (the default /run/sluice/ after a reboot, or a deeper
  // path such as /run/sluice/eth0/): created private to the starting user, as `mkdir -p`.
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
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
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("--control: socket: " + errno_text());
  // Mode 0600 from the start (SPEC §4): no moment at which others could connect.
  const mode_t old_mask = umask(0177);
  const int bound = bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0 || listen(fd, SOMAXCONN) != 0) {
    const std::string why = std::strerror(bound != 0 ? bind_errno : errno);
    close(fd);
    if (bound == 0) unlink(path.c_str());
    return make_error("--control " + path + ": cannot listen: " + why);
  }
  std::unique_ptr<ControlServer> control(
      new ControlServer(path, std::make_unique<ControlService>(target, std::move(startup_rules))));
  auto loop = ControlLoop::start(fd, control->service_.get(), limits);
  if (!loop) {
    unlink(path.c_str());
    return make_error("--control: " + loop.error().message);
  }
  control->loop_ = std::move(loop).value();
  return control;
}

ControlServer::ControlServer(std::string path, std::unique_ptr<ControlService> service)
    : path_(std::move(path)), service_(std::move(service)) {}

ControlServer::~ControlServer() {
  loop_.reset();
  unlink(path_.c_str());
}

void ControlServer::publish(const CountersSnapshot& snap) { service_->publish(snap); }

std::vector<RequestTiming> ControlServer::request_timings() const {
  return loop_ ? loop_->timings() : std::vector<RequestTiming>{};
}

size_t ControlServer::connections() const { return loop_ ? loop_->connections() : 0; }

}  // namespace sluice
