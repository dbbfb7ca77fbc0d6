// sluicectl: the only place that turns errors into exit codes (SPEC §1: 0 success, 1 runtime
// failure, 2 bad usage or invalid input), by the error's kind (result.hpp: exit_code).
#include <net/if.h>
#include <sys/un.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

using sluice::kExitOk;
constexpr int kExitUsage = sluice::kExitInvalidInput;
// sockaddr_un::sun_path holds the path and its terminating NUL; IFNAMSIZ likewise.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un::sun_path) - 1;
constexpr size_t kMaxInterfaceNameBytes = IFNAMSIZ - 1;

// What is wrong with the global options' values, if anything.
std::string backend_choice_error(const sluice::ctl::Cli& cli) {
  const std::string& socket = cli.backend.socket_path;
  const std::string& xdp = cli.backend.xdp_iface;
  if (socket.empty()) return "--socket needs a non-empty value";
  if (socket.size() > kMaxSocketPathBytes)
    return "--socket " + socket + ": a socket path must be 1 to " +
           std::to_string(kMaxSocketPathBytes) + " bytes long";
  if (cli.app.count("--xdp") != 0 && xdp.empty()) return "--xdp needs a non-empty value";
  if (xdp.size() > kMaxInterfaceNameBytes)
    return "--xdp " + xdp + ": an interface name is at most " +
           std::to_string(kMaxInterfaceNameBytes) + " bytes long";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sluice::ctl;
  auto cli = make_cli();
  if (const std::string why = command_word_error({argv + 1, argv + argc}); !why.empty()) {
    std::fprintf(stderr, "sluicectl: %s\n", why.c_str());
    return kExitUsage;
  }
  try {
    cli->app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return cli->app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::CallForAllHelp& e) {
    return cli->app.exit(e) == 0 ? kExitOk : kExitUsage;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "sluicectl: %s\nRun with --help for more information.\n", e.what());
    return kExitUsage;
  }
  if (const std::string why = backend_choice_error(*cli); !why.empty()) {
    std::fprintf(stderr, "sluicectl: %s\n", why.c_str());
    return kExitUsage;
  }
  const Command* command = cli->chosen;
  if (command == nullptr) {
    std::fprintf(stderr, "sluicectl: no command\n");
    return kExitUsage;
  }
  std::string name;
  for (const std::string& w : command->words) name += (name.empty() ? "" : " ") + w;
  if (command->run == nullptr) {
    std::fprintf(stderr, "sluicectl: %s: %s\n", name.c_str(), command->summary.c_str());
    return kExitUsage;
  }
  std::unique_ptr<Backend> backend;
  if (command->needs_backend) {
    auto made = make_backend(cli->backend);
    if (!made) {
      std::fprintf(stderr, "sluicectl: %s\n", made.error().message.c_str());
      return sluice::exit_code(made.error());
    }
    backend = std::move(made).value();
  }
  CommandContext context;
  context.args = &cli->args;
  context.backend = backend.get();
  context.choice = &cli->backend;
  auto done = command->run(context);
  if (!done) {
    std::fprintf(stderr, "sluicectl: %s\n", done.error().message.c_str());
    return sluice::exit_code(done.error());
  }
  return kExitOk;
}
