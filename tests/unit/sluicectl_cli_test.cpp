// sluicectl as a binary (SPEC §1): exit codes 0 / 1 / 2 with a message that says what was
// wrong, `config check` without any backend, and every command (reads and writes) against a
// real ControlServer hosted by this test on a Unix socket, its rules applied to a RulesTarget
// over a real core Pipeline (no DPDK needed; the live dataplane's own socket is tested in
// tests/dpdk/sluiced_live_test.cpp).
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
#include "scripted_rules_target.hpp"
#include "rules_loader.hpp"
#include "stats_rates.hpp"

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
    target_.reset();
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
    target_ = test::ScriptedRulesTarget::create(*rules);
    ASSERT_TRUE(target_);
    auto server = ControlServer::start(path("s.sock"), *rules, target_.get());
    ASSERT_TRUE(server) << server.error().message;
    server_ = std::move(server).value();
    server_->publish(snap);
  }

  std::string bin_;
  fs::path dir_;
  std::unique_ptr<test::ScriptedRulesTarget> target_;
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

#ifdef SLUICE_HAVE_XDP
// With --xdp, config check holds the file to what the XDP backend runs, as its config load
// would (exit 2, the same reason): no shaping, tables of at most 2^24 flows at the XDP
// table's 256 bytes a flow. It needs no attached program: the interface is not looked up.
TEST_F(SluicectlCli, ConfigCheckWithXdpIsHeldToWhatTheXdpBackendRuns) {
  Exit ok = run({"--xdp", "nosuch0", "config", "check", path("rules.yaml")});
  EXPECT_EQ(ok.code, 0) << ok.err;
  // One keyed rule of the default 65,536 flows: 16 MiB in the kernel (4 MiB in sluiced).
  EXPECT_NE(ok.out.find("ok, 2 rule(s), default pass; XDP flow tables 16.0 MiB for 65536 flows"),
            std::string::npos) << ok.out;
  Exit dpdk = run({"config", "check", path("rules.yaml")});
  EXPECT_NE(dpdk.out.find("; flow tables 2.0 MiB for 65536 flows"), std::string::npos) << dpdk.out;

  std::ofstream(path("shaping.yaml"))
      << "rules:\n  - {name: shape, match: {proto: udp}, key: none, rate: 1kpps, burst: 10,\n"
         "     algorithm: leaky-bucket, max-delay: 10ms}\n";
  EXPECT_EQ(run({"config", "check", path("shaping.yaml")}).code, 0) << "sluiced shapes";
  Exit shaping = run({"--xdp", "nosuch0", "config", "check", path("shaping.yaml")});
  EXPECT_EQ(shaping.code, 2);
  EXPECT_NE(shaping.err.find(path("shaping.yaml") + ": rule \"shape\": leaky-bucket shapes traffic"),
            std::string::npos) << shaping.err;
  EXPECT_EQ(shaping.out, "");

  std::ofstream(path("huge.yaml"))
      << "rules:\n  - {name: huge, match: {proto: udp}, key: src-ip, rate: 1kpps, burst: 10,\n"
         "     max-flows: 20000000}\n";
  Exit huge = run({"--xdp", "nosuch0", "config", "check", path("huge.yaml")});
  EXPECT_EQ(huge.code, 2);
  EXPECT_NE(huge.err.find("max-flows 20000000 is above what an XDP flow table holds (16777216 flows"),
            std::string::npos) << huge.err;
}
#endif

TEST_F(SluicectlCli, BadUsageIsExit2WithTheReason) {
  const struct {
    std::vector<std::string> args;
    const char* says;
  } cases[] = {
      {{}, "no command"},
      {{"frobnicate"}, "unknown command \"frobnicate\""},
      {{"rule"}, "rule: needs a command: list, show, add, set, del"},
      {{"rule", "frob"}, "unknown command \"rule frob\""},
      {{"--colour", "stats"}, "not expected: --colour"},
      {{"--socket"}, "--socket: 1 required TEXT missing"},
      {{"stats", "--count", "3"}, "only with --watch"},
      {{"stats", "--watch", "soon"}, "--watch: Value soon not in range"},
      // NaN compares false with both ends of a range: once taken as "no --watch".
      {{"stats", "--watch", "nan"}, "--watch: Value nan not in range"},
      {{"stats", "--watch", "inf"}, "--watch: Value inf not in range"},
      {{"stats", "--verbose"}, "not expected: --verbose"},
      {{"rule", "list", "extra"}, "not expected: extra"},
      {{"config", "check"}, "FILE is required"},
      {{"rule", "add"}, "FILE is required"},
      {{"rule", "set", "x"}, "nothing to change"},
      {{"rule", "set", "x", "--field", "rate"}, "expected KEY=VALUE"},
      {{"flows", "top", "0"}, "N: Value 0 not in range 1 to 10000"},
      {{"flows", "top", "3", "--by", "size"}, "--by: size not in {pps,bps}"},
      {{"rule", "add", path("none.yaml")}, "none.yaml: cannot open"},
#ifdef SLUICE_HAVE_XDP
      {{"xdp", "attach", "veth0"}, "--config is required"},
      {{"--xdp", "sl-none-0", "stats"}, "no such interface"},
#else
      {{"xdp", "attach", "veth0"}, "not available in this build"},
      {{"--xdp", "veth0", "stats"}, "XDP backend is not available"},
#endif
  };
  for (const auto& c : cases) {
    Exit r = run(c.args);
    EXPECT_EQ(r.code, 2) << c.says;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  Exit help = run({"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Usage: sluicectl"), std::string::npos);
  // Every command has a --help of its own, generated from its declared options.
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"stats"}, {"rule", "list"}, {"rule", "show"}, {"rule", "add"},
        {"rule", "set"}, {"rule", "del"}, {"config", "check"}, {"config", "save"},
        {"config", "load"}, {"config", "diff"}, {"flows", "top"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    Exit h = run(args);
    EXPECT_EQ(h.code, 0) << args[0];
    std::string usage = "Usage: sluicectl";
    for (const std::string& w : cmd) usage += " " + w;
    EXPECT_NE(h.out.find(usage), std::string::npos) << h.out;
  }
  EXPECT_NE(run({"rule", "set", "--help"}).out.find("--rate"), std::string::npos);
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
  for (size_t at = r.out.find("\ndataplane:"); at != std::string::npos;
       at = r.out.find("\ndataplane:", at + 1))
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
  Exit unknown = run({"--socket", path("s.sock"), "rule", "show", "nope"});  // NOLINT
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

TEST_F(SluicectlCli, RuleSetAddDelPrintWhatChangedAndTheRulesFollow) {
  serve(counters());
  const std::string sock = path("s.sock");
  Exit set = run({"--socket", sock, "rule", "set", "udp-only", "--rate", "2kpps", "--burst", "20"});
  ASSERT_EQ(set.code, 0) << set.err;
  EXPECT_EQ(set.out, "~ udp-only: rate, burst (buckets kept)\n"
                     "2 rules: 0 added, 1 changed, 0 removed, 1 unchanged\ngeneration 2\n");
  EXPECT_EQ(target_->rules().rules[0].burst, 20u);

  std::ofstream(path("new.yaml")) << "name: dns\nmatch: {proto: udp, dst-port: 53}\nkey: src-ip\n"
                                     "rate: 100pps\nburst: 5\naction: drop\n";
  Exit add = run({"--socket", sock, "rule", "add", path("new.yaml"), "--before", "udp-only"});
  ASSERT_EQ(add.code, 0) << add.err;
  EXPECT_NE(add.out.find("+ dns (added)\n"), std::string::npos) << add.out;
  EXPECT_NE(add.out.find("3 rules: 1 added, 0 changed, 0 removed, 2 unchanged\n"), std::string::npos) << add.out;
  EXPECT_EQ(target_->rules().rules.at(0).name, "dns");

  // From stdin.
  std::ofstream(path("more.yaml")) << "rules:\n  - {name: icmp, match: {proto: icmp}, key: none, rate: 10pps, burst: 2}\n";
  ChildProcess piped({"/bin/sh", "-c", bin_ + " --socket " + sock + " rule add - < " + path("more.yaml")});
  ASSERT_EQ(piped.wait_exit(30s), 0) << piped.err();
  EXPECT_NE(piped.out().find("+ icmp (added)"), std::string::npos) << piped.out();

  Exit del = run({"--socket", sock, "rule", "del", "icmp"});
  ASSERT_EQ(del.code, 0) << del.err;
  EXPECT_NE(del.out.find("- icmp (removed)\n"), std::string::npos) << del.out;
  EXPECT_EQ(target_->rules().rules.size(), 3u);
  EXPECT_EQ(target_->generation(), 5u);
}

TEST_F(SluicectlCli, RefusedWritesExitWithTheirClassAndChangeNothing) {
  serve(counters());
  const std::string sock = path("s.sock");
  std::ofstream(path("bad.yaml")) << "name: x\nkey: none\nrate: fast\nburst: 5\n";
  const struct {
    std::vector<std::string> args;
    int code;
    const char* says;
  } cases[] = {
      {{"rule", "add", path("bad.yaml")}, 2, "bad.yaml:3:"},
      {{"config", "load", path("bad.yaml")}, 2, "bad.yaml:"},
      {{"rule", "set", "udp-only", "--rate", "0pps"}, 2, "rule set udp-only: "},
      {{"rule", "set", "ghost", "--rate", "1kpps"}, 2, "no rule of that name"},
      {{"rule", "del", "ghost"}, 2, "no rule of that name"},
      {{"rule", "del", "udp-only", "--expect-generation", "9"}, 1,
       "rules changed since generation 9 (now 1)"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"--socket", sock};
    args.insert(args.end(), c.args.begin(), c.args.end());
    Exit r = run(args);
    EXPECT_EQ(r.code, c.code) << c.says << ": " << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
  }
  EXPECT_EQ(target_->generation(), 1u);
  EXPECT_EQ(target_->applies(), 1);
}

TEST_F(SluicectlCli, ConfigDiffShowsAndConfigLoadApplies) {
  serve(counters());
  const std::string sock = path("s.sock");
  std::ofstream(path("next.yaml")) << "default: {action: drop}\nrules:\n"
                                      "  - {name: udp-only, match: {proto: udp}, key: src-ip, rate: 1kpps, burst: 10, action: drop}\n"
                                      "  - {name: fresh, key: none, rate: 5pps, burst: 1}\n";
  Exit diff = run({"--socket", sock, "config", "diff", path("next.yaml")});
  ASSERT_EQ(diff.code, 0) << diff.err;
  EXPECT_EQ(diff.out, "~ default: action\n~ udp-only: key (new buckets)\n+ fresh (added)\n"
                      "- per-source (removed)\n2 rules: 1 added, 1 changed, 1 removed, 0 unchanged\n");
  EXPECT_EQ(target_->generation(), 1u) << "a diff applies nothing";
  Exit load = run({"--socket", sock, "config", "load", path("next.yaml"), "--expect-generation", "1"});
  ASSERT_EQ(load.code, 0) << load.err;
  EXPECT_EQ(load.out, diff.out + "generation 2\n");
  EXPECT_EQ(target_->rules().default_action.kind, ActionKind::drop);
}

TEST_F(SluicectlCli, FlowsTopListsTheBusiestFlowsInTheOrderAsked) {
  serve(counters());
  target_->add_flow({"per-source", "192.0.2.1", 100, 1e6});
  target_->add_flow({"per-source", "192.0.2.2", 300, 2e5});
  target_->add_flow({"udp-only", "all", 50, 5e6});
  Exit pps = run({"--socket", path("s.sock"), "flows", "top", "2"});
  ASSERT_EQ(pps.code, 0) << pps.err;
  EXPECT_LT(pps.out.find("192.0.2.2"), pps.out.find("192.0.2.1")) << pps.out;
  EXPECT_EQ(pps.out.find("udp-only  all"), std::string::npos) << pps.out;
  Exit bps = run({"--socket", path("s.sock"), "flows", "top", "5", "--by", "bps", "--rule", "per-source"});
  ASSERT_EQ(bps.code, 0) << bps.err;
  EXPECT_LT(bps.out.find("192.0.2.1"), bps.out.find("192.0.2.2")) << bps.out;
  EXPECT_EQ(bps.out.find("udp-only"), std::string::npos) << bps.out;
}

TEST_F(SluicectlCli, StatsWatchPrintsRatesPerSecondBesideTheTotals) {
  serve(counters());
  Exit r = run({"--socket", path("s.sock"), "stats", "--watch", "0.2", "--count", "2"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The first report has no rates (nothing to compare with), the second does.
  const size_t rates = r.out.find("per second");
  ASSERT_NE(rates, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("per second", rates + 1), std::string::npos);
  EXPECT_NE(r.out.find("matched/s"), std::string::npos);
}

TEST(StatsRates, PerSecondBetweenTwoReadsByRuleNameDefaultAndPort) {
  CountersSnapshot a, b;
  RuleSnapshot r;
  r.name = "web";
  a.rules.push_back(r);
  for (int i = 0; i < 100; ++i) r.traffic.add(Outcome::matched, 125);
  for (int i = 0; i < 40; ++i) r.traffic.add(Outcome::dropped, 125);
  b.rules.push_back(r);
  RuleSnapshot added;
  added.name = "new";
  added.traffic.add(Outcome::passed, 64);
  b.rules.push_back(added);
  a.ports.push_back({0, 10, 0, 0, 0, 0});
  b.ports.push_back({0, 30, 4, 0, 0, 0});
  const std::string t = ctl::rates_table(a, b, 2.0);
  // web: 100 matched over 2 s = 50/s, 40 dropped = 20/s, 100 x 125 B x 8 / 2 s = 50000 bit/s.
  EXPECT_NE(t.find("web"), std::string::npos) << t;
  EXPECT_NE(t.find("50.0"), std::string::npos) << t;
  EXPECT_NE(t.find("20.0"), std::string::npos) << t;
  EXPECT_NE(t.find("50000.0"), std::string::npos) << t;
  EXPECT_NE(t.find("port 0: rx/s 10.0  tx/s 2.0  missed/s 0.0"), std::string::npos) << t;
  // A counter that went backwards (a rule re-added) is 0, not a huge number.
  const std::string back = ctl::rates_table(b, a, 1.0);
  EXPECT_EQ(back.find("18446"), std::string::npos) << back;
}

}  // namespace
