#!/usr/bin/env bash
# live_memory_limit: flow tables are held to the memory sluiced can have, its cgroup's limit
# included, at start and for rules added while it runs (issue 13: "memory budget checked
# before allocation"). Before this check, `config load` of a file whose tables need more than
# the limit had the kernel kill sluiced (its huge-page tables are written at creation).
#
# sluiced runs on net_null in a cgroup limited to 1.5 GiB:
#   - `config diff big.yaml` (a rule of 2^26 flows: 2 GiB of table) exits 1 saying the tables
#     need more than the memory available; `config load big.yaml` says the same words, and
#     the rules stay as they were;
#   - `config load small.yaml` (a 64k-flow rule) applies;
#   - sluiced stops on SIGINT with status 0 (it was not killed);
#   - started in the same cgroup with big.yaml, sluiced exits 2 with the same message.
#
# Exit: 0 pass, 1 fail, 77 skip (not root, no cgroup memory controller).
set -euo pipefail
# shellcheck source=tests/integration/lib.sh
source "$(dirname "$0")/lib.sh"
it_init live_memory_limit --no-net
it_need_bin SLUICED SLUICECTL

LIMIT=$((1536 * 1024 * 1024))
it_memory_cgroup CG "$LIMIT"
SOCK=$IT_DIR/sluiced.sock
ctl() { timeout 20 "$SLUICECTL" --socket "$SOCK" "$@"; }
status_of() { local rc=0; "$@" >"$IT_DIR/out" 2>"$IT_DIR/err" || rc=$?; echo "$rc"; }

cat >"$IT_DIR/rules.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: a, match: {proto: udp}, key: src-ip, rate: 1000pps, burst: 100, action: drop}
Y
cat >"$IT_DIR/big.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: a, match: {proto: udp}, key: src-ip, rate: 1000pps, burst: 100, action: drop}
  - {name: big, match: {proto: tcp}, key: src-ip, rate: 1000pps, burst: 100, action: drop, max-flows: 67108864}
Y
cat >"$IT_DIR/small.yaml" <<'Y'
default: {action: pass}
rules:
  - {name: a, match: {proto: udp}, key: src-ip, rate: 1000pps, burst: 100, action: drop}
  - {name: small, match: {proto: tcp}, key: src-ip, rate: 1000pps, burst: 100, action: drop}
Y

# $JOIN CMD...: CMD as a member of the cgroup (a shell joins it, then execs CMD: one PID).
JOIN=(bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG")

it_prefix P
it_spawn DP "$IT_DIR/sluiced.out" "$IT_DIR/sluiced.err" "${JOIN[@]}" "$SLUICED" -l 0,1 \
  --no-pci --no-huge -m 512 --no-telemetry --file-prefix "$P" --vdev net_null0 --vdev net_null1 \
  -- --config "$IT_DIR/rules.yaml" --control "$SOCK"
it_wait_for "$IT_DIR/sluiced.err" 'worker\(s\) running' 30 "$DP"
it_log "sluiced running in $CG (limit $LIMIT bytes)"

[ "$(status_of ctl config diff "$IT_DIR/big.yaml")" = 1 ] ||
  it_fail "config diff big.yaml: want exit 1, got: $(cat "$IT_DIR/out" "$IT_DIR/err")"
DIFF_ERR=$(cat "$IT_DIR/err")
grep -q "flow tables need 2.0 GiB .* of memory available" <<<"$DIFF_ERR" ||
  it_fail "config diff big.yaml does not say why: $DIFF_ERR"
[ "$(status_of ctl config load "$IT_DIR/big.yaml")" = 1 ] ||
  it_fail "config load big.yaml: want exit 1, got: $(cat "$IT_DIR/out" "$IT_DIR/err")"
grep -q "flow tables need 2.0 GiB .* of memory available" "$IT_DIR/err" ||
  it_fail "config load big.yaml does not say why: $(cat "$IT_DIR/err")"
kill -0 "$DP" 2>/dev/null || it_fail "sluiced died on config load big.yaml: $(tail -5 "$IT_DIR/sluiced.err")"
LIST=$(ctl rule list) || it_fail "rule list after the refused load"
if grep -q "^big" <<<"$LIST"; then it_fail "the refused load added big: $LIST"; fi
it_log "big.yaml refused by config diff and config load: $DIFF_ERR"

ctl config load "$IT_DIR/small.yaml" >/dev/null || it_fail "config load small.yaml"
grep -q "^small" <<<"$(ctl rule list)" || it_fail "config load small.yaml did not apply"
it_stop "$DP" 30

it_prefix P2
RC=0
"${JOIN[@]}" "$SLUICED" -l 0,1 --no-pci --no-huge -m 512 --no-telemetry --file-prefix "$P2" \
  --vdev net_null0 --vdev net_null1 -- --config "$IT_DIR/big.yaml" \
  >"$IT_DIR/start.out" 2>"$IT_DIR/start.err" || RC=$?
[ "$RC" = 2 ] || it_fail "sluiced started with big.yaml in the cgroup: want exit 2, got $RC: $(tail -3 "$IT_DIR/start.err")"
grep -q "big.yaml: flow tables need 2.0 GiB .* of memory available; lower max-flows or --flows" \
  "$IT_DIR/start.err" ||
  it_fail "sluiced's refusal of big.yaml does not say why: $(tail -3 "$IT_DIR/start.err")"
it_pass "tables beyond the cgroup's memory refused by config diff, config load (sluiced kept running) and at start (exit 2)"
