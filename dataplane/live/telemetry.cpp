#include "telemetry.hpp"

#include <rte_telemetry.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "counters_json.hpp"

namespace sluice {

namespace {

// Where the commands take the counters from. The telemetry thread outlives the dataplane
// (DPDK 22.11 cannot unregister a command) and even main(): it is never joined, so this is
// allocated once and never destroyed, and a request during exit still finds the source whole
// (finished by then: it answers the final counters without waiting).
struct Published {
  std::mutex mu;
  std::shared_ptr<CountersSource> source = std::make_shared<CountersSource>();
};

Published& published_source() {
  static Published* p = new Published;
  return *p;
}

constexpr std::chrono::milliseconds kCountersMaxAge{20};
constexpr std::chrono::milliseconds kCountersPatience{250};  // the telemetry thread's own

std::shared_ptr<const CountersSnapshot> take() {
  Published& pub = published_source();
  std::shared_ptr<CountersSource> source;
  {
    std::lock_guard lock(pub.mu);
    source = pub.source;
  }
  return source->get(kCountersMaxAge, kCountersPatience).snap;
}

// Rule names are [A-Za-z0-9_.-]{1,63} (the loader checks): valid telemetry strings as they
// are, with nothing to escape in DPDK's JSON and within RTE_TEL_MAX_STRING_LEN.
static_assert(RTE_TEL_MAX_STRING_LEN > 63);

int list_rules(const char*, const char*, rte_tel_data* d) {
  const auto snap = take();
  if (!snap) return -EAGAIN;  // the EAL is up, the rules not yet: null
  rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
  for (const RuleSnapshot& r : snap->rules) rte_tel_data_add_array_string(d, r.name.c_str());
  rte_tel_data_add_array_string(d, snap->default_rule.name.c_str());
  return 0;
}

int show_rule(const char*, const char* params, rte_tel_data* d) {
  if (params == nullptr || *params == '\0') return -EINVAL;
  const auto snap = take();
  if (!snap) return -EAGAIN;
  // The first rule of that name; a rule named "default" shadows the default action's counters.
  const RuleSnapshot* rule = nullptr;
  for (const RuleSnapshot& r : snap->rules) {
    if (r.name == params) {
      rule = &r;
      break;
    }
  }
  if (rule == nullptr && snap->default_rule.name == params) rule = &snap->default_rule;
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

void telemetry_use_counters(std::shared_ptr<CountersSource> source) {
  Published& pub = published_source();
  std::lock_guard lock(pub.mu);
  pub.source = std::move(source);
}

}  // namespace sluice
