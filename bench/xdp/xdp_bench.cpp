// sluice-bench-xdp: ns per packet through BPF_PROG_TEST_RUN of sluice's XDP program beside a
// bare XDP_PASS program, a naive hash-map token bucket and the memory floor of a per-flow
// array as large as sluice's tables (one lookup, one line) (bench/xdp/*.bpf.c), in one run, at
// each flow count given (distinct IPv4 sources, UDP). Prints one markdown table row per
// program and flow count; scripts/bench_xdp.sh runs it (root: BPF_PROG_TEST_RUN).
//
//   sluice-bench-xdp [--flows 1,1000,1000000] [--packets N] [--passes N] [--repeat R] [--shuffle]
//                    [--only NAME,...]   (rows whose name contains one of these, and XDP_PASS)
//   sluice-bench-xdp --attach IFACE [--program sluice|drop] [--mode native|skb] --seconds S
//
// The second form attaches to IFACE for S seconds, for the live veth measurement of
// scripts/bench_xdp.sh, and prints the frames the program saw: sluice (XdpBackend: pinned
// maps, bpf_xdp_attach) with a per-source token bucket that drops nearly everything (1 pps,
// burst 1), or the floor, drop.bpf.c (every frame dropped and counted).
//
// Method: the frames of all flows are built first; one pass over them warms the maps (every
// flow exists), then the measured passes send frame k mod flows, one BPF_PROG_TEST_RUN call
// per frame with repeat R (default 1, so a 1M-flow run really visits 1M flows per pass rather
// than one hot flow R times). The kernel times only the program runs (bpf_test_timer), so the
// system call is not in the figure; at repeat 1 the timer's own two clock reads are, equally
// for every program (the XDP_PASS row shows that floor). Reported: the mean of the per-call
// means, and the median over passes. --shuffle visits the flows in one random order instead of
// the order they were created in: a table that allocates its entries in arrival order (the
// kernel's hash maps) otherwise walks its memory sequentially at 1M flows, which no real
// traffic does.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "array_probe.skel.h"
#include "drop.skel.h"
#include "flow_table.hpp"
#include "naive_tb.skel.h"
#include "packet_builder.hpp"
#include "pass.skel.h"
#include "rules_loader.hpp"
#include "xdp_backend.hpp"
#include "xdp_program.hpp"

namespace {

using Bytes = std::vector<uint8_t>;

struct Options {
  std::vector<size_t> flows{1, 1000, 1000000};
  size_t packets = 300000;  // per measured pass (at least one visit of every flow)
  int passes = 3;
  uint32_t repeat = 1;
  std::string attach;  // live mode: the interface
  std::string mode = "native";
  std::string program = "sluice";
  int seconds = 0;
  bool shuffle = false;
  std::vector<std::string> only;  // --only: rows whose name contains one of these (and XDP_PASS)
};

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: sluice-bench-xdp [--flows N,N,...] [--packets N] [--passes N] "
                       "[--repeat R] [--shuffle] [--only NAME,...]\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--shuffle") {
      o.shuffle = true;
      continue;
    }
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--flows") {
      o.flows.clear();
      size_t at = 0;
      while (at <= v.size()) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        o.flows.push_back(std::stoul(v.substr(at, comma - at)));
        at = comma + 1;
      }
    } else if (a == "--packets") {
      o.packets = std::stoul(v);
    } else if (a == "--only") {
      size_t at = 0;
      while (at <= v.size()) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        o.only.push_back(v.substr(at, comma - at));
        at = comma + 1;
      }
    } else if (a == "--passes") {
      o.passes = std::stoi(v);
    } else if (a == "--repeat") {
      o.repeat = uint32_t(std::stoul(v));
    } else if (a == "--attach") {
      o.attach = v;
    } else if (a == "--program") {
      o.program = v;
    } else if (a == "--mode") {
      o.mode = v;
    } else if (a == "--seconds") {
      o.seconds = std::stoi(v);
    } else {
      usage();
    }
  }
  if (o.flows.empty() || o.passes < 1 || o.repeat < 1) usage();
  if (!o.attach.empty() && (o.seconds < 1 || (o.mode != "native" && o.mode != "skb") ||
                            (o.program != "sluice" && o.program != "drop")))
    usage();
  return o;
}

// One frame per flow, sources 10.0.0.0 + i in a fixed random order: a dense table
// (per_source_pinned) would otherwise be walked in address order, line after line.
std::vector<Bytes> frames_for(size_t flows) {
  std::vector<uint32_t> order(flows);
  std::iota(order.begin(), order.end(), 0u);
  std::shuffle(order.begin(), order.end(), std::mt19937(1));
  std::vector<Bytes> out;
  out.reserve(flows);
  for (uint32_t i : order) {
    const uint32_t src = 0x0a000000u + i;  // 10.0.0.0 + i
    char addr[32];
    std::snprintf(addr, sizeof addr, "%u.%u.%u.%u", src >> 24, (src >> 16) & 255,
                  (src >> 8) & 255, src & 255);
    out.push_back(
        sluice::testing::PacketBuilder().ipv4(addr, "192.0.2.1").udp(4000, 53).frame_size(64).build());
  }
  return out;
}

// Mean ns per run of one call.
double run_once(int prog_fd, const Bytes& f, uint32_t repeat) {
  uint8_t out[256];
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = f.data(), .data_out = out,
              .data_size_in = uint32_t(f.size()), .data_size_out = sizeof out,
              .repeat = int(repeat));
  if (int err = bpf_prog_test_run_opts(prog_fd, &run)) {
    std::fprintf(stderr, "BPF_PROG_TEST_RUN: %s\n", std::strerror(-err));
    std::exit(1);
  }
  return double(run.duration);
}

// The median over passes of the mean ns/packet of a pass.
double measure(int prog_fd, const std::vector<Bytes>& frames, const Options& o) {
  for (const Bytes& f : frames) run_once(prog_fd, f, 1);  // every flow exists
  std::vector<size_t> order(frames.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (o.shuffle) std::shuffle(order.begin(), order.end(), std::mt19937_64(1));
  std::vector<double> pass_means;
  const size_t n = std::max(o.packets, frames.size());
  for (int p = 0; p < o.passes; ++p) {
    double sum = 0;
    for (size_t k = 0; k < n; ++k)
      sum += run_once(prog_fd, frames[order[k % frames.size()]], o.repeat);
    pass_means.push_back(sum / double(n));
  }
  std::sort(pass_means.begin(), pass_means.end());
  return pass_means[pass_means.size() / 2];
}

struct Program {
  std::string name;
  std::function<int(size_t flows)> fd_for;  // loads (fresh maps) for a flow count
  std::function<void()> unload;
};

// A token bucket per source that every frame conforms to, for the frames `match` takes.
std::string per_source(const std::string& match) {
  return "rules:\n  - {name: per-source, match: " + match +
         ", key: src-ip, algorithm: token-bucket, rate: 1000000pps, burst: 1000000, action: drop}\n";
}

// The sources pinned to the smallest prefix of 10.0.0.0 that holds `flows` of frames_for()'s:
// a dense table (dense_key.hpp; at most table_flows keys, see main).
std::string per_source_pinned(size_t flows) {
  const unsigned bits = flows <= 1 ? 0u : unsigned(std::bit_width(flows - 1));
  return per_source("{proto: udp, src: 10.0.0.0/" + std::to_string(32 - bits) + "}");
}

const char* kDropPerSource =
    "rules:\n  - {name: per-source, match: {proto: udp}, key: src-ip, algorithm: "
    "token-bucket, rate: 1pps, burst: 1, action: drop}\n";

int attach_drop_for(const Options& o) {
  const int ifindex = int(if_nametoindex(o.attach.c_str()));
  if (ifindex == 0) return std::fprintf(stderr, "no such interface: %s\n", o.attach.c_str()), 2;
  bench_drop* d = bench_drop__open_and_load();
  if (!d) return std::perror("loading drop.bpf.o"), 1;
  const uint32_t flags = XDP_FLAGS_UPDATE_IF_NOEXIST |
                         (o.mode == "skb" ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE);
  const int fd = bpf_program__fd(d->progs.bench_drop);
  if (int err = bpf_xdp_attach(ifindex, fd, flags, nullptr)) {
    bench_drop__destroy(d);
    return std::fprintf(stderr, "attaching: %s\n", std::strerror(-err)), 1;
  }
  sleep(unsigned(o.seconds));
  const int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> per_cpu(size_t(cpus > 0 ? cpus : 1));
  const uint32_t zero = 0;
  uint64_t total = 0;
  if (bpf_map__lookup_elem(d->maps.drop_count, &zero, sizeof zero, per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) == 0)
    for (uint64_t n : per_cpu) total += n;
  LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = fd);
  bpf_xdp_detach(ifindex, (flags & ~uint32_t(XDP_FLAGS_UPDATE_IF_NOEXIST)) | XDP_FLAGS_REPLACE,
                 &opts);
  bench_drop__destroy(d);
  std::printf("%llu\n", (unsigned long long)total);
  return 0;
}

int attach_for(const Options& o) {
  if (o.program == "drop") return attach_drop_for(o);
  auto rules = sluice::load_rules_text(kDropPerSource, "bench.yaml");
  if (!rules) return std::fprintf(stderr, "%s\n", rules.error().message.c_str()), 1;
  auto be = sluice::xdp::XdpBackend::attach(
      o.attach, o.mode == "skb" ? sluice::xdp::AttachMode::skb : sluice::xdp::AttachMode::native,
      *rules);
  if (!be) return std::fprintf(stderr, "%s\n", be.error().message.c_str()), 1;
  sleep(unsigned(o.seconds));
  auto c = (*be)->counters();
  if (!c) return std::fprintf(stderr, "%s\n", c.error().message.c_str()), 1;
  std::printf("%llu\n", (unsigned long long)c->per_rule[0].pkts(sluice::Outcome::matched));
  return (*be)->detach().ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (!o.attach.empty()) return attach_for(o);
  const size_t max_flows = *std::max_element(o.flows.begin(), o.flows.end());

  bench_pass* pass = nullptr;
  bench_naive_tb* naive = nullptr;
  bench_array_probe* probe = nullptr;
  std::unique_ptr<sluice::xdp::XdpProgram> sluice_prog;
  // sluice's tables hold this many flows (the probe's array is as large as one of them)
  const uint64_t table_flows = std::max<size_t>(max_flows + max_flows / 4, 1024);
  auto load_sluice = [&](const std::string& yaml) {
    sluice::xdp::LoadOptions lo;
    lo.default_max_flows = table_flows;
    auto p = sluice::xdp::XdpProgram::load(lo);
    if (!p) { std::fprintf(stderr, "%s\n", p.error().message.c_str()); std::exit(1); }
    auto rules = sluice::load_rules_text(yaml, "bench.yaml");
    if (!rules) { std::fprintf(stderr, "%s\n", rules.error().message.c_str()); std::exit(1); }
    if (auto s = (*p)->set_rules(*rules); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      std::exit(1);
    }
    sluice_prog = std::move(*p);
    return sluice_prog->prog_fd();
  };
  const char* kNoRules = "rules: []\n";

  std::vector<Program> programs = {
      {"XDP_PASS (bare)",
       [&](size_t) {
         pass = bench_pass__open_and_load();
         if (!pass) { std::perror("loading pass.bpf.o"); std::exit(1); }
         return bpf_program__fd(pass->progs.bench_pass);
       },
       [&] { bench_pass__destroy(pass); pass = nullptr; }},
      {"naive hash-map token bucket",
       [&](size_t) {
         naive = bench_naive_tb__open_and_load();
         if (!naive) { std::perror("loading naive_tb.bpf.o"); std::exit(1); }
         return bpf_program__fd(naive->progs.bench_naive_tb);
       },
       [&] { bench_naive_tb__destroy(naive); naive = nullptr; }},
      {"array probe (1 KB sets, one line; no clock)",
       [&](size_t) {
         probe = bench_array_probe__open();
         if (!probe) { std::perror("opening array_probe.bpf.o"); std::exit(1); }
         const uint64_t sets = sluice::FlowTable::geometry(table_flows, 0, 0).sets;
         probe->rodata->probe_set_count = sets;
         if (bpf_map__set_max_entries(probe->maps.probe_sets, uint32_t(sets)) ||
             bench_array_probe__load(probe)) {
           std::perror("loading array_probe.bpf.o");
           std::exit(1);
         }
         return bpf_program__fd(probe->progs.bench_array_probe);
       },
       [&] { bench_array_probe__destroy(probe); probe = nullptr; }},
      {"sluice, no rules", [&](size_t) { return load_sluice(kNoRules); },
       [&] { sluice_prog.reset(); }},
      {"sluice, token-bucket per source",
       [&](size_t) { return load_sluice(per_source("{proto: udp}")); },
       [&] { sluice_prog.reset(); }},
      {"sluice, token-bucket per source, sources pinned (dense table)",
       [&](size_t flows) { return load_sluice(per_source_pinned(flows)); },
       [&] { sluice_prog.reset(); }},
  };

  std::printf("| program | flows | ns/packet | x XDP_PASS |\n|---|---:|---:|---:|\n");
  for (size_t flows : o.flows) {
    const std::vector<Bytes> frames = frames_for(flows);
    double floor_ns = 0;
    for (Program& p : programs) {
      if (!o.only.empty() && floor_ns != 0 &&
          std::none_of(o.only.begin(), o.only.end(),
                       [&](const std::string& n) { return p.name.find(n) != std::string::npos; }))
        continue;
      const double ns = measure(p.fd_for(flows), frames, o);
      p.unload();
      if (floor_ns == 0) floor_ns = ns;
      std::printf("| %s | %zu | %.1f | %.2f |\n", p.name.c_str(), flows, ns,
                  floor_ns > 0 ? ns / floor_ns : 0.0);
      std::fflush(stdout);
    }
  }
  return 0;
}
