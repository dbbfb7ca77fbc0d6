// sluicectl: the only place that turns errors into exit codes (SPEC §1: 0 success, 1 runtime
// failure, 2 bad usage or invalid input).
#include <net/if.h>
#include <sys/un.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands.hpp"
#include "socket_backend.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;
// sockaddr_un::sun_path holds the path and its terminating NUL; IFNAMSIZ likewise.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un::sun_path) - 1;
constexpr size_t kMaxInterfaceNameBytes = IFNAMSIZ - 1;

int usage_failure(const std::string& message) {
  std::fprintf(stderr, "sluicectl: %s\n%s", message.c_str(), sluice::ctl::usage_text().c_str());
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice::ctl;
  std::vector<std::string> words(argv + 1, argv + argc);
  std::string socket_path = kDefaultSocket, xdp_iface;
  size_t i = 0;
  for (; i < words.size() && words[i].rfind("-", 0) == 0; ++i) {
    const std::string& opt = words[i];
    if (opt == "-h" || opt == "--help") {
      std::fputs(usage_text().c_str(), stdout);
      return kExitOk;
    }
    if ((opt == "--socket" || opt == "--xdp") && i + 1 < words.size()) {
      const std::string& value = words[++i];
      if (value.empty()) return usage_failure(opt + " needs a non-empty value");
      if (opt == "--socket" && value.size() > kMaxSocketPathBytes)
        return usage_failure("--socket " + value + ": a socket path must be 1 to " +
                             std::to_string(kMaxSocketPathBytes) + " bytes long");
      if (opt == "--xdp" && value.size() > kMaxInterfaceNameBytes)
        return usage_failure("--xdp " + value + ": an interface name is at most " +
                             std::to_string(kMaxInterfaceNameBytes) + " bytes long");
      (opt == "--socket" ? socket_path : xdp_iface) = value;
      continue;
    }
    if (opt == "--socket" || opt == "--xdp") return usage_failure(opt + " needs a value");
    return usage_failure("unknown option " + opt);
  }
  words.erase(words.begin(), words.begin() + long(i));
  if (words.empty()) return usage_failure("no command");
  if (words[0] == "help") {
    std::fputs(usage_text().c_str(), stdout);
    return kExitOk;
  }

  size_t name_words = 0;
  const Command* command = find_command(words, &name_words);
  std::string name;
  for (size_t w = 0; w < std::min(words.size(), size_t(2)); ++w) name += (w ? " " : "") + words[w];
  if (command == nullptr) return usage_failure("unknown command \"" + name + "\"");
  name = command_name(*command);
  if (command->run == nullptr) {
    std::fprintf(stderr, "sluicectl: %s: %s\n", name.c_str(), command->summary.c_str());
    return kExitUsage;
  }

  std::unique_ptr<Backend> backend;
  if (command->needs_backend) {
    if (!xdp_iface.empty()) {
      std::fprintf(stderr, "sluicectl: --xdp %s: the XDP backend is not available in this build\n",
                   xdp_iface.c_str());
      return kExitUsage;
    }
    backend = std::make_unique<SocketBackend>(socket_path);
  }
  Failure failure = Failure::runtime;
  CommandContext context;
  context.args.assign(words.begin() + long(name_words), words.end());
  context.backend = backend.get();
  context.failure = &failure;
  if (sluice::Status s = command->run(context); !s) {
    std::fprintf(stderr, "sluicectl: %s\n", s.error().message.c_str());
    return failure == Failure::usage ? kExitUsage : kExitRuntime;
  }
  return kExitOk;
}
