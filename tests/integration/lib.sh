# shellcheck shell=bash
# Shared helpers of the integration tests (DESIGN habit 9: each test runs in network
# namespaces of its own, joined by veth pairs, and removes everything it created).
#
# Source it after `set -euo pipefail`, then call it_init NAME. Everything created through
# these helpers is removed by one EXIT trap, whatever way the script ends:
#   - processes started with it_spawn (by PID: SIGTERM, then SIGKILL after 5 s);
#   - network namespaces from it_netns (and with them every veth end inside them);
#   - veth ends left in the root namespace by it_veth;
#   - DPDK runtime directories of the file prefixes from it_prefix;
#   - the scratch directory $IT_DIR (kept when IT_KEEP=1, for debugging).
#
# Environment: SLUICED, SENDER, TRACEGEN (the binaries; meson passes them), IT_KEEP.
# Exit codes: 0 pass, 1 fail, 77 skip (meson's convention), only where a capability is absent.

IT_SKIP=77
IT_PIDS=()
IT_NETNS=()
IT_ROOT_LINKS=()
IT_PREFIXES=()
IT_CGROUPS=()
IT_DIR=""
IT_NAME=""
IT_T0_MS=$(($(date +%s%N) / 1000000))

# it_log MESSAGE: a progress line on stderr, with the seconds since the script started.
it_log() {
  local ms=$(($(date +%s%N) / 1000000 - IT_T0_MS))
  printf '[%s %d.%03ds] %s\n' "$IT_NAME" $((ms / 1000)) $((ms % 1000)) "$*" >&2
}

it_skip() {
  echo "SKIP: $IT_NAME: $*"
  exit $IT_SKIP
}

# it_fail MESSAGE: ends the test as failed (the trap cleans up).
it_fail() {
  echo "FAIL: $IT_NAME: $*"
  exit 1
}

it_pass() {
  echo "PASS: $IT_NAME: $*"
  exit 0
}

it_cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM ERR
  local pid _
  for pid in "${IT_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null
  done
  for pid in "${IT_PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "cleanup: process $pid did not stop on SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
  done
  local l ns p c
  for c in "${IT_CGROUPS[@]}"; do rmdir "$c" 2>/dev/null; done
  for l in "${IT_ROOT_LINKS[@]}"; do ip link del "$l" 2>/dev/null; done
  for ns in "${IT_NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  for p in "${IT_PREFIXES[@]}"; do rm -rf "/var/run/dpdk/$p"; done
  if [ -n "$IT_DIR" ]; then
    if [ "${IT_KEEP:-0}" = 1 ]; then echo "kept: $IT_DIR" >&2; else rm -rf "$IT_DIR"; fi
  fi
  exit "$rc"
}

# it_init NAME [--no-net]: checks root and (unless --no-net) namespace and veth support,
# skipping if absent; makes $IT_DIR and installs the cleanup trap.
it_init() {
  IT_NAME=$1
  local net=1
  [ "${2:-}" = --no-net ] && net=0
  trap it_cleanup EXIT
  # A command that fails under `set -e` says so, rather than ending the test in silence.
  set -E
  trap 'echo "FAIL: $IT_NAME: line $LINENO: \"$BASH_COMMAND\" failed (status $?)"' ERR
  trap 'exit 130' INT
  trap 'exit 143' TERM
  [ "$(id -u)" = 0 ] || it_skip "needs root (network namespaces, veth, DPDK)"
  # Debian's python3 by its path, in every script: another python3 first on PATH (a pyenv
  # shim on the development machines) took 0.6 s a start, inside windows the tests time.
  [ -x /usr/bin/python3 ] || it_fail "/usr/bin/python3 is not installed (scripts/setup-deps.sh installs it)"
  IT_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-it-$IT_NAME.XXXXXX")
  IT_ID=$$
  [ $net = 1 ] || return 0
  command -v ip >/dev/null || it_skip "iproute2 (ip) is not installed"
  # Capabilities: a namespace, and a veth pair inside it.
  local probe="sl-probe-$IT_ID"
  ip netns add "$probe" 2>/dev/null || it_skip "cannot create network namespaces"
  IT_NETNS+=("$probe")
  if ! ip netns exec "$probe" true 2>/dev/null; then
    it_skip "cannot enter a network namespace (ip netns exec)"
  fi
  if ! ip -n "$probe" link add name p0 type veth peer name p1 2>/dev/null; then
    it_skip "no veth support in this kernel"
  fi
  ip netns del "$probe"
  IT_NETNS=()
}

# it_need_bin VAR...: the named variables must point at executables (meson sets them).
it_need_bin() {
  local v
  for v in "$@"; do
    [ -n "${!v:-}" ] || it_fail "$v is not set (run through meson test, or export it)"
    [ -x "${!v}" ] || it_fail "$v=${!v} is not an executable"
  done
}

# it_netns NAME: creates a namespace (its loopback up), removed at exit.
it_netns() {
  ip netns add "$1"
  IT_NETNS+=("$1")
  ip -n "$1" link set lo up
}

# it_veth NAME_A NS_A NAME_B NS_B: a veth pair, each end in the given namespace ("" = root
# namespace), both up, with IPv6 off so the kernel sends nothing of its own on them
# (no router solicitations, no MLD reports: the counters see only the test's traffic).
it_veth() {
  local a=$1 nsa=$2 b=$3 nsb=$4
  ip link add name "$a" type veth peer name "$b"
  IT_ROOT_LINKS+=("$a")
  local end ns
  for end in "$a:$nsa" "$b:$nsb"; do
    ns=${end#*:}
    end=${end%%:*}
    if [ -n "$ns" ]; then
      # Off before it moves and comes up: no IPv6 traffic at all.
      ip link set "$end" netns "$ns"
      ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$end.disable_ipv6=1" || true
      ip -n "$ns" link set "$end" up
    else
      sysctl -qw "net.ipv6.conf.$end.disable_ipv6=1" || true
      ip link set "$end" up
    fi
  done
}

# it_netns_veth NAME_A NS_A NAME_B NS_B: two new namespaces joined by a veth pair, NAME_A in
# NS_A and NAME_B in NS_B (as it_netns and it_veth make them): the usual rig, sluiced on one
# end and a sender on the other.
it_netns_veth() {
  it_netns "$2"
  it_netns "$4"
  it_veth "$1" "$2" "$3" "$4"
}

# it_spawn VAR OUT ERR CMD...: starts CMD in the background (stdout to OUT, stderr to ERR),
# stores its PID in VAR; stopped at exit if still running. `ip netns exec` execs its command,
# so a PID taken here is the command's own.
it_spawn() {
  local var=$1 out=$2 err=$3
  shift 3
  "$@" >"$out" 2>"$err" &
  local pid=$!
  IT_PIDS+=("$pid")
  printf -v "$var" '%s' "$pid"
}

# it_wait_exit PID TIMEOUT_S: waits for a spawned process and sets IT_RC to its exit status
# ("timeout" if it still runs after TIMEOUT_S). Not in $(...): only this shell can wait for it.
it_wait_exit() {
  local pid=$1 timeout=$2 _
  IT_RC=0
  for _ in $(seq $((timeout * 10))); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    IT_RC=timeout
    return 0
  fi
  wait "$pid" || IT_RC=$?
  it_forget "$pid"
}

# it_forget PID: a spawned process that has been waited for: its PID may be reused by now, so
# the clean-up must not signal it.
it_forget() {
  local keep=() p
  for p in "${IT_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
  IT_PIDS=("${keep[@]}")
}

# it_stop PID TIMEOUT_S [SIGNAL]: signals a spawned process (SIGINT by default) and waits for
# it; fails the test unless it exits with status 0 in time.
it_stop() {
  local pid=$1 timeout=$2 sig=${3:-INT}
  kill "-$sig" "$pid" 2>/dev/null || true
  it_wait_exit "$pid" "$timeout"
  [ "$IT_RC" = 0 ] || it_fail "process $pid exited with '$IT_RC' after SIG$sig (want 0)"
}

# it_try_wait_for FILE REGEX TIMEOUT_S [PID]: waits until FILE has a line matching REGEX.
# Returns 0 when it does, 1 on timeout, 2 if PID (when given) exited first.
it_try_wait_for() {
  local file=$1 re=$2 timeout=$3 pid=${4:-} _
  for _ in $(seq $((timeout * 20))); do
    grep -Eq -- "$re" "$file" 2>/dev/null && return 0
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      grep -Eq -- "$re" "$file" 2>/dev/null && return 0
      return 2
    fi
    sleep 0.05
  done
  return 1
}

# it_wait_for FILE REGEX TIMEOUT_S [PID]: the same, failing the test unless REGEX shows up.
it_wait_for() {
  local rc=0
  it_try_wait_for "$@" || rc=$?
  case $rc in
    0) return 0;;
    1) it_fail "no /$2/ in $1 after ${3}s";;
    *) it_fail "process $4 exited while waiting for /$2/ in $1";;
  esac
}

# it_memory_cgroup VAR LIMIT_BYTES: a new cgroup whose memory is limited to LIMIT_BYTES (v1's
# memory controller where it is mounted, else v2's memory.max), removed at exit; VAR gets its
# directory (write a PID to VAR/cgroup.procs). Skips where neither can be made.
it_memory_cgroup() {
  local var=$1 limit=$2 dir
  if [ -d /sys/fs/cgroup/memory ] && [ -f /sys/fs/cgroup/memory/cgroup.procs ]; then
    dir=/sys/fs/cgroup/memory/sluice-it-$IT_NAME-$IT_ID
    mkdir "$dir" || it_skip "cannot create a cgroup under /sys/fs/cgroup/memory"
    IT_CGROUPS+=("$dir")
    echo "$limit" >"$dir/memory.limit_in_bytes"
  elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    dir=/sys/fs/cgroup/sluice-it-$IT_NAME-$IT_ID
    mkdir "$dir" || it_skip "cannot create a cgroup under /sys/fs/cgroup"
    IT_CGROUPS+=("$dir")
    echo "$limit" >"$dir/memory.max"
  else
    it_skip "no cgroup memory controller here (neither v1's nor v2's)"
  fi
  printf -v "$var" '%s' "$dir"
}

# it_prefix VAR: a unique DPDK --file-prefix in VAR (its runtime directory is removed at exit).
it_prefix() {
  local p="sluice-it-$IT_NAME-$IT_ID-${#IT_PREFIXES[@]}"
  IT_PREFIXES+=("$p")
  printf -v "$1" '%s' "$p"
}

# it_eal_common PREFIX: the EAL arguments every DPDK process of these tests shares: no PCI,
# no hugepages (1 GiB of ordinary memory), no telemetry socket, its own file prefix.
it_eal_common() {
  echo "--no-pci --no-huge -m 1024 --no-telemetry --file-prefix $1"
}

# it_start_sluiced_af_xdp VAR NS IFACE [SLUICED OPTIONS...]: sluiced on net_af_xdp over IFACE
# inside NS, with $IT_DIR/rules.yaml and --report $IT_DIR/report.json (output in
# $IT_DIR/sluiced.{out,err}); VAR gets its PID once its workers run. Skips when this DPDK has
# no net_af_xdp driver, fails when sluiced does not start.
it_start_sluiced_af_xdp() {
  local var=$1 ns=$2 iface=$3 prefix
  shift 3
  it_prefix prefix
  # shellcheck disable=SC2046
  it_spawn "$var" "$IT_DIR/sluiced.out" "$IT_DIR/sluiced.err" \
    ip netns exec "$ns" "$SLUICED" -l 0,1 $(it_eal_common "$prefix") \
    --vdev "net_af_xdp0,iface=$iface" -- \
    --config "$IT_DIR/rules.yaml" --report "$IT_DIR/report.json" "$@"
  if ! it_try_wait_for "$IT_DIR/sluiced.err" 'worker\(s\) running' 30 "${!var}"; then
    cat "$IT_DIR/sluiced.err"
    # EAL's words when no driver of that name is loaded.
    if grep -q 'Unable to parse device .net_af_xdp0' "$IT_DIR/sluiced.err"; then
      it_skip "this DPDK has no net_af_xdp driver"
    fi
    it_fail "sluiced did not start on net_af_xdp"
  fi
  it_log "sluiced running on $iface (net_af_xdp)"
}

# it_last_port_rx FILE PORT: the rx count of PORT in the last counters table in FILE (the
# "port N: rx X  tx Y  missed Z" lines sluiced prints with --stats-interval), or "" if none.
it_last_port_rx() {
  { grep -E "^port $2: rx [0-9]+" "$1" 2>/dev/null || true; } | tail -1 | awk '{print $4}'
}

# it_report_table FILE...: prints each REPORT.json's rule counters as a table (for the log).
it_report_table() {
  /usr/bin/python3 - "$@" <<'EOF'
import json, sys
cols = ["matched", "conformed", "exceeded", "passed", "dropped", "marked", "malformed"]
for path in sys.argv[1:]:
    j = json.load(open(path))
    print("%s:" % path)
    print("  %-22s" % "rule" + "".join("%11s" % c for c in cols) + "%8s" % "flows")
    for r in j["rules"] + [dict(j["default"], name="(default)")]:
        print("  %-22s" % r["name"] + "".join("%11d" % r.get(c + "_packets", 0) for c in cols)
              + "%8d" % r.get("active_flows", 0))
    for p in j.get("ports", []):
        print("  port %d: rx %d tx %d missed %d" % (p["port"], p["rx_packets"], p["tx_packets"],
                                                    p["missed_packets"]))
EOF
}

# it_rt_prefix VAR: a command prefix that runs a mostly-sleeping traffic source at a real-time
# priority (chrt -f 5) when the system allows it, else nothing. On a machine whose CPUs are
# shared with builds, a CFS sender wakes up to ~20 ms late, and a source that stalls sends in
# clumps; at SCHED_FIFO it keeps its schedule to ~1 ms. It sleeps between batches, so it
# takes a fraction of a CPU, and RT throttling bounds it anyway.
it_rt_prefix() {
  if command -v chrt >/dev/null && chrt -f 5 true 2>/dev/null; then
    printf -v "$1" '%s' "chrt -f 5"
  else
    printf -v "$1" '%s' ""
  fi
}

# libxdp: never try the multi-program dispatcher (some kernels refuse it; a single program is
# all net_af_xdp needs). `ip netns exec` hides /sys/fs/bpf anyway, which has the same effect.
export LIBXDP_SKIP_DISPATCHER=1

# it_wait_for_matched SOCK RULE PID TIMEOUT_S: waits until sluiced (control socket SOCK) has
# matched a packet to RULE, failing the test if the sender PID ends first or TIMEOUT_S pass. A
# test measures traffic from then on, not after a fixed sleep: a sender's start (netns,
# socket, real-time class) can take seconds on a loaded host.
it_wait_for_matched() {
  local sock=$1 rule=$2 pid=$3 timeout=$4 n _
  for _ in $(seq $((timeout * 10))); do
    n=$(timeout 10 "$SLUICECTL" --socket "$sock" stats --json | /usr/bin/python3 -c '
import json, sys
print(next(r["matched_packets"] for r in json.load(sys.stdin)["rules"] if r["name"] == sys.argv[1]))
' "$rule") || it_fail "sluicectl stats --json failed while waiting for traffic"
    [ "$n" -gt 0 ] && return 0
    kill -0 "$pid" 2>/dev/null || it_fail "the sender ended before rule $rule matched a packet"
    sleep 0.1
  done
  it_fail "no packet matched rule $rule within ${timeout} s"
}

# it_watch_rule VAR FILE RULE OUT: starts a watcher (PID in VAR) that follows sluiced's stdout
# in FILE and, for every counters table (--stats-interval), appends to OUT the line
# "T MATCHED CONFORMED FLOWS" for RULE, T being CLOCK_MONOTONIC seconds when the watcher saw
# the row (polled every 5 ms, so at most a few ms after sluiced printed it). This is how tests
# bracket when traffic started and ended as sluiced saw it.
it_watch_rule() {
  local var=$1 file=$2 rule=$3 out=$4 rt
  # Real-time priority when allowed: polling lcores on every CPU must not delay the stamps.
  it_rt_prefix rt
  # shellcheck disable=SC2086
  it_spawn "$var" /dev/null "$out.err" $rt /usr/bin/python3 -u -c '
import sys, time
path, rule, out = sys.argv[1:4]
while True:
    try:
        f = open(path)
        break
    except FileNotFoundError:
        time.sleep(0.005)
buf = ""
with open(out, "w") as o:
    while True:
        chunk = f.read()
        if not chunk:
            time.sleep(0.005)
            continue
        now = time.monotonic()
        buf += chunk
        *lines, buf = buf.split("\n")
        for line in lines:
            cols = line.split()
            if len(cols) >= 10 and cols[0] == rule and cols[1].isdigit():
                o.write("%.4f %s %s %s\n" % (now, cols[1], cols[2], cols[-1]))
                o.flush()
' "$file" "$rule" "$out"
}

# it_monotonic: CLOCK_MONOTONIC in seconds (the watcher's clock).
it_monotonic() { /usr/bin/python3 -c 'import time; print("%.4f" % time.monotonic())'; }
