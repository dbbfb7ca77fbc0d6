// Ordered first-match classifier over a rule set (SPEC §2 `match`).
#pragma once

#include <cstdint>
#include <vector>

#include "frame.hpp"
#include "rules.hpp"

namespace sluice {

class Classifier {
 public:
  explicit Classifier(const std::vector<Rule>& rules);
  // Index of the first rule whose every match field holds, or -1.
  int classify(const ParsedFrame& pf, uint16_t ingress_port) const;

 private:
  // A match compiled for the per-packet walk. A rule tests all of its exact fields (ingress
  // port, VLAN, "is IP", IP version, protocol, DSCP, "has ports") with one mask-and-compare
  // of the frame's match word (frame.hpp); only prefixes and port ranges need more, and only
  // rules that have them test them.
  struct Prefix {
    uint64_t addr[2] = {};  // masked, as loaded from the wire
    uint64_t mask[2] = {};
  };
  struct Compiled {
    uint64_t mask = 0;
    uint64_t value = 0;
    bool src = false, dst = false, ports = false;
    uint16_t src_lo = 0, src_hi = 0xffff, dst_lo = 0, dst_hi = 0xffff;
    Prefix src_prefix, dst_prefix;
  };
  static Compiled compile(const Match& m);
  std::vector<Compiled> rules_;
};

}  // namespace sluice
