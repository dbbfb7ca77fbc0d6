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
  struct Compiled {
    Match match;
    bool needs_ip;  // any L3/L4 field: never matches non-IP frames
  };
  std::vector<Compiled> rules_;
};

bool cidr_contains(const Cidr& c, uint8_t ip_version, const std::array<uint8_t, 16>& addr);

}  // namespace sluice
