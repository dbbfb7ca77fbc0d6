// The XDP program verifies and attaches on this kernel in native (driver) and generic (skb)
// mode, on a veth pair in a network namespace the test creates and removes; a second attach
// on the same interface is refused, and detach leaves nothing attached.
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "veth_namespace.hpp"
#include "xdp_harness.hpp"

namespace sluice {
namespace {

uint32_t attached_id(int ifindex, uint32_t mode_flag) {
  uint32_t id = 0;
  EXPECT_EQ(bpf_xdp_query_id(ifindex, int(mode_flag), &id), 0);
  return id;
}

uint32_t prog_id(int fd) {
  bpf_prog_info info{};
  uint32_t len = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
  return info.id;
}

void attach_detach(xdp::AttachMode mode, uint32_t mode_flag) {
  xdp_test::VethNamespace ns;
  ASSERT_TRUE(ns.ok());
  const int ifindex = int(if_nametoindex(ns.a().c_str()));
  ASSERT_GT(ifindex, 0);
  auto prog = xdp::XdpProgram::load(xdp::LoadOptions{});  // the real clock: the live program
  ASSERT_TRUE(prog.ok()) << prog.error().message;
  ASSERT_TRUE((*prog)->set_rules(xdp_test::rules_from(
      "default: {action: pass}\nrules:\n  - {name: a, match: {proto: udp}, key: src-ip, "
      "rate: 10pps, burst: 5, algorithm: srtcm, excess-burst: 5}\n")).ok());
  Status s = (*prog)->attach(ifindex, mode);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(attached_id(ifindex, mode_flag), prog_id((*prog)->prog_fd()));

  auto second = xdp::XdpProgram::load(xdp::LoadOptions{});
  ASSERT_TRUE(second.ok());
  Status again = (*second)->attach(ifindex, mode);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("already has an XDP program"), std::string::npos)
      << again.error().message;

  ASSERT_TRUE((*prog)->detach().ok());
  EXPECT_EQ(attached_id(ifindex, mode_flag), 0u);
}

TEST(XdpAttach, NativeMode) { attach_detach(xdp::AttachMode::native, XDP_FLAGS_DRV_MODE); }

TEST(XdpAttach, GenericMode) { attach_detach(xdp::AttachMode::skb, XDP_FLAGS_SKB_MODE); }

TEST(XdpAttach, MissingInterfaceIsAnError) {
  auto prog = xdp::XdpProgram::load(xdp::LoadOptions{});
  ASSERT_TRUE(prog.ok());
  EXPECT_FALSE((*prog)->attach(999999, xdp::AttachMode::skb).ok());
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// The program as the kernel keeps it after verification, in bpftool's words.
std::string xlated(int fd) {
  const std::string cmd = "bpftool prog dump xlated id " + std::to_string(prog_id(fd));
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// The .rodata switch is a constant to the verifier: the branch it turns off is removed, so the
// live program never reads the test clock and the test program never reads the kernel's.
TEST(XdpAttach, TestClockSwitchIsPrunedByTheVerifier) {
  xdp::LoadOptions live, test;
  test.test_clock = true;
  auto a = xdp::XdpProgram::load(live), b = xdp::XdpProgram::load(test);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string live_code = xlated((*a)->prog_fd()), test_code = xlated((*b)->prog_fd());
  ASSERT_NE(live_code.find("sluice_xdp"), std::string::npos) << live_code.substr(0, 200);
  EXPECT_NE(live_code.find("call bpf_ktime_get_ns"), std::string::npos);
  EXPECT_EQ(test_code.find("call bpf_ktime_get_ns"), std::string::npos);
}

}  // namespace
}  // namespace sluice
