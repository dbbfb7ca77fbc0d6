// sluiced's live mode as a binary: exit codes and messages for bad set-ups (SPEC §1: 2 for
// bad usage or input), a clean stop on SIGINT/SIGTERM with final counters and REPORT.json
// (with its "dataplane" object: drops outside the rules, the mbuf pool), --mbufs, and the same
// counters as `sluiced --replay` on a capture fed through net_pcap with rules whose outcome
// does not depend on timing. Watching it run (telemetry, the control socket, --metrics) is in
// sluiced_live_observe_test.cpp. Each run gets its own EAL file prefix, removed after.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "../e2e/mini_json.hpp"
#include "child_process.hpp"
#include "sluiced_live_fixture.hpp"

namespace sluice {
namespace {

TEST_F(SluicedLive, NoPortsIsExit2WithTheReason) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1"}, {"--config", path("pass.yaml")}), &err), 2);
  EXPECT_NE(err.find("sluiced: no ports"), std::string::npos) << err;
}

TEST_F(SluicedLive, OddPortCountIsExit2WithTheReason) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", "net_null0", "--vdev", "net_null1",
                                   "--vdev", "net_null2"},
                                  {"--config", path("pass.yaml")}),
                        &err),
            2);
  EXPECT_NE(err.find("odd number of ports (3)"), std::string::npos) << err;
}

TEST_F(SluicedLive, BadEalArgumentIsExit2) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"--no-such-eal-option"}, {"--config", path("pass.yaml")}), &err), 2);
  EXPECT_NE(err.find("EAL initialisation failed"), std::string::npos) << err;
}

TEST_F(SluicedLive, NoWorkerLcoreIsExit2) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0", "--vdev", "net_null0"}, {"--config", path("pass.yaml")}), &err), 2);
  EXPECT_NE(err.find("no worker lcore"), std::string::npos) << err;
}

TEST_F(SluicedLive, BadRulesFileIsExit2BeforeEalStarts) {
  write("bad.yaml", "rules:\n  - {name: x, rate: 0pps, burst: 1}\n");
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", "net_null0"}, {"--config", path("bad.yaml")}), &err), 2);
  EXPECT_NE(err.find("bad.yaml:2"), std::string::npos) << err;
  EXPECT_EQ(err.find("EAL:"), std::string::npos) << "EAL started for a bad rules file";
}

TEST_F(SluicedLive, BadMetricsAddressIsExit2BeforeEalStarts) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1"}, {"--config", path("pass.yaml"), "--metrics", "9100"}), &err), 2);
  EXPECT_NE(err.find("--metrics 9100: expected HOST:PORT"), std::string::npos) << err;
  EXPECT_EQ(err.find("EAL"), std::string::npos) << err;
}

TEST_F(SluicedLive, StopsCleanlyOnSignalsWithCountersAndReport) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string report = path("report-" + std::to_string(sig) + ".json");
    ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                             {"--config", path("pass.yaml"), "--report", report,
                              "--stats-interval", "0.2"}));
    // Two periodic tables means the workers are forwarding.
    ASSERT_TRUE(p.wait_for_output(
        [](const std::string& out) {
          size_t n = 0;
          for (size_t at = out.find("port 0: rx"); at != std::string::npos; at = out.find("port 0: rx", at + 1)) ++n;
          return n >= 2;
        },
        30s))
        << p.err();
    p.signal(sig);
    EXPECT_EQ(p.wait_exit(30s), 0) << p.err();
    EXPECT_NE(p.err().find("stopping"), std::string::npos);
    EXPECT_NE(p.err().find("stopped:"), std::string::npos);
    std::ifstream in(report);
    std::stringstream text;
    text << in.rdbuf();
    Json j = Json::parse(text.str());
    ASSERT_EQ(j.at("ports").items.size(), 1u);
    const Json& port = j.at("ports").items[0];
    EXPECT_GT(port.u64("rx_packets"), 0u);
    // Every packet received was sent back out (pass-all, no TX drops on net_null).
    EXPECT_EQ(port.u64("tx_packets"), port.u64("rx_packets"));
    EXPECT_EQ(j.at("default").u64("matched_packets"), port.u64("rx_packets"));
    // The dataplane's own view agrees, nothing was dropped outside the rules, and after the
    // port closed every mbuf was back in the (default-sized) pool.
    const Json& d = j.at("dataplane");
    EXPECT_EQ(d.u64("rx_packets"), port.u64("rx_packets"));
    EXPECT_EQ(d.u64("tx_packets"), port.u64("tx_packets"));
    EXPECT_EQ(d.u64("dropped_tx_buffer_full"), 0u);
    EXPECT_EQ(d.u64("dropped_shaper_full"), 0u);
    EXPECT_EQ(d.u64("dropped_at_shutdown"), 0u);
    EXPECT_EQ(d.u64("mbufs_total"), 8191u);
    EXPECT_EQ(d.u64("mbufs_in_use"), 0u);
    EXPECT_EQ(d.u64("mbufs_leaked"), 0u);
    ASSERT_EQ(d.at("ports").items.size(), 1u);
    EXPECT_EQ(d.at("ports").items[0].at("driver").str, "net_null");
    EXPECT_EQ(d.at("ports").items[0].u64("rx_nombuf"), 0u);
    ASSERT_EQ(d.at("workers").items.size(), 1u);
    EXPECT_EQ(d.at("workers").items[0].u64("lcore"), 1u);
    EXPECT_NE(p.out().find("dataplane: rx "), std::string::npos) << p.out();
    EXPECT_EQ(p.err().find("still out of the pool"), std::string::npos) << p.err();
  }
}

TEST_F(SluicedLive, ReportAndStatsShowShaperOverflowAndPacketsHeldAtShutdown) {
  // net_null offers millions of packets/s to a 100 kpps shaper with 1 s of max-delay: up to
  // 100k packets would wait, the wheel holds 8192, the rest are dropped on the full wheel, and
  // whatever waits when SIGINT comes is dropped at shutdown. None of this is a rule's drop.
  write("shape.yaml", R"(
default: {action: pass}
rules:
  - {name: shape, key: none, rate: 100kpps, burst: 1, algorithm: leaky-bucket, max-delay: 1s}
)");
  ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                           {"--config", path("shape.yaml"), "--report", path("shape.json"),
                            "--stats-interval", "0.2"}));
  ASSERT_TRUE(p.wait_for_output(
      [](const std::string& out) {
        const size_t at = out.rfind("shaper-full ");
        return at != std::string::npos && out.compare(at, 14, "shaper-full 0 ") != 0;
      },
      30s))
      << p.out() << p.err();
  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
  const Json j = load("shape.json");
  const Json& d = j.at("dataplane");
  const Json& shape = j.at("rules").items.at(0);
  EXPECT_GT(d.u64("dropped_shaper_full"), 0u);
  EXPECT_GT(d.u64("dropped_at_shutdown"), 0u);
  EXPECT_LE(d.u64("dropped_at_shutdown"), 8192u);  // the wheel's capacity
  EXPECT_EQ(d.u64("dropped_tx_buffer_full"), 0u);
  // The rule counted them as delayed: only the dataplane object says they never left.
  EXPECT_EQ(shape.u64("delayed_packets") + shape.u64("passed_packets"),
            d.u64("tx_packets") + d.u64("dropped_shaper_full") + d.u64("dropped_at_shutdown"));
  EXPECT_EQ(d.at("workers").items.at(0).u64("dropped_shaper_full"), d.u64("dropped_shaper_full"));
  EXPECT_EQ(d.u64("mbufs_in_use"), 0u);
  EXPECT_EQ(d.u64("mbufs_leaked"), 0u);
  // The final table says it too, as does the log line.
  const std::string last = "at-shutdown " + std::to_string(d.u64("dropped_at_shutdown"));
  EXPECT_NE(p.out().find(last), std::string::npos) << p.out();
  EXPECT_NE(p.err().find(std::to_string(d.u64("dropped_at_shutdown")) + " held at shutdown"),
            std::string::npos)
      << p.err();
}

TEST_F(SluicedLive, BadMbufsValueIsExit2BeforeEalStarts) {
  for (const char* bad : {"0", "-1", "lots", "1073741824"}) {
    std::string err;
    EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", "net_null0"},
                                    {"--config", path("pass.yaml"), "--mbufs", bad}),
                          &err),
              2)
        << bad;
    EXPECT_NE(err.find("option '--mbufs'"), std::string::npos) << err;
    EXPECT_NE(err.find("usage:"), std::string::npos) << err;
    EXPECT_EQ(err.find("EAL:"), std::string::npos) << "EAL started for a bad option";
  }
}

TEST_F(SluicedLive, MbufsBelowWhatTheSetUpNeedsIsExit2) {
  std::string err;
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", "net_null0"},
                                  {"--config", path("pass.yaml"), "--mbufs", "1000"}),
                        &err),
            2);
  EXPECT_NE(err.find("--mbufs 1000 is too few"), std::string::npos) << err;
  EXPECT_NE(err.find("need at least"), std::string::npos) << err;
}

TEST_F(SluicedLive, MbufsSizesThePoolForATraceNetPcapKeepsInMemory) {
  // net_pcap with infinite_rx=1 copies the whole trace into mbufs of our pool at set-up and
  // replays it in a loop: 12000 packets do not fit the default pool (8191), they do in 20000.
  std::string err;
  ASSERT_EQ(run_to_exit({tracegen_, "--out", path("t.pcap"), "--packets", "12000", "--flows", "50",
                         "--seed", "3"},
                        &err),
            0)
      << err;
  const std::string pcap = "net_pcap0,rx_pcap=" + path("t.pcap") + ",infinite_rx=1";
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", pcap, "--vdev", "net_null1,no-rx=1"},
                                  {"--config", path("pass.yaml")}),
                        &err),
            1);
  EXPECT_NE(err.find("cannot set up RX queue 0"), std::string::npos) << err;
  EXPECT_NE(err.find("--mbufs N"), std::string::npos) << err;

  ChildProcess p(live_args({"-l", "0,1", "--vdev", pcap, "--vdev", "net_null1,no-rx=1"},
                           {"--config", path("pass.yaml"), "--mbufs", "20000", "--report",
                            path("mbufs.json"), "--stats-interval", "0.1"}));
  // More than twice the trace received: the looped trace really came out of the pool.
  ASSERT_TRUE(p.wait_for_output(
      [](const std::string& out) {
        const size_t at = out.rfind("port 0: rx ");
        // (strtoull: a line read only up to "rx " counts as 0, not as an error)
        return at != std::string::npos && std::strtoull(out.c_str() + at + 11, nullptr, 10) > 24000;
      },
      60s))
      << p.out() << p.err();
  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
  EXPECT_NE(p.err().find("mbuf pool: 20000 mbufs (--mbufs"), std::string::npos) << p.err();
  const Json d = load("mbufs.json").at("dataplane");
  EXPECT_EQ(d.u64("mbufs_total"), 20000u);
  // net_pcap gives the trace's mbufs back at close: the pool is full again.
  EXPECT_EQ(d.u64("mbufs_in_use"), 0u);
  EXPECT_EQ(d.u64("mbufs_leaked"), 0u);
  EXPECT_EQ(d.at("ports").items.at(0).u64("rx_nombuf"), 0u);
}

TEST_F(SluicedLive, SameCountersAsReplayOnACaptureThroughNetPcap) {
  // Burst-only limits: rates so small nothing refills while the test runs, so the counts do
  // not depend on timing and must equal the replay's exactly.
  write("rules.yaml", R"(
default: {action: pass}
rules:
  - {name: dns-per-source, match: {proto: udp, dst-port: 53}, key: src-ip, rate: 0.001pps,
     burst: 7, action: drop}
  - {name: web, match: {proto: tcp, dst-port: 80}, key: none, rate: 0.01pps, burst: 300,
     algorithm: gcra, action: "mark-dscp:AF11"}
)");
  std::string err;
  ASSERT_EQ(run_to_exit({tracegen_, "--out", path("a.pcap"), "--packets", "20000", "--flows", "300",
                         "--random-flows", "--size-mix", "--ipv6-share", "0.2",
                         "--malformed-every", "53", "--seed", "9"},
                        &err),
            0)
      << err;
  ASSERT_EQ(run_to_exit({tracegen_, "--out", path("b.pcap"), "--packets", "5000", "--flows", "20",
                         "--proto", "tcp", "--dst-port", "80", "--vlan", "7", "--seed", "10"},
                        &err),
            0)
      << err;
  ASSERT_EQ(run_to_exit({tracegen_, "--out", path("in.pcap"), "--merge", path("a.pcap"), "--merge",
                         path("b.pcap")},
                        &err),
            0)
      << err;
  ASSERT_EQ(run_to_exit({sluiced_, "--replay", path("in.pcap"), "--out", path("replay.pcap"),
                         "--report", path("replay.json"), "--config", path("rules.yaml")},
                        &err),
            0)
      << err;

  ChildProcess live(live_args(
      {"-l", "0,1", "--vdev", "net_pcap0,rx_pcap=" + path("in.pcap") + ",tx_pcap=" + path("live.pcap")},
      {"--config", path("rules.yaml"), "--report", path("live.json"), "--stats-interval", "0.1"}));
  ASSERT_TRUE(live.wait_for_output(
      [](const std::string& out) { return out.find("port 0: rx 25000 ") != std::string::npos; }, 60s))
      << live.err();
  live.signal(SIGINT);
  ASSERT_EQ(live.wait_exit(30s), 0) << live.err();
  // The keyed rule's table (default capacity), reported at start as replay reports it.
  const std::string tables = "sluiced: flow tables: 2 MB for 65536 flows (1 tables; reserved, "
                             "backed as flows arrive)\n";
  EXPECT_NE(live.err().find(tables), std::string::npos) << live.err();

  const Json replay = load("replay.json"), got = load("live.json");
  auto same = [](const Json& a, const Json& b) {
    for (const auto& [key, value] : a.fields) {
      if (value.kind != Json::Kind::number) continue;
      EXPECT_EQ(b.u64(key), value.integer) << a.at("name").str << "." << key;
    }
  };
  ASSERT_EQ(got.at("rules").items.size(), replay.at("rules").items.size());
  for (size_t i = 0; i < replay.at("rules").items.size(); ++i)
    same(replay.at("rules").items[i], got.at("rules").items[i]);
  same(replay.at("default"), got.at("default"));
  EXPECT_GT(replay.at("default").u64("malformed_packets"), 0u);
  const Json& rp = replay.at("ports").items[0];
  const Json& lp = got.at("ports").items[0];
  EXPECT_EQ(lp.u64("rx_packets"), rp.u64("rx_packets"));
  EXPECT_EQ(lp.u64("tx_packets"), rp.u64("tx_packets"));
  EXPECT_EQ(lp.u64("tx_bytes"), rp.u64("tx_bytes"));
}

// (caplen, len) of each record of a classic pcap file.
std::vector<std::pair<uint32_t, uint32_t>> pcap_record_lengths(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  char global[24];
  if (!in.read(global, sizeof global)) return out;
  for (;;) {
    uint32_t rec[4];
    if (!in.read(reinterpret_cast<char*>(rec), sizeof rec)) break;
    out.emplace_back(rec[2], rec[3]);
    in.seekg(rec[2], std::ios::cur);
  }
  return out;
}

// 1,000 UDP frames of `size` bytes under one 1 kbit/s drop rule with a 100,000-byte burst,
// through replay and through live net_pcap (with `extra` live options); the burst admits
// 100000 / size of them and the rate refills nothing while the test runs, so live must
// decide exactly as replay does, charge every frame whole, and send the admitted ones whole.
// Returns live sluiced's stderr.
class SluicedLiveChained : public SluicedLive {
 protected:
  std::string expect_chained_frames_decided_whole(uint32_t size, const char* seed,
                                                  std::vector<std::string> extra);
};

std::string SluicedLiveChained::expect_chained_frames_decided_whole(uint32_t size, const char* seed,
                                                                    std::vector<std::string> extra) {
  write("rules.yaml", R"(
default: {action: pass}
rules:
  - {name: slow, match: {proto: udp}, key: none, rate: 1kbit, burst: 100000, action: drop}
)");
  std::string err;
  EXPECT_EQ(run_to_exit({tracegen_, "--out", path("in.pcap"), "--packets", "1000", "--size",
                         std::to_string(size), "--seed", seed},
                        &err),
            0)
      << err;
  EXPECT_EQ(run_to_exit({sluiced_, "--replay", path("in.pcap"), "--out", path("replay.pcap"),
                         "--report", path("replay.json"), "--config", path("rules.yaml")},
                        &err),
            0)
      << err;
  std::vector<std::string> opts = {"--config", path("rules.yaml"), "--report", path("live.json"),
                                   "--stats-interval", "0.1"};
  opts.insert(opts.end(), extra.begin(), extra.end());
  ChildProcess live(live_args(
      {"-l", "0,1", "--vdev", "net_pcap0,rx_pcap=" + path("in.pcap") + ",tx_pcap=" + path("live.pcap")},
      opts));
  EXPECT_TRUE(live.wait_for_output(
      [](const std::string& out) { return out.find("port 0: rx 1000 ") != std::string::npos; }, 60s))
      << live.err();
  live.signal(SIGINT);
  EXPECT_EQ(live.wait_exit(30s), 0) << live.err();

  const uint64_t admitted = 100000 / size;
  const Json replay = load("replay.json"), got = load("live.json");
  const Json& slow = got.at("rules").items.at(0);
  EXPECT_EQ(replay.at("rules").items.at(0).u64("dropped_packets"), 1000 - admitted);
  EXPECT_EQ(slow.u64("matched_packets"), 1000u);
  EXPECT_EQ(slow.u64("matched_bytes"), 1000u * size);
  EXPECT_EQ(slow.u64("passed_packets"), admitted);
  EXPECT_EQ(slow.u64("dropped_packets"), 1000 - admitted);
  EXPECT_EQ(got.at("default").u64("matched_packets"), 0u);
  EXPECT_EQ(got.at("default").u64("malformed_packets"), 0u);
  EXPECT_EQ(got.at("default").u64("malformed_bytes"), 0u);
  for (const auto& [key, value] : replay.at("rules").items.at(0).fields) {
    if (value.kind != Json::Kind::number) continue;
    EXPECT_EQ(slow.u64(key), value.integer) << key;
  }
  const auto sent = pcap_record_lengths(path("live.pcap"));
  EXPECT_EQ(sent.size(), admitted);
  for (const auto& [caplen, len] : sent) {
    EXPECT_EQ(caplen, size);
    EXPECT_EQ(len, size);
  }
  EXPECT_EQ(got.at("ports").items.at(0).u64("tx_bytes"), admitted * size);
  return live.err();
}

TEST_F(SluicedLiveChained, JumboFramesThroughNetPcapAreClassifiedAndChargedWhole) {
  // 8000-byte frames do not fit one 2 KiB mbuf: net_pcap chains each over four.
  expect_chained_frames_decided_whole(8000, "4", {});
}

TEST_F(SluicedLiveChained, SmallMbufSizeChainsEveryFrameAndDecidesAsReplayDoes) {
  // --mbuf-size 256 leaves 128 bytes of data per mbuf: each 1500-byte frame arrives as a
  // chain of 12, its headers split across segments.
  const std::string err =
      expect_chained_frames_decided_whole(1500, "5", {"--mbuf-size", "256", "--mbufs", "20000"});
  EXPECT_NE(err.find("of 256 bytes each"), std::string::npos) << err;
}

}  // namespace
}  // namespace sluice
