// `sluicectl rule list`: one line per rule (name, what it matches, key, limiter, action) and
// the default action; the spellings are the rules file's, so a line reads like the file.
#pragma once

#include <string>

#include "rules.hpp"

namespace sluice::ctl {

std::string rule_listing(const RuleSet& rules);

}  // namespace sluice::ctl
