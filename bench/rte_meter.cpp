// DPDK's meters (rte_meter, 22.11) with the same traffic and parameters as the core's meter
// rows: 64-byte frames every 256 ns; srTCM CIR 1 Gbit/s, CBS = EBS = 16 KiB; trTCM the same
// CIR and CBS, PIR 2 Gbit/s, PBS 16 KiB. rte_meter's clock is the TSC, so the synthetic
// arrivals are converted to cycles (needs EAL: rte_get_tsc_hz). rte_meter state is
// single-writer (no atomics), so it runs on one thread only.
//
// Two srTCM rows, because where the meter's state lives decides what a decision costs:
//   "rte_meter srtcm": the state in memory, loaded and stored by every decision, as a
//     dataplane's per-flow or per-rule meters are and as the core's rows keep theirs (their
//     state words are atomics): the like-for-like row for "srtcm, single writer" (likewise
//     "rte_meter trtcm" for "trtcm, single writer");
//   "rte_meter srtcm, state in registers": the meter a local the compiler may keep in
//     registers across the loop (the first version of this benchmark did so without saying:
//     GCC 12 never touched memory in its loop), like for like with "srtcm, arithmetic only".
#include <rte_cycles.h>
#include <rte_meter.h>

#include "scenario.hpp"

namespace {

enum class StateIn { memory, registers };

struct Srtcm {
  using Meter = rte_meter_srtcm;
  using Profile = rte_meter_srtcm_profile;
  static int configure(Profile* p, Meter* m) {
    rte_meter_srtcm_params params{bench::kRateBytesPerSec, bench::kBurstBytes,
                                  bench::kBurstBytes};
    return rte_meter_srtcm_profile_config(p, &params) != 0 ? -1 : rte_meter_srtcm_config(m, p);
  }
  static rte_color check(Meter* m, Profile* p, uint64_t tsc, uint32_t len) {
    return rte_meter_srtcm_color_blind_check(m, p, tsc, len);
  }
  static uint64_t stamp(const Meter& m) { return m.time; }
};

struct Trtcm {
  using Meter = rte_meter_trtcm;
  using Profile = rte_meter_trtcm_profile;
  static int configure(Profile* p, Meter* m) {
    rte_meter_trtcm_params params{bench::kRateBytesPerSec, 2 * bench::kRateBytesPerSec,
                                  bench::kBurstBytes, bench::kBurstBytes};
    return rte_meter_trtcm_profile_config(p, &params) != 0 ? -1 : rte_meter_trtcm_config(m, p);
  }
  static rte_color check(Meter* m, Profile* p, uint64_t tsc, uint32_t len) {
    return rte_meter_trtcm_color_blind_check(m, p, tsc, len);
  }
  static uint64_t stamp(const Meter& m) { return m.time_tc; }
};

template <class Kind, StateIn Where>
void BM_rte_meter(benchmark::State& state) {
  if (rte_get_tsc_hz() == 0) {
    state.SkipWithError("EAL not initialised: TSC frequency unknown");
    return;
  }
  typename Kind::Profile profile;
  alignas(64) typename Kind::Meter meter;
  if (Kind::configure(&profile, &meter) != 0) {
    state.SkipWithError("rte_meter config failed");
    return;
  }
  if constexpr (Where == StateIn::memory) benchmark::DoNotOptimize(&meter);
  // Cycles in 16.16 fixed point, so the spacing stays exact on average.
  const uint64_t step_fp = (bench::kStepNs * rte_get_tsc_hz() << 16) / 1'000'000'000;
  uint64_t now_fp = Kind::stamp(meter) << 16;  // config stamps the meter with the current TSC
  uint64_t conformed = 0;
  for (auto _ : state) {
    conformed += Kind::check(&meter, &profile, now_fp >> 16, uint32_t(bench::kFrameBytes)) ==
                 RTE_COLOR_GREEN;
    now_fp += step_fp;
    // The meter escaped above: a compiler barrier makes each decision load and store it.
    if constexpr (Where == StateIn::memory) benchmark::ClobberMemory();
  }
  bench::report(state, conformed);
}

BENCHMARK(BM_rte_meter<Srtcm, StateIn::memory>)
    ->Name("rte_meter srtcm")->UseRealTime()->Threads(1);
BENCHMARK(BM_rte_meter<Srtcm, StateIn::registers>)
    ->Name("rte_meter srtcm, state in registers")->UseRealTime()->Threads(1);
BENCHMARK(BM_rte_meter<Trtcm, StateIn::memory>)
    ->Name("rte_meter trtcm")->UseRealTime()->Threads(1);

}  // namespace
