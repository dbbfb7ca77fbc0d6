// sluiced's metrics (SPEC §5 `--metrics`): the Prometheus text rendering, and the HTTP
// endpoint on a real loopback TCP socket (no DPDK; the live one is in
// tests/dpdk/sluiced_live_test.cpp).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "counters_prometheus.hpp"
#include "metrics_server.hpp"

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
  s.dataplane = {{"dropped_shaper_full", 3, false}, {"mbufs_in_use", 12, true}};
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
  // 2 rules x 11 outcomes x 2 families + 2 x 2 flow gauges/counters + 2 ports x 5 + 2.
  EXPECT_EQ(s.size(), 2u * kOutcomeCount * 2 + 4 + 10 + 2);
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
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
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
  EXPECT_EQ(http(port, "GET / HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 404 ", 0), 0u);
  const std::string post = http(port, "POST /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.1 405 ", 0), 0u);
  EXPECT_NE(post.find("Allow: GET, HEAD"), std::string::npos);
  EXPECT_EQ(http(port, "hello\r\n\r\n").rfind("HTTP/1.1 400 ", 0), 0u);
  EXPECT_EQ(http(port, "GET /metrics HTTP/1.1\r\nX: " + std::string(10000, 'a') + "\r\n\r\n")
                .rfind("HTTP/1.1 431 ", 0),
            0u);
  EXPECT_EQ(http(port, "GET /metrics HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0), 0u);
}

TEST(MetricsServer, RefusesMalformedAndBusyAddresses) {
  for (const char* bad : {"9100", ":9100", "localhost:", "localhost:http", "::1:9100",
                          "127.0.0.1:65536", "[::1:9100"}) {
    auto m = MetricsServer::start(bad);
    ASSERT_FALSE(m) << bad;
    EXPECT_NE(m.error().message.find("expected HOST:PORT"), std::string::npos) << m.error().message;
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
