// A network namespace with a veth pair a() <-> b() (both up; names unique per process, since
// pin paths under /sys/fs/bpf are global) that the calling thread enters, created by the test
// and removed (with the pair) when it ends.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace sluice::xdp_test {

class VethNamespace {
 public:
  VethNamespace()
      : name_("sluice-xdp-" + std::to_string(getpid())),
        a_("sxa" + std::to_string(getpid())),
        b_("sxb" + std::to_string(getpid())) {
    ok_ = sh("ip netns add " + name_) &&
          sh("ip -n " + name_ + " link add " + a_ + " type veth peer name " + b_) &&
          sh("ip -n " + name_ + " link set " + a_ + " up") &&
          sh("ip -n " + name_ + " link set " + b_ + " up");
    home_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int ns = open(("/run/netns/" + name_).c_str(), O_RDONLY | O_CLOEXEC);
    ok_ = ok_ && home_ >= 0 && ns >= 0 && setns(ns, CLONE_NEWNET) == 0;
    if (ns >= 0) close(ns);
  }
  ~VethNamespace() {
    if (home_ >= 0) {
      (void)setns(home_, CLONE_NEWNET);
      close(home_);
    }
    sh("ip netns del " + name_);
  }
  bool ok() const { return ok_; }
  const std::string& a() const { return a_; }
  const std::string& b() const { return b_; }

 private:
  static bool sh(const std::string& cmd) { return std::system((cmd + " 2>&1").c_str()) == 0; }
  std::string name_, a_, b_;
  int home_ = -1;
  bool ok_ = false;
};

}  // namespace sluice::xdp_test
