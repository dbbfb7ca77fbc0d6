// sluicectl's subcommands (SPEC §1): a table of them, each with the words that name it, its
// usage line and whether it needs a backend. main() parses the global options, finds the
// command here and turns its Result into an exit code.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend.hpp"
#include "result.hpp"

namespace sluice::ctl {

// Where sluicectl looks for sluiced without --socket.
constexpr const char* kDefaultSocket = "/run/sluice/sluiced.sock";

// Which exit code an error deserves (SPEC §1): 2 for bad usage or invalid input, 1 otherwise.
enum class Failure { usage, runtime };

struct CommandContext {
  std::vector<std::string> args;     // the words after the command's name
  Backend* backend = nullptr;        // null for commands that need none
  std::FILE* out = stdout;
  Failure* failure = nullptr;        // set alongside an error
};

struct Command {
  std::vector<std::string> words;  // {"rule", "list"}
  std::string usage;               // the arguments after the words
  std::string summary;
  bool needs_backend = true;
  // Empty: not available in this build (the summary says why); refused with exit 2.
  Status (*run)(CommandContext&) = nullptr;
};

const std::vector<Command>& commands();

// "rule list"
std::string command_name(const Command& c);

// The command `words` start with, and how many words its name takes; null if none.
const Command* find_command(const std::vector<std::string>& words, size_t* name_words);

std::string usage_text();

}  // namespace sluice::ctl
