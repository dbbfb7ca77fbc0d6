// sluicectl as a binary (SPEC §1): exit codes 0 / 1 / 2 with a message that says what was
// wrong, `config check` without any backend, and stats / rule list / rule show / config save
// against a real ControlServer hosted by this test on a Unix socket (no DPDK needed; the
// live dataplane's own socket is tested in tests/dpdk/sluiced_live_test.cpp).
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../e2e/mini_json.hpp"
#include "child_process.hpp"
#include "control_server.hpp"
#include "rules_loader.hpp"

using namespace sluice;
using namespace std::chrono_literals;
using sluice::testing::ChildProcess;
using sluice::testing::Json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kRules = R"(default: {action: pass}
rules:
  - {name: udp-only, match: {proto: udp}, key: none, rate: 1kpps, burst: 10, action: drop}
  - name: per-source
    match: {proto: tcp, dst-port: 80}
    key: src-ip
    rate: 2Mbit
    burst: 3000B
    action: mark-dscp:10
)";

struct Exit {
  int code = -1;
  std::string out, err;
};

class SluicectlCli : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("SLUICECTL");
    ASSERT_NE(bin, nullptr) << "SLUICECTL is not set (meson sets it)";
    bin_ = bin;
    dir_ = fs::temp_directory_path() /
           ("sluicectl-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(path("rules.yaml")) << kRules;
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  Exit run(std::vector<std::string> args) {
    args.insert(args.begin(), bin_);
    ChildProcess p(args);
    Exit r;
    r.code = p.wait_exit(30s);
    r.out = p.out();
    r.err = p.err();
    return r;
  }
  // A server on path("s.sock") with the rules of kRules, counters published.
  void serve(const CountersSnapshot& snap) {
    auto rules = load_rules_text(kRules, "rules.yaml");
    ASSERT_TRUE(rules) << rules.error().message;
    auto server = ControlServer::start(path("s.sock"), dump_rules_yaml(*rules));
    ASSERT_TRUE(server) << server.error().message;
    server_ = std::move(server).value();
    server_->publish(snap);
  }

  std::string bin_;
  fs::path dir_;
  std::unique_ptr<ControlServer> server_;
};

CountersSnapshot counters() {
  CountersSnapshot s;
  for (const char* name : {"udp-only", "per-source"}) {
    RuleSnapshot r;
    r.name = name;
    s.rules.push_back(r);
  }
  s.rules[0].traffic.add(Outcome::matched, 100);
  s.rules[0].traffic.add(Outcome::exceeded, 100);
  s.rules[0].traffic.add(Outcome::dropped, 100);
  s.rules[1].active_flows = 3;
  s.default_rule.name = "default";
  for (int i = 0; i < 5; ++i) s.default_rule.traffic.add(Outcome::passed, 64);
  s.ports.push_back({0, 6, 5, 0, 384, 320});
  s.dataplane = {{"rx_packets", 6, false}, {"dropped_tx_buffer_full", 1, false},
                 {"mbufs_in_use", 40, true}};
  return s;
}

TEST_F(SluicectlCli, ConfigCheckNeedsNoBackendAndNamesTheBadLine) {
  Exit ok = run({"config", "check", path("rules.yaml")});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("ok, 2 rule(s), default pass"), std::string::npos) << ok.out;

  std::ofstream(path("bad.yaml")) << "default: {action: pass}\nrules:\n  - {name: x, rate: fast}\n";
  Exit bad = run({"config", "check", path("bad.yaml")});
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find(path("bad.yaml") + ":3"), std::string::npos) << bad.err;
  Exit missing = run({"config", "check", path("none.yaml")});
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("cannot open"), std::string::npos) << missing.err;
}

TEST_F(SluicectlCli, BadUsageIsExit2WithTheReason) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{}, "no command"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"rule"}, "unknown command \"rule\""},
      {{"--colour", "stats"}, "unknown option --colour"},
      {{"--socket"}, "--socket needs a value"},
      {{"stats", "--count", "3"}, "only with --watch"},
      {{"stats", "--watch", "soon"}, "not a number of seconds"},
      {{"stats", "--verbose"}, "unknown argument --verbose"},
      {{"rule", "list", "extra"}, "takes no arguments"},
      {{"config", "check"}, "needs one rules file"},
      {{"rule", "add", "x"}, "not available in this build"},
      {{"config", "load", "f.yaml"}, "not available in this build"},
      {{"--xdp", "veth0", "stats"}, "XDP backend is not available"},
  };
  for (const auto& c : cases) {
    Exit r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  Exit help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("usage: sluicectl"), std::string::npos);
}

TEST_F(SluicectlCli, EmptyAndOverLongPathsAreBadUsage) {
  const std::string long_path = "/tmp/" + std::string(103, 'a');  // 108 bytes: one too many
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{"--socket", "", "stats"}, "--socket needs a non-empty value"},
      {{"--socket", long_path, "stats"}, "a socket path must be 1 to 107 bytes long"},
      {{"--xdp", "", "stats"}, "--xdp needs a non-empty value"},
      {{"--xdp", "an-interface-name", "stats"}, "an interface name is at most 15 bytes long"},
      {{"config", "save", ""}, "config save: the file name is empty"},
  };
  for (const auto& c : cases) {
    Exit r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
}

TEST_F(SluicectlCli, ConfigSaveRefusesASymlinkBeforeAskingSluiced) {
  std::ofstream(path("target")) << "keep";
  fs::create_symlink(path("target"), path("link.yaml"));
  // No sluiced listens: the refusal comes first, as bad usage.
  Exit r = run({"--socket", path("s.sock"), "config", "save", path("link.yaml")});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(path("link.yaml") + ": is a symbolic link"), std::string::npos) << r.err;
  std::ifstream in(path("target"));
  std::string kept;
  in >> kept;
  EXPECT_EQ(kept, "keep");
  EXPECT_TRUE(fs::is_symlink(path("link.yaml")));
}

TEST_F(SluicectlCli, NoSluicedListeningIsExit1SayingWhere) {
  Exit r = run({"--socket", path("s.sock"), "stats"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("cannot connect"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--control " + path("s.sock")), std::string::npos) << r.err;
}

TEST_F(SluicectlCli, StatsAsATableAndAsTheJsonOfTheReport) {
  serve(counters());
  Exit table = run({"--socket", path("s.sock"), "stats"});
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("udp-only"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("port 0: rx 6  tx 5  missed 0"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("dataplane:  rx_packets 6  dropped_tx_buffer_full 1  mbufs_in_use 40\n"),
            std::string::npos) << table.out;

  Exit json = run({"--socket", path("s.sock"), "stats", "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  const Json j = Json::parse(json.out);
  EXPECT_EQ(j.at("rules").items.at(0).at("name").str, "udp-only");
  EXPECT_EQ(j.at("rules").items.at(0).u64("dropped_bytes"), 100u);
  EXPECT_EQ(j.at("rules").items.at(1).u64("active_flows"), 3u);
  EXPECT_EQ(j.at("default").u64("passed_packets"), 5u);
  EXPECT_EQ(j.at("ports").items.at(0).u64("tx_bytes"), 320u);
  EXPECT_EQ(j.at("dataplane").u64("dropped_tx_buffer_full"), 1u);
  EXPECT_EQ(j.at("dataplane").u64("mbufs_in_use"), 40u);
}

TEST_F(SluicectlCli, WatchRepeatsTheReportCountTimes) {
  serve(counters());
  Exit r = run({"--socket", path("s.sock"), "stats", "--watch", "0.05", "--count", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  size_t tables = 0;
  for (size_t at = r.out.find("\nudp-only"); at != std::string::npos;
       at = r.out.find("\nudp-only", at + 1))
    ++tables;
  EXPECT_EQ(tables, 3u) << r.out;
}

TEST_F(SluicectlCli, RuleListShowAndConfigSaveGiveTheRunningRules) {
  serve(counters());
  Exit list = run({"--socket", path("s.sock"), "rule", "list"});
  ASSERT_EQ(list.code, 0) << list.err;
  EXPECT_NE(list.out.find("per-source  proto tcp, dst-port 80  src-ip"), std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("mark-dscp:10"), std::string::npos) << list.out;
  EXPECT_NE(list.out.find("default"), std::string::npos) << list.out;

  Exit show = run({"--socket", path("s.sock"), "rule", "show", "per-source"});
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_EQ(show.out.rfind("  - name: \"per-source\"\n", 0), 0u) << show.out;
  auto one = load_rules_text("rules:\n" + show.out, "shown");
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->rules.at(0).burst, 3000u);
  Exit unknown = run({"--socket", path("s.sock"), "rule", "show", "nope"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_NE(unknown.err.find("no rule named \"nope\""), std::string::npos) << unknown.err;

  Exit save = run({"--socket", path("s.sock"), "config", "save", path("saved.yaml")});
  ASSERT_EQ(save.code, 0) << save.err;
  auto saved = load_rules_file(path("saved.yaml"));
  ASSERT_TRUE(saved) << saved.error().message;
  auto original = load_rules_text(kRules, "rules.yaml");
  ASSERT_TRUE(original);
  EXPECT_EQ(dump_rules_yaml(*saved), dump_rules_yaml(*original));
  Exit unwritable = run({"--socket", path("s.sock"), "config", "save", path("no/such/dir.yaml")});
  EXPECT_EQ(unwritable.code, 1);
  EXPECT_NE(unwritable.err.find(path("no/such/dir.yaml") + ": cannot create: No such file"),
            std::string::npos) << unwritable.err;
}

}  // namespace
