// The rules file of the control benchmarks (bench/control_storm.cpp's storms through a live
// sluiced, bench/control_load.cpp's cost of one load): n-1 aggregate rules on ports no packet
// uses, then per-flow, the rule the traffic meets. Every rate differs between flip 0 and 1, so
// a load of the other file changes all n rules.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace bench {

inline std::string control_rules_file(size_t n, int flip) {
  std::string text = "default: {action: pass}\nrules:\n";
  char line[256];
  for (size_t i = 1; i < n; ++i) {
    std::snprintf(line, sizeof line,
                  "  - {name: r%04zu, match: {proto: udp, dst-port: %zu}, rate: %zupps, burst: "
                  "100, action: drop}\n",
                  i, 10000 + i, 1000 * size_t(1 + flip) + i);
    text += line;
  }
  std::snprintf(line, sizeof line,
                "  - {name: per-flow, match: {proto: udp}, key: 5-tuple, rate: %dMpps, burst: "
                "1000, algorithm: token-bucket, action: drop}\n",
                1 + flip);
  return text + line;
}

}  // namespace bench
