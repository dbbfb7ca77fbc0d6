// libFuzzer target: the XDP program's parser and classifier, through BPF_PROG_TEST_RUN on the
// real kernel verifier, against the core Pipeline (as `sluiced --replay` runs it) on the same
// fuzzed frames at the same times. Every frame must get the same verdict and leave with the
// same bytes, and after every input each rule's counters must agree outcome by outcome: the
// frames are arbitrary bytes, so this is where the two parsers (VLAN/QinQ, IPv4 options and
// lengths, IPv6 extension chains, fragments, ports) are held to one meaning of every frame.
//
// Input: records of [gap code: 1 byte][length: 2 bytes LE][frame: length bytes]. The gap code
// moves the clock (0: the same instant; else code^2 microseconds). Frames shorter than an
// Ethernet header are not offered (BPF_PROG_TEST_RUN refuses them: no driver hands XDP one)
// and frames are cut at kMaxFrame, a linear XDP buffer's room.
//
// State carries over between inputs (one program load and one pipeline for the whole run;
// reloading per input would cost milliseconds), so each input starts 10 s after the previous
// one: every bucket of the rules below is full again and every window over, whatever earlier
// inputs did, and an input's verdicts depend on the input alone. Rate-limited rules are
// aggregates (`key: none`), whose state cannot differ between the two backends' flow tables;
// the keyed rule has a burst no input can exhaust, so it exercises the flow key's parse
// (fragments keyed by addresses, ports) without making a verdict depend on which flow an
// LRU table evicted.
//
// Needs root (BPF). Without it the target says so once and runs nothing.
#include <linux/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "fuzz_input.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "xdp_program.hpp"

using namespace sluice;
using sluice::fuzz::FuzzInput;

namespace {

constexpr uint32_t kMinFrame = 14;
constexpr uint32_t kMaxFrame = 3000;
constexpr uint64_t kInputGapNs = 10'000'000'000;

// Every match field and every algorithm but shaping, each rule on its own aggregate bucket; a
// default that marks, so the default path's rewrite is compared too.
constexpr const char* kRules =
    "default: {action: mark-dscp:CS1}\n"
    "rules:\n"
    "  - {name: dns, match: {proto: udp, dst-port: 53}, key: none, rate: 50pps, burst: 3,"
    " algorithm: token-bucket, action: drop}\n"
    "  - {name: web6, match: {src: 2001:db8::/32, proto: tcp}, key: none, rate: 20kbit,"
    " burst: 3000, algorithm: gcra, action: mark-dscp:AF11, overhead: 24}\n"
    "  - {name: vlan10, match: {vlan: 10}, key: none, window: 5ms, limit: 2,"
    " algorithm: fixed-window, action: drop}\n"
    "  - {name: pfx, match: {src: 10.0.0.0/16}, key: none, window: 8ms, limit: 3,"
    " algorithm: sliding-window, action: pass}\n"
    "  - {name: ef, match: {dscp: 46}, key: none, rate: 20pps, burst: 2,"
    " algorithm: token-bucket, action: mark-dscp:CS2}\n"
    "  - {name: ports, match: {src-port: 1000-1001}, key: none, rate: 40kbit, burst: 2000,"
    " algorithm: token-bucket, action: drop}\n"
    "  - {name: m6, match: {dst: 2001:db8:1::/48}, key: none, algorithm: srtcm, rate: 200kbit,"
    " burst: 1500, excess-burst: 3000, actions: {green: pass, yellow: mark-dscp:AF13, red: drop}}\n"
    "  - {name: m4, match: {dst: 192.0.2.0/24, proto: tcp}, key: none, algorithm: trtcm,"
    " rate: 20pps, burst: 2, peak-rate: 50pps, peak-burst: 3,"
    " actions: {green: mark-dscp:EF, yellow: pass, red: drop}}\n"
    "  - {name: sctp, match: {proto: sctp}, key: none, rate: 10pps, burst: 1,"
    " algorithm: gcra, action: drop}\n"
    "  - {name: flows, match: {proto: udp}, key: 5-tuple, rate: 1Mpps, burst: 100000,"
    " algorithm: token-bucket, action: drop}\n";

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_xdp_program: %s\n", what);
    std::abort();
  }
}

struct Backends {
  std::unique_ptr<xdp::XdpProgram> xdp;
  std::unique_ptr<Pipeline> core;
  WorkerCounters core_counters;
  uint64_t next_input_ns = 1'000'000'000;
};

Backends* backends = nullptr;  // null: not root, nothing to run

Backends* start() {
  if (geteuid() != 0) {
    std::fprintf(stderr, "fuzz_xdp_program: skipped: BPF_PROG_TEST_RUN needs root\n");
    return nullptr;
  }
  auto rules = load_rules_text(kRules, "fuzz_xdp_program.yaml");
  check(rules.ok(), "the target's rules do not load");
  auto b = std::make_unique<Backends>();
  xdp::LoadOptions opts;
  opts.test_clock = true;
  opts.stale_read_tolerance_ns = 0;  // as the core runs in replay: no stale-read tolerance
  auto prog = xdp::XdpProgram::load(opts);
  if (!prog.ok()) std::fprintf(stderr, "fuzz_xdp_program: %s\n", prog.error().message.c_str());
  check(prog.ok(), "the XDP program does not load");
  b->xdp = std::move(*prog);
  check(b->xdp->set_rules(*rules).ok(), "the XDP program refuses the target's rules");
  auto core = Pipeline::create(*rules, PipelineOptions::single_threaded(0x5eed));
  check(core.ok(), "the core refuses the target's rules");
  b->core = std::move(*core);
  b->core_counters = b->core->make_counters();
  return b.release();
}

void compare_counters(const Backends& b) {
  auto x = b.xdp->counters();
  check(x.ok(), "reading the XDP counters failed");
  check(x->per_rule.size() == b.core_counters.per_rule.size(), "counter slots differ");
  for (size_t i = 0; i < x->per_rule.size(); ++i)
    for (size_t o = 0; o < kOutcomeCount; ++o) {
      if (x->per_rule[i].packets[o] != b.core_counters.per_rule[i].packets[o] ||
          x->per_rule[i].bytes[o] != b.core_counters.per_rule[i].bytes[o]) {
        std::fprintf(stderr, "fuzz_xdp_program: slot %zu, %s: xdp %llu pkts %llu bytes, core %llu pkts %llu bytes\n",
                     i, outcome_name(Outcome(o)),
                     (unsigned long long)x->per_rule[i].packets[o],
                     (unsigned long long)x->per_rule[i].bytes[o],
                     (unsigned long long)b.core_counters.per_rule[i].packets[o],
                     (unsigned long long)b.core_counters.per_rule[i].bytes[o]);
        check(false, "counters differ");
      }
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  backends = start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (backends == nullptr) return 0;
  Backends& b = *backends;
  FuzzInput in(data, size);
  uint64_t now_ns = b.next_input_ns;
  b.next_input_ns += kInputGapNs;
  std::vector<uint8_t> frame, core_frame;
  while (!in.empty()) {
    const uint8_t gap = in.u8();
    now_ns += uint64_t(gap) * gap * 1000;
    const uint32_t want = in.u16();
    frame.resize(std::min<uint32_t>(want, kMaxFrame));
    frame.resize(in.take(frame.data(), frame.size()));
    if (frame.size() < kMinFrame) continue;
    core_frame = frame;
    const Verdict v = b.core->process(core_frame.data(), uint32_t(core_frame.size()), 0, now_ns,
                                      b.core_counters);
    check(b.xdp->set_test_now(now_ns).ok(), "setting the test clock failed");
    auto x = b.xdp->test_run(frame.data(), uint32_t(frame.size()));
    if (!x.ok()) std::fprintf(stderr, "fuzz_xdp_program: %s\n", x.error().message.c_str());
    check(x.ok(), "BPF_PROG_TEST_RUN failed");
    const uint32_t core_verdict = v.kind == Verdict::Kind::drop ? XDP_DROP : XDP_PASS;
    check(x->verdict == core_verdict, "verdicts differ");
    check(x->frame == core_frame, "output frames differ");
  }
  compare_counters(b);
  return 0;
}
