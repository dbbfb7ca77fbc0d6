# shellcheck shell=bash
# Shared helpers of the install tests: a scratch directory removed at exit, `meson install`
# of this build into it, and the build's install directories.
#
# Environment (meson passes it): BUILD_ROOT, SOURCE_ROOT, MESON (the meson that configured the
# build). Exit codes: 0 pass, 1 fail, 77 skip (meson's convention).

INST_NAME=""
INST_DIR=""

inst_fail() {
  echo "FAIL: $INST_NAME: $*"
  exit 1
}

inst_skip() {
  echo "SKIP: $INST_NAME: $*"
  exit 77
}

inst_pass() {
  echo "PASS: $INST_NAME: $*"
  exit 0
}

inst_cleanup() {
  local rc=${1:-$?}
  if [ -n "$INST_DIR" ]; then
    if [ "${INST_KEEP:-0}" = 1 ]; then echo "kept: $INST_DIR" >&2; else rm -rf "$INST_DIR"; fi
  fi
  exit "$rc"
}

# inst_init NAME: checks the environment, makes $INST_DIR.
inst_init() {
  inst_init_standalone "$1"
  local v
  for v in BUILD_ROOT SOURCE_ROOT MESON; do
    [ -n "${!v:-}" ] || inst_fail "$v is not set (run through meson test, or export it)"
  done
}

# inst_init_standalone NAME: the traps and $INST_DIR only, for a test that needs no build
# tree (one given a .deb).
inst_init_standalone() {
  INST_NAME=$1
  trap inst_cleanup EXIT
  set -E
  trap 'echo "FAIL: $INST_NAME: line $LINENO: \"$BASH_COMMAND\" failed (status $?)"' ERR
  INST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sluice-inst-$INST_NAME.XXXXXX")
}

# inst_dirs [BUILD]: sets PREFIX BINDIR SYSCONFDIR DATADIR MANDIR (absolute) from BUILD's
# options (default $BUILD_ROOT).
inst_dirs() {
  local build=${1:-$BUILD_ROOT} vars
  vars=$("$MESON" introspect --buildoptions "$build" | /usr/bin/python3 -c '
import json, os, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
prefix = opts["prefix"]
for name in ("bindir", "sysconfdir", "datadir", "mandir"):
    print("%s=%s" % (name.upper(), os.path.join(prefix, opts[name])))
print("PREFIX=" + prefix)
')
  eval "$vars"
}

# inst_install DESTDIR: `meson install --destdir DESTDIR` of the build (already built by meson
# test), quietly unless it fails.
inst_install() {
  local log=$INST_DIR/install.log
  "$MESON" install -C "$BUILD_ROOT" --no-rebuild --destdir "$1" >"$log" 2>&1 || {
    cat "$log"
    inst_fail "meson install --destdir failed"
  }
}

# inst_unit_dir: where the build puts sluiced@.service (systemd/meson.build's rule).
inst_unit_dir() {
  if [ "$PREFIX" = /usr ] && pkg-config --exists systemd; then
    pkg-config --variable=systemdsystemunitdir systemd
  else
    echo "$PREFIX/lib/systemd/system"
  fi
}

# inst_completion_dir: bash-completion's completionsdir under this prefix's datadir.
inst_completion_dir() {
  if pkg-config --exists bash-completion; then
    pkg-config --define-variable=datadir="$DATADIR" --variable=completionsdir bash-completion
  else
    echo "$DATADIR/bash-completion/completions"
  fi
}
