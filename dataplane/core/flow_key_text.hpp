// Flow keys (flow_key.hpp) as an operator reads them, for `sluicectl flows top`. The key's
// first word says its mode, IP version and prefix length, so the key alone is enough:
//   src-ip, dst-ip     192.0.2.7 | 2001:db8::7
//   src-dst            10.0.0.1 > 192.0.2.1
//   5-tuple            udp 10.0.0.1:1024 > 192.0.2.1:53 | tcp [2001:db8::1]:80 > [...]:443
//                      icmp 10.0.0.1 > 192.0.2.1 (no ports) | proto 47 10.0.0.1 > ...
//   src-/dst-prefix/N  10.1.0.0/16 | 2001:db8::/32
// A frame that is not IP (a keyed rule without IP match fields sees ARP too) reads "non-IP".
#pragma once

#include <string>

#include "flow_key.hpp"
#include "frame.hpp"
#include "rules.hpp"

namespace sluice {

std::string flow_key_text(const FlowKey& key);

// An IP protocol number as flow keys show it: "tcp", "udp", "icmp", "icmpv6", "sctp", else
// "proto N" (shared with the XDP backend's flows top, which formats its keys the same way).
std::string protocol_name(uint8_t proto);

// The key of `mode` for a parsed frame (flow_key_of<mode>, chosen at run time).
FlowKey flow_key_for(KeyMode mode, const ParsedFrame& pf, uint8_t prefix_len);

}  // namespace sluice
