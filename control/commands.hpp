// sluicectl's subcommands (SPEC §1), from one table: each entry names its words, says what it
// does, declares its options and arguments on its CLI11 subcommand (which generates its
// parsing and --help) and runs against a Backend. main() builds the CLI, parses, makes the
// backend the global options choose (backend_factory.hpp) and turns the command's Status into
// an exit code (result.hpp's exit_code).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "backend_factory.hpp"

namespace sluice::ctl {

// Every value a command's options may set (one struct: CLI11 binds to its fields).
struct CommandArgs {
  std::string file, name, before, rule, by = "pps";
  bool json = false;
  double watch_seconds = 0;  // 0: no --watch
  uint64_t count = 0;        // stats --count; flows top N
  std::optional<uint64_t> expect_generation;
  // rule set
  std::string rate, burst, action, parent, max_flows, idle_timeout, max_delay;
  std::vector<std::string> set_fields, unset_fields;
};

struct CommandContext {
  const CommandArgs* args = nullptr;
  Backend* backend = nullptr;  // null for commands that need none
  const BackendChoice* choice = nullptr;  // the backend the global options name
  std::FILE* out = stdout;
  std::FILE* in = stdin;  // `rule add -`
};

using CommandRun = Status (*)(CommandContext&);

struct Command {
  std::vector<std::string> words;  // {"rule", "list"}
  std::string summary;
  bool needs_backend = true;
  // Declares the options and arguments on `sub`, bound to `args`.
  void (*declare)(CLI::App& sub, CommandArgs& args) = nullptr;
  CommandRun run = nullptr;  // null: not available in this build (the summary says why)
};

const std::vector<Command>& commands();

// sluicectl's whole command line: global options, then one subcommand per table entry.
struct Cli {
  CLI::App app{"sluicectl: control a running sluice dataplane (SPEC §1)", "sluicectl"};
  BackendChoice backend;
  CommandArgs args;
  const Command* chosen = nullptr;  // after a successful parse
};
std::unique_ptr<Cli> make_cli();

// What is wrong with the command words of `args` (argv without the program), if anything:
// an unknown command, or a group ("rule") without one of its commands. CLI11 would only
// say "A subcommand is required". Empty when the words name a command (or --help is asked).
std::string command_word_error(const std::vector<std::string>& args);

}  // namespace sluice::ctl
