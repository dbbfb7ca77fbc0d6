#include "cli_args.hpp"

#include <sys/un.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <memory>

#include "rate.hpp"

namespace sluice {

namespace {

// Which command shape an option belongs to.
enum ModeBits : unsigned { kLive = 1, kReplay = 2 };

// One table of sluiced's own options: the parsers of both modes and --help are made from it.
// `value` names what the option takes (nullptr: a flag); `help` is one paragraph, wrapped by
// wrap() below.
struct OptionSpec {
  const char* name;
  const char* value;
  unsigned modes;
  std::string help;
};

const std::vector<OptionSpec>& option_table() {
  static const std::vector<OptionSpec> table = {
      {"config", "RULES.yaml", kLive | kReplay, "the rules file (sluice-rules(5)); required"},
      {"report", "REPORT.json", kLive | kReplay,
       "the counters as JSON (SPEC §5): live, written at shutdown if given; replay: required"},
      {"stats-interval", "S", kLive, "prints the counters table every S seconds (0.001-86400)"},
      {"flows", "N", kLive,
       "flow capacity of each keyed rule without max-flows (default 65536; 32 bytes per flow, "
       "48 for meters, allocated at start)"},
      {"mbufs", "N", kLive,
       "the packet-buffer pool (default: what the descriptor rings, TX buffers, shaper and "
       "caches need, ~8k mbufs of ~2.3 KiB of EAL memory); give more for devices that hold "
       "many (net_pcap infinite_rx=1 keeps the whole trace). At least that need, at most " +
           std::to_string(kMaxMbufs)},
      {"mbuf-size", "BYTES", kLive,
       "data room of each mbuf, headroom included (" + std::to_string(kMinMbufSize) + "-" +
           std::to_string(kMaxMbufSize) +
           ", default " + std::to_string(kDefaultMbufSize) + ": one 2 KiB frame). Smaller mbufs take less EAL memory per packet a "
           "device holds; longer frames then arrive as chains, classified and charged whole"},
      {"burst", "N", kLive,
       "packets per RX burst (1-" + std::to_string(kMaxCliBurst) +
           ", default 32): a burst is classified and its flow-table lines fetched before any "
           "of it is charged, so larger bursts hide more memory latency with many flows, at "
           "some latency per packet"},
      {"max-delay", "DURATION", kLive,
       "the longest max-delay a shaping rule may have, at start or added while sluiced runs: "
       "the horizon of the workers' timing wheels (1ms-60s, e.g. 2s; default: the start-up "
       "rules' longest max-delay, at least 100ms). A shaping rule with a longer one is refused"},
      {"control", "SOCK", kLive,
       "serves sluicectl on a Unix socket (mode 0600; its directory is made if missing): "
       "`sluicectl --socket SOCK stats`, `rule list`, ..."},
      {"metrics", "HOST:PORT", kLive,
       "serves the counters for Prometheus at http://HOST:PORT/metrics (PORT 0: a free "
       "port, logged)"},
      {"replay", "IN.pcap", kReplay,
       "the trace to run, each packet's capture time as the clock; required"},
      {"out", "OUT.pcap", kReplay,
       "the packets that left (shaped ones carry their departure time); required"},
      {"hash-seed", "N", kReplay,
       "fixes the flow-table hash (default: random per run), making OUT.pcap and REPORT.json "
       "reproducible"},
      {"stats", nullptr, kReplay, "also prints the per-rule counters as a table on stdout"},
  };
  return table;
}

// Words of `text` in lines of at most `width` characters, joined by "\n" (CLI11 indents each
// line of a description to its column).
std::string wrap(const std::string& text, size_t width) {
  std::string out, line, word;
  auto flush_word = [&] {
    if (word.empty()) return;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += (out.empty() ? "" : "\n") + line;
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') flush_word();
    else word += c;
  }
  flush_word();
  if (!line.empty()) out += (out.empty() ? "" : "\n") + line;
  return out;
}

// "--name=value" / "--name value" options of one mode, parsed by CLI11 from the table. The
// values are validated by the callers, which know each one's range and say it in their
// messages.
struct OptionList {
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;
  bool help = false;
};

Result<OptionList> parse_options(const std::vector<std::string>& args, unsigned mode) {
  OptionList out;
  CLI::App app;
  app.set_help_flag();  // ours below: help is a mode, not an exit from inside the parser
  app.add_flag("-h,--help", out.help);
  std::map<std::string, CLI::Option*> options;
  std::map<std::string, bool> flag_values;
  for (const OptionSpec& o : option_table()) {
    if ((o.modes & mode) == 0) continue;
    if (o.value) options[o.name] = app.add_option(std::string("--") + o.name, out.values[o.name]);
    else app.add_flag(std::string("--") + o.name, flag_values[o.name]);
  }
  try {
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them reversed
  } catch (const CLI::ArgumentMismatch& e) {
    // A value option given twice, or given no value.
    for (const auto& [name, opt] : options)
      if (std::string(e.what()).find("--" + name) != std::string::npos)
        return make_error(opt->count() > 1 ? "option '--" + name + "' given twice"
                                           : "option '--" + name + "' needs a value");
    return make_error(e.what());
  } catch (const CLI::ParseError& e) {
    return make_error(e.what());
  }
  for (auto it = out.values.begin(); it != out.values.end();) {
    if (options[it->first]->count() == 0) {
      it = out.values.erase(it);
      continue;
    }
    if (it->second.empty()) return make_error("option '--" + it->first + "' needs a non-empty value");
    ++it;
  }
  for (const auto& [f, set] : flag_values)
    if (set) out.flags[f] = true;
  return out;
}

Result<uint64_t> parse_u64(const std::string& name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 0);  // decimal or 0x...
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
    return make_error("option '--" + name + "': '" + text + "' is not an unsigned 64-bit number");
  return uint64_t(v);
}

// Seconds as a decimal ("2", "0.5"), to whole milliseconds: > 0 and at most a day.
Result<uint64_t> parse_interval_ms(const std::string& name, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double s = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !(s >= 0.001) || s > 86400)
    return make_error("option '--" + name + "': '" + text +
                      "' is not a number of seconds between 0.001 and 86400");
  return uint64_t(s * 1000 + 0.5);
}

// sockaddr_un::sun_path holds the path and its terminating NUL.
constexpr size_t kMaxSocketPathBytes = sizeof(sockaddr_un::sun_path) - 1;

// The most flows one keyed rule may be given: 32-48 B each (two slots per flow), so at most 192 GiB.
constexpr uint64_t kMaxFlows = uint64_t{1} << 32;

Result<CliArgs> parse_replay(const std::vector<std::string>& args) {
  auto opts = parse_options(args, kReplay);
  if (!opts) return opts.error();
  CliArgs cli;
  if (opts->help) {
    cli.mode = RunMode::help;
    return cli;
  }
  cli.mode = RunMode::replay;
  for (const char* required : {"replay", "out", "report", "config"}) {
    if (opts->values.count(required) == 0)
      return make_error(std::string("replay mode needs --") + required);
  }
  cli.replay.in_path = opts->values["replay"];
  cli.replay.out_path = opts->values["out"];
  cli.replay.report_path = opts->values["report"];
  cli.replay.config_path = opts->values["config"];
  cli.print_stats = opts->flags.count("stats") != 0;
  if (auto it = opts->values.find("hash-seed"); it != opts->values.end()) {
    auto seed = parse_u64("hash-seed", it->second);
    if (!seed) return seed.error();
    cli.replay.hash_seed = *seed;
  }
  return cli;
}

// Live mode: EAL arguments, then "--", then ours.
Result<CliArgs> parse_live(const std::vector<std::string>& args, const std::string& program) {
  CliArgs cli;
  cli.mode = RunMode::live;
  cli.eal_args.push_back(program);
  size_t i = 0;
  bool has_separator = false;
  for (; i < args.size(); ++i) {
    if (args[i] == "--") {
      has_separator = true;
      ++i;
      break;
    }
    if (args[i] == "--help" || args[i] == "-h") {
      cli.mode = RunMode::help;
      return cli;
    }
    cli.eal_args.push_back(args[i]);
  }
  if (!has_separator) {
    // No "--": everything is ours (no EAL arguments).
    cli.eal_args.resize(1);
    i = 0;
  }
  std::vector<std::string> ours(args.begin() + long(i), args.end());
  auto opts = parse_options(ours, kLive);
  if (!opts) return opts.error();
  if (opts->help) {
    cli.mode = RunMode::help;
    return cli;
  }
  if (opts->values.count("config") == 0) return make_error("missing --config RULES.yaml");
  cli.config_path = opts->values["config"];
  cli.control_socket = opts->values.count("control") ? opts->values["control"] : "";
  if (cli.control_socket.size() > kMaxSocketPathBytes)
    return make_error("option '--control': " + cli.control_socket + ": a socket path must be 1 to " +
                      std::to_string(kMaxSocketPathBytes) + " bytes long");
  cli.metrics_addr = opts->values.count("metrics") ? opts->values["metrics"] : "";
  cli.report_path = opts->values.count("report") ? opts->values["report"] : "";
  if (auto it = opts->values.find("stats-interval"); it != opts->values.end()) {
    auto ms = parse_interval_ms("stats-interval", it->second);
    if (!ms) return ms.error();
    cli.stats_interval_ms = *ms;
  }
  // Counts given as --NAME N, each with its range.
  auto ranged = [&](const char* name, uint64_t min, uint64_t max, auto&& store) -> Status {
    auto it = opts->values.find(name);
    if (it == opts->values.end()) return Ok{};
    auto n = parse_u64(name, it->second);
    if (!n) return n.error();
    if (*n < min || *n > max)
      return make_error(std::string("option '--") + name + "': " + it->second +
                        " is not between " + std::to_string(min) + " and " + std::to_string(max));
    store(*n);
    return Ok{};
  };
  auto count = [&](const char* name, uint64_t max, auto&& store) {
    return ranged(name, 1, max, store);
  };
  if (Status st = count("flows", kMaxFlows, [&](uint64_t n) { cli.flows = n; }); !st)
    return st.error();
  if (Status st = count("mbufs", kMaxMbufs, [&](uint64_t n) { cli.mbufs = n; }); !st)
    return st.error();
  if (Status st = ranged("mbuf-size", kMinMbufSize, kMaxMbufSize,
                         [&](uint64_t n) { cli.mbuf_size = uint32_t(n); });
      !st)
    return st.error();
  if (Status st = count("burst", kMaxCliBurst, [&](uint64_t n) { cli.burst = uint16_t(n); }); !st)
    return st.error();
  if (auto it = opts->values.find("max-delay"); it != opts->values.end()) {
    auto ns = parse_duration(it->second);
    if (!ns || *ns < kMinMaxDelayNs || *ns > kMaxMaxDelayNs)
      return make_error("option '--max-delay': '" + it->second +
                        "' is not a duration between 1ms and 60s");
    cli.max_delay_ns = *ns;
  }
  return cli;
}

bool mentions_replay(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    if (a == "--replay" || a.rfind("--replay=", 0) == 0) return true;
  return false;
}

}  // namespace

Result<CliArgs> parse_cli_args(int argc, const char* const* argv) {
  std::string program = argc > 0 ? argv[0] : "sluiced";
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  if (args.empty()) return make_error("no arguments");
  if (mentions_replay(args)) return parse_replay(args);
  return parse_live(args, program);
}

namespace {

// CLI11's help with our usage lines (two command shapes) in place of its one-line usage.
class SluicedFormatter final : public CLI::Formatter {
 public:
  std::string make_description(const CLI::App*) const override { return ""; }
  std::string make_usage(const CLI::App*, std::string program) const override {
    return "usage:\n"
           "  " + program + " [EAL args] -- --config RULES.yaml [LIVE OPTIONS]\n"
           "      the DPDK dataplane: forwards between port pairs 0<->1, 2<->3, ... (or back\n"
           "      out of the only port), one worker per lcore except the main one, until\n"
           "      SIGINT or SIGTERM; then prints the counters and writes --report.\n"
           "      EAL args e.g.: -l 0,1 --no-pci --vdev net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap\n"
           "  " + program + " --replay IN.pcap --out OUT.pcap --report REPORT.json --config RULES.yaml\n"
           "          [--hash-seed N] [--stats]\n"
           "      deterministic offline run of the same code with each packet's capture time\n"
           "      as the clock; needs no NIC, no hugepages, no root.\n";
  }
};

}  // namespace

std::string usage_text(const std::string& program) {
  constexpr size_t kNameColumn = 26;
  constexpr size_t kDescriptionWidth = 80 - kNameColumn;
  CLI::App app("", program);
  auto formatter = std::make_shared<SluicedFormatter>();
  formatter->column_width(kNameColumn);
  app.formatter(formatter);
  app.set_help_flag("-h,--help", "prints this help");
  app.get_help_ptr()->group("Both modes");
  // Placeholders only: this App prints help and never parses.
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;
  for (unsigned group : {kLive | kReplay, unsigned(kLive), unsigned(kReplay)}) {
    const char* title = group == (kLive | kReplay) ? "Both modes"
                        : group == kLive           ? "Live mode (after --)"
                                                   : "Replay mode (--replay)";
    for (const OptionSpec& o : option_table()) {
      if (o.modes != group) continue;
      const std::string name = std::string("--") + o.name;
      CLI::Option* opt = o.value ? app.add_option(name, values[o.name], wrap(o.help, kDescriptionWidth))
                                       ->type_name(o.value)
                                 : app.add_flag(name, flags[o.name], wrap(o.help, kDescriptionWidth));
      opt->group(title);
    }
  }
  app.footer("exit status: 0 success, 1 runtime failure, 2 bad usage or invalid input");
  std::string text = app.help();  // "": the App's own name, the program
  // CLI11 ends each group with a blank line and starts the next with one: keep one.
  for (size_t at; (at = text.find("\n\n\n")) != std::string::npos;) text.erase(at, 1);
  return text;
}

}  // namespace sluice
