#!/usr/bin/env bash
# Builds DPDK's examples/qos_meter (Debian dpdk-doc) for scripts/bench_dataplane.sh, with only
# what the net_pcap -> net_null rig needs changed:
#
#   bench/dataplane/qos_meter_build.sh OUT_DIR MBUFS [MBUF_SIZE]   -> OUT_DIR/build/qos_meter
#
#  - RX: no RSS (mq_mode NONE, rss_hf 0) and no RX checksum offload: net_pcap offers neither,
#    and rte_eth_dev_configure refuses a port asked for an offload it lacks.
#  - NB_MBUF 8192 -> MBUFS: net_pcap infinite_rx=1 keeps the whole trace in mbufs of the RX
#    queue's pool, so the pool must hold the trace plus what is in flight.
#  - the mbufs' data room RTE_MBUF_DEFAULT_BUF_SIZE -> MBUF_SIZE, if given (the bench's
#    --mbuf-size, the same for every forwarder: a 10M-packet trace fits only in small mbufs).
# Everything else is the example as shipped: srTCM colour-blind (rte_meter) per flow, 256
# flows indexed by the last byte of the IPv4 destination (frame byte 33), the policer table
# indexed by the input colour read from the destination MAC's last byte (frame byte 5: the
# trace must carry 0 = green there, or every packet is dropped) and the output colour written
# back to that byte; CIR 46 MB/s, CBS = EBS = 2048 bytes; one lcore; rte_rdtsc once per burst.
# The copy is built with the example's own Makefile (pkg-config libdpdk).
set -euo pipefail
out=${1:?OUT_DIR}
mbufs=${2:?MBUFS}
mbuf_size=${3:-}
src=${QOS_METER_SRC:-/usr/share/dpdk/examples/qos_meter}
[ -f "$src/main.c" ] || { echo "qos_meter_build: no $src/main.c (Debian: dpdk-doc)" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
cp "$src"/Makefile "$src"/*.c "$src"/*.h "$out"/

# patch PATTERN REPLACEMENT: exactly one line of main.c must match, so that a different
# upstream version fails here instead of running unpatched.
patch_line() {
  local n
  n=$(grep -c -- "$1" "$out/main.c" || true)
  [ "$n" = 1 ] || { echo "qos_meter_build: '$1' matches $n lines of main.c (want 1)" >&2; exit 1; }
  sed -i "s|$1|$2|" "$out/main.c"
}
patch_line '\.mq_mode	= RTE_ETH_MQ_RX_RSS,' '.mq_mode	= RTE_ETH_MQ_RX_NONE,'
patch_line '\.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,' '.offloads = 0,'
patch_line '\.rss_hf = RTE_ETH_RSS_IP,' '.rss_hf = 0,'
patch_line '^#define NB_MBUF  *8192$' "#define NB_MBUF             $mbufs"
[ -z "$mbuf_size" ] || patch_line '0, RTE_MBUF_DEFAULT_BUF_SIZE, rte_socket_id());' "0, $mbuf_size, rte_socket_id());"
make -C "$out" -s >&2
[ -x "$out/build/qos_meter" ] || { echo "qos_meter_build: no $out/build/qos_meter" >&2; exit 1; }
