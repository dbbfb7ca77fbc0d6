// sluiced's metrics (SPEC §5 `--metrics`): the Prometheus text rendering (checked by
// promtool), and the HTTP endpoint (cpp-httplib) on a real loopback TCP socket, also under
// abuse: idle, half-sent, trickling and never-reading clients delay no other scrape (no
// DPDK; the live one is in tests/dpdk/sluiced_live_test.cpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "counters_prometheus.hpp"
#include "metrics_server.hpp"
#include "sanitizers.hpp"

using namespace sluice;

namespace {

CountersSnapshot sample() {
  CountersSnapshot s;
  RuleSnapshot r;
  r.name = "per-source";
  r.traffic.add(Outcome::matched, 1500);
  r.traffic.add(Outcome::exceeded, 1500);
  r.traffic.add(Outcome::dropped, 1500);
  r.active_flows = 4;
  r.flows_evicted = 9;
  s.rules.push_back(r);
  s.default_rule.name = "default";
  s.default_rule.traffic.add(Outcome::passed, 64);
  s.ports.push_back({0, 10, 8, 2, 640, 512});
  s.ports.push_back({1, 8, 10, 0, 512, 640});
  s.dataplane = {{"dropped_shaper_full", 3, false}, {"mbufs_total", 8191, true},
                 {"mbufs_in_use", 12, true}};
  return s;
}

// Every sample line of a text exposition, "name{labels}" -> value; fails the test on a line
// that is neither a comment nor a well-formed sample.
std::map<std::string, uint64_t> samples(const std::string& text) {
  static const std::regex kSample(R"(^([a-z_]+)(\{[a-z_]+="[^"\\\n]*"(,[a-z_]+="[^"\\\n]*")*\})? ([0-9]+)$)");
  static const std::regex kComment(R"(^# (HELP|TYPE) [a-z_]+ .+$)");
  std::map<std::string, uint64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, kComment)) continue;
    EXPECT_TRUE(std::regex_match(line, m, kSample)) << "malformed line: " << line;
    if (m.empty()) continue;
    EXPECT_EQ(out.count(m[1].str() + m[2].str()), 0u) << "repeated: " << line;
    out[m[1].str() + m[2].str()] = std::stoull(m[4].str());
  }
  return out;
}

TEST(Prometheus, EveryCounterOfEveryRuleTheDefaultAndThePorts) {
  const std::string text = counters_to_prometheus(sample());
  const auto s = samples(text);
  EXPECT_EQ(s.at("sluice_packets_total{rule=\"per-source\",outcome=\"dropped\"}"), 1u);
  EXPECT_EQ(s.at("sluice_bytes_total{rule=\"per-source\",outcome=\"exceeded\"}"), 1500u);
  EXPECT_EQ(s.at("sluice_packets_total{rule=\"default\",outcome=\"passed\"}"), 1u);
  EXPECT_EQ(s.at("sluice_active_flows{rule=\"per-source\"}"), 4u);
  EXPECT_EQ(s.at("sluice_flows_evicted_total{rule=\"per-source\"}"), 9u);
  EXPECT_EQ(s.at("sluice_port_missed_packets_total{port=\"0\"}"), 2u);
  EXPECT_EQ(s.at("sluice_port_tx_bytes_total{port=\"1\"}"), 640u);
  EXPECT_EQ(s.at("sluice_dataplane_dropped_shaper_full_total"), 3u);
  EXPECT_EQ(s.at("sluice_dataplane_mbufs_in_use"), 12u);
  EXPECT_NE(text.find("# TYPE sluice_dataplane_mbufs_in_use gauge\n"), std::string::npos);
  // A gauge must not end in _total (promtool): the pool's size is its capacity.
  EXPECT_EQ(s.at("sluice_dataplane_mbufs_capacity"), 8191u);
  EXPECT_EQ(text.find("sluice_dataplane_mbufs_total"), std::string::npos);
  // 2 rules x 11 outcomes x 2 families + 2 x 2 flow gauges/counters + 2 ports x 5 + 3.
  EXPECT_EQ(s.size(), 2u * kOutcomeCount * 2 + 4 + 10 + 3);
  // Each family declared once, before its samples.
  for (const char* family : {"sluice_packets_total counter", "sluice_active_flows gauge",
                             "sluice_port_rx_packets_total counter"}) {
    const size_t at = text.find(std::string("# TYPE ") + family);
    ASSERT_NE(at, std::string::npos) << family;
    EXPECT_EQ(text.find(std::string("# TYPE ") + family, at + 1), std::string::npos) << family;
  }
}

TEST(Prometheus, NoPortsNoPortFamilies) {
  CountersSnapshot s = sample();
  s.ports.clear();
  EXPECT_EQ(counters_to_prometheus(s).find("sluice_port_"), std::string::npos);
}

// One HTTP exchange with 127.0.0.1:port; the whole response.
std::string http(uint16_t port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
  // One request per connection: the server would keep an HTTP/1.1 one open for the next.
  std::string req = request;
  if (req.find("HTTP/1.1\r\n") != std::string::npos && req.find("Connection:") == std::string::npos)
    req.insert(req.find("\r\n") + 2, "Connection: close\r\n");
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, size_t(n));
  close(fd);
  return out;
}

std::string body_of(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

TEST(MetricsServer, ServesTheLatestCountersAtSlashMetrics) {
  auto m = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(m) << m.error().message;
  const uint16_t port = (*m)->port();
  ASSERT_NE(port, 0);
  const std::string get = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  EXPECT_EQ(http(port, get).rfind("HTTP/1.1 503 ", 0), 0u) << "before the first publish";

  CountersSnapshot s = sample();
  (*m)->publish(s);
  std::string r = http(port, get);
  ASSERT_EQ(r.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(r.find("Content-Length: " + std::to_string(body_of(r).size()) + "\r\n"), std::string::npos);
  EXPECT_EQ(body_of(r), counters_to_prometheus(s));

  s.default_rule.traffic.add(Outcome::passed, 64);
  (*m)->publish(s);
  EXPECT_EQ(samples(body_of(http(port, get))).at("sluice_packets_total{rule=\"default\",outcome=\"passed\"}"), 2u);
  // A query string is ignored; HEAD gets the head only.
  EXPECT_EQ(http(port, "GET /metrics?x=1 HTTP/1.0\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
  const std::string head = http(port, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200 ", 0), 0u);
  EXPECT_EQ(body_of(head), "");
}

TEST(MetricsServer, BadRequestsGetTheirStatusAndChangeNothing) {
  auto m = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(m) << m.error().message;
  (*m)->publish(sample());
  const uint16_t port = (*m)->port();
  const std::string root = http(port, "GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(root.rfind("HTTP/1.1 404 ", 0), 0u) << root;
  EXPECT_NE(root.find("sluiced serves its counters at /metrics"), std::string::npos);
  EXPECT_EQ(http(port, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  EXPECT_EQ(http(port, "hello\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(http(port, std::string("\x00\xff\x13garbage\r\n\r\n", 14)).rfind("HTTP/1.1 400 ", 0), 0u);
  const std::string big_head = http(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'a') + "\r\n\r\n");
  EXPECT_EQ(big_head.find("200 OK"), std::string::npos) << big_head.substr(0, 80);
  EXPECT_EQ(http(port, "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
}

int connect_loopback(uint16_t port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

using Clock = std::chrono::steady_clock;

// 20 scrapes, each on a new connection: their latencies in ms, sorted (1e9: no 200).
std::vector<double> scrape_latencies(uint16_t port) {
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    const auto t = Clock::now();
    const bool ok = http(port, "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0) == 0;
    ms.push_back(ok ? std::chrono::duration<double, std::milli>(Clock::now() - t).count() : 1e9);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

// The 100 ms is held by the normal build. Under TSan every new connection's thread start
// costs milliseconds and grows with the threads alive, so there the bound is loosened: that
// build is for the races (with 1,000 idle connections and two CPU-bound processes beside it,
// p90 reached 100-107 ms in two of five runs here; the slowest scrape ~150 ms).
#if defined(SLUICE_TSAN)
constexpr double kSanitizerSlowdown = 5;
#else
constexpr double kSanitizerSlowdown = 1;
#endif

// "Other clients answered within 100 ms": 18 of 20 well within it, none near a timeout.
void expect_prompt(const std::vector<double>& ms) {
  EXPECT_LT(ms[17], 100.0 * kSanitizerSlowdown) << "p90 " << ms[17] << " ms, max " << ms.back() << " ms";
  EXPECT_LT(ms.back(), 1000.0 * kSanitizerSlowdown) << "max " << ms.back() << " ms";
}

CountersSnapshot many_rules(int n) {
  CountersSnapshot s = sample();
  for (int i = 0; i < n; ++i) {
    RuleSnapshot r = s.rules[0];
    r.name = "bulk-" + std::to_string(i);
    s.rules.push_back(r);
  }
  return s;
}

TEST(MetricsServer, AThousandIdleConnectionsAndOthersAreStillAnswered) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 4096) {
    lim.rlim_cur = 4096;
    lim.rlim_max = std::max<rlim_t>(lim.rlim_max, 4096);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0) << std::strerror(errno);
  }
  MetricsLimits limits;
  // Longer than the test, so they stay idle throughout: under TSan on a loaded host taking
  // on the thousand alone can outlast 5 s, and then the first would time out and go.
  limits.keep_alive_timeout_ms = 120000;
  limits.read_timeout_ms = 120000;
  auto m = MetricsServer::start("127.0.0.1:0", limits);
  ASSERT_TRUE(m) << m.error().message;
  (*m)->publish(sample());
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    const int fd = connect_loopback((*m)->port());
    ASSERT_GE(fd, 0) << i;
    idle.push_back(fd);
  }
  // Half of them also began a request and stopped (a byte, then nothing).
  for (size_t i = 0; i < idle.size(); i += 2) send(idle[i], "G", 1, MSG_NOSIGNAL);
  // The claim is about clients arriving while the thousand are held, not about how long the
  // server takes to take them on: wait until each has its thread. Under TSan on a loaded CI
  // host that takes seconds, and a scrape sent sooner queues behind those accepts (one CI
  // run: p90 170 ms, max 4.4 s); in the normal build it takes milliseconds. Counted by the
  // server, not as the process's threads: one CI run counted a thread of the previous test's
  // server, which ended meanwhile, and came out one short.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((*m)->connections() < 1000 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ((*m)->connections(), 1000u) << "the server did not take on the 1,000";
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  expect_prompt(scrape_latencies((*m)->port()));
  for (int fd : idle) close(fd);
}

TEST(MetricsServer, AClientThatNeverReadsOrTricklesDelaysNoOtherScrape) {
  MetricsLimits limits;
  limits.write_timeout_ms = 500;
  auto m = MetricsServer::start("127.0.0.1:0", limits);
  ASSERT_TRUE(m) << m.error().message;
  (*m)->publish(many_rules(3000));  // a body of megabytes, far over a socket buffer
  const uint16_t port = (*m)->port();
  std::vector<int> deaf;
  for (int i = 0; i < 10; ++i) {
    const int fd = connect_loopback(port);
    const int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    const std::string get = "GET /metrics HTTP/1.1\r\n\r\n";
    send(fd, get.data(), get.size(), MSG_NOSIGNAL);
    deaf.push_back(fd);
  }
  std::atomic<bool> stop{false};
  std::thread trickler([&] {
    const int fd = connect_loopback(port);
    const std::string get = "GET /metrics HTTP/1.1\r\nHost: slow\r\n\r\n";
    for (size_t i = 0; i < get.size() && !stop; ++i) {
      send(fd, get.data() + i, 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    close(fd);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*m)->publish(sample());  // small scrapes for the timing
  expect_prompt(scrape_latencies(port));
  stop = true;
  trickler.join();
  for (int fd : deaf) close(fd);
}

TEST(MetricsServer, AHundredMegabyteRequestIsRefusedWithoutBeingRead) {
  auto m = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(m) << m.error().message;
  (*m)->publish(sample());
  const int fd = connect_loopback((*m)->port());
  ASSERT_GE(fd, 0);
  const std::string head = "POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n";
  send(fd, head.data(), head.size(), MSG_NOSIGNAL);
  const std::string chunk(1 << 16, 'x');
  for (int i = 0; i < 16; ++i) send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  std::string out;
  char buf[4096];
  timeval tv{3, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ssize_t n;
  while (out.find("\r\n\r\n") == std::string::npos && (n = recv(fd, buf, sizeof buf, 0)) > 0)
    out.append(buf, size_t(n));
  close(fd);
  EXPECT_EQ(out.rfind("HTTP/1.1 413 ", 0), 0u) << out.substr(0, 80);
  expect_prompt(scrape_latencies((*m)->port()));
}

// promtool (Debian package prometheus) on a real scrape: no finding at all.
TEST(MetricsServer, AScrapePassesPromtoolCheckMetrics) {
  const char* promtool = "/usr/bin/promtool";
  if (access(promtool, X_OK) != 0)
    GTEST_SKIP() << "promtool is not installed (Debian package prometheus); scripts/setup-deps.sh installs it";
  auto m = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(m) << m.error().message;
  CountersSnapshot s = many_rules(3);
  s.dataplane.push_back({"mbufs_kept_by_drivers", 4, true});
  s.dataplane.push_back({"rx_packets", 1000, false});
  (*m)->publish(s);
  const std::string body = body_of(http((*m)->port(), "GET /metrics HTTP/1.1\r\n\r\n"));
  ASSERT_FALSE(body.empty());
  const std::string file = ::testing::TempDir() + "sluice-scrape-" + std::to_string(getpid()) + ".txt";
  std::ofstream(file) << body;
  const std::string cmd = std::string(promtool) + " check metrics < " + file + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  std::remove(file.c_str());
  EXPECT_EQ(status, 0) << out;
  EXPECT_EQ(out, "") << "promtool findings:\n" << out;
}

TEST(MetricsServer, RefusesMalformedAndBusyAddresses) {
  for (const char* bad : {"9100", ":9100", "localhost:", "localhost:http", "::1:9100",
                          "127.0.0.1:65536", "[::1:9100"}) {
    auto m = MetricsServer::start(bad);
    ASSERT_FALSE(m) << bad;
    EXPECT_NE(m.error().message.find("expected HOST:PORT"), std::string::npos) << m.error().message;
    EXPECT_EQ(m.error().kind, ErrorKind::invalid_input) << bad;
  }
  auto first = MetricsServer::start("127.0.0.1:0");
  ASSERT_TRUE(first) << first.error().message;
  auto busy = MetricsServer::start("127.0.0.1:" + std::to_string((*first)->port()));
  ASSERT_FALSE(busy);
  EXPECT_NE(busy.error().message.find("cannot listen: Address already in use"), std::string::npos)
      << busy.error().message;
  auto unknown = MetricsServer::start("no-such-host.invalid:9100");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("cannot resolve"), std::string::npos);
  auto v6 = MetricsServer::start("[::1]:0");
  ASSERT_TRUE(v6) << v6.error().message;
}

}  // namespace
