// sluice-flow-floor: the least work any per-flow dataplane does per packet, as a DPDK forwarder
// to run beside testpmd and sluiced on the same vdevs and traces (scripts/bench_dataplane.sh).
//
//   sluice-flow-floor [EAL args] -- --flows F [--mbufs N] [--mbuf-size BYTES] [--burst B] [--overlap]
//                                    [--split]
//
// Per packet it does what testpmd --forward-mode=macswap does (swap the MAC addresses, send
// port 0 -> port 1) plus the one thing a per-flow limiter cannot skip: read and write the
// packet's flow state in a table sized for F flows. Everything else sluiced does is left out
// or made as cheap as it can be, so the figure is an upper bound for sluiced, not a rival:
//  - no parse: the 5-tuple is read at the fixed offsets of an untagged IPv4 frame (the
//    benchmark traces are nothing else); a cheap multiply-mix instead of a keyed hash;
//  - no lookup: one 16-byte slot per flow (F * 16 bytes, a perfect table with no slack and no
//    tags to compare), the slot at the hash, written unconditionally (a tag and a counter);
//  - prefetched as sluiced does: every packet's slot first, then the writes; or, --overlap,
//    the writes of a burst only after the next burst's prefetches.
// --split lays the same 16 bytes per flow out as sluiced's sets are: 8 flows' tags in one line
// and their counters in the next, so a packet touches two lines (both prefetched) in a table
// of the same size. Against the default it measures what a packet's second line costs.
// So (sluice-flow-floor / testpmd macswap) bounds what a per-flow design keeping at least 16
// bytes per flow can reach on the machine it runs on, and the gap between it and sluiced is
// what sluiced's own code costs.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

constexpr uint16_t kMaxBurst = 64;
constexpr uint16_t kRingSize = 1024;

std::atomic<bool> g_stop{false};

struct Options {
  uint64_t flows = 0;
  unsigned mbufs = 65535;
  uint16_t mbuf_size = RTE_MBUF_DEFAULT_BUF_SIZE;  // data room, headroom included
  uint16_t burst = 32;
  bool overlap = false;
  bool split = false;  // a set's 8 tags in one line, their counters in the next
};

struct Floor {
  Options opt;
  uint64_t* table = nullptr;  // opt.flows * 2 words
  uint64_t rx = 0, tx = 0;
};

[[noreturn]] void die(const std::string& why) {
  std::fprintf(stderr, "sluice-flow-floor: %s\n", why.c_str());
  std::exit(2);
}

bool parse_u64(const char* s, uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  out = v;
  return true;
}

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--overlap") {
      o.overlap = true;
      continue;
    }
    if (a == "--split") {
      o.split = true;
      continue;
    }
    uint64_t v = 0;
    if (i + 1 >= argc || !parse_u64(argv[i + 1], v)) die("usage: -- --flows F [--mbufs N] [--mbuf-size BYTES] [--burst B] [--overlap] [--split]");
    if (a == "--flows") o.flows = v;
    else if (a == "--mbufs") o.mbufs = unsigned(v);
    else if (a == "--mbuf-size") {
      if (v < 192 || v > 65535) die("--mbuf-size must be in [192, 65535]");
      o.mbuf_size = uint16_t(v);
    }
    else if (a == "--burst") o.burst = uint16_t(v);
    else die("unknown option " + a);
    ++i;
  }
  if (o.flows == 0) die("--flows F (> 0) is required");
  if (o.burst == 0 || o.burst > kMaxBurst) die("--burst must be in [1, 64]");
  if (o.split && o.flows % 8 != 0) die("--split needs --flows a multiple of 8");
  return o;
}

// The flow's hash from an untagged IPv4 frame: protocol, addresses and ports.
inline uint64_t flow_hash(const uint8_t* frame) {
  uint64_t addrs;
  uint32_t ports;
  std::memcpy(&addrs, frame + 26, 8);
  std::memcpy(&ports, frame + 34, 4);
  uint64_t h = (addrs ^ 0x9e3779b97f4a7c15ull) * 0xbf58476d1ce4e5b9ull;
  h ^= (uint64_t(ports) << 8 | frame[23]) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

// One burst: received, its slots hashed and prefetched, waiting for its writes.
struct Burst {
  rte_mbuf* pkts[kMaxBurst];
  uint64_t* slot[kMaxBurst];
  uint64_t hash[kMaxBurst];
  uint16_t n = 0;
};

// kSplit (--split) is a template parameter, not a test per packet, so the plain floor's loops
// are what they were before the option existed. The counter's offset from its flow's tag, in
// words: the next word, or the same way of the set's second line.
template <bool kSplit>
constexpr size_t kCounter = kSplit ? 8 : 1;

template <bool kSplit>
void receive(Floor& f, Burst& b) {
  b.n = rte_eth_rx_burst(0, 0, b.pkts, f.opt.burst);
  f.rx += b.n;
  for (uint16_t i = 0; i < b.n; ++i) {
    const uint8_t* d = rte_pktmbuf_mtod(b.pkts[i], const uint8_t*);
    b.hash[i] = flow_hash(d);
    const uint64_t at = uint64_t((static_cast<unsigned __int128>(b.hash[i]) * f.opt.flows) >> 64);
    if constexpr (kSplit) {
      // Slot `at` is way at % 8 of set at / 8: its tag in the set's first line, its counter
      // at the same way of the second.
      uint64_t* const set = f.table + 16 * (at / 8);
      b.slot[i] = set + at % 8;
      rte_prefetch0(set);
      rte_prefetch0(set + 8);
    } else {
      b.slot[i] = f.table + 2 * at;
      rte_prefetch0(b.slot[i]);
    }
  }
}

template <bool kSplit>
void write_and_send(Floor& f, Burst& b) {
  for (uint16_t i = 0; i < b.n; ++i) {
    auto* eth = rte_pktmbuf_mtod(b.pkts[i], rte_ether_hdr*);
    const rte_ether_addr a = eth->src_addr;
    eth->src_addr = eth->dst_addr;
    eth->dst_addr = a;
    b.slot[i][0] = b.hash[i];
    b.slot[i][kCounter<kSplit>] += 1;
  }
  const uint16_t sent = rte_eth_tx_burst(1, 0, b.pkts, b.n);
  f.tx += sent;
  if (sent < b.n) rte_pktmbuf_free_bulk(b.pkts + sent, b.n - sent);
  b.n = 0;
}

template <bool kSplit>
int forward_as(Floor& f) {
  Burst bursts[2];
  unsigned fresh = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    receive<kSplit>(f, bursts[fresh]);
    if (!f.opt.overlap) {
      if (bursts[fresh].n != 0) write_and_send<kSplit>(f, bursts[fresh]);
      continue;
    }
    // --overlap: the previous burst's writes after this burst's prefetches, so each slot has
    // a whole burst of time to arrive.
    Burst& older = bursts[fresh ^ 1];
    if (older.n != 0) write_and_send<kSplit>(f, older);
    if (bursts[fresh].n != 0) fresh ^= 1;
  }
  for (Burst& b : bursts)
    if (b.n != 0) write_and_send<kSplit>(f, b);
  return 0;
}

int forward(void* arg) {
  Floor& f = *static_cast<Floor*>(arg);
  return f.opt.split ? forward_as<true>(f) : forward_as<false>(f);
}

void setup_port(uint16_t port, rte_mempool* pool) {
  rte_eth_conf conf{};
  if (rte_eth_dev_configure(port, 1, 1, &conf) != 0) die("port " + std::to_string(port) + ": configure failed");
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned s = socket < 0 ? 0 : unsigned(socket);
  if (rte_eth_rx_queue_setup(port, 0, kRingSize, s, nullptr, pool) != 0 ||
      rte_eth_tx_queue_setup(port, 0, kRingSize, s, nullptr) != 0)
    die("port " + std::to_string(port) + ": queue set-up failed");
  if (rte_eth_dev_start(port) != 0) die("port " + std::to_string(port) + ": start failed");
}

}  // namespace

int main(int argc, char** argv) {
  const int used = rte_eal_init(argc, argv);
  if (used < 0) die("EAL initialisation failed");
  // The EAL leaves the program name in front of what followed "--".
  const Options o = parse_options(argc - used - 1, argv + used + 1);
  if (rte_eth_dev_count_avail() < 2) die("needs two ports (port 0 in, port 1 out)");
  const unsigned worker = rte_get_next_lcore(-1, 1, 0);
  if (worker >= RTE_MAX_LCORE) die("needs a worker lcore (e.g. -l 0,1)");

  rte_mempool* pool = rte_pktmbuf_pool_create("floor", o.mbufs, 256, 0, o.mbuf_size,
                                              int(rte_socket_id()));
  if (pool == nullptr) die("mempool of " + std::to_string(o.mbufs) + " mbufs: " + rte_strerror(rte_errno));
  setup_port(0, pool);
  setup_port(1, pool);

  // Like sluiced's flow table: anonymous memory on transparent huge pages, written up front.
  Floor f;
  f.opt = o;
  const size_t bytes = size_t(o.flows) * 16, huge = size_t{2} << 20;
  void* m = mmap(nullptr, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) die("table of " + std::to_string(bytes) + " bytes: mmap failed");
  void* table = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(m) + huge - 1) & ~(huge - 1));
  (void)madvise(table, bytes, MADV_HUGEPAGE);
  std::memset(table, 0, bytes);
  f.table = static_cast<uint64_t*>(table);

  std::signal(SIGINT, [](int) { g_stop.store(true); });
  std::signal(SIGTERM, [](int) { g_stop.store(true); });
  std::printf("sluice-flow-floor: %llu flows (%zu-byte table%s), forwarding port 0 -> 1\n",
              static_cast<unsigned long long>(o.flows), bytes,
              o.split ? ", tags and counters in separate lines" : "");
  std::fflush(stdout);
  rte_eal_remote_launch(forward, &f, worker);
  while (!g_stop.load()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  rte_eal_wait_lcore(worker);
  std::printf("sluice-flow-floor: %llu received, %llu sent\n", static_cast<unsigned long long>(f.rx),
              static_cast<unsigned long long>(f.tx));
  for (uint16_t port : {uint16_t(0), uint16_t(1)}) {
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
  }
  munmap(m, bytes + huge);
  rte_mempool_free(pool);
  rte_eal_cleanup();
  return 0;
}
