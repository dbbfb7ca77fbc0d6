#include "eal.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>

#include <cerrno>

namespace sluice {

Result<std::unique_ptr<Eal>> Eal::init(const std::vector<std::string>& args) {
  std::unique_ptr<Eal> eal(new Eal());
  eal->args_ = args;
  if (eal->args_.empty()) eal->args_.push_back("sluiced");
  std::vector<char*> argv;
  for (std::string& a : eal->args_) argv.push_back(a.data());
  argv.push_back(nullptr);

  const int argc = int(argv.size()) - 1;
  const int parsed = rte_eal_init(argc, argv.data());
  if (parsed < 0) {
    const int err = rte_errno;
    // EINVAL: the arguments; everything else (EACCES, ENOMEM, EALREADY, ...) is the system.
    return make_error("EAL initialisation failed: " + std::string(rte_strerror(err)) +
                          (err == EINVAL ? " (check the EAL arguments before \"--\")" : ""),
                      err == EINVAL ? ErrorKind::invalid_input : ErrorKind::runtime);
  }
  // rte_eal_init stops at the first argument it does not know; ours come after "--" and are
  // not passed here, so anything left over is a mistake in the EAL part.
  eal->initialised_ = true;
  if (parsed + 1 < argc) {
    // getopt may have permuted argv: the leftovers are the ones after the parsed part.
    return invalid_input("unexpected EAL argument '" + std::string(argv[size_t(parsed) + 1]) +
                         "' (sluiced's own options go after \"--\")");
  }
  return eal;
}

Eal::~Eal() {
  // After a failed rte_eal_init there is nothing consistent to clean up.
  if (initialised_) rte_eal_cleanup();
}

unsigned Eal::main_lcore() const { return rte_get_main_lcore(); }

std::vector<unsigned> Eal::worker_lcores() const {
  std::vector<unsigned> lcores;
  unsigned lcore;
  RTE_LCORE_FOREACH_WORKER(lcore) lcores.push_back(lcore);
  return lcores;
}

}  // namespace sluice
