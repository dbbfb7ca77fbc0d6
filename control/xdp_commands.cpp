#include "xdp_commands.hpp"

#include <net/if.h>

#include <fstream>
#include <sstream>

#include "rules_loader.hpp"
#include "xdp_backend.hpp"

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

}  // namespace sluice::ctl
