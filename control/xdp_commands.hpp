// `sluicectl xdp attach IFACE [--mode native|skb] --config FILE` and `sluicectl xdp detach
// IFACE`: the XDP program put on and taken off an interface (ebpf/xdp_backend.hpp). attach
// leaves it running with its maps pinned, for later `sluicectl --xdp IFACE ...` commands.
#pragma once

#include "commands.hpp"

namespace sluice::ctl {

Status run_xdp_attach(CommandContext& c);  // args: name = IFACE, by = mode, file = rules
Status run_xdp_detach(CommandContext& c);  // args: name = IFACE

// `sluicectl --xdp IFACE config check FILE`'s verdict on a loaded file: what the XDP backend
// would refuse of it on a first attach (xdp_rules_check.hpp), else the phrase naming its flow
// tables' kernel memory ("XDP flow tables 16.0 MiB for 65536 flows (...)").
Result<std::string> xdp_check_rules(const RuleSet& rules);

}  // namespace sluice::ctl
