# shellcheck shell=bash
# A throwaway systemd machine for the install tests: this host's own OS tree booted by
# systemd-nspawn with systemd as PID 1, so that units really start, reload and stop even
# where the host's PID 1 is not systemd (this CI machine's VM init).
#
# What keeps the host untouched:
#   - --volatile=overlay: the container's / is this host's / read-only under a tmpfs overlay
#     (dpkg -i, /etc and /var writes land in memory and vanish with the container). nspawn
#     refuses -D / itself, so it gets a bind of / made in a private mount namespace, which also
#     has a tmpfs /run (nspawn's lock and propagation directories go there, not the host's).
#   - --private-network: only a loopback inside; the container's services reach no link of the
#     host. /sys and /proc/sys are read-only in it (nspawn), so no udev or sysctl reaches out.
#     nspawn leaves /sys/module out; it is bound in read-only, as DPDK's EAL refuses to start
#     without it (it looks up the vfio module there: "FATAL: Cannot init VFIO").
#   - an empty /etc/systemd/system (a scratch directory bound over it): none of the units this
#     host enables (databases, timers) start; it boots the target ct_boot writes there, which
#     wants basic.target alone.
#   - cgroups: nspawn runs in a cgroup of its own under ours (each hierarchy systemd uses:
#     cgroup2 and a v1 name=systemd one), removed afterwards.
# No machined: --register=no --keep-unit; commands go in with nsenter into the container's PID 1.
#
# Use: source it; ct_check_host (skips the test where it cannot work); ct_boot DIR [nspawn
# options...]; ct_run CMD... (inside, as root); ct_shutdown (also called by ct_cleanup, from
# the test's EXIT trap). Needs: inst_skip/inst_fail from lib.sh.

CT_NSPAWN_PID=""
CT_LEADER=""
CT_CGROUPS=()
CT_DIR=""

# ct_check_host: the tools and rights the container needs, else the test is skipped (77).
ct_check_host() {
  [ "$(id -u)" = 0 ] || inst_skip "needs root (systemd-nspawn)"
  local t
  for t in systemd-nspawn nsenter unshare; do
    command -v "$t" >/dev/null || inst_skip "$t is not installed (Debian: systemd-container, util-linux)"
  done
  [ -x /lib/systemd/systemd ] || inst_skip "no /lib/systemd/systemd to boot (Debian: systemd)"
}

# ct_cgroup_dirs: "MOUNTPOINT/OWN_PATH" of each hierarchy systemd tracks processes in.
ct_cgroup_dirs() {
  /usr/bin/python3 - <<'EOF'
own = {}
for line in open("/proc/self/cgroup"):
    hid, ctrl, path = line.rstrip("\n").split(":", 2)
    own["cgroup2" if hid == "0" else ctrl] = path
for line in open("/proc/self/mountinfo"):
    pre, post = line.split(" - ")
    mnt = pre.split()[4]
    fstype, _src, opts = post.split()[:3]
    key = "cgroup2" if fstype == "cgroup2" else (
        "name=systemd" if fstype == "cgroup" and "name=systemd" in opts.split(",") else None)
    if key and key in own:
        print(mnt.rstrip("/") + own[key].rstrip("/"))
EOF
}

# ct_boot DIR [NSPAWN_OPTION...]: boots the container (console in DIR/console.log) and waits
# until its systemd has finished starting up. Sets CT_LEADER (its PID 1, as seen here).
ct_boot() {
  CT_DIR=$1
  shift
  mkdir -p "$CT_DIR/root" "$CT_DIR/etc-systemd"
  cat >"$CT_DIR/etc-systemd/sluice-test.target" <<'EOF'
[Unit]
Description=sluice install test: the base system only
Requires=basic.target
After=basic.target
EOF
  local dir cg
  while read -r dir; do
    cg=$dir/sluice-ct-$$
    mkdir "$cg" || inst_fail "cannot create the container's cgroup $cg"
    CT_CGROUPS+=("$cg")
  done < <(ct_cgroup_dirs)
  ((${#CT_CGROUPS[@]} > 0)) || inst_skip "no cgroup2 or name=systemd hierarchy is mounted"
  (
    for cg in "${CT_CGROUPS[@]}"; do echo "$BASHPID" >"$cg/cgroup.procs"; done
    # shellcheck disable=SC2016  # $1 and $@ are the inner shell's
    exec unshare --mount --propagation private /bin/sh -c '
      mount -t tmpfs -o mode=0755 tmpfs /run && mount --bind / "$1" || exit 1
      shift
      exec systemd-nspawn "$@"' sh "$CT_DIR/root" \
      --quiet --register=no --keep-unit --volatile=overlay -D "$CT_DIR/root" \
      --machine="sluice-ct-$$" --private-network \
      --bind="$CT_DIR/etc-systemd:/etc/systemd/system" --bind-ro=/sys/module "$@" \
      --boot -- systemd.unit=sluice-test.target
  ) </dev/null >"$CT_DIR/console.log" 2>&1 &
  CT_NSPAWN_PID=$!
  local _ p state=""
  for _ in $(seq 300); do
    kill -0 "$CT_NSPAWN_PID" 2>/dev/null || { cat "$CT_DIR/console.log"; inst_fail "systemd-nspawn exited while booting"; }
    if [ -z "$CT_LEADER" ]; then
      for p in $(pgrep -P "$CT_NSPAWN_PID" || true); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = systemd ] && CT_LEADER=$p
      done
    fi
    if [ -n "$CT_LEADER" ]; then
      state=$(ct_run systemctl is-system-running 2>/dev/null || true)
      case $state in running | degraded) return 0 ;; esac
    fi
    sleep 0.1
  done
  cat "$CT_DIR/console.log"
  inst_fail "the container's systemd did not finish booting in 30 s (state '$state')"
}

# ct_run CMD...: runs CMD inside the container (all of its namespaces), as root.
ct_run() {
  nsenter --target "$CT_LEADER" --all -- "$@"
}

# ct_shutdown: powers the container off (SIGKILL to nspawn after 20 s), removes its cgroups.
ct_shutdown() {
  if [ -n "$CT_NSPAWN_PID" ]; then
    [ -n "$CT_LEADER" ] && ct_run systemctl --no-block poweroff >/dev/null 2>&1
    local _
    for _ in $(seq 200); do kill -0 "$CT_NSPAWN_PID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$CT_NSPAWN_PID" 2>/dev/null; then
      echo "container: no poweroff in 20 s: SIGKILL to systemd-nspawn $CT_NSPAWN_PID" >&2
      kill -KILL "$CT_NSPAWN_PID" 2>/dev/null
      [ -n "$CT_LEADER" ] && kill -KILL "$CT_LEADER" 2>/dev/null
    fi
    wait "$CT_NSPAWN_PID" 2>/dev/null
    CT_NSPAWN_PID="" CT_LEADER=""
  fi
  local cg
  for cg in "${CT_CGROUPS[@]}"; do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$cg" ] && echo "container: could not remove cgroup $cg" >&2
  done
  CT_CGROUPS=()
  return 0
}
