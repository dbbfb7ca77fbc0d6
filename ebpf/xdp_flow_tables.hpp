// The per-rule flow tables of the XDP program from user space (sluice_abi.h "Flow tables"):
// one array of sets per keyed rule (the core's FlowTable layout), held by state slot in the
// array of maps sl_flow_tables, its numbers in sl_flow_meta. Created here with the rule's
// max-flows, replaced when a slot starts over, removed with the rule; mapped into this process
// to be read (stats, `flows top`) and converted (a rate change) in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "../dataplane/abi/sluice_abi.h"
#include "../dataplane/core/dense_key.hpp"
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

// Largest table a rule may ask for: the kernel allocates an array's memory at creation, 256
// bytes per flow of capacity (two 128-byte slots: sluice_abi.h struct sl_flow_set), so 2^24
// flows take 4 GiB.
constexpr uint64_t kMaxFlowTableEntries = uint64_t{1} << 24;

// What a rule's table is made of.
struct FlowTableSpec {
  uint64_t max_flows = 0;
  uint64_t idle_timeout_ns = 0;
  uint64_t hash_seed = 0;  // the state's seed (sl_xdp_config.hash_base + its id)
  DenseKey dense;          // the rule's dense_key_of(rule, max_flows): slots 0, hashed
};

// The table's numbers for a spec (FlowTable::geometry, flow_hash_keys, the dense key), counts
// zero.
sl_flow_meta flow_meta_for(const FlowTableSpec& spec);
// The bytes a table of max_flows flows takes in the kernel.
uint64_t flow_table_bytes(uint64_t max_flows);

// A new, empty table for `slot` of the outer map, replacing the one it held (whose flows are
// gone with it), and its numbers in sl_flow_meta (meta_fd). Refuses 0 or more than
// kMaxFlowTableEntries flows.
Status put_flow_table(int outer_fd, int meta_fd, uint32_t slot, const FlowTableSpec& spec);
// The slot holds no table any more (its flows are gone); nothing to do if it held none.
Status remove_flow_table(int outer_fd, uint32_t slot);
// The table at `slot`, or an Fd of -1 if the slot holds none.
Result<Fd> open_flow_table(int outer_fd, uint32_t slot);
// The numbers and counts of slot's table.
Result<sl_flow_meta> read_flow_meta(int meta_fd, uint32_t slot);

// Every flow of a table (its published slots), read in place while the program runs on (a
// flow created or evicted during the read may be missed or seen).
struct TableFlows {
  std::vector<sl_flow_key> keys;   // in the long layout (sl_flow_key_of)
  std::vector<sl_bucket> buckets;  // buckets[i] is key i's
};
Result<TableFlows> read_flow_table(int table_fd);

// Rewrites each flow's bucket to convert(bucket) in place, under the bucket's sequence claim
// (a meter's writer on another CPU then decides again on the new words).
Status convert_flow_table(int table_fd, const std::function<sl_bucket(const sl_bucket&)>& convert);

}  // namespace sluice::xdp
