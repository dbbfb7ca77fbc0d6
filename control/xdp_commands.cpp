#include "xdp_commands.hpp"

#include <net/if.h>

#include <fstream>
#include <sstream>

#include "rules_loader.hpp"
#include "xdp_backend.hpp"
#include "xdp_rules_check.hpp"

namespace sluice::ctl {

Status run_xdp_attach(CommandContext& c) {
  const CommandArgs& a = *c.args;
  if (if_nametoindex(a.name.c_str()) == 0)
    return Status(invalid_input("xdp attach: no such interface: " + a.name));
  if (a.file.empty()) return Status(invalid_input("xdp attach: --config FILE is required"));
  std::ifstream in(a.file);
  if (!in) return Status(invalid_input(a.file + ": cannot read it"));
  std::ostringstream text;
  text << in.rdbuf();
  auto rules = load_rules_text(text.str(), a.file);
  if (!rules) return Status(with_kind(rules.error(), ErrorKind::invalid_input));
  const auto mode = a.by == "skb" ? xdp::AttachMode::skb : xdp::AttachMode::native;
  auto be = xdp::XdpBackend::attach(a.name, mode, *rules);
  // Rules the XDP backend refuses (shaping, too many) are invalid input here.
  if (!be) return Status(with_kind(be.error(), ErrorKind::runtime));
  (*be)->keep_attached();
  std::fprintf(c.out, "%s: sluice attached (%s), %zu rule(s), maps pinned under %s\n",
               a.name.c_str(), a.by == "skb" ? "skb" : "native", rules->rules.size(),
               (*be)->pin_dir().c_str());
  return Ok{};
}

Status run_xdp_detach(CommandContext& c) {
  const CommandArgs& a = *c.args;
  if (if_nametoindex(a.name.c_str()) == 0)
    return Status(invalid_input("xdp detach: no such interface: " + a.name));
  auto be = xdp::XdpBackend::open(a.name);
  if (!be) return Status(be.error());
  if (Status s = (*be)->detach(); !s) return Status(s.error());
  std::fprintf(c.out, "%s: sluice detached\n", a.name.c_str());
  return Ok{};
}

Result<std::string> xdp_check_rules(const RuleSet& rules) {
  // The memory sluicectl could have now: attach creates the tables in this process's name.
  auto need = xdp::check_xdp_rule_set(rules, SL_XDP_DEFAULT_FLOWS, memory_available_now());
  if (!need) return need.error();
  if (need->flows == 0) return std::string("no XDP flow tables (no keyed rules)");
  return "XDP flow tables " + format_memory_size(need->bytes) + " for " +
         std::to_string(need->flows) + " flows (" + std::to_string(SL_XDP_DEFAULT_FLOWS) +
         " per keyed rule without max-flows)";
}

}  // namespace sluice::ctl
