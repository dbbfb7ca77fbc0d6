#include "stats_rates.hpp"

#include <cstdio>
#include <map>
#include <vector>

#include "text_table.hpp"

namespace sluice::ctl {

namespace {

std::string rate(uint64_t before, uint64_t after, double seconds) {
  const double r = after >= before && seconds > 0 ? double(after - before) / seconds : 0;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", r);
  return buf;
}

}  // namespace

std::string rates_table(const CountersSnapshot& before, const CountersSnapshot& after,
                        double seconds) {
  std::map<std::string, const RuleSnapshot*> old;
  for (const RuleSnapshot& r : before.rules) old[r.name] = &r;
  std::vector<std::vector<std::string>> rows = {
      {"per second", "matched/s", "passed/s", "dropped/s", "marked/s", "delayed/s", "bit/s"}};
  const RuleSnapshot zero;
  auto row = [&](const RuleSnapshot& now, const RuleSnapshot& was, const std::string& name) {
    std::vector<std::string> cells = {name};
    for (Outcome o : {Outcome::matched, Outcome::passed, Outcome::dropped, Outcome::marked,
                      Outcome::delayed})
      cells.push_back(rate(was.traffic.pkts(o), now.traffic.pkts(o), seconds));
    const uint64_t b0 = was.traffic.byts(Outcome::matched) * 8, b1 = now.traffic.byts(Outcome::matched) * 8;
    cells.push_back(rate(b0, b1, seconds));
    rows.push_back(std::move(cells));
  };
  for (const RuleSnapshot& r : after.rules) {
    auto it = old.find(r.name);
    row(r, it == old.end() ? zero : *it->second, r.name);
  }
  row(after.default_rule, before.default_rule, "default");
  std::string out = align_columns(rows);
  for (const PortSnapshot& p : after.ports) {
    PortSnapshot was{};
    for (const PortSnapshot& q : before.ports)
      if (q.port == p.port) was = q;
    out += "port " + std::to_string(p.port) + ": rx/s " + rate(was.rx_packets, p.rx_packets, seconds) +
           "  tx/s " + rate(was.tx_packets, p.tx_packets, seconds) + "  missed/s " +
           rate(was.missed_packets, p.missed_packets, seconds) + "\n";
  }
  return out;
}

}  // namespace sluice::ctl
