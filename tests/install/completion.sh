#!/usr/bin/env bash
# completion: the installed bash completion of sluicectl (and sluiced's options), loaded the way bash-completion loads
# it on demand (by command name, from DATADIR/bash-completion/completions of the install tree),
# completes commands, subcommands, options, rules files and interfaces, and the names of the
# rules a running sluiced has (sluiced on net_null with --control, asked by the completion
# itself through `sluicectl --socket SOCK rule list`).
# Exit: 0 pass, 1 fail, 77 skip (no bash-completion; no root or no live dataplane: the rule
# names part needs a running sluiced).
set -euo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
inst_init completion
BC=/usr/share/bash-completion/bash_completion
[ -f "$BC" ] || inst_skip "bash-completion is not installed (scripts/setup-deps.sh installs it)"

D=$INST_DIR/root
inst_install "$D"
inst_dirs
CTL=$D$BINDIR/sluicectl

# complete LINE: what bash would offer at the end of LINE (its first word sluicectl or
# sluiced, run as the installed program), one candidate a line, sorted.
complete() {
  local prog=${1%% *}
  XDG_DATA_DIRS=$D$DATADIR BASH_COMPLETION_USER_DIR=$INST_DIR/none bash --norc --noprofile -c '
    source "$1" || exit 3
    __load_completion "$4" || { echo "$4: no completion found" >&2; exit 4; }
    line="$3 ${2#"$4" }"    # the installed program, as typed: the completion may run it
    read -ra COMP_WORDS <<<"$line"
    [[ $line == *" " ]] && COMP_WORDS+=("")
    COMP_LINE=$line COMP_POINT=${#line} COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    "_$4" "$4" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf "%s\n" "${COMPREPLY[@]}" | sort
  ' completion "$BC" "$1" "$D$BINDIR/$prog" "$prog"
}

fails=()
# expect LINE WANT...: the candidates are exactly WANT (in any order).
expect() {
  local line=$1 got want
  shift
  got=$(complete "$line" | xargs)
  want=$(printf '%s\n' "$@" | sort | xargs)
  echo "'$line<TAB>' -> $got"
  [ "$got" = "$want" ] || fails+=("'$line': got '$got', want '$want'")
}

expect "sluicectl " stats rule config flows xdp
expect "sluicectl co" config
expect "sluicectl --" --socket --xdp --help
expect "sluicectl rule " list show add set del
expect "sluicectl config " check load save diff
expect "sluicectl stats --" --json --watch --count
expect "sluicectl stats --json --w" --watch
expect "sluicectl --socket /x/y.sock c" config

mkdir -p "$INST_DIR/files/rdir"
touch "$INST_DIR/files/r1.yaml" "$INST_DIR/files/r2.yml" "$INST_DIR/files/rx.txt"
expect "sluicectl config check $INST_DIR/files/r" \
  "$INST_DIR/files/r1.yaml" "$INST_DIR/files/r2.yml" "$INST_DIR/files/rdir"
expect "sluiced -- --c" --config --control
expect "sluiced --replay in.pcap --o" --out
expect "sluiced -l 0,1 --no-p" --no-pci
expect "sluiced -l 0,1 -- --config $INST_DIR/files/r" \
  "$INST_DIR/files/r1.yaml" "$INST_DIR/files/r2.yml" "$INST_DIR/files/rdir"
got=$(complete "sluicectl --xdp " | xargs)
echo "'sluicectl --xdp <TAB>' -> $got"
[[ " $got " == *" lo "* ]] || fails+=("--xdp does not offer the interface lo: '$got'")

# Rule names from a running sluiced.
live_note=""
if [ "$(id -u)" != 0 ]; then
  live_note="rule names not checked: needs root for a live sluiced"
elif [ "${SLUICE_LIVE:-0}" != 1 ]; then
  live_note="rule names not checked: this build has no live (DPDK) dataplane"
else
  cat >"$INST_DIR/rules.yaml" <<'YAML'
default: {action: pass}
rules:
  - {name: alpha-dns, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 100pps, burst: 10, action: drop}
  - {name: beta, match: {proto: tcp}, key: none, rate: 1Mbit, burst: 16KiB, action: pass}
  - {name: alpine, match: {proto: icmp}, key: none, rate: 10pps, burst: 5, action: drop}
YAML
  SOCK=$INST_DIR/ctl.sock PREFIX_ID=sluice-inst-completion-$$
  "$D$BINDIR/sluiced" -l 0,1 --no-pci --no-huge -m 512 --no-telemetry --file-prefix "$PREFIX_ID" \
    --vdev net_null0 -- --config "$INST_DIR/rules.yaml" --control "$SOCK" \
    >"$INST_DIR/sluiced.out" 2>"$INST_DIR/sluiced.err" &
  DP_PID=$!
  stop_sluiced() {
    kill -INT "$DP_PID" 2>/dev/null || true
    wait "$DP_PID" 2>/dev/null || true
    rm -rf "/var/run/dpdk/$PREFIX_ID"
  }
  trap 'rc=$?; stop_sluiced; (exit $rc); inst_cleanup' EXIT
  for _ in $(seq 200); do
    "$CTL" --socket "$SOCK" rule list >/dev/null 2>&1 && break
    kill -0 "$DP_PID" 2>/dev/null || { cat "$INST_DIR/sluiced.err"; inst_fail "sluiced exited"; }
    sleep 0.1
  done
  "$CTL" --socket "$SOCK" rule list || inst_fail "sluiced does not answer on $SOCK"
  expect "sluicectl --socket $SOCK rule show " alpha-dns beta alpine
  expect "sluicectl --socket $SOCK rule show al" alpha-dns alpine
  expect "sluicectl --socket $SOCK rule show alpha-dns " ""
  # No backend: no names, and no error on the terminal.
  expect "sluicectl --socket $INST_DIR/nobody.sock rule show " ""
fi

((${#fails[@]} == 0)) || inst_fail "${fails[*]}"
[ -z "$live_note" ] || inst_skip "static completions pass; $live_note"
inst_pass "commands, options, files, interfaces and running rule names complete"
