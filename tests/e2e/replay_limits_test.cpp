// End-to-end `sluiced --replay`: every limiter algorithm and the hierarchy against SPEC §3.
#include "replay_common.hpp"

namespace sluice::testing {
namespace {

// ------------------------------------------------------------------ policing (§3)

struct PolicerCase {
  const char* rate;
  const char* burst;
  ExactRate exact;
  uint64_t burst_tokens;
  bool bytes;
  bool mixed_sizes;
  uint64_t gap_scale;
};

class ReplayPolicing : public ::testing::TestWithParam<PolicerCase> {};

TEST_P(ReplayPolicing, TokenBucketAndGcraMatchTheExactModel) {
  const PolicerCase& c = GetParam();
  auto trace = irregular_trace(800, 7, c.mixed_sizes, c.gap_scale);
  ExactBucket model(c.exact, c.burst_tokens);
  uint64_t expected = 0;
  for (const Frame& f : trace) expected += model.charge(f.ts_ns, cost_of(f, c.bytes));
  ASSERT_GT(expected, 10u);
  ASSERT_LT(expected, trace.size() - 10);  // the trace must exercise both outcomes

  std::map<std::string, std::vector<uint32_t>> passed;
  for (const char* algorithm : {"token-bucket", "gcra"}) {
    SCOPED_TRACE(algorithm);
    Replay r;
    r.set_rules(policer_rules(algorithm, c.rate, c.burst, "drop"));
    r.set_input(trace);
    run_ok(r);
    Json rule = r.rule("limit");
    EXPECT_EQ(rule.u64("matched_packets"), trace.size());
    EXPECT_EQ(rule.u64("matched_bytes"), total_bytes(trace));
    EXPECT_WITHIN_ONE(rule.u64("conformed_packets"), expected);
    EXPECT_EQ(rule.u64("conformed_packets") + rule.u64("exceeded_packets"), trace.size());
    EXPECT_EQ(rule.u64("dropped_packets"), rule.u64("exceeded_packets"));
    EXPECT_EQ(rule.u64("passed_packets"), rule.u64("conformed_packets"));
    auto out = r.output();
    EXPECT_EQ(out.size(), rule.u64("conformed_packets"));
    for (const Frame& f : out) EXPECT_EQ(f.ts_ns, trace[seq_of(f.bytes)].ts_ns);  // not delayed
    passed[algorithm] = seqs(out);
  }
  // gcra is the same decision from a different state word: identical packets pass.
  EXPECT_EQ(passed["token-bucket"], passed["gcra"]);
}

INSTANTIATE_TEST_SUITE_P(
    Rates, ReplayPolicing,
    ::testing::Values(PolicerCase{"100pps", "10", {100, 1}, 10, false, false, 1},
                      PolicerCase{"2.5kpps", "4", {2500, 1}, 4, false, false, 20},
                      // 800 kbit/s = 100000 bytes/s; cost = frame length
                      PolicerCase{"800kbit", "3000", {100000, 1}, 3000, true, true, 1}));

// ------------------------------------------------------------------ shaping (§3)

struct ShapedRule {
  ExactRate rate;
  uint64_t burst;
  uint64_t max_delay_ns;
  bool bytes;
};

// Checks OUT.pcap of a trace where bucket_of() says which packets one leaky-bucket rule
// shapes (and in which bucket; -1: not shaped, must pass untouched).
void check_shaping(const std::vector<Frame>& in, const std::vector<Frame>& out,
                   const ShapedRule& rule, const std::function<int(const Frame&)>& bucket_of,
                   const Json& counters) {
  // Whole stream: departure order.
  for (size_t i = 1; i < out.size(); ++i)
    ASSERT_LE(out[i - 1].ts_ns, out[i].ts_ns) << "OUT.pcap not in departure order at record " << i;

  // The model, per bucket in arrival order.
  std::map<int, ExactShaper> shapers;
  std::map<uint32_t, std::optional<uint64_t>> model_depart;  // seq -> departure (none: dropped)
  uint64_t shaped_in = 0, model_dropped = 0;
  for (const Frame& f : in) {
    int b = bucket_of(f);
    if (b < 0) continue;
    ++shaped_in;
    auto it = shapers.try_emplace(b, rule.rate, rule.burst, rule.max_delay_ns).first;
    auto d = it->second.depart_ns(f.ts_ns, cost_of(f, rule.bytes));
    model_dropped += !d;
    model_depart[seq_of(f.bytes)] = d;
  }

  std::map<int, std::vector<const Frame*>> departures;  // per bucket, in OUT order
  uint64_t shaped_out = 0, delayed = 0, far_from_model = 0;
  for (const Frame& f : out) {
    uint32_t seq = seq_of(f.bytes);
    ASSERT_LT(seq, in.size());
    const Frame& arrival = in[seq];
    ASSERT_EQ(f.bytes, arrival.bytes) << "shaping must not change the frame";
    int b = bucket_of(arrival);
    if (b < 0) {
      EXPECT_EQ(f.ts_ns, arrival.ts_ns) << "unshaped packet " << seq << " was delayed";
      continue;
    }
    ++shaped_out;
    ASSERT_GE(f.ts_ns, arrival.ts_ns) << "packet " << seq << " left before it arrived";
    EXPECT_LE(f.ts_ns - arrival.ts_ns, rule.max_delay_ns) << "packet " << seq << " waited too long";
    delayed += f.ts_ns > arrival.ts_ns;
    departures[b].push_back(&f);
    const auto& m = model_depart[seq];
    if (m) {
      uint64_t diff = f.ts_ns > *m ? f.ts_ns - *m : *m - f.ts_ns;
      far_from_model += diff > kNsPerUs;
      EXPECT_LE(diff, kNsPerUs) << "packet " << seq << " left at " << f.ts_ns << ", model " << *m;
    }
  }
  EXPECT_LE(far_from_model, 0u);
  EXPECT_WITHIN_ONE(shaped_in - shaped_out, model_dropped);

  for (const auto& [b, frames] : departures) {
    // FIFO per bucket, and the departure stream conforms 100% to (r, B).
    ExactBucket measure(rule.rate, rule.burst);
    for (size_t i = 0; i < frames.size(); ++i) {
      if (i > 0) { EXPECT_LT(seq_of(frames[i - 1]->bytes), seq_of(frames[i]->bytes)) << "bucket " << b << " reordered"; }
      EXPECT_TRUE(measure.charge(frames[i]->ts_ns, cost_of(*frames[i], rule.bytes)))
          << "bucket " << b << ": departure of packet " << seq_of(frames[i]->bytes) << " at "
          << frames[i]->ts_ns << " does not conform to (r, B)";
    }
  }

  EXPECT_EQ(counters.u64("matched_packets"), shaped_in);
  EXPECT_EQ(counters.u64("delayed_packets"), delayed);
  EXPECT_EQ(counters.u64("dropped_packets"), shaped_in - shaped_out);
  EXPECT_GT(delayed, 0u);
}

TEST(ReplayShaping, LeakyBucketDelaysToTheEarliestConformingTime) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: shaped
    match: {proto: udp, dst-port: 53}
    key: none
    rate: 1000pps
    burst: 5
    algorithm: leaky-bucket
    max-delay: 20ms
)");
  std::vector<Frame> trace;
  auto dns = [](uint32_t seq) { return udp4(seq); };
  auto web = [](uint32_t seq) { return udp4(seq, {.dport = 80}); };  // default: pass, unshaped
  // A burst of 30 within 30 us: 5 leave at once, then one per ms, and the last 5 would
  // wait over 20 ms.
  add_run(trace, kT0, kNsPerUs, 30, dns);
  // 200 at 1500/s for the steady state, with unshaped traffic interleaved.
  uint64_t t = kT0 + 100 * kNsPerMs;
  for (int i = 0; i < 200; ++i) {
    add_run(trace, t + uint64_t(i) * 667 * kNsPerUs, 0, 1, dns);
    if (i % 3 == 0) add_run(trace, t + uint64_t(i) * 667 * kNsPerUs + 100 * kNsPerUs, 0, 1, web);
  }
  r.set_input(trace);
  run_ok(r);
  auto out = r.output();
  auto bucket_of = [](const Frame& f) { return f.bytes[kL3 + 22] == 0 && f.bytes[kL3 + 23] == 53 ? 0 : -1; };
  check_shaping(trace, out, {{1000, 1}, 5, 20 * kNsPerMs, false}, bucket_of, r.rule("shaped"));
}

TEST(ReplayShaping, ByteRateShaperKeepsOneQueuePerSource) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: shaped
    match: {proto: udp, dst-port: 5000}
    key: src-ip
    rate: 8Mbit
    burst: 3000
    algorithm: leaky-bucket
    max-delay: 10ms
)");
  // 8 Mbit/s = 1e6 bytes/s: a 1000-byte frame takes 1 ms of credit.
  std::vector<Frame> trace;
  TestRng rng(3);
  uint64_t t = kT0;
  for (uint32_t i = 0; i < 400; ++i) {
    t += rng.below(700) * kNsPerUs;
    std::string src = rng.below(2) ? "10.1.0.1" : "10.1.0.2";
    size_t size = 200 + rng.below(1300);
    trace.push_back(Frame{t, udp4(i, {.src = src, .dport = 5000, .size = size})});
  }
  r.set_input(trace);
  run_ok(r);
  auto bucket_of = [](const Frame& f) { return int(f.bytes[kL3 + 15]); };  // last octet of src
  check_shaping(trace, r.output(), {{1000000, 1}, 3000, 10 * kNsPerMs, true}, bucket_of,
                r.rule("shaped"));
  EXPECT_EQ(r.rule("shaped").u64("active_flows"), 2u);
}

// ------------------------------------------------------------------ meters (§3)

std::vector<Frame> meter_trace() {
  std::vector<Frame> trace;
  auto pkt = [](uint32_t seq) { return udp4(seq, {.size = 100}); };
  uint64_t t = add_run(trace, kT0, 10 * kNsPerUs, 60, pkt);  // a burst
  t = add_run(trace, t + 50 * kNsPerMs, 500 * kNsPerUs, 100, pkt);  // 2x CIR
  add_run(trace, t + 20 * kNsPerMs, 900 * kNsPerUs, 50, pkt);  // just under CIR
  return trace;
}

void check_meter(Replay& r, const std::vector<Frame>& trace,
                 const std::function<Colour(const Frame&)>& model) {
  uint64_t green = 0, yellow = 0, red = 0;
  for (const Frame& f : trace) {
    Colour c = model(f);
    green += c == Colour::green, yellow += c == Colour::yellow, red += c == Colour::red;
  }
  ASSERT_GT(green, 0u);
  ASSERT_GT(yellow, 0u);
  ASSERT_GT(red, 0u);
  r.set_input(trace);
  run_ok(r);
  Json m = r.rule("meter");
  EXPECT_WITHIN_ONE(m.u64("green_packets"), green);
  EXPECT_WITHIN_ONE(m.u64("yellow_packets"), yellow);
  EXPECT_WITHIN_ONE(m.u64("red_packets"), red);
  EXPECT_EQ(m.u64("matched_packets"), trace.size());
  auto out = r.output();
  EXPECT_EQ(out.size(), m.u64("green_packets") + m.u64("yellow_packets"));  // red: drop
  uint64_t af13 = 0;
  for (const Frame& f : out) {
    af13 += dscp_of(f.bytes) == 14;
    EXPECT_TRUE(ipv4_checksum_ok(f.bytes));
  }
  EXPECT_EQ(af13, m.u64("yellow_packets"));  // yellow: mark-dscp:AF13
  EXPECT_EQ(m.u64("marked_packets"), m.u64("yellow_packets"));
}

TEST(ReplayMeters, SrtcmColoursMatchRfc2697) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: meter
    match: {proto: udp}
    key: none
    algorithm: srtcm
    rate: 800kbit
    burst: 1000
    excess-burst: 2000
    actions: {green: pass, yellow: mark-dscp:AF13, red: drop}
)");
  ExactSrtcm model({100000, 1}, 1000, 2000);
  check_meter(r, meter_trace(), [&](const Frame& f) { return model.charge(f.ts_ns, f.bytes.size()); });
}

TEST(ReplayMeters, TrtcmColoursMatchRfc2698) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: meter
    match: {proto: udp}
    key: none
    algorithm: trtcm
    rate: 800kbit
    burst: 1000
    peak-rate: 1600kbit
    peak-burst: 3000
    actions: {green: pass, yellow: mark-dscp:AF13, red: drop}
)");
  ExactTrtcm model({100000, 1}, 1000, {200000, 1}, 3000);
  check_meter(r, meter_trace(), [&](const Frame& f) { return model.charge(f.ts_ns, f.bytes.size()); });
}

// ------------------------------------------------------------------ windows (§3)

std::string window_rules(const std::string& algorithm) {
  return "default: {action: pass}\n"
         "rules:\n"
         "  - name: win\n"
         "    match: {proto: udp}\n"
         "    key: none\n"
         "    algorithm: " + algorithm + "\n"
         "    window: 100ms\n"
         "    limit: 10\n"
         "    action: drop\n";
}

TEST(ReplayWindows, FixedWindowAdmitsTheLimitPerWindow) {
  Replay r;
  r.set_rules(window_rules("fixed-window"));
  std::vector<Frame> trace;
  // 1000/s for 350 ms from a window boundary: 10 per window, 4 windows.
  add_run(trace, kT0, kNsPerMs, 350, [](uint32_t s) { return udp4(s); });
  ExactFixedWindow model(100 * kNsPerMs, 10);
  uint64_t expected = 0;
  for (const Frame& f : trace) expected += model.charge(f.ts_ns, 1);
  ASSERT_EQ(expected, 40u);
  r.set_input(trace);
  run_ok(r);
  Json w = r.rule("win");
  EXPECT_EQ(w.u64("conformed_packets"), expected);
  auto out = r.output();
  ASSERT_EQ(out.size(), expected);
  // The first 10 of every window.
  for (const Frame& f : out) EXPECT_LT((f.ts_ns - kT0) % (100 * kNsPerMs), 10 * kNsPerMs);
}

TEST(ReplayWindows, SlidingWindowWeighsThePreviousWindow) {
  Replay r;
  r.set_rules(window_rules("sliding-window"));
  std::vector<Frame> trace;
  uint64_t t = add_run(trace, kT0, kNsPerMs, 500, [](uint32_t s) { return udp4(s); });
  // Then under the limit (5 per window): everything passes once the estimate has decayed.
  add_run(trace, t + 200 * kNsPerMs, 20 * kNsPerMs, 25, [](uint32_t s) { return udp4(s); });
  SlidingWindowEstimate model(100 * kNsPerMs, 10);
  uint64_t expected = 0, first_window = 0, tail = 0;
  for (const Frame& f : trace) {
    bool ok = model.charge(f.ts_ns, 1);
    expected += ok;
    if (f.ts_ns < kT0 + 100 * kNsPerMs) first_window += ok;
    if (f.ts_ns > t) tail += ok;
  }
  r.set_input(trace);
  run_ok(r);
  auto out = r.output();
  uint64_t got_first = 0, got_tail = 0;
  for (const Frame& f : out) {
    got_first += f.ts_ns < kT0 + 100 * kNsPerMs;
    got_tail += f.ts_ns > t;
  }
  EXPECT_EQ(got_first, first_window);  // no previous window: a plain count
  EXPECT_EQ(got_tail, tail);           // under the limit: all pass
  EXPECT_EQ(tail, 25u);
  // The estimate's rounding may differ by a packet per window.
  EXPECT_LE(std::max(out.size(), size_t(expected)) - std::min(out.size(), size_t(expected)), 6u)
      << "core " << out.size() << ", model " << expected;
  EXPECT_EQ(r.rule("win").u64("conformed_packets"), out.size());
}

// ------------------------------------------------------------------ hierarchy (§3)

TEST(ReplayHierarchy, ParentRefusalRefundsTheChild) {
  Replay r;
  r.set_rules(R"(default: {action: pass}
rules:
  - name: child
    match: {proto: udp, dst-port: 53}
    key: none
    rate: 10pps
    burst: 20
    algorithm: token-bucket
    action: drop
    parent: agg
  - name: agg
    match: {src: 10.0.0.0/8}
    key: none
    rate: 1000pps
    burst: 5
    algorithm: token-bucket
    action: drop
)");
  std::vector<Frame> trace;
  auto pkt = [](uint32_t s) { return udp4(s); };
  // 50 at once: the parent (burst 5) refuses 45. Without the refund the child would have
  // spent its whole burst of 20 on them and refuse everything below.
  add_run(trace, kT0, kNsPerUs, 50, pkt);
  // 15 more, paced so the parent always has a token: only the child's tokens decide.
  add_run(trace, kT0 + 10 * kNsPerMs, 2 * kNsPerMs, 15, pkt);

  ExactBucket child({10, 1}, 20), parent({1000, 1}, 5);
  uint64_t expected = 0;
  for (const Frame& f : trace) {
    if (!child.charge(f.ts_ns, 1)) continue;
    if (parent.charge(f.ts_ns, 1)) {
      ++expected;
    } else {
      child.give(1);  // refused by the parent: charges nothing
    }
  }
  ASSERT_EQ(expected, 20u);
  r.set_input(trace);
  run_ok(r);
  auto out = r.output();
  EXPECT_WITHIN_ONE(out.size(), expected);
  uint64_t late = 0;
  for (const Frame& f : out) late += f.ts_ns >= kT0 + 10 * kNsPerMs;
  EXPECT_EQ(late, 15u) << "the child was charged for packets its parent refused";
  Json c = r.rule("child");
  EXPECT_EQ(c.u64("matched_packets"), trace.size());
  EXPECT_EQ(c.u64("dropped_packets"), trace.size() - out.size());
  EXPECT_EQ(c.u64("passed_packets"), out.size());
}

}  // namespace
}  // namespace sluice::testing
