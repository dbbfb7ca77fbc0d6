// `sluicectl flows top` against a running sluiced (the binaries, end to end): a capture of
// three sources at 4:2:1 replayed in a loop through net_pcap into a per-source rule; the
// command names them in that order, --rule and --by are honoured, and a key: none rule is
// refused with the reason. Own EAL file prefix, removed after.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <thread>

#include "child_process.hpp"
#include "sluiced_live_fixture.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(
default: {action: pass}
rules:
  - {name: per-source, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 100Mpps, burst: 1000000}
  - {name: all-tcp, match: {proto: tcp}, key: none, rate: 1kpps, burst: 10}
)";

struct Row {
  std::string rule, key;
  double pps = 0;
};

// sluicectl's table ("rule  key  pps  bit/s", then one row per flow).
std::vector<Row> rows_of(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    Row r;
    if (f >> r.rule >> r.key >> r.pps) rows.push_back(r);
  }
  return rows;
}

TEST_F(SluicedLive, SluicectlFlowsTopNamesTheBusiestSources) {
  const char* ctl = std::getenv("SLUICECTL");
  if (ctl == nullptr) GTEST_SKIP() << "SLUICECTL not set";
  std::string err;
  const std::pair<const char*, const char*> sources[] = {
      {"10.0.0.1", "4000"}, {"10.0.0.2", "2000"}, {"10.0.0.3", "1000"}};
  std::vector<std::string> merge = {tracegen_, "--out", path("in.pcap")};
  for (const auto& [src, n] : sources) {
    const std::string out = path(std::string(src) + ".pcap");
    ASSERT_EQ(run_to_exit({tracegen_, "--out", out, "--packets", n, "--pps", n, "--flows", "1",
                           "--src-base", src, "--seed", "4"},
                          &err),
              0)
        << err;
    merge.insert(merge.end(), {"--merge", out});
  }
  ASSERT_EQ(run_to_exit(merge, &err), 0) << err;
  write("rules.yaml", kRules);
  const std::string sock = path("sluiced.sock");
  const std::string pcap = "net_pcap0,rx_pcap=" + path("in.pcap") + ",infinite_rx=1";
  ChildProcess p(live_args({"-l", "0,1", "--vdev", pcap, "--vdev", "net_null1,no-rx=1"},
                           {"--config", path("rules.yaml"), "--control", sock, "--mbufs", "16383"}));
  auto sluicectl = [&](std::vector<std::string> args, std::string* out, std::string* err) {
    return SluicedLive::sluicectl(ctl, sock, std::move(args), out, err);
  };

  // Once a whole window (1 s) of traffic is behind the worker, its last window has all three.
  std::string out;
  std::vector<Row> rows;
  for (int i = 0; i < 100 && rows.size() < 3; ++i) {
    std::this_thread::sleep_for(100ms);
    if (sluicectl({"flows", "top", "3"}, &out, &err) == 0) rows = rows_of(out);
  }
  std::this_thread::sleep_for(1200ms);
  ASSERT_EQ(sluicectl({"flows", "top", "3"}, &out, &err), 0) << err << p.err();
  std::printf("%s", out.c_str());
  rows = rows_of(out);
  ASSERT_EQ(rows.size(), 3u) << out;
  EXPECT_EQ(rows[0].key, "10.0.0.1");
  EXPECT_EQ(rows[1].key, "10.0.0.2");
  EXPECT_EQ(rows[2].key, "10.0.0.3");
  for (const Row& r : rows) EXPECT_EQ(r.rule, "per-source");
  ASSERT_GT(rows[2].pps, 0);
  EXPECT_NEAR(rows[0].pps / rows[2].pps, 4.0, 0.8) << out;

  ASSERT_EQ(sluicectl({"flows", "top", "1", "--rule", "per-source", "--by", "bps"}, &out, &err), 0)
      << err;
  rows = rows_of(out);
  ASSERT_EQ(rows.size(), 1u) << out;
  EXPECT_EQ(rows[0].key, "10.0.0.1");
  EXPECT_EQ(sluicectl({"flows", "top", "3", "--rule", "all-tcp"}, &out, &err), 1);
  EXPECT_NE(err.find("key: none"), std::string::npos) << err;

  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
}

}  // namespace
}  // namespace sluice
