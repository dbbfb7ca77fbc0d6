// The DPDK Environment Abstraction Layer as an owned resource: Eal::init() runs rte_eal_init,
// the destructor runs rte_eal_cleanup. Everything else DPDK (mempools, ports, workers) must be
// destroyed first, so whoever owns an Eal declares it before the things that use it.
//
// DPDK allows one successful rte_eal_init per process: a second Eal fails with a runtime error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "result.hpp"

namespace sluice {

class Eal {
 public:
  // args: the EAL command line, program name first (everything before "--"). Errors are
  // invalid_input when EAL rejected the arguments, runtime otherwise.
  static Result<std::unique_ptr<Eal>> init(const std::vector<std::string>& args);
  ~Eal();
  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  unsigned main_lcore() const;
  // Every enabled lcore except the main one, in id order: one worker each.
  std::vector<unsigned> worker_lcores() const;

 private:
  Eal() = default;
  // rte_eal_init keeps pointers into argv on some paths; the strings live as long as EAL.
  std::vector<std::string> args_;
  bool initialised_ = false;
};

}  // namespace sluice
