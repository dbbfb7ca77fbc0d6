// run_live for a sluiced built without DPDK (meson -Ddpdk=disabled, or no libdpdk found):
// the command line still parses, and live mode says why it cannot run. Replay is unaffected.
#include "live_run.hpp"

namespace sluice {

Status run_live(const LiveOptions&) {
  return invalid_input(
      "this sluiced was built without DPDK: the live dataplane is not available "
      "(rebuild with libdpdk-dev installed, or use --replay)");
}

}  // namespace sluice
