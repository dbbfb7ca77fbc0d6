# shellcheck shell=bash
# What scripts/bench.sh and scripts/bench_dataplane.sh share: the release build they measure
# and the wait for a quiet machine. Source it from the repository root (both scripts cd there
# first).
#
#   bench_build DIR TARGET...   configures DIR as a release build once, then builds TARGETs
#   bench_wait_for_quiet NAME   waits (at most 10 min) until the CPUs are >= 90% idle for 15 s

# GCC 12 at -O3 reports false positives inside libstdc++ inlined into our code (-Wrestrict:
# GCC PR105329/PR105651; -Warray-bounds and -Wstringop-* on vector copies), which -Werror
# turns into a failed release build. They stay visible as warnings, in the benchmark builds
# only.
BENCH_GCC12_O3_FALSE_POSITIVES="-Wno-error=restrict -Wno-error=array-bounds \
-Wno-error=stringop-overread -Wno-error=stringop-overflow"

# bench_build DIR TARGET...: ninja's output goes to stderr (the scripts print markdown on
# stdout).
bench_build() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" --buildtype=release "-Dcpp_args=$BENCH_GCC12_O3_FALSE_POSITIVES" >/dev/null
  fi
  ninja -C "$dir" "$@" >&2
}

# bench_wait_for_quiet NAME: builds and tests running beside the benchmarks take the CPUs that
# the measured threads and lcores need. NAME prefixes the message if it gives up waiting.
bench_wait_for_quiet() {
  local name=$1 deadline=$((SECONDS + 600)) quiet=0 idle=0 total=0 prev_idle prev_total
  _bench_cpu_times() {
    local u n s i w q sq st
    read -r _ u n s i w q sq st _ </proc/stat
    idle=$((i + w)) total=$((u + n + s + i + w + q + sq + st))
  }
  _bench_cpu_times
  while ((quiet < 3 && SECONDS < deadline)); do
    prev_idle=$idle prev_total=$total
    sleep 5
    _bench_cpu_times
    if ((100 * (idle - prev_idle) >= 90 * (total - prev_total))); then
      quiet=$((quiet + 1))
    else
      quiet=0
    fi
  done
  ((quiet >= 3)) || echo "$name: the machine is still busy after 10 minutes; running anyway" >&2
}
