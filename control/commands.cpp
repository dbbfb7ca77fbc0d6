#include "commands.hpp"

#include <charconv>
#include <chrono>
#include <thread>

#include "counters_json.hpp"
#include "memory_budget.hpp"
#include "output_file.hpp"
#include "pipeline.hpp"
#include "rule_listing.hpp"
#include "rules_loader.hpp"

namespace sluice::ctl {

namespace {

Error usage_error(CommandContext& c, std::string message) {
  *c.failure = Failure::usage;
  return make_error(std::move(message));
}

Error runtime_error(CommandContext& c, const Error& e) {
  *c.failure = Failure::runtime;
  return e;
}

void print(CommandContext& c, const std::string& text) {
  std::fputs(text.c_str(), c.out);
  std::fflush(c.out);
}

// "--watch 0.5": seconds as a decimal, at least 1 ms.
bool parse_seconds(const std::string& s, std::chrono::milliseconds* out) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !(v >= 0.001) || v > 86400) return false;
  *out = std::chrono::milliseconds(static_cast<int64_t>(v * 1000));
  return true;
}

bool parse_count(const std::string& s, uint64_t* out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out != 0;
}

// The live dataplane's counters outside the rules, under the rules table, names as in the
// report: "dataplane: rx_packets 10  tx_packets 9  ...".
std::string dataplane_line(const CountersSnapshot& snap) {
  if (snap.dataplane.empty()) return "";
  std::string out = "dataplane:";
  for (const NamedCounter& n : snap.dataplane) out += "  " + n.name + " " + std::to_string(n.value);
  return out + "\n";
}

// ... and as REPORT.json's "dataplane" object holds them (its totals).
std::string stats_json(const CountersSnapshot& snap) {
  if (snap.dataplane.empty()) return counters_to_json(snap);
  std::string object = "{";
  for (const NamedCounter& n : snap.dataplane)
    object += (object.size() > 1 ? ", " : "") + json_quote(n.name) + ": " + std::to_string(n.value);
  return counters_to_json(snap, {{"dataplane", object + "}"}});
}

Status run_stats(CommandContext& c) {
  bool json = false, watch = false;
  auto interval = std::chrono::milliseconds(1000);
  uint64_t count = 0;  // 0: until interrupted
  for (size_t i = 0; i < c.args.size(); ++i) {
    const std::string& a = c.args[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--watch") {
      watch = true;
      if (i + 1 < c.args.size() && c.args[i + 1].rfind("--", 0) != 0 &&
          !parse_seconds(c.args[++i], &interval))
        return usage_error(c, "stats --watch: not a number of seconds (0.001 to 86400): " + c.args[i]);
    } else if (a == "--count") {
      if (i + 1 >= c.args.size() || !parse_count(c.args[++i], &count))
        return usage_error(c, "stats --count: needs a number of reports above 0");
    } else {
      return usage_error(c, "stats: unknown argument " + a);
    }
  }
  if (count != 0 && !watch) return usage_error(c, "stats --count: only with --watch");
  if (!watch) count = 1;
  for (uint64_t n = 0; count == 0 || n < count; ++n) {
    if (n != 0) std::this_thread::sleep_for(interval);
    auto snap = c.backend->stats();
    if (!snap) return runtime_error(c, snap.error());
    print(c, json ? stats_json(*snap)
                  : counters_to_table(*snap) + dataplane_line(*snap) + (watch ? "\n" : ""));
  }
  return Ok{};
}

Result<RuleSet> running_rules(CommandContext& c) {
  auto rules = c.backend->rules();
  if (!rules) return runtime_error(c, rules.error());
  return rules;
}

Status run_rule_list(CommandContext& c) {
  if (!c.args.empty()) return usage_error(c, "rule list: takes no arguments");
  auto rules = running_rules(c);
  if (!rules) return rules.error();
  print(c, rule_listing(*rules));
  return Ok{};
}

Status run_rule_show(CommandContext& c) {
  if (c.args.size() != 1) return usage_error(c, "rule show: needs one rule name");
  auto rules = running_rules(c);
  if (!rules) return rules.error();
  for (const Rule& r : rules->rules) {
    if (r.name == c.args[0]) {
      print(c, dump_rule_yaml(r));
      return Ok{};
    }
  }
  return usage_error(c, "rule show: no rule named \"" + c.args[0] + "\"");
}

Status run_config_check(CommandContext& c) {
  if (c.args.size() != 1) return usage_error(c, "config check: needs one rules file");
  auto rules = load_rules_file(c.args[0]);
  if (!rules) return usage_error(c, rules.error().message);
  // The flow tables sluiced would allocate at its default capacity (it may be given another
  // with --flows), so that an operator can compare them with the machine's memory first.
  const uint64_t per_rule = PipelineOptions{}.default_max_flows;
  FlowMemory mem = flow_table_memory(*rules, per_rule);
  std::string tables = mem.flows == 0 ? "no flow tables (no keyed rules)"
                                      : "flow tables " + format_memory_size(mem.bytes) + " for " +
                                            std::to_string(mem.flows) + " flows (" +
                                            std::to_string(per_rule) +
                                            " per keyed rule without max-flows)";
  print(c, c.args[0] + ": ok, " + std::to_string(rules->rules.size()) + " rule(s), default " +
               format_action(rules->default_action) + "; " + tables + "\n");
  return Ok{};
}

Status run_config_save(CommandContext& c) {
  if (c.args.size() != 1) return usage_error(c, "config save: needs one file to write");
  if (c.args[0].empty()) return usage_error(c, "config save: the file name is empty");
  // A link, directory or device the file must not replace: refused before asking sluiced.
  if (Status s = check_outputs({}, {{"config save", c.args[0]}}); !s)
    return usage_error(c, s.error().message);
  auto rules = running_rules(c);
  if (!rules) return rules.error();
  if (Status s = write_file_atomically(c.args[0], dump_rules_yaml(*rules)); !s)
    return runtime_error(c, s.error());
  print(c, c.args[0] + ": saved " + std::to_string(rules->rules.size()) + " rule(s)\n");
  return Ok{};
}

constexpr const char* kNotYet =
    "not available in this build: sluiced's rules change only by restarting it with another "
    "--config";

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {{"stats"}, "[--json] [--watch [SECONDS] [--count N]]",
       "the counters of every rule, the default and the ports", true, run_stats},
      {{"rule", "list"}, "", "the running rules, one line each", true, run_rule_list},
      {{"rule", "show"}, "NAME", "one running rule, as in a rules file", true, run_rule_show},
      {{"config", "check"}, "FILE", "validates a rules file (no backend needed)", false,
       run_config_check},
      {{"config", "save"}, "FILE", "writes the running rules as a rules file", true,
       run_config_save},
      {{"rule", "add"}, "...", kNotYet, true, nullptr},
      {{"rule", "set"}, "...", kNotYet, true, nullptr},
      {{"rule", "del"}, "...", kNotYet, true, nullptr},
      {{"config", "load"}, "FILE", kNotYet, true, nullptr},
      {{"flows", "top"}, "N", "not available in this build", true, nullptr},
      {{"xdp", "attach"}, "IFACE", "not available in this build: the XDP backend is not built",
       false, nullptr},
      {{"xdp", "detach"}, "IFACE", "not available in this build: the XDP backend is not built",
       false, nullptr},
  };
  return table;
}

std::string command_name(const Command& c) {
  std::string name;
  for (const std::string& w : c.words) name += (name.empty() ? "" : " ") + w;
  return name;
}

const Command* find_command(const std::vector<std::string>& words, size_t* name_words) {
  for (const Command& c : commands()) {
    if (words.size() < c.words.size()) continue;
    bool match = true;
    for (size_t i = 0; i < c.words.size(); ++i) match = match && words[i] == c.words[i];
    if (match) {
      *name_words = c.words.size();
      return &c;
    }
  }
  return nullptr;
}

std::string usage_text() {
  std::string out =
      "usage: sluicectl [--socket SOCK | --xdp IFACE] COMMAND\n"
      "  --socket SOCK   a running sluiced's control socket (sluiced ... -- --control SOCK);\n"
      "                  default " + std::string(kDefaultSocket) + "\n"
      "  --xdp IFACE     the XDP backend on IFACE (not available in this build)\n"
      "commands:\n";
  for (const Command& c : commands()) {
    if (c.run == nullptr) continue;
    out += "  " + command_name(c) + (c.usage.empty() ? "" : " " + c.usage) + "\n      " + c.summary + "\n";
  }
  std::string missing;
  for (const Command& c : commands()) {
    if (c.run != nullptr) continue;
    missing += (missing.empty() ? "" : ", ") + command_name(c);
  }
  out += "not available in this build: " + missing + "\n" +
         "exit codes: 0 success, 1 runtime failure, 2 bad usage or invalid input\n";
  return out;
}

}  // namespace sluice::ctl
