// A CountersSnapshot as plain text, for the control socket (sluiced -> sluicectl), which then
// renders it the way it renders any backend's counters (counters_json.hpp). One line each:
//
//   rule NAME KEY VALUE KEY VALUE ...     (the rules in order; keys of for_each_rule_counter)
//   default default KEY VALUE ...
//   port N KEY VALUE ...                  (keys of for_each_port_counter)
//   dataplane counters KEY VALUE ...      (CountersSnapshot::dataplane, live mode only)
//   dataplane gauges KEY VALUE ...
//
// Rule names are words (rules_values.cpp: valid_name), so a space ends them. The decoder
// rejects a malformed line with its number; keys it does not know are skipped, so a newer
// sluiced can add counters without breaking an older sluicectl.
#pragma once

#include <string>
#include <string_view>

#include "counters.hpp"
#include "result.hpp"

namespace sluice {

std::string encode_counters(const CountersSnapshot& snapshot);
Result<CountersSnapshot> decode_counters(std::string_view text);

}  // namespace sluice
