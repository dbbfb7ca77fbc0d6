// `sluicectl stats --watch`: the rates per second between two successive reads of the
// counters, per rule, the default and each port, beside the totals.
#pragma once

#include <string>

#include "counters.hpp"

namespace sluice::ctl {

// Rates over `seconds` from `before` to `after`; rules known by name (a rule added in between
// counts from zero, a counter that went backwards, e.g. a rule re-added, shows 0).
std::string rates_table(const CountersSnapshot& before, const CountersSnapshot& after,
                        double seconds);

}  // namespace sluice::ctl
