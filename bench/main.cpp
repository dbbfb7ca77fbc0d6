// Benchmark main without DPDK.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
