// Dense flow tables (dense_key.hpp, flow_table.hpp): which rules get one, the slot of an
// address, the table's lookups and expiry, and that a rule decides exactly as it does with a
// hashed table, through every path of the pipeline.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dense_key.hpp"
#include "flow_table.hpp"
#include "flow_table_helpers.hpp"
#include "packet_builder.hpp"
#include "pipeline.hpp"
#include "rules_loader.hpp"
#include "rules_snapshot.hpp"

namespace sluice {
namespace {

using flow_table_testing::kNever;
using flow_table_testing::kTick;
using Found = FlowTable::Outcome;
using testing::PacketBuilder;

Rule rule_of(const std::string& yaml) {
  auto r = load_rules_text("rules:\n  - " + yaml + "\n", "test.yaml");
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r->rules.at(0) : Rule{};
}

std::string keyed(const std::string& match, const std::string& key) {
  return "{name: r, match: " + match + ", key: " + key +
         ", rate: 10pps, burst: 5, algorithm: token-bucket, action: drop}";
}

TEST(DenseKey, KeysThatTheMatchPinsToARangeWithinCapacity) {
  struct Case {
    std::string match, key;
    uint64_t capacity, slots;
    bool src;
  } cases[] = {
      {"{dst: 192.0.2.0/24}", "dst-ip", 65536, 256, false},
      {"{src: 10.1.0.0/16}", "src-ip", 65536, 65536, true},
      {"{src: 10.1.0.0/16}", "src-ip", 65535, 0, false},  // more keys than flows: hashed
      {"{dst: 10.0.0.0/8}", "dst-prefix/24", 65536, 65536, false},
      {"{dst: 10.0.0.0/20}", "dst-prefix/24", 64, 16, false},
      {"{dst: 10.0.0.0/28}", "dst-prefix/24", 64, 1, false},  // the match is finer than the key
      {"{dst: 10.0.0.5/32}", "dst-ip", 1, 1, false},
      {"{dst: 10.0.0.0/8}", "dst-prefix/1", 65536, 1, false},
      {"{dst: 0.0.0.0/0}", "dst-prefix/1", 65536, 2, false},
      {"{src: 0.0.0.0/0}", "src-ip", uint64_t{1} << 33, uint64_t{1} << 32, true},
      {"{src: 10.0.0.0/24}", "dst-ip", 65536, 0, false},     // another field pinned
      {"{dst: 2001:db8::/120}", "dst-ip", 65536, 0, false},  // IPv6
      {"{dst: 192.0.2.0/24}", "5-tuple", 65536, 0, false},
      {"{dst: 192.0.2.0/24}", "src-dst", 65536, 0, false},
      {"{proto: udp}", "dst-ip", 65536, 0, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.match + " key " + c.key);
    const DenseKey d = dense_key_of(rule_of(keyed(c.match, c.key)), c.capacity);
    EXPECT_EQ(d.slots, c.slots);
    if (d.slots != 0) {
      EXPECT_EQ(d.src, c.src);
      EXPECT_EQ(uint64_t(d.mask) + 1, d.slots);
    }
  }
}

TEST(DenseKey, APrefixKeyOfNoBitsIsHashed) {
  // A file cannot say dst-prefix/0 (the loader takes 1 to 128), but the core is handed rules
  // built in code too: the pipeline fuzzer's (session 28) made one, whose dense table of one
  // slot put half of all addresses at slot 1 (addr >> 31), past its end.
  for (const char* pin : {"{dst: 0.0.0.0/0}", "{dst: 10.0.0.0/8}"}) {
    Rule r = rule_of(keyed(pin, "dst-prefix/1"));
    r.key_prefix_len = 0;
    EXPECT_EQ(dense_key_of(r, 65536).slots, 0u) << pin;
  }
}

uint32_t loaded(uint32_t host) {  // the address as Ipv4Fields::dst() holds it
  const uint8_t b[4] = {uint8_t(host >> 24), uint8_t(host >> 16), uint8_t(host >> 8), uint8_t(host)};
  uint32_t w;
  std::memcpy(&w, b, 4);
  return w;
}

TEST(DenseKey, TheRangeTestIsThePrefixAndBothSlotsAgree) {
  for (const auto& [match, key] : std::vector<std::pair<std::string, std::string>>{
           {"{dst: 192.0.2.0/24}", "dst-ip"},
           {"{dst: 10.16.0.0/12}", "dst-prefix/20"},
           {"{dst: 10.0.0.0/28}", "dst-prefix/24"},
           {"{dst: 10.0.0.0/8}", "dst-prefix/8"},
           {"{dst: 0.0.0.0/0}", "dst-prefix/4"},
           {"{dst: 0.0.0.0/0}", "dst-prefix/1"},
           {"{dst: 128.0.0.0/1}", "dst-prefix/1"}}) {
    SCOPED_TRACE(match + " key " + key);
    const Rule r = rule_of(keyed(match, key));
    const DenseKey d = dense_key_of(r, uint64_t{1} << 20);
    ASSERT_NE(d.slots, 0u);
    const Cidr& p = *r.match.dst;
    const uint32_t base = uint32_t(p.addr[0]) << 24 | uint32_t(p.addr[1]) << 16 |
                          uint32_t(p.addr[2]) << 8 | p.addr[3];
    const uint32_t span_m1 = p.prefix_len == 0 ? ~0u : (uint32_t{1} << (32 - p.prefix_len)) - 1;
    std::mt19937_64 rng(7);
    std::vector<uint32_t> probes = {base, base + span_m1, base - 1, base + span_m1 + 1, 0, ~0u};
    for (int i = 0; i < 20000; ++i) probes.push_back(base + (uint32_t(rng()) & span_m1));
    for (int i = 0; i < 20000; ++i) probes.push_back(uint32_t(rng()));
    std::vector<bool> seen(d.slots, false);
    for (uint32_t a : probes) {
      const bool in = (a & ~span_m1) == base;
      uint64_t slot = ~uint64_t{0};
      ASSERT_EQ(dense_slot_in(a, d, slot), in) << std::hex << a;
      if (!in) continue;
      ASSERT_LT(slot, d.slots) << std::hex << a;
      ASSERT_EQ(slot, dense_slot(loaded(a), d)) << std::hex << a;
      // The slot is the key's: addresses with the same key bits share it, and only they.
      const unsigned k = key == "dst-ip" ? 32 : unsigned(std::stoi(key.substr(key.find('/') + 1)));
      const uint64_t key_bits = k == 0 ? 0 : a >> (32 - k);
      ASSERT_EQ(slot, key_bits & d.mask) << std::hex << a;
      seen[slot] = true;
    }
    if (d.slots <= 4096) {
      EXPECT_EQ(std::count(seen.begin(), seen.end(), true), int64_t(d.slots));
    }
  }
}

// Marks a flow's first state word (the only one of a one-word table).
auto mark(uint64_t v) {
  return [v](std::atomic<uint64_t>* st) { st[0].store(v, std::memory_order_relaxed); };
}

FlowTable make_dense(uint64_t capacity, uint64_t slots, uint64_t idle_timeout_ns, unsigned words) {
  auto t = FlowTable::create(capacity, idle_timeout_ns, 1'000'000, words, FlowTable::kSlack, slots);
  if (!t) ADD_FAILURE() << t.error().message;
  return std::move(t).value();
}

TEST(DenseFlowTable, RefusesARangeBeyondItsCapacity) {
  auto t = FlowTable::create(100, kNever, 1'000'000, 1, FlowTable::kSlack, 101);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("101 keys"), std::string::npos) << t.error().message;
  EXPECT_TRUE(FlowTable::create(100, kNever, 1'000'000, 1, FlowTable::kSlack, 100).ok());
}

TEST(DenseFlowTable, EachKeyHasItsOwnSlotFoundAgainAndFreedWhenIdle) {
  for (unsigned words : {1u, 2u}) {
    SCOPED_TRACE(words);
    FlowTable t = make_dense(300, 256, 10 * kTick, words);
    EXPECT_EQ(t.dense_slots(), 256u);
    std::vector<const std::atomic<uint64_t>*> states(256);
    uint64_t now = 1000 * kTick;
    for (uint64_t k = 0; k < 256; ++k) {
      const FlowTable::Lookup l = t.find_or_insert_dense(k, now, mark(k));
      ASSERT_EQ(l.outcome, Found::created) << k;
      states[k] = l.state;
      EXPECT_EQ(t.slot_of(l.state), k) << "the key's offset is its slot";
    }
    EXPECT_EQ(t.active(), 256u);
    EXPECT_EQ(std::set<const std::atomic<uint64_t>*>(states.begin(), states.end()).size(), 256u);
    for (uint64_t k = 0; k < 256; ++k) {
      const FlowTable::Lookup l = t.find_or_insert_dense(k, now + kTick, mark(~k));
      ASSERT_EQ(l.outcome, Found::found) << k;
      ASSERT_EQ(l.state, states[k]);
      EXPECT_EQ(l.state[0].load(), k) << "a found flow keeps its words";
    }
    // Keys 0..127 keep sending; 128..255 go idle past the timeout and are expired.
    now += 20 * kTick;
    for (uint64_t k = 0; k < 128; ++k)
      ASSERT_EQ(t.find_or_insert_dense(k, now, mark(k)).outcome, Found::found);
    EXPECT_EQ(t.expire(now, t.slot_count()), 128u);
    EXPECT_EQ(t.active(), 128u);
    EXPECT_EQ(t.evicted(), 0u) << "a dense table never evicts";
    const FlowTable::Lookup again = t.find_or_insert_dense(200, now, mark(7));
    EXPECT_EQ(again.outcome, Found::created);
    EXPECT_EQ(again.state, states[200]);
    EXPECT_EQ(again.state[0].load(), 7u) << "a returning flow starts afresh";
    size_t listed = 0;
    t.for_each_flow_slot([&](size_t) { ++listed; });
    EXPECT_EQ(listed, 129u);
  }
}

TEST(DenseFlowTable, ThreadsCreatingTheSameKeysMakeEachOnce) {
  FlowTable t = make_dense(4096, 4096, kNever, 2);
  constexpr int kThreads = 4;
  std::atomic<uint64_t> created{0};
  std::vector<std::vector<const std::atomic<uint64_t>*>> seen(kThreads, std::vector<const std::atomic<uint64_t>*>(4096));
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (uint64_t k = 0; k < 4096; ++k) {
        const uint64_t key = th % 2 ? 4095 - k : k;  // two directions: they meet midway
        const FlowTable::Lookup l = t.find_or_insert_dense(key, kTick, mark(key));
        if (l.outcome == Found::created) created.fetch_add(1);
        seen[size_t(th)][key] = l.state;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(created.load(), 4096u);
  EXPECT_EQ(t.active(), 4096u);
  // A thread that waits too long for a preempted creator reports no slot (flow_table.hpp,
  // "Waits are bounded"); every slot any thread got for a key is the same one.
  for (uint64_t k = 0; k < 4096; ++k) {
    const std::atomic<uint64_t>* const slot = t.state_at(k);  // key k's slot is slot k
    for (int th = 0; th < kThreads; ++th) {
      if (seen[size_t(th)][k] != nullptr) {
        ASSERT_EQ(seen[size_t(th)][k], slot) << k;
      }
    }
  }
}

// The pipeline: a rule with a dense table (max-flows covers its range) and the same rule
// with a hashed one (one flow less of capacity than the range), over frames in the prefix,
// at its edges and outside it, common IPv4 (the fast burst) and not (VLAN, IP options: the
// general stages), in bursts and one by one: the same verdicts, rewrites and counters.
// `first`: rules before it (then the many-rule loops run, not the one-rule one); the dense
// rule is the last.
void expect_dense_same_as_hashed(const std::string& rule_body, uint64_t range,
                                 const std::vector<std::string>& dsts,
                                 const std::string& first = "") {
  const size_t last = size_t(std::count(first.begin(), first.end(), '\n'));
  auto make = [&](uint64_t max_flows, bool single_writer) {
    auto r = load_rules_text("default: {action: pass}\nrules:\n" + first + "  - " + rule_body +
                                 ", max-flows: " + std::to_string(max_flows) + "}\n",
                             "test.yaml");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    PipelineOptions opts;
    opts.hash_seed = 99;
    opts.single_writer = single_writer;
    auto p = Pipeline::create(*r, opts);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
    return std::move(p).value();
  };
  for (bool single_writer : {true, false}) {
    SCOPED_TRACE(single_writer ? "single writer" : "shared");
    auto dense = make(range, single_writer), hashed = make(range - 1, single_writer);
    WorkerCounters dc = dense->make_counters(), hc = hashed->make_counters();
    EXPECT_EQ(dense->enter(dc, 0).compiled[last].flows->dense_slots(), range);
    EXPECT_EQ(hashed->enter(hc, 0).compiled[last].flows->dense_slots(), 0u);
    std::mt19937_64 rng(5);
    uint64_t now = 1'000'000'000;
    size_t forwarded = 0, dropped = 0;
    for (int burst = 0; burst < 300; ++burst) {
      const size_t n = 1 + rng() % 32;
      std::vector<std::vector<uint8_t>> a, b;
      for (size_t i = 0; i < n; ++i) {
        PacketBuilder pb;
        const unsigned kind = unsigned(rng() % 8);
        if (kind == 0) pb.vlan(5);
        pb.ipv4("10.9." + std::to_string(rng() % 4) + ".1", dsts[rng() % dsts.size()]);
        if (kind == 1) pb.ipv4_options(4);
        pb.udp(uint16_t(1000 + rng() % 4), 53).payload(rng() % 600);
        a.push_back(pb.build());
      }
      b = a;
      std::vector<Pipeline::Frame> fa, fb;
      for (size_t i = 0; i < n; ++i) {
        fa.push_back({a[i].data(), uint32_t(a[i].size()), uint32_t(a[i].size())});
        fb.push_back({b[i].data(), uint32_t(b[i].size()), uint32_t(b[i].size())});
      }
      std::vector<Verdict> va(n), vb(n);
      // Dense in bursts, hashed one by one on odd bursts and in bursts on even ones.
      dense->process_burst(fa.data(), n, 0, now, dc, va.data(), VerdictFill::all);
      if (burst % 2)
        for (size_t i = 0; i < n; ++i) vb[i] = hashed->process(b[i].data(), uint32_t(b[i].size()), 0, now, hc);
      else
        hashed->process_burst(fb.data(), n, 0, now, hc, vb.data(), VerdictFill::all);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(va[i].kind, vb[i].kind) << "burst " << burst << " frame " << i;
        ASSERT_EQ(va[i].depart_ns, vb[i].depart_ns) << "burst " << burst << " frame " << i;
        ASSERT_EQ(a[i], b[i]) << "burst " << burst << " frame " << i << " rewritten differently";
        (va[i].kind == Verdict::Kind::drop ? dropped : forwarded) += 1;
      }
      now += rng() % 3'000'000;
    }
    const CountersSnapshot x = dense->snapshot({&dc}), y = hashed->snapshot({&hc});
    for (size_t i = 0; i <= last; ++i) {
      EXPECT_EQ(x.rules[i].traffic.packets, y.rules[i].traffic.packets) << x.rules[i].name;
      EXPECT_EQ(x.rules[i].traffic.bytes, y.rules[i].traffic.bytes) << x.rules[i].name;
      EXPECT_EQ(x.rules[i].active_flows, y.rules[i].active_flows) << x.rules[i].name;
    }
    EXPECT_EQ(x.default_rule.traffic.packets, y.default_rule.traffic.packets);
    EXPECT_GT(x.rules[last].traffic.pkts(Outcome::matched), 300u);
    EXPECT_GT(x.default_rule.traffic.pkts(Outcome::matched), 100u) << "frames outside the prefix";
    EXPECT_GT(dropped, 50u);
    EXPECT_GT(forwarded, 50u);
  }
}

const std::vector<std::string> kEdges = {"192.0.2.0",  "192.0.2.1",   "192.0.2.77",
                                         "192.0.2.255", "192.0.1.255", "192.0.3.0",
                                         "192.0.2.128", "10.0.0.1"};

TEST(DenseFlowTable, ATokenBucketPerDestinationDecidesAsWithAHashedTable) {
  expect_dense_same_as_hashed(
      "{name: per-dst, match: {dst: 192.0.2.0/24}, key: dst-ip, rate: 300pps, burst: 3, "
      "algorithm: token-bucket, action: drop",
      256, kEdges);
}

TEST(DenseFlowTable, AnSrtcmPerDestinationDecidesAsWithAHashedTable) {
  for (const char* green : {"pass", "\"mark-dscp:AF11\""}) {
    SCOPED_TRACE(green);
    expect_dense_same_as_hashed(
        std::string("{name: per-dst, match: {proto: udp, dst: 192.0.2.0/24}, key: dst-ip, "
                    "rate: 200kbit, burst: 2000, excess-burst: 2000, algorithm: srtcm, "
                    "actions: {green: ") +
            green + ", yellow: \"mark-dscp:AF13\", red: drop}",
        256, kEdges);
  }
}

TEST(DenseFlowTable, APrefixKeyAndAMatchOnPortsTooDecideAsWithAHashedTable) {
  // The match keeps a test beyond the address (the ports), so the burst tests both.
  expect_dense_same_as_hashed(
      "{name: per-net, match: {dst: 192.0.0.0/22, src-port: 1000-1002}, key: dst-prefix/30, "
      "rate: 300pps, burst: 3, algorithm: token-bucket, action: drop",
      256, {"192.0.0.1", "192.0.1.9", "192.0.2.200", "192.0.3.255", "192.0.4.0", "191.255.255.255"});
}

TEST(DenseFlowTable, AMatchOnBothAddressesDecidesAsWithAHashedTable) {
  // The source is tested by the match, the destination by the slot's range: half the
  // trace's sources (10.9.0-3.1) are outside 10.9.0.0/23.
  expect_dense_same_as_hashed(
      "{name: pair, match: {src: 10.9.0.0/23, dst: 192.0.2.0/24}, key: dst-ip, rate: 300pps, "
      "burst: 3, algorithm: token-bucket, action: drop",
      256, kEdges);
}

TEST(DenseFlowTable, ADenseRuleAmongOthersDecidesAsWithAHashedTable) {
  // Two rules before it (hashed, keyed by source; the second a meter): the many-rule loops,
  // which look up each packet's table by its rule, dense or hashed.
  for (const char* algo : {"rate: 300pps, burst: 3, algorithm: token-bucket, action: drop",
                           "rate: 200kbit, burst: 2000, excess-burst: 2000, algorithm: srtcm, "
                           "actions: {green: pass, yellow: drop, red: drop}"}) {
    SCOPED_TRACE(algo);
    expect_dense_same_as_hashed(
        std::string("{name: per-dst, match: {dst: 192.0.2.0/24}, key: dst-ip, ") + algo, 256,
        kEdges,
        "  - {name: odd-src, match: {src: 10.9.1.0/24}, key: src-ip, rate: 100pps, burst: 2, "
        "algorithm: token-bucket, action: drop}\n"
        "  - {name: src-meter, match: {src: 10.9.3.0/24, dst: 192.0.2.128/25}, key: src-ip, "
        "rate: 100kbit, burst: 1500, excess-burst: 1500, algorithm: srtcm, "
        "actions: {green: pass, yellow: drop, red: drop}}\n");
  }
}

}  // namespace
}  // namespace sluice
