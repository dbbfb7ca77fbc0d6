#!/usr/bin/env bash
# The newcomer's test command: installs what is missing, builds, and runs every test:
#   1. the normal build: unit, end-to-end and integration suites;
#   2. the core, replay, DPDK and integration tests again under AddressSanitizer +
#      UndefinedBehaviorSanitizer (docs/SANITIZERS.md says what is left out and why);
#   3. the concurrency tests under ThreadSanitizer;
#   4. the Debian package: built once by scripts/package.sh (lintian-checked), then installed
#      into a scratch root and run by tests/install/package_check.sh, and installed into a
#      container whose PID 1 is systemd, which runs its sluiced@.service
#      (tests/install/unit_systemd.sh): two tests.
#   5. a short run of every libFuzzer target (tests/fuzz, clang, build-fuzz), one test each.
# Ends with meson's summaries and one plain line "N passed, N failed[, N skipped]".
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/setup-deps.sh || { echo "setup-deps failed"; echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
summaries=()

# setup_build DIR [meson options...]: configures DIR once (reconfigures if options change).
setup_build() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    meson setup "$dir" "$@" >/dev/null
  fi
}

# run_tests LABEL DIR [meson test args...]: runs meson test and adds its counts.
run_tests() {
  local label=$1 dir=$2
  shift 2
  local log t0=$SECONDS
  log=$(mktemp)
  echo "=== $label ==="
  meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log"
  local ok fail timeout skip
  ok=$(awk '/^Ok:/ {print $2}' "$log" | tail -1)
  fail=$(awk '/^Fail:/ {print $2}' "$log" | tail -1)
  timeout=$(awk '/^Timeout:/ {print $2}' "$log" | tail -1)
  skip=$(awk '/^Skipped:/ {print $2}' "$log" | tail -1)
  if [ -z "$ok" ]; then  # meson did not get to run the tests at all
    fail=1 ok=0 timeout=0 skip=0
  fi
  passed=$((passed + ok))
  failed=$((failed + fail + timeout))
  skipped=$((skipped + skip))
  summaries+=("$label: $ok passed, $((fail + timeout)) failed, $skip skipped ($((SECONDS - t0)) s)")
  rm -f "$log"
}

# build LABEL DIR [TARGET...]: builds DIR (only TARGETs if given).
build() {
  local label=$1 dir=$2
  shift 2
  echo "=== build: $label ==="
  local t0=$SECONDS
  if ! ninja -C "$dir" "$@"; then
    failed=$((failed + 1))
    summaries+=("$label: BUILD FAILED")
    return 1
  fi
  summaries+=("build $label: $((SECONDS - t0)) s")
}

# Debug information costs a third of every compile and nothing here reads it: the normal
# build is debugoptimized's -O2 (asserts on) without -g; the sanitizer builds keep line
# tables only (-g1), all their reports print.
setup_build build -Doptimization=2 -Ddebug=false
build normal build && run_tests "normal build" build

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# Leaks inside DPDK's own libraries, each named and explained there (docs/SANITIZERS.md).
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizers/lsan.supp
setup_build build-asan -Doptimization=0 -Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1 \
  -Db_sanitize=address,undefined -Db_lundef=false -Ddpdk=enabled
# The live dataplane too: the dpdk suite and the integration scripts on the ASan binaries,
# less the two whose assertions need more packets per second than an -O0 ASan build moves
# (docs/SANITIZERS.md): TwoLcores.AggregateAdmitsAtMostBurstPlusRateTimesTime, vhost_virtio.
asan_suites=(--suite unit --suite e2e --suite dpdk)
asan_integration=(pcap_vs_replay af_xdp_rate af_xdp_mbufs two_lcores_aggregate operator_reads)
# Only what those tests need is built (what `meson test` would build for them: not the
# benchmarks nor the bpf suite's programs), and meson test is told not to rebuild the rest.
asan_targets=()
if asan_list=$(scripts/lib/test_targets.py build-asan "${asan_suites[@]}" "${asan_integration[@]}"); then
  mapfile -t asan_targets <<<"$asan_list"
else
  failed=$((failed + 1))
  summaries+=("ASan+UBSan: FAILED to list the targets of its tests")
fi
if ((${#asan_targets[@]} > 0)) && build "ASan+UBSan" build-asan "${asan_targets[@]}"; then
  # 2,000 rather than 10,000 live rule changes: the same paths, a fifth of the -O0 time.
  SLUICE_CHANGES=2000 GTEST_FILTER=-TwoLcores.AggregateAdmitsAtMostBurstPlusRateTimesTime \
    run_tests "ASan+UBSan" \
    build-asan --no-rebuild "${asan_suites[@]}" --timeout-multiplier 4
  run_tests "ASan+UBSan integration" build-asan --no-rebuild --timeout-multiplier 4 \
    "${asan_integration[@]}"
fi

export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
setup_build build-tsan -Doptimization=2 -Ddebug=false -Dc_args=-g1 -Dcpp_args=-g1 \
  -Db_sanitize=thread -Db_lundef=false -Ddpdk=disabled
# TSan's shadow memory needs a fixed layout: run without address-space randomisation.
# Only the suites TSan runs are built (and meson test is told not to rebuild the rest).
tsan_suites=(limiter_concurrency flow_table pipeline counters_handoff rules_swap control_socket
  metrics flows_top)
build "TSan" build-tsan "${tsan_suites[@]/#/tests/test_}" &&
  run_tests "TSan" build-tsan --no-rebuild --timeout-multiplier 4 \
    --wrapper "setarch $(uname -m) -R" "${tsan_suites[@]}"

echo "=== Debian package ==="
t0=$SECONDS
pkg_ok=0 pkg_fail=0 pkg_skip=0
deb=""
if deb=$(scripts/package.sh build-deb | tail -1) && tests/install/package_check.sh "$deb"; then
  pkg_ok=$((pkg_ok + 1))
else
  pkg_fail=$((pkg_fail + 1))
fi
# The package's sluiced@.service under a real systemd (PID 1 of a container), one more test.
rc=1
if [ -f "$deb" ]; then
  TRACEGEN=$PWD/build/tools/sluice-tracegen tests/install/unit_systemd.sh "$deb"
  rc=$?
fi
case $rc in
  0) pkg_ok=$((pkg_ok + 1)) ;;
  77) pkg_skip=$((pkg_skip + 1)) ;;
  *) pkg_fail=$((pkg_fail + 1)) ;;
esac
passed=$((passed + pkg_ok))
failed=$((failed + pkg_fail))
skipped=$((skipped + pkg_skip))
summaries+=("Debian package: $pkg_ok passed, $pkg_fail failed, $pkg_skip skipped ($((SECONDS - t0)) s)")
# Every fuzz target for FUZZ_SECONDS (30 s) from its seeds: one test each, passed if it
# found no crash (scripts/fuzz.sh; a crashing input is kept in build-fuzz/artifacts/). Built
# first, then run two at a time: one per core of the 2-core CI machine.
echo "=== fuzz (${FUZZ_SECONDS:-30} s per target) ==="
t0=$SECONDS
fuzz_ok=0 fuzz_fail=0
fuzz_logs=$(mktemp -d)
if scripts/fuzz.sh --build; then
  scripts/fuzz.sh --list | xargs -P 2 -I{} sh -c \
    'scripts/fuzz.sh {} "${FUZZ_SECONDS:-30}" >"$1/{}.log" 2>&1; echo $? >"$1/{}.rc"' _ "$fuzz_logs"
fi
for target in $(scripts/fuzz.sh --list); do
  if [ "$(cat "$fuzz_logs/$target.rc" 2>/dev/null)" = 0 ]; then
    fuzz_ok=$((fuzz_ok + 1))
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$fuzz_logs/$target.log" |
      sed "s/^/$target: /"
  else
    fuzz_fail=$((fuzz_fail + 1))
    echo "fuzz $target FAILED:"
    tail -40 "$fuzz_logs/$target.log" 2>/dev/null
  fi
done
rm -rf "$fuzz_logs"
passed=$((passed + fuzz_ok))
failed=$((failed + fuzz_fail))
summaries+=("fuzz: $fuzz_ok passed, $fuzz_fail failed, 0 skipped ($((SECONDS - t0)) s)")

echo
echo "=== summary (total $((SECONDS / 60)) min $((SECONDS % 60)) s) ==="
for s in "${summaries[@]}"; do echo "$s"; done
if ((skipped > 0)); then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
((failed == 0))
