#!/usr/bin/env bash
# man_options: every long option the programs print in their help appears in their manual
# page, so the pages cannot drift from the CLIs. Generic over the help's format: it takes every
# `--word` token of `sluiced --help`, `sluicectl --help` and `sluicectl CMD... --help` for each
# command of SPEC §1 (a command whose --help exits non-zero contributes nothing), and looks
# for each as a whole token in the rendered page (man -l, no line wrapping).
# A negative control checks that an option missing from a page is reported.
set -euo pipefail
# shellcheck source=tests/install/lib.sh
source "$(dirname "$0")/lib.sh"
inst_init man_options
command -v man >/dev/null || inst_fail "man is not installed (Debian: man-db; scripts/setup-deps.sh installs it)"
for v in SLUICED SLUICECTL; do [ -x "${!v:-}" ] || inst_fail "$v is not an executable"; done

# help_text OUT CMD...: appends CMD's output (stdout and stderr) to OUT if it exits 0.
help_text() {
  local out=$1 tmp=$INST_DIR/help.tmp rc=0
  shift
  "$@" >"$tmp" 2>&1 || rc=$?
  if ((rc == 0)); then
    cat "$tmp" >>"$out"
    echo "  ${1##*/} ${*:2}: $(grep -oE -- '--[a-z][a-z0-9-]*' "$tmp" | sort -u | wc -l) options" >&2
  else
    echo "  ${1##*/} ${*:2}: exit status $rc, not counted" >&2
  fi
}

# missing_options HELP PAGE: prints the --options of HELP that the rendered PAGE lacks.
missing_options() {
  local help=$1 page=$2 text=$INST_DIR/page.txt opt
  MANWIDTH=2000 man -l "$page" 2>/dev/null | col -b >"$text"
  [ -s "$text" ] || inst_fail "man -l $page printed nothing"
  for opt in $(grep -oE -- '--[a-z][a-z0-9-]*' "$help" | sort -u); do
    grep -qE -- "(^|[^A-Za-z0-9-])$opt([^A-Za-z0-9-]|\$)" "$text" || echo "$opt"
  done
}

MAN=$BUILD_ROOT/man
for page in sluiced.8 sluicectl.8; do
  [ -f "$MAN/$page" ] || inst_fail "no $MAN/$page (is scdoc installed?)"
done

echo "help texts:" >&2
help_text "$INST_DIR/sluiced.help" "$SLUICED" --help
help_text "$INST_DIR/sluicectl.help" "$SLUICECTL" --help
for cmd in stats rule "rule list" "rule show" "rule add" "rule set" "rule del" \
    config "config check" "config load" "config save" "config diff" \
    flows "flows top" xdp "xdp attach" "xdp detach"; do
  # shellcheck disable=SC2086
  help_text "$INST_DIR/sluicectl.help" "$SLUICECTL" $cmd --help
done

fails=()
for prog in sluiced sluicectl; do
  help=$INST_DIR/$prog.help
  [ -s "$help" ] || inst_fail "$prog --help printed nothing or failed"
  n=$(grep -oE -- '--[a-z][a-z0-9-]*' "$help" | sort -u | wc -l)
  ((n > 0)) || inst_fail "$prog --help lists no --options"
  missing=$(missing_options "$help" "$MAN/$prog.8" | xargs)
  echo "$prog: $n distinct options in --help; missing from $prog(8): ${missing:-none}"
  [ -z "$missing" ] || fails+=("$prog(8) lacks: $missing")
done

# Negative control: an option the page does not have is reported.
echo "--no-such-option-$$ and --config" >"$INST_DIR/fake.help"
[ "$(missing_options "$INST_DIR/fake.help" "$MAN/sluiced.8")" = "--no-such-option-$$" ] ||
  inst_fail "the check did not report an undocumented option"

((${#fails[@]} == 0)) || inst_fail "${fails[*]}"
inst_pass "every --option of sluiced's and sluicectl's help is in their manual pages"
