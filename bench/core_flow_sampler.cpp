// What `flows top` costs a worker per packet: the burst loop of core_pipeline.cpp's per-flow
// rows (32 64-byte UDP frames per burst, one 5-tuple token bucket per flow, one thread, one
// clock reading per burst, 16 Mpps of synthetic time) run twice over the same trace, once as
// a worker without a FlowSampler ran it and once as a worker runs it now (observe() before
// each burst, tick() after it, the adaptive interval, settled). The difference of the two
// rows is the sampler's share per packet; a third row samples every packet (the cost of one
// sample).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flow_sampler.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "scenario.hpp"
#include "synthetic_trace.hpp"

namespace {

using namespace sluice;

constexpr size_t kBurst = 32;
constexpr size_t kFrameBytes = 64;
constexpr size_t kFrames = 131072;
constexpr uint64_t kBurstGapNs = 2000;

std::vector<uint8_t> make_trace(size_t flows) {
  return bench::synthetic_trace(bench::shuffled_flow_order(flows, kFrames), kFrameBytes);
}

enum class Sampling { off, adaptive, every_packet };

void run(benchmark::State& state, Sampling mode) {
  const bool sample = mode != Sampling::off;
  const auto flows = size_t(state.range(0));
  std::vector<uint8_t> trace = make_trace(flows);
  auto rules = load_rules_text(bench::kPerFlowRules, "bench");
  if (!rules) std::exit(1);
  PipelineOptions opts;
  opts.default_max_flows = flows;
  opts.hash_seed = 0x5eed;
  opts.single_writer = true;
  std::unique_ptr<Pipeline> pipeline = bench::must(Pipeline::create(std::move(*rules), opts));
  WorkerCounters counters = pipeline->make_counters();
  FlowSamplerOptions so;
  so.seed = 0x5eed;
  if (mode == Sampling::every_packet) so.fixed_every = 1;
  FlowSampler sampler(so);
  Pipeline::Frame burst[kBurst];
  Verdict verdicts[kBurst];
  uint64_t now_ns = bench::kStartNs;
  size_t at = 0;
  auto one_burst = [&] {
    for (size_t i = 0; i < kBurst; ++i) {
      burst[i] = {trace.data() + at * kFrameBytes, uint32_t(kFrameBytes)};
      at = at + 1 == kFrames ? 0 : at + 1;
    }
    const RulesSnapshot& snap = pipeline->enter(counters, now_ns);
    if (sample) sampler.observe(snap, burst, kBurst, 0);
    pipeline->process_burst(snap, burst, kBurst, 0, now_ns, counters, verdicts);
    if (sample) sampler.tick(now_ns);
    now_ns += kBurstGapNs;
    benchmark::DoNotOptimize(verdicts);
  };
  for (size_t done = 0; done < kFrames; done += kBurst) one_burst();  // flows created
  // Two seconds of synthetic time (32M packets): the adaptive interval has settled, as in a
  // worker that has run for a while (the first second of a worker's life samples more).
  if (mode == Sampling::adaptive) {
    const uint64_t settled_ns = now_ns + 2'000'000'000;  // one_burst() moves now_ns on
    while (now_ns < settled_ns) one_burst();
  }
  for (auto _ : state) one_burst();
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(kBurst));
  if (sample) state.counters["sample_every"] = double(sampler.every());
}

const bool registered = [] {
  const std::pair<const char*, Sampling> rows[] = {
      {"pipeline, per-flow, flows top sampler off", Sampling::off},
      {"pipeline, per-flow, flows top sampler on", Sampling::adaptive},
      // Every packet sampled: the cost of one sample (parse, classify, two sketch updates)
      // on top of the row above, what a worker pays per packet only at low rates.
      {"pipeline, per-flow, flows top sampling every packet", Sampling::every_packet}};
  for (const auto& [name, mode] : rows)
    benchmark::RegisterBenchmark(name, run, mode)->ArgName("flows")->Arg(1000)->Arg(100'000);
  return true;
}();

}  // namespace
