#include "commands.hpp"
#ifdef SLUICE_HAVE_XDP
#include "xdp_commands.hpp"
#endif

#include <chrono>
#include <thread>

#include "command_parts.hpp"
#include "counters_json.hpp"
#include "memory_budget.hpp"
#include "output_file.hpp"
#include "pipeline.hpp"
#include "rule_listing.hpp"
#include "rules_loader.hpp"
#include "stats_rates.hpp"

namespace sluice::ctl {

namespace {

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

// CLI::Range(0.001, 86400.0), and NaN refused too: it fails neither of Range's comparisons.
const CLI::Validator kWatchSeconds(
    [](std::string& text) -> std::string {
      double seconds = 0;
      if (!CLI::detail::lexical_cast(text, seconds) || !(seconds >= 0.001 && seconds <= 86400.0))
        return "Value " + text + " not in range 0.001 to 86400";
      return {};
    },
    "FLOAT in [0.001 - 86400]");

void declare_stats(CLI::App& sub, CommandArgs& a) {
  sub.add_flag("--json", a.json, "the counters as REPORT.json holds them");
  sub.add_option("--watch", a.watch_seconds,
                 "report every SECONDS (default 1), with the rates per second since the last")
      ->expected(0, 1)
      ->default_str("1")
      ->check(kWatchSeconds);
  sub.add_option("--count", a.count, "with --watch: stop after N reports")
      ->check(CLI::Range(uint64_t{1}, ~uint64_t{0}));
}

Status run_stats(CommandContext& c) {
  const CommandArgs& a = *c.args;
  const bool watch = a.watch_seconds > 0;
  if (a.count != 0 && !watch) return usage_error("stats --count: only with --watch");
  const auto interval = std::chrono::milliseconds(int64_t(a.watch_seconds * 1000));
  const uint64_t count = watch ? a.count : 1;  // 0: until interrupted
  std::optional<CountersSnapshot> last;
  auto last_at = std::chrono::steady_clock::now();
  for (uint64_t n = 0; count == 0 || n < count; ++n) {
    if (n != 0) std::this_thread::sleep_for(interval);
    auto snap = c.backend->stats();
    if (!snap) return failed(snap);
    const auto at = std::chrono::steady_clock::now();
    const double seconds = std::chrono::duration<double>(at - last_at).count();
    if (a.json) {
      print(c, stats_json(*snap));
    } else {
      std::string text = counters_to_table(*snap) + dataplane_line(*snap);
      if (watch && last) text += rates_table(*last, *snap, seconds);
      print(c, text + (watch ? "\n" : ""));
    }
    last = *snap;
    last_at = at;
  }
  return Ok{};
}

Status run_rule_list(CommandContext& c) {
  auto rules = c.backend->rules();
  if (!rules) return failed(rules);
  print(c, rule_listing(*rules));
  return Ok{};
}

void declare_name(CLI::App& sub, CommandArgs& a) {
  sub.add_option("NAME", a.name, "the rule's name")->required();
}

void declare_file(CLI::App& sub, CommandArgs& a) {
  sub.add_option("FILE", a.file, "a rules file")->required();
}

Status run_rule_show(CommandContext& c) {
  auto rules = c.backend->rules();
  if (!rules) return failed(rules);
  for (const Rule& r : rules->rules) {
    if (r.name == c.args->name) {
      print(c, dump_rule_yaml(r));
      return Ok{};
    }
  }
  return usage_error("rule show: no rule named \"" + c.args->name + "\"");
}

Status run_config_check(CommandContext& c) {
  auto rules = load_rules_file(c.args->file);
  if (!rules) return usage_error(rules.error().message);
  // The flow tables sluiced would allocate at its default capacity (it may be given another
  // with --flows), so that an operator can compare them with the machine's memory first.
  const uint64_t per_rule = PipelineOptions{}.default_max_flows;
  FlowMemory mem = flow_table_memory(*rules, per_rule);
  std::string tables = mem.flows == 0 ? "no flow tables (no keyed rules)"
                                      : "flow tables " + format_memory_size(mem.bytes) + " for " +
                                            std::to_string(mem.flows) + " flows (" +
                                            std::to_string(per_rule) +
                                            " per keyed rule without max-flows)";
  if (c.choice != nullptr && !c.choice->xdp_iface.empty()) {
    // The XDP backend runs fewer kinds of rule (no shaping, at most 256) and its tables cost
    // more a flow: ok here must mean that `--xdp IFACE config load` takes the file.
#ifdef SLUICE_HAVE_XDP
    auto xdp = xdp_check_rules(*rules);
    // Exit 2, as `--xdp IFACE config load` refuses it (XdpCtlBackend: the file is at fault).
    if (!xdp) return usage_error(c.args->file + ": " + xdp.error().message);
    tables = *xdp;
#else
    return usage_error("--xdp " + c.choice->xdp_iface +
                       ": the XDP backend is not available in this build");
#endif
  }
  print(c, c.args->file + ": ok, " + std::to_string(rules->rules.size()) + " rule(s), default " +
               format_action(rules->default_action) + "; " + tables + "\n");
  return Ok{};
}

Status run_config_save(CommandContext& c) {
  if (c.args->file.empty()) return usage_error("config save: the file name is empty");
  // A link, directory or device the file must not replace: refused before asking sluiced.
  if (Status s = check_outputs({}, {{"config save", c.args->file}}); !s)
    return usage_error(s.error().message);
  auto rules = c.backend->rules();
  if (!rules) return failed(rules);
  if (Status s = write_file_atomically(c.args->file, dump_rules_yaml(*rules)); !s)
    return Status(s.error());
  print(c, c.args->file + ": saved " + std::to_string(rules->rules.size()) + " rule(s)\n");
  return Ok{};
}

void declare_iface(CLI::App& sub, CommandArgs& a) {
  sub.add_option("IFACE", a.name, "the network interface")->required();
}

void declare_xdp_attach(CLI::App& sub, CommandArgs& a) {
  declare_iface(sub, a);
  sub.add_option("--mode", a.by, "native or skb")->check(CLI::IsMember({"native", "skb"}));
  sub.add_option("--config", a.file, "the rules file to run")->required();
}

void declare_nothing(CLI::App&, CommandArgs&) {}

[[maybe_unused]] constexpr const char* kNoXdp =
    "not available in this build: the XDP backend is not built";

}  // namespace

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {{"stats"}, "the counters of every rule, the default and the ports", true, declare_stats,
       run_stats},
      {{"rule", "list"}, "the running rules, one line each", true, declare_nothing, run_rule_list},
      {{"rule", "show"}, "one running rule, as in a rules file", true, declare_name, run_rule_show},
      {{"rule", "add"}, "adds the rules of FILE (- for stdin) to the running ones", true,
       declare_rule_add, run_rule_add},
      {{"rule", "set"}, "changes fields of a running rule (buckets kept where SPEC §4 says)",
       true, declare_rule_set, run_rule_set},
      {{"rule", "del"}, "removes a running rule", true, declare_rule_del, run_rule_del},
      {{"config", "check"}, "validates a rules file (no backend needed)", false, declare_file,
       run_config_check},
      {{"config", "save"}, "writes the running rules as a rules file", true, declare_file,
       run_config_save},
      {{"config", "load"}, "runs the rules of FILE instead, all or nothing", true,
       declare_config_load, run_config_load},
      {{"config", "diff"}, "what config load FILE would change, rule by rule", true,
       declare_config_diff, run_config_diff},
      {{"flows", "top"}, "the N busiest flows now, with their rates", true, declare_flows_top,
       run_flows_top},
#ifdef SLUICE_HAVE_XDP
      {{"xdp", "attach"}, "puts the XDP program with the rules of --config FILE on IFACE", false,
       declare_xdp_attach, run_xdp_attach},
      {{"xdp", "detach"}, "takes sluice's XDP program off IFACE, and its pinned maps", false,
       declare_iface, run_xdp_detach},
#else
      {{"xdp", "attach"}, kNoXdp, false, declare_xdp_attach, nullptr},
      {{"xdp", "detach"}, kNoXdp, false, declare_iface, nullptr},
#endif
  };
  return table;
}

std::string command_word_error(const std::vector<std::string>& args) {
  std::vector<std::string> words;
  for (size_t i = 0; i < args.size() && words.size() < 2; ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help" || a == "--help-all") return "";
    if (a.rfind("-", 0) == 0) {
      if (words.empty() && (a == "--socket" || a == "--xdp")) {
        if (i + 1 == args.size()) return "";  // CLI11 says it needs a value
        ++i;                                  // its value
      }
      if (words.empty()) continue;
      break;  // the command's own options
    }
    words.push_back(a);
  }
  if (words.empty()) return "no command (sluicectl --help lists them)";
  std::string group_commands;
  for (const Command& c : commands()) {
    if (c.words[0] != words[0]) continue;
    if (c.words.size() == 1) return "";
    if (words.size() == 2 && c.words[1] == words[1]) return "";
    group_commands += (group_commands.empty() ? "" : ", ") + c.words[1];
  }
  if (group_commands.empty()) return "unknown command \"" + words[0] + "\" (sluicectl --help lists them)";
  if (words.size() == 1) return words[0] + ": needs a command: " + group_commands;
  return "unknown command \"" + words[0] + " " + words[1] + "\" (" + words[0] + " takes " +
         group_commands + ")";
}

std::unique_ptr<Cli> make_cli() {
  auto cli = std::make_unique<Cli>();
  CLI::App& app = cli->app;
  app.footer(
      "exit codes: 0 success, 1 runtime failure (no sluiced listening, it cannot do it, the rules "
      "changed meanwhile), 2 bad usage or invalid input (rules errors as FILE:LINE)");
  app.add_option("--socket", cli->backend.socket_path,
                 "a running sluiced's control socket (sluiced ... -- --control SOCK)")
      ->default_str(kDefaultSocket);
#ifdef SLUICE_HAVE_XDP
  app.add_option("--xdp", cli->backend.xdp_iface,
                 "the XDP backend on IFACE (attached with `sluicectl xdp attach IFACE`)");
#else
  app.add_option("--xdp", cli->backend.xdp_iface, "the XDP backend on IFACE (not available in this build)");
#endif
  app.require_subcommand(1);
  std::map<std::string, CLI::App*> groups;
  for (const Command& c : commands()) {
    CLI::App* parent = &app;
    if (c.words.size() == 2) {
      CLI::App*& g = groups[c.words[0]];
      if (g == nullptr) {
        g = app.add_subcommand(c.words[0], c.words[0] + " commands");
        g->require_subcommand(1);
      }
      parent = g;
    }
    CLI::App* sub = parent->add_subcommand(c.words.back(), c.summary);
    c.declare(*sub, cli->args);
    sub->final_callback([raw = cli.get(), cmd = &c] { raw->chosen = cmd; });
  }
  groups["rule"]->description("the running rules: list, show, add, set, del");
  groups["config"]->description("rules files: check, save, load, diff");
  groups["flows"]->description("the busiest flows: top");
#ifdef SLUICE_HAVE_XDP
  groups["xdp"]->description("the XDP backend: attach, detach");
#else
  groups["xdp"]->description("the XDP backend: attach, detach (not available in this build)");
#endif
  return cli;
}

}  // namespace sluice::ctl
