// sluicectl: the only place that turns errors into exit codes (SPEC §1: 0 success, 1 runtime
// failure, 2 bad usage or invalid input).
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

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
      std::fprintf(stderr, "sluicectl: %s\n", made.value.error().message.c_str());
      return made.failure == Failure::usage ? kExitUsage : kExitRuntime;
    }
    backend = std::move(made.value).value();
  }
  CommandContext context;
  context.args = &cli->args;
  context.backend = backend.get();
  auto done = command->run(context);
  if (!done) {
    std::fprintf(stderr, "sluicectl: %s\n", done.value.error().message.c_str());
    return done.failure == Failure::usage ? kExitUsage : kExitRuntime;
  }
  return kExitOk;
}
