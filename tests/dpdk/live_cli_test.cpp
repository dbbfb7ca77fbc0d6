// sluiced's live-mode options (parsing only): --report, --stats-interval, --flows, --mbufs,
// --burst, --max-delay.
#include <gtest/gtest.h>

#include "cli_args.hpp"

namespace sluice {
namespace {

Result<CliArgs> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "sluiced");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_cli_args(int(argv.size()), argv.data());
}

TEST(LiveCli, ReportStatsIntervalAndFlows) {
  auto a = parse({"-l", "0,1", "--", "--config", "r.yaml", "--report", "out.json",
                  "--stats-interval", "0.5", "--flows", "10000000"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->mode, RunMode::live);
  EXPECT_EQ(a->report_path, "out.json");
  EXPECT_EQ(a->stats_interval_ms, 500u);
  EXPECT_EQ(a->flows, 10'000'000u);

  auto defaults = parse({"--", "--config", "r.yaml"});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->report_path, "");
  EXPECT_EQ(defaults->stats_interval_ms, 0u);
  EXPECT_EQ(defaults->flows, 0u);
  EXPECT_EQ(defaults->mbufs, 0u);
  EXPECT_EQ(defaults->burst, 0u);
  auto eq = parse({"--", "--config=r.yaml", "--stats-interval=2"});
  ASSERT_TRUE(eq);
  EXPECT_EQ(eq->stats_interval_ms, 2000u);
}

TEST(LiveCli, MbufsTakesACountUpToTheLargestPool) {
  auto a = parse({"-l", "0,1", "--", "--config", "r.yaml", "--mbufs", "1200000"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->mbufs, 1'200'000u);
  auto eq = parse({"--", "--config", "r.yaml", "--mbufs=1"});
  ASSERT_TRUE(eq) << eq.error().message;
  EXPECT_EQ(eq->mbufs, 1u);
  auto max = parse({"--", "--config", "r.yaml", "--mbufs", std::to_string(kMaxMbufs)});
  ASSERT_TRUE(max) << max.error().message;
  EXPECT_EQ(max->mbufs, kMaxMbufs);
  EXPECT_EQ(kMaxMbufs, (uint64_t{1} << 30) - 1);
  auto over = parse({"--", "--config", "r.yaml", "--mbufs", std::to_string(kMaxMbufs + 1)});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("is not between 1 and 1073741823"), std::string::npos)
      << over.error().message;
  EXPECT_NE(usage_text("sluiced").find("--mbufs N"), std::string::npos);
}

TEST(LiveCli, MbufSizeTakesADataRoomFromHeadroomPlusAFrameToSixtyFourKiB) {
  auto defaults = parse({"--", "--config", "r.yaml"});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->mbuf_size, 0u);
  for (uint32_t n : {kMinMbufSize, 256u, kDefaultMbufSize, kMaxMbufSize}) {
    auto a = parse({"--", "--config", "r.yaml", "--mbuf-size", std::to_string(n)});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->mbuf_size, n);
  }
  for (const char* bad : {"0", "191", "65536", "-1", "big"}) {
    auto a = parse({"--", "--config", "r.yaml", "--mbuf-size", bad});
    ASSERT_FALSE(a) << bad;
    EXPECT_NE(a.error().message.find("--mbuf-size"), std::string::npos) << a.error().message;
  }
  auto under = parse({"--", "--config", "r.yaml", "--mbuf-size", "191"});
  EXPECT_NE(under.error().message.find("'--mbuf-size': 191 is not between 192 and 65535"),
            std::string::npos)
      << under.error().message;
  EXPECT_NE(usage_text("sluiced").find("--mbuf-size BYTES"), std::string::npos);
}

TEST(LiveCli, BurstTakesOneToSixtyFour) {
  for (uint16_t n : {uint16_t{1}, uint16_t{32}, uint16_t{64}}) {
    auto a = parse({"--", "--config", "r.yaml", "--burst", std::to_string(n)});
    ASSERT_TRUE(a) << a.error().message;
    EXPECT_EQ(a->burst, n);
  }
  auto over = parse({"--", "--config", "r.yaml", "--burst", "65"});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("'--burst': 65 is not between 1 and 64"), std::string::npos)
      << over.error().message;
  EXPECT_NE(usage_text("sluiced").find("--burst N"), std::string::npos);
}

TEST(LiveCli, MaxDelayTakesADurationFromOneMillisecondToAMinute) {
  auto defaults = parse({"--", "--config", "r.yaml"});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->max_delay_ns, 0u);
  const std::pair<const char*, uint64_t> good[] = {
      {"1ms", 1'000'000}, {"250ms", 250'000'000}, {"2s", 2'000'000'000}, {"60s", 60'000'000'000}};
  for (const auto& [text, ns] : good) {
    auto a = parse({"--", "--config", "r.yaml", "--max-delay", text});
    ASSERT_TRUE(a) << text << ": " << a.error().message;
    EXPECT_EQ(a->max_delay_ns, ns) << text;
  }
  for (const char* bad : {"0", "999us", "61s", "2m", "-1s", "soon", "5"}) {
    auto a = parse({"--", "--config", "r.yaml", "--max-delay", bad});
    ASSERT_FALSE(a) << bad;
    EXPECT_EQ(a.error().message, "option '--max-delay': '" + std::string(bad) +
                                     "' is not a duration between 1ms and 60s");
  }
  EXPECT_NE(usage_text("sluiced").find("--max-delay DURATION"), std::string::npos);
  EXPECT_FALSE(parse({"--replay", "i", "--out", "o", "--report", "r", "--config", "c",
                      "--max-delay", "1s"}));
}

TEST(LiveCli, RejectsBadValuesWithTheOptionName) {
  for (auto bad : std::vector<std::vector<std::string>>{
           {"--", "--config", "r", "--stats-interval", "0"},
           {"--", "--config", "r", "--stats-interval", "-1"},
           {"--", "--config", "r", "--stats-interval", "soon"},
           {"--", "--config", "r", "--stats-interval", "1e9"},
           {"--", "--config", "r", "--flows", "0"},
           {"--", "--config", "r", "--flows", "-5"},
           {"--", "--config", "r", "--flows", "99999999999"},
           {"--", "--config", "r", "--mbufs", "0"},
           {"--", "--config", "r", "--mbufs", "-5"},
           {"--", "--config", "r", "--mbufs", "many"},
           {"--", "--config", "r", "--mbufs", "1e6"},
           {"--", "--config", "r", "--mbufs", "99999999999"},
           {"--", "--config", "r", "--mbufs", "18446744073709551616"},
           {"--", "--config", "r", "--burst", "0"},
           {"--", "--config", "r", "--burst", "fast"},
           {"--", "--config", "r", "--report"},
           {"--", "--config", "r", "--report", ""},
           {"--", "--config", "r", "--control", ""},
           {"--", "--config", "r", "--control", "/tmp/" + std::string(103, 's')},
       }) {
    auto a = parse(bad);
    ASSERT_FALSE(a) << bad[3];
    EXPECT_NE(a.error().message.find(bad[3]), std::string::npos) << a.error().message;
  }
}

TEST(LiveCli, ReplayDoesNotTakeLiveOptions) {
  EXPECT_FALSE(parse({"--replay", "i", "--out", "o", "--report", "r", "--config", "c", "--flows", "5"}));
  EXPECT_FALSE(parse({"--replay", "i", "--out", "o", "--report", "r", "--config", "c", "--mbufs", "5"}));
}

}  // namespace
}  // namespace sluice
