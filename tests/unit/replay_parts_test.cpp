// Unit tests of the replay's own parts: the departure queue's ordering (ties, the spill set,
// clocks stepping back), the counters JSON (escaping, shape) and the sluiced command line.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../e2e/mini_json.hpp"
#include "cli_args.hpp"
#include "counters_json.hpp"
#include "replay/departure_queue.hpp"

namespace sluice {
namespace {

using Released = std::vector<std::pair<uint64_t, uint64_t>>;  // (depart_ns, seq)

HeldPacket held(uint64_t seq) { return HeldPacket{seq, 64, std::vector<uint8_t>(64, uint8_t(seq))}; }

TEST(DepartureQueue, ReleasesInDepartureThenArrivalOrderNeverEarly) {
  DepartureQueue q(/*max_delay_ns=*/10'000'000);
  Released out;
  auto sink = [&](uint64_t d, HeldPacket&& p) {
    EXPECT_EQ(p.frame[0], uint8_t(p.seq));
    out.emplace_back(d, p.seq);
  };
  q.release(1'000'000, sink);
  // Several departures in one 1 us slot, pushed out of order.
  q.hold(1'000'900, held(0));
  q.hold(1'000'100, held(1));
  q.hold(1'000'100, held(2));
  q.hold(1'002'000, held(3));
  q.release(1'000'500, sink);  // the slot has started, but only the two at 100 are due
  EXPECT_EQ(out, (Released{{1'000'100, 1}, {1'000'100, 2}}));
  q.release(1'001'999, sink);
  EXPECT_EQ(out.back(), (std::pair<uint64_t, uint64_t>{1'000'900, 0}));
  EXPECT_EQ(q.size(), 1u);
  q.release_all(sink);
  EXPECT_EQ(out.back(), (std::pair<uint64_t, uint64_t>{1'002'000, 3}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(DepartureQueue, OverflowAndBackwardClockStillComeOutSorted) {
  DepartureQueue q(/*max_delay_ns=*/1'000'000'000);
  Released out;
  auto sink = [&](uint64_t d, HeldPacket&& p) { out.emplace_back(d, p.seq); };
  uint64_t seq = 0;
  q.release(5'000'000'000, sink);
  // More than the wheel holds: the rest goes to the spill set.
  const size_t n = DepartureQueue::kWheelCapacity + 1000;
  for (size_t i = 0; i < n; ++i) q.hold(5'000'000'000 + (n - i) * 7, held(seq++));
  // The clock steps back: departures before the wheel's time go to the spill set too.
  q.release(4'000'000'000, sink);
  EXPECT_TRUE(out.empty());
  q.hold(4'000'000'500, held(seq++));
  q.release(4'000'000'600, sink);
  ASSERT_EQ(out.size(), 1u);
  q.release_all(sink);
  ASSERT_EQ(out.size(), n + 1);
  EXPECT_TRUE(std::is_sorted(out.begin(), out.end()));
}

TEST(CountersJson, EscapesNamesAndParsesBack) {
  EXPECT_EQ(json_quote("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  CountersSnapshot s;
  RuleSnapshot r;
  r.name = "we\"ird\\name";
  r.traffic.add(Outcome::matched, 100);
  r.traffic.add(Outcome::dropped, 100);
  r.active_flows = 3;
  s.rules.push_back(r);
  s.default_rule.traffic.add(Outcome::malformed, 20);
  auto j = testing::Json::parse(counters_to_json(s));
  EXPECT_EQ(j.at("rules").items.at(0).at("name").str, "we\"ird\\name");
  EXPECT_EQ(j.at("rules").items.at(0).u64("dropped_bytes"), 100u);
  EXPECT_EQ(j.at("rules").items.at(0).u64("active_flows"), 3u);
  EXPECT_EQ(j.at("default").at("name").str, "default");
  EXPECT_EQ(j.at("default").u64("malformed_packets"), 1u);
  EXPECT_FALSE(j.has("ports"));  // only when there are any
  s.ports.push_back(PortSnapshot{0, 5, 4, 1, 500, 400});
  j = testing::Json::parse(counters_to_json(s));
  EXPECT_EQ(j.at("ports").items.at(0).u64("missed_packets"), 1u);
  std::string table = counters_to_table(s);
  EXPECT_NE(table.find("we\"ird\\name"), std::string::npos);
  EXPECT_NE(table.find("default"), std::string::npos);
}

Result<CliArgs> parse(std::vector<const char*> argv) {
  argv.insert(argv.begin(), "sluiced");
  return parse_cli_args(int(argv.size()), argv.data());
}

TEST(CliArgs, ReplayNeedsAllFourPaths) {
  auto a = parse({"--replay", "i.pcap", "--out=o.pcap", "--report", "r.json", "--config", "c.yaml",
                  "--hash-seed", "0x10", "--stats"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->mode, RunMode::replay);
  EXPECT_EQ(a->replay.in_path, "i.pcap");
  EXPECT_EQ(a->replay.out_path, "o.pcap");
  EXPECT_EQ(a->replay.hash_seed, 16u);
  EXPECT_TRUE(a->print_stats);
  auto missing = parse({"--replay", "i.pcap", "--out", "o.pcap", "--config", "c.yaml"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("--report"), std::string::npos);
  EXPECT_FALSE(parse({"--replay", "i", "--out", "o", "--report", "r", "--config", "c", "--hash-seed", "-1"}));
  EXPECT_FALSE(parse({"--replay", "i", "--out", "o", "--report", "r", "--config", "c", "--out", "x"}));
  EXPECT_FALSE(parse({"--replay"}));
  EXPECT_FALSE(parse({}));
}

TEST(CliArgs, LiveModeSplitsEalArguments) {
  auto a = parse({"-l", "0-1", "--vdev", "net_null0", "--", "--config", "c.yaml", "--control", "s"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->mode, RunMode::live);
  EXPECT_EQ(a->eal_args, (std::vector<std::string>{"sluiced", "-l", "0-1", "--vdev", "net_null0"}));
  EXPECT_EQ(a->config_path, "c.yaml");
  EXPECT_EQ(a->control_socket, "s");
  EXPECT_EQ(parse({"--help"})->mode, RunMode::help);
  EXPECT_FALSE(parse({"--", "--control", "s"}));  // --config is required
}

}  // namespace
}  // namespace sluice
