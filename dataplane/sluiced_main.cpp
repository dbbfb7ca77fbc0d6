// sluiced: the only place that turns errors into exit codes (SPEC §1: 0 success, 1 runtime
// failure, 2 bad usage or invalid input), by the error's kind (result.hpp: exit_code).
#include <cstdio>
#include <string>
#include <utility>

#include "cli_args.hpp"
#include "counters_json.hpp"
#include "live/live_run.hpp"
#include "replay/replay.hpp"

namespace {

using sluice::kExitInvalidInput;
using sluice::kExitOk;

int run_replay_mode(const sluice::ReplayOptions& opts, bool print_stats) {
  auto summary = sluice::run_replay(opts);
  if (!summary) {
    std::fprintf(stderr, "sluiced: %s\n", summary.error().message.c_str());
    return sluice::exit_code(summary.error());
  }
  if (print_stats) {
    std::fputs(sluice::counters_to_table(summary->counters).c_str(), stdout);
    std::fflush(stdout);  // table before the summary line when both go to one terminal
  }
  std::fprintf(stderr,
               "sluiced: replay: %llu packets in, %llu out, %llu dropped, %llu delayed\n",
               static_cast<unsigned long long>(summary->packets_in),
               static_cast<unsigned long long>(summary->packets_out),
               static_cast<unsigned long long>(summary->packets_dropped),
               static_cast<unsigned long long>(summary->packets_delayed));
  return kExitOk;
}

int run_live_mode(const sluice::CliArgs& args) {
  sluice::LiveOptions opts;
  opts.eal_args = args.eal_args;
  opts.config_path = args.config_path;
  opts.report_path = args.report_path;
  opts.control_socket = args.control_socket;
  opts.metrics_addr = args.metrics_addr;
  opts.stats_interval_ms = args.stats_interval_ms;
  opts.flows = args.flows;
  opts.mbufs = args.mbufs;
  opts.mbuf_size = args.mbuf_size;
  opts.burst = args.burst;
  opts.max_delay_ns = args.max_delay_ns;
  if (sluice::Status s = sluice::run_live(opts); !s) {
    std::fprintf(stderr, "sluiced: %s\n", s.error().message.c_str());
    return sluice::exit_code(s.error());
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string program = "sluiced";
  auto args = sluice::parse_cli_args(argc, argv);
  if (!args) {
    std::fprintf(stderr, "sluiced: %s\n%s", args.error().message.c_str(),
                 sluice::usage_text(program).c_str());
    return kExitInvalidInput;
  }
  switch (args->mode) {
    case sluice::RunMode::help:
      std::fputs(sluice::usage_text(program).c_str(), stdout);
      return kExitOk;
    case sluice::RunMode::replay:
      return run_replay_mode(args->replay, args->print_stats);
    case sluice::RunMode::live:
      return run_live_mode(*args);
  }
  return kExitInvalidInput;
}
