// `sluicectl xdp attach IFACE [--mode native|skb] --config FILE` and `sluicectl xdp detach
// IFACE`: the XDP program put on and taken off an interface (ebpf/xdp_backend.hpp). attach
// leaves it running with its maps pinned, for later `sluicectl --xdp IFACE ...` commands.
#pragma once

#include "commands.hpp"

namespace sluice::ctl {

Status run_xdp_attach(CommandContext& c);  // args: name = IFACE, by = mode, file = rules
Status run_xdp_detach(CommandContext& c);  // args: name = IFACE

}  // namespace sluice::ctl
