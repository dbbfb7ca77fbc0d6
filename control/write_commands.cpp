// sluicectl's commands that change the running rules, and `flows top`. Each write prints
// what changed, rule by rule (format_rules_diff), and the generation it made.
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "command_parts.hpp"
#include "control_frame.hpp"
#include "text_table.hpp"

namespace sluice::ctl {

namespace {

void declare_write(CLI::App& sub, CommandArgs& a) {
  sub.add_option("--expect-generation", a.expect_generation,
                 "refuse unless the running rules are still at generation G (each write prints the one it made)");
}

// A rules text from FILE or stdin ("-"), at most what one request carries.
Result<std::string> read_text(CommandContext& c, const std::string& file) {
  const bool stdin_text = file == "-";
  std::FILE* f = stdin_text ? c.in : std::fopen(file.c_str(), "rb");
  if (f == nullptr)
    return Result<std::string>(invalid_input(file + ": cannot open: " + std::strerror(errno)));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > wire::kMaxFrameBytes - 4096) break;
  }
  const bool bad = std::ferror(f) != 0;
  if (!stdin_text) std::fclose(f);
  if (bad) return Result<std::string>(invalid_input(file + ": cannot read"));
  if (text.size() > wire::kMaxFrameBytes - 4096)
    return Result<std::string>(invalid_input(file + ": larger than a request may carry (16 MiB)"));
  return text;
}

std::string display_name(const std::string& file) { return file == "-" ? "<stdin>" : file; }

Status print_change(CommandContext& c, const Result<AppliedChange>& a) {
  if (!a) return failed(a);
  print(c, format_rules_diff(a->diff) + "generation " + std::to_string(a->generation) + "\n");
  return Ok{};
}

WriteOptions write_options(const CommandArgs& a) { return WriteOptions{a.expect_generation}; }

}  // namespace

void declare_rule_add(CLI::App& sub, CommandArgs& a) {
  sub.add_option("FILE", a.file, "rules text: a file with rules: only, a list of rules or one rule; - for stdin")
      ->required();
  sub.add_option("--before", a.before, "insert before this rule (default: at the end)");
  declare_write(sub, a);
}

Status run_rule_add(CommandContext& c) {
  auto text = read_text(c, c.args->file);
  if (!text) return failed(text);
  return print_change(c, c.backend->add_rules(*text, display_name(c.args->file),
                                              c.args->before, write_options(*c.args)));
}

void declare_rule_set(CLI::App& sub, CommandArgs& a) {
  sub.add_option("NAME", a.name, "the rule to change")->required();
  sub.add_option("--rate", a.rate, "new rate, as in a rules file (1000pps, 10Mbit, ...)");
  sub.add_option("--burst", a.burst, "new burst (packets, or bytes: 64KiB)");
  sub.add_option("--action", a.action, "drop | pass | mark-dscp:<0-63, CSn, AFxy, EF>");
  sub.add_option("--parent", a.parent, "the aggregate rule also charged (--unset parent for none)");
  sub.add_option("--max-flows", a.max_flows, "cap on the buckets it may hold");
  sub.add_option("--idle-timeout", a.idle_timeout, "a flow's idle time before it expires (60s)");
  sub.add_option("--max-delay", a.max_delay, "leaky-bucket: the longest a packet may wait");
  sub.add_option("--field", a.set_fields, "any other rules-file field: KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  sub.add_option("--unset", a.unset_fields, "removes an optional field (repeatable)")->allow_extra_args(false);
  declare_write(sub, a);
}

Status run_rule_set(CommandContext& c) {
  const CommandArgs& a = *c.args;
  std::map<std::string, std::optional<std::string>> fields;
  const std::pair<const char*, const std::string*> named[] = {
      {"rate", &a.rate},         {"burst", &a.burst},
      {"action", &a.action},     {"max-flows", &a.max_flows},
      {"idle-timeout", &a.idle_timeout}, {"max-delay", &a.max_delay}};
  for (const auto& [key, value] : named)
    if (!value->empty()) fields[key] = *value;
  if (!a.parent.empty()) fields["parent"] = a.parent;
  for (const std::string& kv : a.set_fields) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      return usage_error("rule set --field: expected KEY=VALUE, got \"" + kv + "\"");
    fields[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& key : a.unset_fields) fields[key] = std::nullopt;
  if (fields.empty())
    return usage_error("rule set " + a.name + ": nothing to change (give --rate, --burst, --action, ...)");
  return print_change(c, c.backend->set_rule(a.name, fields, write_options(a)));
}

void declare_rule_del(CLI::App& sub, CommandArgs& a) {
  sub.add_option("NAME", a.name, "the rule to remove")->required();
  declare_write(sub, a);
}

Status run_rule_del(CommandContext& c) {
  return print_change(c, c.backend->delete_rule(c.args->name, write_options(*c.args)));
}

void declare_config_load(CLI::App& sub, CommandArgs& a) {
  sub.add_option("FILE", a.file, "a whole rules file (- for stdin)")->required();
  declare_write(sub, a);
}

Status run_config_load(CommandContext& c) {
  auto text = read_text(c, c.args->file);
  if (!text) return failed(text);
  return print_change(c, c.backend->load_config(*text, display_name(c.args->file),
                                                write_options(*c.args)));
}

void declare_config_diff(CLI::App& sub, CommandArgs& a) {
  sub.add_option("FILE", a.file, "a whole rules file (- for stdin)")->required();
}

Status run_config_diff(CommandContext& c) {
  auto text = read_text(c, c.args->file);
  if (!text) return failed(text);
  auto diff = c.backend->diff_config(*text, display_name(c.args->file));
  if (!diff) return failed(diff);
  print(c, format_rules_diff(*diff));
  return Ok{};
}

void declare_flows_top(CLI::App& sub, CommandArgs& a) {
  sub.add_option("N", a.count, "how many flows")->required()->check(CLI::Range(uint64_t{1}, uint64_t{10000}));
  sub.add_option("--rule", a.rule, "only this rule's flows");
  sub.add_option("--by", a.by, "order by packets (pps) or bits (bps) per second")
      ->check(CLI::IsMember({"pps", "bps"}));
}

Status run_flows_top(CommandContext& c) {
  TopFlowsQuery q;
  q.count = size_t(c.args->count);
  q.rule = c.args->rule;
  q.by_bytes = c.args->by == "bps";
  auto flows = c.backend->top_flows(q);
  if (!flows) return failed(flows);
  std::vector<std::vector<std::string>> rows = {{"rule", "key", "pps", "bit/s"}};
  for (const FlowRate& f : *flows) {
    char pps[32], bps[32];
    std::snprintf(pps, sizeof pps, "%.1f", f.packets_per_sec);
    std::snprintf(bps, sizeof bps, "%.0f", f.bits_per_sec);
    rows.push_back({f.rule, f.key, pps, bps});
  }
  print(c, flows->empty() ? std::string("no flows\n") : align_columns(rows, 2));
  return Ok{};
}

}  // namespace sluice::ctl
