// The pipeline's burst loops (core/pipeline_burst.hpp, pipeline_fast_v4.hpp) instantiated over
// a worker's mbufs (mbuf_frames.hpp). The uniform-key loops are in mbuf_burst_uniform.cpp, apart
// as in the core (their instantiations change how GCC inlines these).
#include "mbuf_frames.hpp"
#include "pipeline_burst.hpp"
#include "pipeline_fast_v4.hpp"

namespace sluice {

namespace pipeline_run {
template size_t burst_common_ipv4<MbufFrames>(const Run&, const MbufFrames&, size_t, uint16_t,
                                              uint64_t, WorkerCounters&, Verdict*, Classified*,
                                              VerdictFill);
}  // namespace pipeline_run

size_t process_mbuf_burst(const RulesSnapshot& snap, const MbufFrames& src, size_t n,
                          uint16_t port, uint64_t now_ns, WorkerCounters& counters,
                          Verdict* verdicts) {
  return pipeline_run::run_burst(snap, src, n, port, now_ns, counters, verdicts,
                                 VerdictFill::unless_all_now);
}

}  // namespace sluice
