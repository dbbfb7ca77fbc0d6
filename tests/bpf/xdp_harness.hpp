// Shared by the bpf suite: the XDP program loaded with the test clock (real kernel verifier,
// BPF_PROG_TEST_RUN), rules from YAML text, and one frame through both it and the core.
#pragma once

#include <gtest/gtest.h>
#include <linux/bpf.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rules_loader.hpp"
#include "xdp_program.hpp"

namespace sluice::xdp_test {

using Bytes = std::vector<uint8_t>;

// The flow hash seed of the tests' core pipelines (PipelineOptions::single_threaded(kHashSeed)):
// the program's tables then place, evict and refuse flows as the core's do.
constexpr uint64_t kHashSeed = 0x5eed;

inline std::unique_ptr<xdp::XdpProgram> load_test_program(uint64_t stale_read_tolerance_ns = 0) {
  xdp::LoadOptions opts;
  opts.test_clock = true;
  opts.hash_seed = kHashSeed;
  opts.stale_read_tolerance_ns = stale_read_tolerance_ns;
  auto prog = xdp::XdpProgram::load(opts);
  EXPECT_TRUE(prog.ok()) << (prog.ok() ? "" : prog.error().message);
  return prog.ok() ? std::move(*prog) : nullptr;
}

inline RuleSet rules_from(const std::string& yaml) {
  auto rules = load_rules_text(yaml, "test.yaml");
  EXPECT_TRUE(rules.ok()) << (rules.ok() ? "" : rules.error().message);
  return rules.ok() ? *rules : RuleSet{};
}

// One frame at now_ns through the program.
inline xdp::XdpProgram::RunResult run_at(xdp::XdpProgram& prog, const Bytes& frame,
                                         uint64_t now_ns) {
  EXPECT_TRUE(prog.set_test_now(now_ns).ok());
  auto r = prog.test_run(frame.data(), uint32_t(frame.size()));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : xdp::XdpProgram::RunResult{};
}

inline TrafficCounters counters_of(const xdp::XdpProgram& prog, size_t slot) {
  auto c = prog.counters();
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
  return c.ok() && slot < c->per_rule.size() ? c->per_rule[slot] : TrafficCounters{};
}

}  // namespace sluice::xdp_test
