// sluiced's live mode as a binary: exit codes and messages for bad set-ups (SPEC §1: 2 for
// bad usage or input), a clean stop on SIGINT/SIGTERM with final counters and REPORT.json
// (with its "dataplane" object: drops outside the rules, the mbuf pool), --mbufs, and the same
// counters as `sluiced --replay` on a capture fed through net_pcap with rules whose outcome
// does not depend on timing; telemetry, the control socket with sluicectl, and --metrics.
// Each run gets its own EAL file prefix, removed after.
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

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::Json;

std::string env_or_skip(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

class SluicedLive : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "the dpdk suite needs root";
    sluiced_ = env_or_skip("SLUICED");
    tracegen_ = env_or_skip("TRACEGEN");
    if (sluiced_.empty() || tracegen_.empty()) GTEST_SKIP() << "SLUICED and TRACEGEN not set";
    dir_ = fs::temp_directory_path() /
           ("sluiced-live-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("pass.yaml", "default: {action: pass}\nrules: []\n");
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
    for (const std::string& p : prefixes_) fs::remove_all("/var/run/dpdk/" + p, ec);
  }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) { std::ofstream(path(name)) << text; }

  // sluiced with the common EAL arguments (no PCI, no hugepages, own prefix), then `eal`,
  // then "--" and `ours`.
  std::vector<std::string> live_args(const std::vector<std::string>& eal,
                                     const std::vector<std::string>& ours, bool telemetry = false) {
    prefixes_.push_back("sluice-bin-" + std::to_string(getpid()) + "-" + std::to_string(prefixes_.size()));
    std::vector<std::string> a = {sluiced_, "--no-pci", "--no-huge", "-m", "512",
                                  "--file-prefix", prefixes_.back()};
    if (!telemetry) a.push_back("--no-telemetry");
    a.insert(a.end(), eal.begin(), eal.end());
    a.push_back("--");
    a.insert(a.end(), ours.begin(), ours.end());
    return a;
  }

  int run_to_exit(const std::vector<std::string>& args, std::string* err) {
    ChildProcess p(args);
    const int code = p.wait_exit(60s);
    *err = p.err();
    return code;
  }

  Json load(const std::string& name) {
    std::ifstream in(path(name));
    std::stringstream text;
    text << in.rdbuf();
    return Json::parse(text.str());
  }

  std::string sluiced_, tracegen_;
  fs::path dir_;
  std::vector<std::string> prefixes_;
};

// Two rules that net_null's all-zero frames (EtherType 0, not IP) never match: every packet
// goes to the default, which passes it.
constexpr const char* kTwoRules = R"(
default: {action: pass}
rules:
  - {name: udp-only, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, action: drop}
  - {name: per-source, match: {proto: tcp}, key: src-ip, rate: 1kpps, burst: 10, action: drop}
)";

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

// One GET of http://127.0.0.1:port/metrics: the whole response ("" if nobody listens).
std::string get_metrics(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  }
  close(fd);
  return out;
}

// The value of one sample line ("NAME{LABELS} VALUE") of a metrics response; -1 if absent.
int64_t metric(const std::string& response, const std::string& series) {
  const size_t at = response.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(response.substr(at + series.size() + 2));
}

// --metrics (SPEC §5): Prometheus text at /metrics on the address given, a consistent cut of
// the live counters, gone when sluiced stops.
TEST_F(SluicedLive, MetricsServesTheLiveCountersForPrometheus) {
  ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                           {"--config", path("pass.yaml"), "--metrics", "127.0.0.1:0"}));
  ASSERT_TRUE(p.wait_for_output([&](const std::string&) { return p.err().find("(port ") != std::string::npos; }, 30s))
      << p.err();
  const std::string log = p.err();
  const uint16_t port = uint16_t(std::stoul(log.substr(log.find("(port ") + 6)));
  ASSERT_NE(port, 0) << log;

  const std::string matched = "sluice_packets_total{rule=\"default\",outcome=\"matched\"}";
  const std::string passed = "sluice_packets_total{rule=\"default\",outcome=\"passed\"}";
  std::string r;
  for (int i = 0; i < 300 && metric(r, matched) <= 0; ++i) {
    std::this_thread::sleep_for(20ms);
    r = get_metrics(port);
  }
  ASSERT_GT(metric(r, matched), 0) << r << p.err();
  EXPECT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  for (int i = 0; i < 10; ++i) {
    r = get_metrics(port);
    EXPECT_EQ(metric(r, passed), metric(r, matched));
    EXPECT_EQ(metric(r, "sluice_bytes_total{rule=\"default\",outcome=\"matched\"}"),
              64 * metric(r, matched));
  }
  EXPECT_GE(metric(r, "sluice_port_rx_packets_total{port=\"0\"}"), metric(r, matched));
  EXPECT_GE(metric(r, "sluice_dataplane_rx_packets_total"), metric(r, matched));
  EXPECT_GT(metric(r, "sluice_dataplane_mbufs_capacity"), 0);

  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
  EXPECT_EQ(get_metrics(port), "") << "nothing listens once sluiced has stopped";
}

// sluicectl against a running sluiced's control socket (SPEC §1, §4): the socket is private
// (0600), stats are a consistent cut of the live counters, the rules are the running ones, a
// second sluiced cannot take the socket, and the socket goes away with sluiced.
TEST_F(SluicedLive, SluicectlReadsTheRunningDataplaneThroughItsControlSocket) {
  const char* ctl = std::getenv("SLUICECTL");
  if (ctl == nullptr) GTEST_SKIP() << "SLUICECTL not set";
  write("two.yaml", kTwoRules);
  const std::string sock = path("run/sluiced.sock");  // run/ does not exist yet: sluiced makes it
  ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                           {"--config", path("two.yaml"), "--control", sock}));
  auto sluicectl = [&](std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), {ctl, "--socket", sock});
    ChildProcess c(args);
    const int code = c.wait_exit(30s);
    *out = c.out();
    *err = c.err();
    return code;
  };

  // Until the dataplane runs and counts, the command fails or reads zeroes.
  std::string out, err;
  Json stats;
  for (int i = 0; i < 300; ++i) {
    if (sluicectl({"stats", "--json"}, &out, &err) == 0) {
      stats = Json::parse(out);
      if (stats.at("default").u64("matched_packets") != 0) break;
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_NE(stats.kind, Json::Kind::null) << err << p.err();
  struct stat st{};
  ASSERT_EQ(lstat(sock.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Every live read is a consistent cut: each packet counted in all its outcomes or none.
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(sluicectl({"stats", "--json"}, &out, &err), 0) << err;
    const Json d = Json::parse(out).at("default");
    ASSERT_GT(d.u64("matched_packets"), 0u);
    EXPECT_EQ(d.u64("passed_packets"), d.u64("matched_packets"));
    EXPECT_EQ(d.u64("matched_bytes"), 64 * d.u64("matched_packets"));  // net_null: 64 B frames
  }
  const Json j = Json::parse(out);
  // The dataplane's own counters ride along: every packet matched was received.
  EXPECT_GE(j.at("dataplane").u64("rx_packets"), j.at("default").u64("matched_packets"));
  EXPECT_GT(j.at("dataplane").u64("mbufs_total"), 0u);
  EXPECT_TRUE(j.at("dataplane").has("dropped_tx_buffer_full"));
  EXPECT_EQ(j.at("rules").items.at(1).at("name").str, "per-source");
  EXPECT_EQ(j.at("rules").items.at(1).u64("matched_packets"), 0u);

  ASSERT_EQ(sluicectl({"rule", "list"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("udp-only"), std::string::npos) << out;
  EXPECT_NE(out.find("per-source  proto tcp"), std::string::npos) << out;
  ASSERT_EQ(sluicectl({"config", "save", path("saved.yaml")}, &out, &err), 0) << err;
  {
    ChildProcess c({ctl, "config", "check", path("saved.yaml")});
    EXPECT_EQ(c.wait_exit(30s), 0) << c.err();
    EXPECT_NE(c.out().find("ok, 2 rule(s)"), std::string::npos) << c.out();
  }

  // A second sluiced on the same socket is refused before it takes any device.
  EXPECT_EQ(run_to_exit(live_args({"-l", "0,1", "--vdev", "net_null0"},
                                  {"--config", path("two.yaml"), "--control", sock}), &err), 2);
  EXPECT_NE(err.find("another process"), std::string::npos) << err;
  EXPECT_EQ(sluicectl({"rule", "show", "udp-only"}, &out, &err), 0) << "the first keeps its socket";

  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
  EXPECT_FALSE(fs::exists(sock));
  EXPECT_EQ(sluicectl({"stats"}, &out, &err), 1);
  EXPECT_NE(err.find("cannot connect"), std::string::npos) << err;
}

// A client of DPDK's telemetry socket (/var/run/dpdk/PREFIX/dpdk_telemetry.v2, one JSON
// message per request, as dpdk-telemetry.py speaks it).
class TelemetryClient {
 public:
  explicit TelemetryClient(const std::string& prefix) {
    const std::string path = "/var/run/dpdk/" + prefix + "/dpdk_telemetry.v2";
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    // The socket appears while the EAL starts: retry for a while.
    for (int i = 0; i < 200 && fd_ < 0; ++i) {
      const int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        fd_ = fd;
        greeting_ = receive();
      } else {
        if (fd >= 0) close(fd);
        std::this_thread::sleep_for(50ms);
      }
    }
  }
  ~TelemetryClient() {
    if (fd_ >= 0) close(fd_);
  }
  bool connected() const { return fd_ >= 0; }
  const std::string& greeting() const { return greeting_; }
  // The reply to `command`, parsed; its one member is the command's name.
  Json ask(const std::string& command) {
    if (send(fd_, command.data(), command.size(), 0) < 0) throw std::runtime_error("send failed");
    return Json::parse(receive());
  }

 private:
  std::string receive() {
    std::string buf(64 * 1024, '\0');
    const ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
    if (n <= 0) throw std::runtime_error("telemetry socket closed");
    buf.resize(size_t(n));
    return buf;
  }
  int fd_ = -1;
  std::string greeting_;
};

TEST_F(SluicedLive, TelemetryServesEachRulesCounters) {
  write("two.yaml", kTwoRules);
  ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                           {"--config", path("two.yaml"), "--report", path("two.json")},
                           /*telemetry=*/true));
  TelemetryClient tel(prefixes_.back());
  ASSERT_TRUE(tel.connected()) << p.err();
  EXPECT_NE(tel.greeting().find("max_output_len"), std::string::npos) << tel.greeting();

  // null while the EAL is up and the dataplane not yet.
  Json names = tel.ask("/sluice/rules").at("/sluice/rules");
  for (int i = 0; i < 200 && names.kind == Json::Kind::null; ++i) {
    std::this_thread::sleep_for(20ms);
    names = tel.ask("/sluice/rules").at("/sluice/rules");
  }
  ASSERT_EQ(names.items.size(), 3u);
  EXPECT_EQ(names.items[0].str, "udp-only");
  EXPECT_EQ(names.items[1].str, "per-source");
  EXPECT_EQ(names.items[2].str, "default");

  // net_null's frames are all zeros (EtherType 0, not IP): no rule matches them, every one
  // goes to the default. Its counters grow while the workers run; the rules' stay at zero.
  uint64_t first = 0, later = 0;
  for (int i = 0; i < 200 && first == 0; ++i) {
    first = tel.ask("/sluice/rule,default").at("/sluice/rule").u64("matched_packets");
    if (first == 0) std::this_thread::sleep_for(20ms);
  }
  ASSERT_GT(first, 0u) << p.err();
  for (int i = 0; i < 200 && later <= first; ++i) {
    std::this_thread::sleep_for(20ms);
    later = tel.ask("/sluice/rule,default").at("/sluice/rule").u64("matched_packets");
  }
  EXPECT_GT(later, first);
  const Json d = tel.ask("/sluice/rule,default").at("/sluice/rule");
  EXPECT_EQ(d.at("name").str, "default");
  EXPECT_EQ(d.u64("dropped_packets"), 0u);
  EXPECT_EQ(d.u64("passed_packets"), d.u64("matched_packets"));
  EXPECT_EQ(d.u64("matched_bytes"), 64 * d.u64("matched_packets"));  // net_null: 64-byte frames
  const Json r = tel.ask("/sluice/rule,per-source").at("/sluice/rule");
  EXPECT_EQ(r.at("name").str, "per-source");
  EXPECT_EQ(r.u64("matched_packets"), 0u);
  EXPECT_EQ(r.u64("active_flows"), 0u);
  EXPECT_TRUE(r.has("flows_evicted"));
  // Unknown names and a missing name: DPDK's null answer, and sluiced keeps running.
  EXPECT_EQ(tel.ask("/sluice/rule,no-such-rule").at("/sluice/rule").kind, Json::Kind::null);
  EXPECT_EQ(tel.ask("/sluice/rule").at("/sluice/rule").kind, Json::Kind::null);

  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
  // The report's final figures are at least what telemetry read while it ran.
  const Json report = load("two.json");
  EXPECT_GE(report.at("default").u64("matched_packets"), d.u64("matched_packets"));
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

TEST_F(SluicedLive, JumboFramesThroughNetPcapAreClassifiedAndChargedWhole) {
  // 8000-byte frames do not fit one 2 KiB mbuf: net_pcap chains each over four. The rule
  // must see every one of them, charged at 8000 bytes: the burst admits 12, the rate (125 B/s)
  // refills nothing while the test runs, so live drops exactly what replay drops.
  write("rules.yaml", R"(
default: {action: pass}
rules:
  - {name: slow, match: {proto: udp}, key: none, rate: 1kbit, burst: 100000, action: drop}
)");
  std::string err;
  ASSERT_EQ(run_to_exit({tracegen_, "--out", path("in.pcap"), "--packets", "1000", "--size", "8000",
                         "--seed", "4"},
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
      [](const std::string& out) { return out.find("port 0: rx 1000 ") != std::string::npos; }, 60s))
      << live.err();
  live.signal(SIGINT);
  ASSERT_EQ(live.wait_exit(30s), 0) << live.err();

  const Json replay = load("replay.json"), got = load("live.json");
  const Json& slow = got.at("rules").items.at(0);
  EXPECT_EQ(replay.at("rules").items.at(0).u64("dropped_packets"), 988u);
  EXPECT_EQ(slow.u64("matched_packets"), 1000u);
  EXPECT_EQ(slow.u64("matched_bytes"), 8'000'000u);
  EXPECT_EQ(slow.u64("passed_packets"), 12u);
  EXPECT_EQ(slow.u64("dropped_packets"), 988u);
  EXPECT_EQ(got.at("default").u64("matched_packets"), 0u);
  EXPECT_EQ(got.at("default").u64("malformed_packets"), 0u);
  EXPECT_EQ(got.at("default").u64("malformed_bytes"), 0u);
  for (const auto& [key, value] : replay.at("rules").items.at(0).fields) {
    if (value.kind != Json::Kind::number) continue;
    EXPECT_EQ(slow.u64(key), value.integer) << key;
  }
  // The chains went out whole: 12 records of 8000 bytes, none cut.
  const auto sent = pcap_record_lengths(path("live.pcap"));
  ASSERT_EQ(sent.size(), 12u);
  for (const auto& [caplen, len] : sent) {
    EXPECT_EQ(caplen, 8000u);
    EXPECT_EQ(len, 8000u);
  }
  EXPECT_EQ(got.at("ports").items.at(0).u64("tx_bytes"), 12u * 8000u);
}

}  // namespace
}  // namespace sluice
