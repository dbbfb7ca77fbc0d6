#!/usr/bin/env bash
# Installs every Debian package that sluice's build, tests, demo and benchmarks need.
# Idempotent: installs only what is missing, and runs `apt-get update` only then.
set -euo pipefail

packages=(
  # toolchain and build
  build-essential g++ meson ninja-build pkg-config clang llvm
  libasan8 libubsan1 libtsan2
  libclang-rt-14-dev  # libFuzzer for tests/fuzz (only Recommended by clang-14)
  # libraries
  libyaml-dev libpcap-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
  libdpdk-dev dpdk dpdk-dev dpdk-doc libbpf-dev libxdp-dev libelf-dev zlib1g-dev bpftool
  # test and demo tools
  iproute2 python3 procps prometheus socat
  valgrind  # callgrind: scripts/bench.sh instructions
  # installing as a service: manual pages, bash completion, unit checks, the Debian package
  scdoc bash-completion man-db systemd libcap2-bin debhelper dpkg-dev lintian
  systemd-container  # systemd-nspawn: tests/install/unit_systemd.sh runs the unit under systemd
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "setup-deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "setup-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
