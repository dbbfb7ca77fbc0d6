// ns per packet of Pipeline::process_burst, the code every sluiced worker runs per received
// burst, without DPDK: bursts of 32 64-byte UDP frames read from a prebuilt trace in memory,
// one clock reading per burst, one thread (single writer, as a one-worker dataplane runs).
// The rules are bench/dataplane/'s, so these rows split the live benchmark's per-packet cost
// without the vdevs' share:
//   "pipeline, no rule": parse and the default action (the fixed cost);
//   "pipeline, aggregate": one key: none token bucket, charged once per burst;
//   "pipeline, per-flow/F": one 5-tuple token bucket per flow, F flows of capacity, every
//     flow once per pass over the trace in random order (all conform).
// The trace has max(F, 131072) frames, 64 bytes apart: at 1M flows it is 64 MiB, streamed
// from memory as the mbufs of net_pcap's preloaded trace are.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "scenario.hpp"
#include "synthetic_trace.hpp"

namespace {

using namespace sluice;

constexpr size_t kBurst = 32;
constexpr size_t kFrameBytes = 64;
constexpr size_t kMinFrames = 131072;
constexpr uint64_t kBurstGapNs = 2000;  // 32 frames per 2 us: 16 Mpps offered

const char* const kAggregateRules = R"(
default: {action: pass}
rules:
  - name: aggregate
    match: {proto: udp}
    key: none
    rate: 500Mpps
    burst: 100000
    algorithm: token-bucket
    action: drop
)";

const char* const kNoRules = "default: {action: pass}\nrules: []\n";

// Flow i: 10.(i >> 16).(i >> 8).i:(1024 + i % 64512) -> 192.0.2.1:53, as sluice-tracegen
// numbers them; every flow once per pass, the passes shuffled independently.
std::vector<uint8_t> make_trace(size_t flows) {
  const size_t frames = std::max(kMinFrames, (kMinFrames + flows - 1) / flows * flows);
  return bench::synthetic_trace(bench::shuffled_flow_order(flows, frames), kFrameBytes);
}

std::unique_ptr<Pipeline> make_pipeline(const char* rules_text, uint64_t flows) {
  auto rules = load_rules_text(rules_text, "bench");
  if (!rules) {
    std::fprintf(stderr, "bench: rules rejected: %s\n", rules.error().message.c_str());
    std::exit(1);
  }
  PipelineOptions opts;
  opts.default_max_flows = flows;
  opts.hash_seed = 0x5eed;
  opts.single_writer = true;
  return bench::must(Pipeline::create(std::move(*rules), opts));
}

// Built once per flow count (Google Benchmark calls a row's function once per repetition).
const std::vector<uint8_t>& trace_of(size_t flows) {
  static std::map<size_t, std::vector<uint8_t>> traces;
  auto it = traces.find(flows);
  if (it == traces.end()) it = traces.emplace(flows, make_trace(flows)).first;
  return it->second;
}

void run_pipeline(benchmark::State& state, const char* rules_text) {
  const auto flows = uint64_t(state.range(0));
  // A private copy: process_burst may rewrite frames (not with these rules, but it may).
  std::vector<uint8_t> trace = trace_of(flows);
  const size_t frames = trace.size() / kFrameBytes;
  std::unique_ptr<Pipeline> pipeline = make_pipeline(rules_text, flows);
  WorkerCounters counters = pipeline->make_counters();
  Pipeline::Frame burst[kBurst];
  Verdict verdicts[kBurst];
  uint64_t now_ns = bench::kStartNs, forwarded = 0;
  size_t at = 0;
  // One untimed pass creates every flow: the rows time lookups of known flows.
  auto one_burst = [&] {
    for (size_t i = 0; i < kBurst; ++i) {
      burst[i] = {trace.data() + at * kFrameBytes, uint32_t(kFrameBytes)};
      at = at + 1 == frames ? 0 : at + 1;
    }
    pipeline->process_burst(burst, kBurst, 0, now_ns, counters, verdicts);
    now_ns += kBurstGapNs;
    for (const Verdict& v : verdicts) forwarded += v.kind == Verdict::Kind::forward;
  };
  for (size_t done = 0; done < frames; done += kBurst) one_burst();
  forwarded = 0;
  for (auto _ : state) one_burst();
  const uint64_t packets = uint64_t(state.iterations()) * kBurst;
  state.SetItemsProcessed(int64_t(packets));
  // Every packet conforms: anything else means the set-up, not the code, is measured.
  state.counters["conform"] = packets ? double(forwarded) / double(packets) : 0;
  const CountersSnapshot snap = pipeline->snapshot({&counters});
  state.counters["flows"] = double(snap.rules.empty() ? 0 : snap.rules[0].active_flows);
}

const bool registered = [] {
  benchmark::RegisterBenchmark("pipeline, no rule", run_pipeline, kNoRules)->Arg(1000);
  benchmark::RegisterBenchmark("pipeline, aggregate", run_pipeline, kAggregateRules)->Arg(1000);
  benchmark::RegisterBenchmark("pipeline, per-flow", run_pipeline, bench::kPerFlowRules)
      ->ArgName("flows")
      ->Arg(1000)
      ->Arg(100'000)
      ->Arg(1'000'000);
  return true;
}();

}  // namespace
