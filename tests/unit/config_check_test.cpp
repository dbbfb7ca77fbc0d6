// The rules loader's limits as the binaries show them: `sluicectl config check` prints the
// flow-table memory a file needs and refuses what the dataplane would refuse, and sluiced
// refuses up front (exit 2) a file whose flow tables the machine cannot hold.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "child_process.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Exit {
  int code = -1;
  std::string out, err;
};

class ConfigCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("config-check-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }

  // Runs the binary named by `env` (meson sets it); a run that does not end within 60 s is
  // a hang, reported as code -1.
  static Exit run(const char* env, std::vector<std::string> args) {
    const char* bin = std::getenv(env);
    EXPECT_NE(bin, nullptr) << env << " is not set (meson sets it)";
    if (bin == nullptr) return {};
    args.insert(args.begin(), bin);
    sluice::testing::ChildProcess p(args);
    Exit r;
    r.code = p.wait_exit(60s);
    r.out = p.out();
    r.err = p.err();
    return r;
  }

  Exit replay(const std::string& rules) {
    return run("SLUICED", {"--replay", (dir_ / "in.pcap").string(), "--out",
                           (dir_ / "out.pcap").string(), "--report",
                           (dir_ / "report.json").string(), "--config", rules});
  }

  fs::path dir_;
};

TEST_F(ConfigCheck, PrintsTheFlowTableMemory) {
  std::string f = write("rules.yaml",
                        "rules:\n"
                        "  - {name: a, key: src-ip, rate: 10pps, burst: 5}\n"
                        "  - {name: b, key: dst-ip, rate: 10pps, burst: 5}\n"
                        "  - {name: c, key: 5-tuple, rate: 10pps, burst: 5}\n");
  Exit r = run("SLUICECTL", {"config", "check", f});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, f + ": ok, 3 rule(s), default pass; flow tables 6.0 MiB for 196608 flows "
                       "(65536 per keyed rule without max-flows)\n");
}

// yaml-cpp 0.7 never returned on this file (its memory growing by ~0.5 GB/s).
TEST_F(ConfigCheck, RefusesTheCommaFile) {
  std::string f = write("comma.yaml", ",\n");
  Exit r = run("SLUICECTL", {"config", "check", f});
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err.find("sluicectl: " + f + ":1: YAML syntax error"), 0u) << r.err;
}

TEST_F(ConfigCheck, RefusesADefaultRuleAndADeepChain) {
  std::string def = write("default.yaml", "rules:\n  - {name: default, rate: 10pps, burst: 5}\n");
  Exit d = run("SLUICECTL", {"config", "check", def});
  EXPECT_EQ(d.code, 2);
  EXPECT_NE(d.err.find(def + ":2: rule \"default\": the name \"default\" is reserved"),
            std::string::npos)
      << d.err;
  std::string text = "rules:\n";
  for (int i = 1; i <= 9; ++i) {
    text += "  - {name: c" + std::to_string(i) + ", rate: 10pps, burst: 5";
    if (i < 9) text += ", parent: c" + std::to_string(i + 1);
    text += "}\n";
  }
  std::string chain = write("chain.yaml", text);
  Exit c = run("SLUICECTL", {"config", "check", chain});
  EXPECT_EQ(c.code, 2);
  EXPECT_NE(c.err.find(chain + ":2: rule \"c1\": parent chain"), std::string::npos) << c.err;
}

// sluiced --replay used to die of an uncaught std::length_error (exit 134) on this file.
TEST_F(ConfigCheck, SluicedRefusesHugeMaxFlowsAtItsLine) {
  std::string f = write("rules.yaml",
                        "rules:\n  - {name: a, key: src-ip, rate: 10pps, burst: 5,\n"
                        "     max-flows: 2000000000000}\n");
  Exit r = replay(f);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(f + ":3: rule \"a\": max-flows 2000000000000 is above the limit"),
            std::string::npos)
      << r.err;
}

TEST_F(ConfigCheck, SluicedRefusesFlowTablesLargerThanMemory) {
  // 64 meters at the largest max-flows: 768 GiB of flow tables (and 8 MiB each of bits, one
  // per set), more than this machine has.
  std::string text = "rules:\n";
  for (int i = 0; i < 64; ++i)
    text += "  - {name: m" + std::to_string(i) +
            ", key: src-ip, algorithm: srtcm, rate: 10pps, burst: 5, max-flows: 268435456}\n";
  std::string f = write("rules.yaml", text);
  Exit check = run("SLUICECTL", {"config", "check", f});
  EXPECT_EQ(check.code, 0) << check.err;
  EXPECT_NE(check.out.find("flow tables 768.5 GiB for 17179869184 flows"), std::string::npos)
      << check.out;
  Exit r = replay(f);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(f + ": flow tables need 768.5 GiB (825170591744 bytes) for 17179869184 "
                           "flows, more than the "),
            std::string::npos)
      << r.err;
  // Replay has no --flows (sluiced refuses it there): the advice is max-flows alone.
  EXPECT_NE(r.err.find("of memory available; lower max-flows\n"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("--flows"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "out.pcap"));
}

}  // namespace
}  // namespace sluice
