// The fixture the sluiced live-mode binary tests share: the binaries from the environment
// (skipped without root or without them), a private directory per test, and sluiced's
// command line with its own EAL file prefix, removed after.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../e2e/mini_json.hpp"
#include "child_process.hpp"

namespace sluice {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::ChildProcess;
using testing::Json;

inline std::string env_or_skip(const char* name) {
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

  // `sluicectl` (the binary `ctl`) on the control socket `sock` with `args`: its exit status,
  // stdout and stderr.
  static int sluicectl(const char* ctl, const std::string& sock, std::vector<std::string> args,
                       std::string* out, std::string* err) {
    args.insert(args.begin(), {ctl, "--socket", sock});
    ChildProcess c(args);
    const int code = c.wait_exit(30s);
    *out = c.out();
    *err = c.err();
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

}  // namespace sluice
