// The per-rule flow tables of the XDP program from user space (sluice_abi.h "Flow tables"):
// one LRU hash per keyed rule, held by state slot in the array of maps sl_flow_tables. Created
// here with the rule's max-flows, replaced when a slot starts over, removed with the rule;
// read in batches for stats and `flows top`.
#pragma once

#include <cstdint>
#include <vector>

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/result.hpp"

namespace sluice::xdp {

// A file descriptor, closed when it goes.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_;
};

// Largest table a rule may ask for (an LRU hash preallocates every entry).
constexpr uint64_t kMaxFlowTableEntries = uint64_t{1} << 26;

// A new, empty table of max_flows entries at `slot` of the outer map, replacing the one it
// held (whose flows are gone with it), with the outer map's key size (sl_flow_key, or
// sl_addr_flow_key in sl_addr_flow_tables). Refuses 0 or more than kMaxFlowTableEntries flows.
Status put_flow_table(int outer_fd, uint32_t slot, uint64_t max_flows, uint32_t key_size);
// The slot holds no table any more (its flows are gone); nothing to do if it held none.
Status remove_flow_table(int outer_fd, uint32_t slot);
// The table at `slot`, or an Fd of -1 if the slot holds none.
Result<Fd> open_flow_table(int outer_fd, uint32_t slot);

// Every flow of a table, read in batches while the program runs on (a flow created or evicted
// during the read may be missed or seen).
struct TableFlows {
  uint32_t key_size = 0;
  std::vector<uint8_t> raw_keys;   // key i at i * key_size, as the table holds it
  std::vector<sl_flow_key> keys;   // key i in the long layout (full_flow_key)
  std::vector<sl_bucket> buckets;  // buckets[i] is key i's
  const void* raw_key(size_t i) const { return raw_keys.data() + i * key_size; }
};
Result<TableFlows> read_flow_table(int table_fd, uint32_t key_size);

// A one-address key (sluice_abi.h) in the long layout, as sl_flow_key_of lays it out.
sl_flow_key full_flow_key(const sl_addr_flow_key& k);

}  // namespace sluice::xdp
