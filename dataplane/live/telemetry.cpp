#include "telemetry.hpp"

#include <rte_telemetry.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "counters_json.hpp"

namespace sluice {

namespace {

// The last published counters. The telemetry thread outlives the dataplane (DPDK 22.11
// cannot unregister a command) and even main(): it is never joined, so this is allocated
// once and never destroyed, and a request during exit still finds it whole.
struct Published {
  std::mutex mu;
  CountersSnapshot snap;
  bool ready = false;
};

Published& published() {
  static Published* p = new Published;
  return *p;
}

// Rule names are [A-Za-z0-9_.-]{1,63} (the loader checks): valid telemetry strings as they
// are, with nothing to escape in DPDK's JSON and within RTE_TEL_MAX_STRING_LEN.
static_assert(RTE_TEL_MAX_STRING_LEN > 63);

int list_rules(const char*, const char*, rte_tel_data* d) {
  Published& pub = published();
  std::lock_guard lock(pub.mu);
  if (!pub.ready) return -EAGAIN;  // the EAL is up, the rules not yet: null
  rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
  for (const RuleSnapshot& r : pub.snap.rules) rte_tel_data_add_array_string(d, r.name.c_str());
  rte_tel_data_add_array_string(d, pub.snap.default_rule.name.c_str());
  return 0;
}

int show_rule(const char*, const char* params, rte_tel_data* d) {
  if (params == nullptr || *params == '\0') return -EINVAL;
  Published& pub = published();
  std::lock_guard lock(pub.mu);
  if (!pub.ready) return -EAGAIN;
  // The first rule of that name; a rule named "default" shadows the default action's counters.
  const RuleSnapshot* rule = nullptr;
  for (const RuleSnapshot& r : pub.snap.rules) {
    if (r.name == params) {
      rule = &r;
      break;
    }
  }
  if (rule == nullptr && pub.snap.default_rule.name == params) rule = &pub.snap.default_rule;
  if (rule == nullptr) return -ENOENT;  // DPDK answers {"/sluice/rule": null}
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_string(d, "name", rule->name.c_str());
  for_each_rule_counter(*rule, [&](const char* key, uint64_t value) {
    rte_tel_data_add_dict_u64(d, key, value);
  });
  return 0;
}

}  // namespace

Status register_telemetry() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] {
    rc = rte_telemetry_register_cmd("/sluice/rules", list_rules,
                                    "Rule names, in rules-file order, then \"default\". No parameters");
    if (rc == 0)
      rc = rte_telemetry_register_cmd("/sluice/rule", show_rule,
                                      "One rule's counters, as in REPORT.json. Parameter: rule name");
  });
  if (rc != 0) return make_error(std::string("cannot register telemetry commands: ") + std::strerror(-rc));
  return Ok{};
}

void publish_telemetry(CountersSnapshot snap) {
  Published& pub = published();
  std::lock_guard lock(pub.mu);
  pub.snap = std::move(snap);
  pub.ready = true;
}

}  // namespace sluice
