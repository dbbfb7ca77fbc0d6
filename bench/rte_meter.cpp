// DPDK's srTCM (rte_meter, 22.11) with the same traffic and parameters as the core's srtcm
// row: CIR 1 Gbit/s, CBS = EBS = 16 KiB, 64-byte frames every 256 ns. rte_meter's clock is
// the TSC, so the synthetic arrivals are converted to cycles (needs EAL: rte_get_tsc_hz).
// rte_meter state is single-writer (no atomics), so it runs on one thread only.
#include <rte_cycles.h>
#include <rte_meter.h>

#include "scenario.hpp"

namespace {

void BM_rte_meter_srtcm(benchmark::State& state) {
  if (rte_get_tsc_hz() == 0) {
    state.SkipWithError("EAL not initialised: TSC frequency unknown");
    return;
  }
  rte_meter_srtcm_params params{bench::kRateBytesPerSec, bench::kBurstBytes, bench::kBurstBytes};
  rte_meter_srtcm_profile profile;
  rte_meter_srtcm meter;
  if (rte_meter_srtcm_profile_config(&profile, &params) != 0 ||
      rte_meter_srtcm_config(&meter, &profile) != 0) {
    state.SkipWithError("rte_meter_srtcm config failed");
    return;
  }
  // Cycles in 16.16 fixed point, so the spacing stays exact on average.
  const uint64_t step_fp = (bench::kStepNs * rte_get_tsc_hz() << 16) / 1'000'000'000;
  uint64_t now_fp = meter.time << 16;  // config stamps the meter with the current TSC
  uint64_t conformed = 0;
  for (auto _ : state) {
    conformed += rte_meter_srtcm_color_blind_check(&meter, &profile, now_fp >> 16,
                                                   uint32_t(bench::kFrameBytes)) ==
                 RTE_COLOR_GREEN;
    now_fp += step_fp;
  }
  bench::report(state, conformed);
}

BENCHMARK(BM_rte_meter_srtcm)->Name("rte_meter srtcm")->UseRealTime()->Threads(1);

}  // namespace
