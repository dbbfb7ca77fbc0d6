// The dense-table common-IPv4 loops (core/pipeline_fast_v4_dense.hpp) over a worker's mbufs.
#include "mbuf_frames.hpp"
#include "pipeline_fast_v4_dense.hpp"

namespace sluice::pipeline_run {

template size_t burst_dense_common_ipv4<MbufFrames>(const Run&, const MbufFrames&, size_t,
                                                    uint16_t, uint64_t, WorkerCounters&,
                                                    Verdict*, Classified*, VerdictFill);

}  // namespace sluice::pipeline_run
