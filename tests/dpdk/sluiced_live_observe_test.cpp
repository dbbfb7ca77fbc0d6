// sluiced's live mode watched while it runs: --metrics for Prometheus (SPEC §5), sluicectl
// through the control socket (SPEC §1, §4), and DPDK telemetry's per-rule counters. Each run
// gets its own EAL file prefix, removed after.
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

// Two rules that net_null's all-zero frames (EtherType 0, not IP) never match: every packet
// goes to the default, which passes it.
constexpr const char* kTwoRules = R"(
default: {action: pass}
rules:
  - {name: udp-only, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, action: drop}
  - {name: per-source, match: {proto: tcp}, key: src-ip, rate: 1kpps, burst: 10, action: drop}
)";

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
    return SluicedLive::sluicectl(ctl, sock, std::move(args), out, err);
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

// sluiced --max-delay: a shaping rule with a longer max-delay than any start-up rule's (none
// shapes here) comes live through sluicectl; one beyond the option's horizon is refused (exit
// 1: a valid file this sluiced cannot run) and changes nothing.
TEST_F(SluicedLive, MaxDelayLetsALongerShapingRuleComeLive) {
  const char* ctl = std::getenv("SLUICECTL");
  if (ctl == nullptr) GTEST_SKIP() << "SLUICECTL not set";
  write("two.yaml", kTwoRules);
  write("shape-1s.yaml",
        "rules:\n  - {name: shape, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, "
        "algorithm: leaky-bucket, max-delay: 1s}\n");
  write("shape-3s.yaml",
        "rules:\n  - {name: shape3, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, "
        "algorithm: leaky-bucket, max-delay: 3s}\n");
  const std::string sock = path("sluiced.sock");
  ChildProcess p(live_args({"-l", "0,1", "--vdev", "net_null0"},
                           {"--config", path("two.yaml"), "--control", sock, "--max-delay", "2s"}));
  auto sluicectl = [&](std::vector<std::string> args, std::string* out, std::string* err) {
    return SluicedLive::sluicectl(ctl, sock, std::move(args), out, err);
  };
  std::string out, err;
  // Until the dataplane is up, a write is refused as "still starting" (exit 1).
  int code = 1;
  for (int i = 0; i < 500 && code != 0; ++i) {
    code = sluicectl({"rule", "add", path("shape-1s.yaml")}, &out, &err);
    if (code != 0) {
      ASSERT_EQ(code, 1) << err;
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_EQ(code, 0) << err << p.err();
  EXPECT_NE(out.find("+ shape (added)"), std::string::npos) << out;
  EXPECT_EQ(sluicectl({"rule", "add", path("shape-3s.yaml")}, &out, &err), 1);
  EXPECT_NE(err.find("max-delay 3s is beyond the shaping horizon of 2s"), std::string::npos)
      << err;
  ASSERT_EQ(sluicectl({"rule", "list"}, &out, &err), 0) << err;
  EXPECT_NE(out.find("shape "), std::string::npos) << out;
  EXPECT_EQ(out.find("shape3"), std::string::npos) << out;
  p.signal(SIGINT);
  ASSERT_EQ(p.wait_exit(30s), 0) << p.err();
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

}  // namespace
}  // namespace sluice
