// burst_dense_common_ipv4 over arrays of frames (process_burst): pipeline_fast_v4_dense.hpp.
#include "pipeline_fast_v4_dense.hpp"

namespace sluice::pipeline_run {

template size_t burst_dense_common_ipv4<FrameArray>(const Run&, const FrameArray&, size_t,
                                                    uint16_t, uint64_t, WorkerCounters&,
                                                    Verdict*, Classified*, VerdictFill);

}  // namespace sluice::pipeline_run
