// burst_common_ipv4 over an array of frames (process_burst): see pipeline_fast_v4.hpp.
#include "pipeline_fast_v4.hpp"

namespace sluice::pipeline_run {

template size_t burst_common_ipv4<FrameArray>(const Run&, const FrameArray&, size_t, uint16_t,
                                              uint64_t, WorkerCounters&, Verdict*, Classified*,
                                              VerdictFill);

}  // namespace sluice::pipeline_run
