// Which live flow a new flow may push out of its two candidate sets when its rule has no
// capacity left (SPEC §3 Flows, §6): the flow table's victim choice, apart from the table so
// that the policy reads (and is tested) on its own.
//
// Plain LRU among the candidates lets a flood of one-packet flows push out flows that are
// sending: at capacity a set's occupancy no longer changes (a new flow takes its victim's
// slot), so sparse sets turn over fast, their flood residents are young, and an established
// flow there is often the oldest candidate, or the only one (1.5-3% of established flows lost
// their bucket to a 10M-flow flood, docs/SOAK.md). And an evicted flow that is still sending
// comes back with a full bucket: every such eviction hands it a fresh burst. So, as a
// segmented LRU does for a cache under a scan:
//  - a flow seen once (one packet so far; the table marks it at creation and its next packet
//    clears the mark) is on probation, and so is a flow idle for protect_ticks or more;
//  - every other flow (seen twice or more, and within protect_ticks) is protected: no new
//    flow pushes it out; it leaves by going idle (probation again, then expiry);
//  - the victim is the least recently used flow on probation, if idle for evict_ticks or
//    more (min-evict-idle); otherwise the new flow gets no slot (the rule's overflow action).
// Deterministic: the choice depends only on the candidates' tag words and idle times, in way
// order (the first of equally idle flows goes, as in the LRU it replaces).
#pragma once

#include <cstdint>

namespace sluice {

class EvictionChoice {
 public:
  struct Victim {
    int way = -1;       // candidate way (first set 0-7, second set 8-15); -1: none may go
    uint64_t tag = 0;   // the tag word it was judged by (the claim CASes from exactly this)
    uint32_t idle = 0;  // its idle ticks
  };

  EvictionChoice(uint32_t evict_ticks, uint32_t protect_ticks)
      : evict_ticks_(evict_ticks), protect_ticks_(protect_ticks) {}

  // A live flow of the candidate sets, not expired: way, tag word, idle ticks, and whether
  // it has been seen only once.
  void consider(int way, uint64_t tag, uint32_t idle_ticks, bool seen_once) {
    if (!seen_once && idle_ticks < protect_ticks_) return;  // protected
    if (lru_.way < 0 || idle_ticks > lru_.idle) lru_ = {way, tag, idle_ticks};
  }

  Victim pick() const { return lru_.way >= 0 && lru_.idle >= evict_ticks_ ? lru_ : Victim{}; }

 private:
  uint32_t evict_ticks_;
  uint32_t protect_ticks_;
  Victim lru_;  // the least recently used flow on probation
};

}  // namespace sluice
