#include "classifier.hpp"

namespace sluice {
namespace {

bool in_range(const std::optional<PortRange>& r, uint16_t v) {
  return !r || (v >= r->lo && v <= r->hi);
}

bool matches(const Match& m, bool needs_ip, const ParsedFrame& pf, uint16_t port) {
  if (m.port && *m.port != port) return false;
  if (m.vlan && (pf.vlan_count == 0 || pf.outer_vlan != *m.vlan)) return false;
  if (!needs_ip) return true;
  if (pf.ip_version == 0) return false;
  if (m.src && !cidr_contains(*m.src, pf.ip_version, pf.src)) return false;
  if (m.dst && !cidr_contains(*m.dst, pf.ip_version, pf.dst)) return false;
  if (m.proto && *m.proto != pf.proto) return false;
  if (m.dscp && *m.dscp != pf.dscp) return false;
  // Port rules need ports: non-first fragments and port-less protocols never match them.
  if ((m.src_port || m.dst_port) && !pf.has_ports) return false;
  return in_range(m.src_port, pf.src_port) && in_range(m.dst_port, pf.dst_port);
}

}  // namespace

bool cidr_contains(const Cidr& c, uint8_t ip_version, const std::array<uint8_t, 16>& addr) {
  if (c.family != ip_version) return false;
  unsigned full = c.prefix_len / 8, rest = c.prefix_len % 8;
  for (unsigned i = 0; i < full; ++i)
    if (c.addr[i] != addr[i]) return false;
  if (rest == 0) return true;
  uint8_t mask = uint8_t(0xff00u >> rest);
  return (c.addr[full] & mask) == (addr[full] & mask);
}

Classifier::Classifier(const std::vector<Rule>& rules) {
  for (const Rule& r : rules) {
    const Match& m = r.match;
    bool needs_ip = m.src || m.dst || m.proto || m.src_port || m.dst_port || m.dscp;
    rules_.push_back({m, needs_ip});
  }
}

int Classifier::classify(const ParsedFrame& pf, uint16_t ingress_port) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (matches(rules_[i].match, rules_[i].needs_ip, pf, ingress_port)) return int(i);
  return -1;
}

}  // namespace sluice
