// What sluicectl's command implementations share (commands.cpp, write_commands.cpp).
#pragma once

#include <string>

#include "commands.hpp"

namespace sluice::ctl {

inline void print(CommandContext& c, const std::string& text) {
  std::fputs(text.c_str(), c.out);
  std::fflush(c.out);
}

template <class T>
Status failed(const Result<T>& a) {
  return Status(a.error());
}

inline Status usage_error(std::string message) {
  return Status(invalid_input(std::move(message)));
}

// The write commands (write_commands.cpp).
void declare_rule_add(CLI::App& sub, CommandArgs& a);
void declare_rule_set(CLI::App& sub, CommandArgs& a);
void declare_rule_del(CLI::App& sub, CommandArgs& a);
void declare_config_load(CLI::App& sub, CommandArgs& a);
void declare_config_diff(CLI::App& sub, CommandArgs& a);
void declare_flows_top(CLI::App& sub, CommandArgs& a);
Status run_rule_add(CommandContext& c);
Status run_rule_set(CommandContext& c);
Status run_rule_del(CommandContext& c);
Status run_config_load(CommandContext& c);
Status run_config_diff(CommandContext& c);
Status run_flows_top(CommandContext& c);

}  // namespace sluice::ctl
