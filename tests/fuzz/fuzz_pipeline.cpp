// libFuzzer target: the whole pipeline. A RuleSet built from the fuzz bytes (a few rules with
// random match fields, keys, algorithms, rates, bursts and parents; built directly, not
// through the rules loader), then bursts of fuzzed frames at fuzzed timestamps (forward,
// equal, backward, days ahead) through Pipeline::process_burst. After every burst the
// counters must keep the identities of docs/SEMANTICS.md, and a lone token-bucket or gcra
// rule with one shared bucket must never have conformed more than B + r*T (SPEC §3).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <arpa/inet.h>

#include "fuzz_frame_writer.hpp"
#include "fuzz_input.hpp"
#include "pipeline.hpp"
#include "rules.hpp"

using namespace sluice;
using sluice::fuzz::FrameSlots;
using sluice::fuzz::FrameSpec;
using sluice::fuzz::FuzzInput;
using sluice::fuzz::L4Kind;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_pipeline: %s\n", what);
    std::abort();
  }
}

const char* const kV4[] = {"10.0.0.1", "10.0.0.2", "10.1.2.3", "192.0.2.1", "198.51.100.7"};
const char* const kV6[] = {"2001:db8::1", "2001:db8::2", "fe80::1", "2001:db8:1::5"};

// kV4 and kV6 as bytes, parsed once.
struct Addresses {
  uint8_t v4[5][4];
  uint8_t v6[4][16];
};
const Addresses& addresses() {
  static const Addresses a = [] {
    Addresses x{};
    for (size_t i = 0; i < 5; ++i) check(inet_pton(AF_INET, kV4[i], x.v4[i]) == 1, "bad kV4");
    for (size_t i = 0; i < 4; ++i) check(inet_pton(AF_INET6, kV6[i], x.v6[i]) == 1, "bad kV6");
    return x;
  }();
  return a;
}

Cidr cidr(FuzzInput& in) {
  Cidr c;
  c.family = in.flag() ? 6 : 4;
  const unsigned max_len = c.family == 4 ? 32 : 128;
  c.prefix_len = uint8_t(in.range(0, max_len));
  // Mostly the addresses the frames use, so rules do match.
  if (in.flag()) {
    const Addresses& a = addresses();
    const uint8_t* bytes = c.family == 4 ? a.v4[in.range(0, 4)] : a.v6[in.range(0, 3)];
    for (unsigned i = 0; i < max_len / 8; ++i) c.addr[i] = bytes[i];
  } else {
    in.take(c.addr.data(), max_len / 8);
  }
  // The loader keeps host bits zero; so do we.
  for (unsigned bit = c.prefix_len; bit < max_len; ++bit)
    c.addr[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
  return c;
}

Rate rate(FuzzInput& in, CostUnit unit) {
  // Round rates (exact profiles) and arbitrary ones, from 1/s up to the documented top.
  static const uint64_t kRound[] = {1, 10, 1000, 64'000, 1'000'000, 10'000'000, 125'000'000,
                                    1'250'000'000, 50'000'000'000};
  Rate r;
  r.unit = unit;
  r.per_sec_num = in.flag() ? kRound[in.range(0, 8)] : in.range(1, 50'000'000'000ull);
  r.per_sec_den = in.flag() ? 1 : in.range(1, 1000);
  return r;
}

Action action(FuzzInput& in) {
  switch (in.range(0, 2)) {
    case 0: return Action{ActionKind::pass, 0};
    case 1: return Action{ActionKind::drop, 0};
    default: return Action{ActionKind::mark_dscp, uint8_t(in.range(0, 63))};
  }
}

Rule rule(FuzzInput& in, size_t index) {
  Rule r;
  r.name = "r" + std::to_string(index);
  if (in.flag()) r.match.src = cidr(in);
  if (in.flag()) r.match.dst = cidr(in);
  if (in.flag()) r.match.proto = uint8_t(in.flag() ? 17 : in.range(0, 255));
  if (in.flag()) {
    uint16_t lo = uint16_t(in.range(0, 2000)), hi = uint16_t(lo + in.range(0, 2000));
    r.match.dst_port = PortRange{lo, hi};
  }
  if (in.flag()) r.match.vlan = uint16_t(in.range(0, 4095));
  if (in.flag()) r.match.dscp = uint8_t(in.range(0, 63));
  if (in.flag()) r.match.port = uint16_t(in.range(0, 3));
  r.key = KeyMode(in.range(0, 6));
  if (r.key == KeyMode::src_prefix || r.key == KeyMode::dst_prefix)
    r.key_prefix_len = uint8_t(in.range(0, 128));
  r.algorithm = Algorithm(in.range(0, 6));
  const CostUnit unit = in.flag() ? CostUnit::bytes : CostUnit::packets;
  r.rate = rate(in, unit);
  r.burst = unit == CostUnit::bytes ? in.range(64, 2'000'000) : in.range(1, 100'000);
  r.excess_burst = in.range(0, r.burst * 2);
  r.peak_rate = r.rate;
  r.peak_rate.per_sec_num = r.rate.per_sec_num * in.range(1, 4);
  r.peak_burst = r.burst + in.range(0, r.burst);
  r.window_ns = in.range(1000, 10'000'000'000ull);
  r.limit = in.range(1, 1'000'000);
  r.limit_unit = in.flag() ? CostUnit::bytes : CostUnit::packets;
  r.max_delay_ns = in.range(1, 60'000'000'000ull);
  r.overhead_bytes = uint32_t(in.flag() ? 0 : in.range(0, 64));
  r.action = action(in);
  r.colour_actions = ColourActions{action(in), action(in), action(in)};
  if (in.flag()) r.overflow = action(in);
  r.max_flows = in.range(0, 64);
  r.idle_timeout_ns = in.range(1, 120'000'000'000ull);
  return r;
}

// One frame into `slots`' slot i; returns its length. Reads the input as PacketBuilder's
// version of this function did, so a corpus means the same frames.
uint32_t frame(FuzzInput& in, FrameSlots& slots, size_t i) {
  uint8_t* out = slots.open(i);
  size_t len;
  const unsigned kind = unsigned(in.range(0, 7));
  if (kind == 0) {  // raw bytes: malformed, non-IP, anything
    len = in.take(out, in.range(0, 200));
  } else {
    FrameSpec s;
    if (kind & 4) s.vlan = int(in.range(0, 4095));
    s.dscp = uint8_t(in.range(0, 63));
    s.ipv6 = (kind & 1) != 0;
    const Addresses& a = addresses();
    const uint8_t *src, *dst;
    if (s.ipv6) {
      src = a.v6[in.range(0, 3)];
      dst = a.v6[in.range(0, 3)];
    } else {
      src = a.v4[in.range(0, 4)];
      dst = a.v4[in.range(0, 4)];
    }
    switch (in.range(0, 3)) {
      case 0: s.l4 = L4Kind::udp, s.src_port = in.u16(), s.dst_port = uint16_t(in.range(0, 4000)); break;
      case 1: s.l4 = L4Kind::tcp, s.src_port = in.u16(), s.dst_port = uint16_t(in.range(0, 4000)); break;
      case 2: s.l4 = L4Kind::icmp; break;
      default: s.l4 = L4Kind::bare, s.proto = uint8_t(in.range(0, 255)); break;
    }
    s.payload = in.range(0, 1500);
    len = write_frame(s, src, dst, out);
    if (in.range(0, 15) == 0) len = in.range(0, len - 1);  // truncated
  }
  slots.close(i, len);
  return uint32_t(len);
}

void check_identities(const TrafficCounters& t, bool is_rule) {
  for (int bytes = 0; bytes < 2; ++bytes) {
    auto get = [&](Outcome o) { return bytes ? t.byts(o) : t.pkts(o); };
    check(get(Outcome::matched) == get(Outcome::passed) + get(Outcome::dropped) +
                                       get(Outcome::marked) + get(Outcome::delayed),
          "matched != passed + dropped + marked + delayed");
    if (is_rule)
      check(get(Outcome::matched) == get(Outcome::conformed) + get(Outcome::exceeded),
            "matched != conformed + exceeded");
  }
}

bool same(const TrafficCounters& a, const TrafficCounters& b) {
  return a.packets == b.packets && a.bytes == b.bytes;
}

}  // namespace

// Once, before the first input: the frames written in place are PacketBuilder's.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  check(sluice::fuzz::same_as_packet_builder(kV4, 5, kV6, 4),
        "write_frame and PacketBuilder build different frames");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  RuleSet built;
  built.rules.reserve(4);
  built.default_action = action(in);
  const size_t n_rules = in.range(1, 4);
  for (size_t i = 0; i < n_rules; ++i) {
    built.rules.push_back(rule(in, i));
    // A parent is any other rule but itself; cycles are possible on purpose: the pipeline
    // must refuse them (the loader normally does), not loop.
    if (in.range(0, 3) == 0) {
      size_t parent = in.range(0, n_rules - 1);
      if (parent != i) {
        built.rules.back().parent = "r" + std::to_string(parent);
        built.rules.back().parent_index = int(parent);
      }
    }
  }
  // The loader refuses parent cycles; the pipeline is handed only what the loader accepts.
  for (size_t i = 0; i < built.rules.size(); ++i) {
    size_t steps = 0;
    for (int at = built.rules[i].parent_index; at >= 0; at = built.rules[size_t(at)].parent_index)
      if (++steps > built.rules.size()) return 0;
  }
  PipelineOptions opts;
  opts.hash_seed = 1 + in.u8();
  opts.single_writer = true;
  opts.stale_read_tolerance_ns = in.flag() ? 0 : SL_STEP_TOLERANCE_NS;
  opts.default_max_flows = 1 + in.range(0, 255);
  auto made = Pipeline::create(std::move(built), opts);
  if (!made) {  // a combination the profile builder refuses: it must say why
    check(!made.error().message.empty(), "Pipeline::create failed without a message");
    return 0;
  }
  std::unique_ptr<Pipeline> pipeline = std::move(made).value();
  const RuleSet& rs = pipeline->rules();  // the set it runs (moved in, not copied)
  WorkerCounters counters = pipeline->make_counters();

  // One shared token-bucket/gcra bucket that every charge of rule 0 goes through.
  const Rule& r0 = rs.rules[0];
  const bool bounded = rs.rules.size() == 1 && r0.key == KeyMode::none && r0.parent.empty() &&
                       (r0.algorithm == Algorithm::token_bucket || r0.algorithm == Algorithm::gcra);
  uint64_t now = in.u64() >> 1;
  const uint64_t first = now;
  bool monotone = true;

  static FrameSlots slots(Pipeline::kMaxBurst);
  Pipeline::Frame frames[Pipeline::kMaxBurst];
  Verdict verdicts[Pipeline::kMaxBurst];
  for (int burst = 0; burst < 48 && !in.empty(); ++burst) {
    switch (in.range(0, 7)) {
      case 0: break;                                                // same instant
      case 1: now += in.range(0, 1'000'000); break;                 // up to 1 ms
      case 2: now += in.range(0, 2'000'000'000ull); break;          // up to 2 s
      case 3: now -= in.range(1, 2'000'000'000ull); monotone = false; break;  // steps back
      case 4: now += in.range(0, 400ull * 86400 * 1'000'000'000); break;      // idle of days
      case 5: now = in.u64(); monotone = false; break;              // anything, wrap included
      default: now += in.range(0, 100'000); break;
    }
    const size_t n = in.range(1, Pipeline::kMaxBurst);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t len = frame(in, slots, i);
      frames[i] = Pipeline::Frame{slots.data(i), len};
    }
    pipeline->process_burst(frames, n, uint16_t(in.range(0, 3)), now, counters, verdicts);
    for (size_t i = 0; i < n; ++i)
      if (verdicts[i].kind == Verdict::Kind::forward)
        check(verdicts[i].depart_ns - now <= 60'000'000'000ull, "departs before arrival or > 60 s later");

    // The one worker's counters, which are what snapshot() sums (checked equal below): rule
    // i of the start-up set counts in slot i, the default in its own (counters.hpp).
    for (size_t i = 0; i < rs.rules.size(); ++i) check_identities(counters.rule(i), true);
    check_identities(counters.default_rule(), false);
    if (bounded && monotone) {
      const TrafficCounters& t = counters.rule(0);
      const unsigned __int128 cost =
          r0.rate.unit == CostUnit::packets
              ? t.pkts(Outcome::conformed)
              : t.byts(Outcome::conformed) + uint64_t(r0.overhead_bytes) * t.pkts(Outcome::conformed);
      // cost <= B + r*T, scaled by den * 1e9 to stay in integers.
      const unsigned __int128 scale = (unsigned __int128)r0.rate.per_sec_den * 1'000'000'000u;
      check(cost * scale <= (unsigned __int128)r0.burst * scale +
                                (unsigned __int128)(now - first) * r0.rate.per_sec_num,
            "a bucket admitted more than B + r*T");
    }
  }
  // A snapshot per input, not per burst (its allocations were ~5% of the run): it must list
  // every rule with exactly the counters the bursts were checked on.
  CountersSnapshot snap = pipeline->snapshot({&counters});
  check(snap.rules.size() == rs.rules.size(), "a snapshot without every rule");
  for (size_t i = 0; i < rs.rules.size(); ++i)
    check(snap.rules[i].name == rs.rules[i].name && same(snap.rules[i].traffic, counters.rule(i)),
          "a snapshot's rule counters are not the worker's");
  check(same(snap.default_rule.traffic, counters.default_rule()),
        "a snapshot's default counters are not the worker's");
  return 0;
}
