#!/usr/bin/env bash
# libFuzzer campaigns for the targets in tests/fuzz (see docs/FUZZING.md).
#   scripts/fuzz.sh TARGET [SECONDS]   one target, as long as asked (default: until stopped)
#   scripts/fuzz.sh --all SECONDS      every target in turn, SECONDS each
#   scripts/fuzz.sh --list             the targets
#   scripts/fuzz.sh --build            configure and build every target (then runs need no build)
#   scripts/fuzz.sh --merge TARGET     shrink TARGET's found corpus to the inputs that add coverage
# TARGET is a name such as frame_parser (tests/fuzz/fuzz_frame_parser.cpp). The targets are
# built with clang in a build directory of their own, build-fuzz (FUZZ_BUILD_DIR), with
# ASan+UBSan. Each run starts from the committed seeds (tests/fuzz/corpus/TARGET) plus what
# earlier runs found (build-fuzz/corpus/TARGET, never the tree); a crashing input lands in
# build-fuzz/artifacts/TARGET/. Extra arguments after -- go to libFuzzer. Exit status: 0 if no
# target crashed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

targets() {
  local f
  for f in "$root"/tests/fuzz/fuzz_*.cpp; do
    f=${f##*/fuzz_}
    echo "${f%.cpp}"
  done
}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

setup() {
  if [ ! -f "$build/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$build" --buildtype=debugoptimized -Dfuzz=enabled \
      -Dtests=disabled -Ddpdk=disabled -Db_lundef=false >/dev/null
  fi
}

# Configures build-fuzz if needed and builds the given targets, one caller at a time: runs
# beside each other share build-fuzz (a campaign's two, CI's xargs -P 2), and two ninjas that
# both regenerate it after a meson.build change fail one of them ("rebuilding 'build.ninja':
# subcommand failed": a campaign run lost in session 33).
build_locked() {
  mkdir -p "$build"
  (
    flock 9
    setup
    ninja -C "$build" "$@"
  ) 9>"$build/.fuzz-build.lock"
}

# The longest input each target is given (-max_len; libFuzzer's default grows to 4096 bytes).
# Past these the inputs only repeat what a shorter one does: more bursts and frames through
# the same flow tables (pipeline: 1 KiB is ~80 frames, past any fuzzed flow cap of 64), more
# steps of the same trace (bucket_diff: 512 bytes are up to 256 steps of up to 64 packets),
# more rules, fields or frames of the same kinds (rules_loader: 1 KiB reaches every limit of
# rules_loader.hpp but the rule and node counts; control_*). Each input costs time in
# proportion to its length (docs/FUZZING.md).
# An explicit -max_len after -- wins.
max_len() {
  case $1 in
    frame_parser) echo 4096 ;;  # one frame: jumbo lengths stay reachable
    pipeline) echo 1024 ;;
    bucket_diff) echo 512 ;;
    rules_loader | control_request | control_reply) echo 1024 ;;
    *) echo 4096 ;;  # pcap_reader, xdp_program: records of up to 3,000 bytes
  esac
}

# run TARGET SECONDS [libFuzzer args...]
run() {
  local target=$1 seconds=$2
  shift 2
  # Not `targets | grep -qx`: grep -q exits at its match, and under pipefail the SIGPIPE that
  # the rest of the list then meets made a target that exists "missing" (CI, pcap_reader).
  if [[ ! -f "$root/tests/fuzz/fuzz_$target.cpp" || "$target" == */* ]]; then
    echo "fuzz.sh: no target '$target' (scripts/fuzz.sh --list)" >&2
    return 2
  fi
  build_locked "tests/fuzz/fuzz_$target" >/dev/null
  local work="$build/corpus/$target" artifacts="$build/artifacts/$target"
  mkdir -p "$work" "$artifacts"
  local time_args=()
  if [ "$seconds" != 0 ]; then time_args=(-max_total_time="$seconds"); fi
  echo "=== fuzz $target ${seconds}s ==="
  # malloc_context_size=5: each allocation records 5 frames of its stack, not 30 (the
  # unwinding and storing was 5-10% of a run). What ASan detects does not change, only how
  # much of an allocation's stack a report shows: rerun an artifact with
  # ASAN_OPTIONS=malloc_context_size=30 for the whole of it.
  # -reload=60: libFuzzer re-reads the corpus directory every second by default, to take up
  # what a run beside it found; a stat() of every file, which with a campaign's tens of
  # thousands of files was 13% of a pipeline run (perf, session 28). A minute's delay in
  # sharing a finding costs nothing.
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:malloc_context_size=5} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
    "$build/tests/fuzz/fuzz_$target" "${time_args[@]}" -print_final_stats=1 -timeout=25 \
      -rss_limit_mb=2048 -reload=60 -max_len="$(max_len "$target")" -artifact_prefix="$artifacts/" "$@" \
      "$work" "$root/tests/fuzz/corpus/$target"
}

[ $# -ge 1 ] || usage
case $1 in
  --list) targets ;;
  --build)
    # Quiet when it builds; when it does not, ninja's own output says why (on stdout).
    log=$(mktemp)
    if ! build_locked $(targets | sed 's|^|tests/fuzz/fuzz_|') >"$log" 2>&1; then
      grep -v '^\[' "$log" >&2
      rm -f "$log"
      exit 1
    fi
    rm -f "$log"
    ;;
  --merge)
    # A long campaign keeps every input that once added a feature, and each reduction adds a
    # file: 31,000 files for 6,400 corpus entries after 30M executions of pipeline. Each run
    # reads them all at its start. libFuzzer's merge keeps one input per feature set.
    [ $# -eq 2 ] || usage
    target=$2 work="$build/corpus/$2"
    [[ -f "$root/tests/fuzz/fuzz_$target.cpp" && "$target" != */* ]] || {
      echo "fuzz.sh: no target '$target' (scripts/fuzz.sh --list)" >&2
      exit 2
    }
    build_locked "tests/fuzz/fuzz_$target" >/dev/null
    [ -d "$work" ] || { echo "fuzz.sh: no corpus yet for $target ($work)" >&2; exit 2; }
    merged=$(mktemp -d "$build/corpus/.merge-$target.XXXXXX")
    # Every input runs once more: one that now crashes (a build since the campaign) is kept
    # in the artifacts and fails the merge, with the corpus left as it was.
    mkdir -p "$build/artifacts/$target"
    if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:malloc_context_size=5} \
      "$build/tests/fuzz/fuzz_$target" -merge=1 -timeout=120 -rss_limit_mb=2048 \
        -artifact_prefix="$build/artifacts/$target/" -max_len="$(max_len "$target")" \
        "$merged" "$work" "$root/tests/fuzz/corpus/$target" >"$merged.log" 2>&1 ||
      [ -z "$(ls -A "$merged")" ] || grep -q '^==[0-9]*== ERROR' "$merged.log"; then
      grep -E '^==[0-9]*== ERROR|Test unit written|Assertion' "$merged.log" >&2 || true
      tail -20 "$merged.log" >&2
      rm -rf "$merged" "$merged.log"
      echo "fuzz.sh: the merge failed; $work is unchanged" >&2
      exit 1
    fi
    rm -f "$merged.log"
    echo "$target: $(find "$work" -type f | wc -l) files -> $(find "$merged" -type f | wc -l)"
    rm -rf "$work"
    mv "$merged" "$work"
    ;;
  --all)
    [ $# -ge 2 ] || usage
    seconds=$2
    shift 2
    [ "${1:-}" != -- ] || shift
    status=0
    for t in $(targets); do run "$t" "$seconds" "$@" || status=1; done
    exit $status
    ;;
  -*) usage ;;
  *)
    target=$1 seconds=${2:-0}
    shift $(($# >= 2 ? 2 : 1))
    [ "${1:-}" != -- ] || shift
    run "$target" "$seconds" "$@"
    ;;
esac
