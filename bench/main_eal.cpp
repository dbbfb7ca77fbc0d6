// Benchmark main with DPDK: rte_meter needs the EAL (rte_get_tsc_hz), so it is initialised
// before any benchmark runs, without hugepages, PCI, telemetry or shared files.
#include <pthread.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <vector>

namespace {

bool init_eal(const char* program) {
  std::vector<std::string> args = {program, "--no-huge", "--no-pci", "-m", "512",
                                   "--no-telemetry", "-l", "0", "--no-shconf",
                                   "--log-level=*:warning"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  // EAL pins the calling thread to lcore 0, and benchmark threads inherit the pinning:
  // give the thread its CPUs back, or the 2-thread runs would share one CPU.
  cpu_set_t cpus;
  pthread_getaffinity_np(pthread_self(), sizeof cpus, &cpus);
  if (rte_eal_init(int(argv.size()), argv.data()) < 0) {
    std::fprintf(stderr, "bench: EAL init failed: %s\n", rte_strerror(rte_errno));
    return false;
  }
  pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  // Without the EAL only the rte_meter benchmark is skipped (it reports why).
  const bool eal = init_eal(argv[0]);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (eal) rte_eal_cleanup();
  return 0;
}
