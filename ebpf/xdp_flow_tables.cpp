#include "xdp_flow_tables.hpp"

#include <bpf/bpf.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace sluice::xdp {
namespace {

Error os_error(const std::string& what, int err) {
  return make_error(what + ": " + std::strerror(err < 0 ? -err : err));
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Status put_flow_table(int outer_fd, uint32_t slot, uint64_t max_flows, uint32_t key_size) {
  if (max_flows == 0 || max_flows > kMaxFlowTableEntries)
    return make_error("an XDP flow table holds 1 to " + std::to_string(kMaxFlowTableEntries) +
                      " flows, not " + std::to_string(max_flows));
  // The sizes and flags of sl_flow_tables' template (sluice_maps.bpf.h): the kernel refuses
  // an inner map that differs in any of them.
  Fd table(bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "sl_flows", key_size, sizeof(sl_bucket),
                          uint32_t(max_flows), nullptr));
  if (!table)
    return os_error("creating an XDP flow table of " + std::to_string(max_flows) + " flows",
                    errno);
  const uint32_t fd = uint32_t(table.get());
  if (bpf_map_update_elem(outer_fd, &slot, &fd, BPF_ANY) != 0)
    return os_error("installing an XDP flow table", errno);
  return Ok{};  // the outer map holds the table now; our descriptor may go
}

Status remove_flow_table(int outer_fd, uint32_t slot) {
  if (bpf_map_delete_elem(outer_fd, &slot) != 0 && errno != ENOENT)
    return os_error("removing an XDP flow table", errno);
  return Ok{};
}

Result<Fd> open_flow_table(int outer_fd, uint32_t slot) {
  uint32_t id = 0;
  if (bpf_map_lookup_elem(outer_fd, &slot, &id) != 0) {
    if (errno == ENOENT) return Fd{};
    return os_error("reading sl_flow_tables", errno);
  }
  Fd table(bpf_map_get_fd_by_id(id));
  // Removed between the two calls: as if it had not been there.
  if (!table) return errno == ENOENT ? Result<Fd>(Fd{}) : Result<Fd>(os_error("opening an XDP flow table", errno));
  return table;
}

sl_flow_key full_flow_key(const sl_addr_flow_key& k) {
  sl_flow_key full{};
  full.w[0] = k.w[0];
  const unsigned mode = k.w[0] & 0xff, version = (k.w[0] >> 8) & 0xff;
  const bool src = mode == SL_KEY_SRC_IP || mode == SL_KEY_SRC_PREFIX;
  if (version == 6) {
    full.w[src ? 1 : 3] = k.w[1];
    full.w[src ? 2 : 4] = k.w[2];
  } else {
    full.w[1] = src ? k.w[1] : k.w[1] << 32;  // IPv4: src | dst << 32
  }
  return full;
}

Result<TableFlows> read_flow_table(int table_fd, uint32_t key_size) {
  constexpr uint32_t kBatch = 4096;  // entries per syscall; more than any hash bucket holds
  if (key_size != sizeof(sl_flow_key) && key_size != sizeof(sl_addr_flow_key))
    return make_error("no XDP flow table has keys of " + std::to_string(key_size) + " bytes");
  TableFlows out;
  out.key_size = key_size;
  std::vector<uint8_t> keys(size_t(kBatch) * key_size);
  std::vector<sl_bucket> values(kBatch);
  uint32_t token = 0;  // an LRU hash's batch position: a bucket index (4 bytes)
  bool first = true;
  for (;;) {
    uint32_t count = kBatch;
    const int err = bpf_map_lookup_batch(table_fd, first ? nullptr : &token, &token, keys.data(),
                                         values.data(), &count, nullptr);
    if (err && err != -ENOENT) return os_error("reading an XDP flow table", err);
    out.raw_keys.insert(out.raw_keys.end(), keys.begin(), keys.begin() + size_t(count) * key_size);
    out.buckets.insert(out.buckets.end(), values.begin(), values.begin() + count);
    if (err == -ENOENT) break;  // the end of the table
    first = false;
  }
  const size_t n = out.buckets.size();
  out.keys.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (key_size == sizeof(sl_flow_key)) {
      std::memcpy(&out.keys[i], out.raw_key(i), sizeof(sl_flow_key));
    } else {
      sl_addr_flow_key k;
      std::memcpy(&k, out.raw_key(i), sizeof k);
      out.keys[i] = full_flow_key(k);
    }
  }
  return out;
}

}  // namespace sluice::xdp
