// The cost of one `config load` of 1,000 rules on the control thread, without sockets or
// DPDK: the request scripts/bench_control.sh sends (the same JSON body, the same generated
// file, every rule's rate changed by each load) handed to ControlService::handle over a core
// Pipeline (PipelineRulesTarget), as sluiced's control thread does after reading a frame:
// decode the JSON, load the rules text, apply, encode the diff reply.
//
//   sluice-bench-control-load [--rules N] [--loads L] [--set]
//
// The first load (1 rule -> N) is not measured; then L loads alternate between the two files,
// each changing every rule. --set: instead, L `rule.set per-flow` requests (the rate flipping
// between 2 and 1 Mpps: bench_control.sh's "rule.set, 1,000 rules running") with N rules
// running. Prints this thread's CPU time per measured load (median, mean,
// min) on stdout; exits 1 if a load is refused. For instruction counts, run it under
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*changed_load*'
// and divide the total by L.
#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "control_service.hpp"
#include "pipeline.hpp"
#include "pipeline_rules_target.hpp"
#include "control_rules.hpp"
#include "rules_loader.hpp"
#include "synthetic_trace.hpp"

namespace {

using namespace sluice;

std::string set_request(uint64_t id, int flip) {
  return nlohmann::json{{"version", 2}, {"id", id}, {"op", "rule.set"}, {"name", "per-flow"},
                        {"fields", {{"rate", flip ? "1Mpps" : "2Mpps"}}}}
      .dump();
}

std::string request(uint64_t id, const std::string& text) {
  return nlohmann::json{{"version", 2}, {"id", id}, {"op", "config.load"},
                        {"text", text}, {"filename", "rules-1000.yaml"}}
      .dump();
}

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

// One measured load (its own function, for callgrind's --toggle-collect).
#if defined(__clang__)
#define SLUICE_NOIPA __attribute__((noinline))
#else
#define SLUICE_NOIPA __attribute__((noipa))
#endif
SLUICE_NOIPA std::string changed_load(ControlService& service,
                                                   const std::string& body) {
  return service.handle(body);
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: sluice-bench-control-load [--rules N] [--loads L] [--set]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  size_t rules = 1000, loads = 20;
  bool set = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--set") {
      set = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    const size_t value = std::strtoull(argv[++i], nullptr, 10);
    if (arg == "--rules") rules = value;
    else if (arg == "--loads") loads = value;
    else usage();
  }
  if (rules < 1 || loads < 1) usage();

  auto start = load_rules_text(bench::kPerFlowRules, "bench");
  if (!start) {
    std::fprintf(stderr, "bench: %s\n", start.error().message.c_str());
    return 1;
  }
  auto created = Pipeline::create(*start, PipelineOptions::single_threaded(0x5eed));
  if (!created) {
    std::fprintf(stderr, "bench: %s\n", created.error().message.c_str());
    return 1;
  }
  uint64_t now_ns = 1'000'000'000;
  PipelineRulesTarget target(**created, [&] { return now_ns; });
  ControlService service(&target, *start);

  const std::array<std::string, 2> bodies = set ? std::array<std::string, 2>{set_request(1, 0), set_request(2, 1)}
                                    : std::array<std::string, 2>{request(1, bench::control_rules_file(rules, 0)),
                                                                 request(2, bench::control_rules_file(rules, 1))};
  const std::string first = request(1, bench::control_rules_file(rules, 0));
  std::vector<double> ms;
  for (size_t i = 0; i <= loads; ++i) {
    const double t0 = thread_cpu_ms();
    // The first load adds 999 rules (not measured); each other one changes all of them.
    const std::string reply = i == 0 ? service.handle(first) : changed_load(service, bodies[i % 2]);
    const double t1 = thread_cpu_ms();
    now_ns += 1'000'000;
    if (reply.find("\"ok\":true") == std::string::npos) {
      std::fprintf(stderr, "bench: load %zu refused: %.300s\n", i, reply.c_str());
      return 1;
    }
    if (i > 0) ms.push_back(t1 - t0);
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (double m : ms) sum += m;
  std::printf("%s: rules %zu loads %zu body %zu bytes: CPU per load median %.3f ms, mean %.3f ms, "
              "min %.3f ms\n",
              set ? "rule.set" : "config.load", rules, loads, bodies[1].size(), sorted[sorted.size() / 2],
              sum / double(ms.size()), sorted.front());
  return 0;
}
