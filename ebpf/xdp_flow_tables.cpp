#include "xdp_flow_tables.hpp"

#include <bpf/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <string>

#include "../dataplane/core/flow_key.hpp"
#include "../dataplane/core/flow_table.hpp"

namespace sluice::xdp {
namespace {

Error os_error(const std::string& what, int err) {
  return make_error(what + ": " + std::strerror(err < 0 ? -err : err));
}

uint64_t load(const uint64_t& w) { return __atomic_load_n(&w, __ATOMIC_ACQUIRE); }
void store(uint64_t& w, uint64_t v) { __atomic_store_n(&w, v, __ATOMIC_RELEASE); }

bool is_live(uint64_t tag) { return tag != 0 && !(tag & SL_FT_PENDING); }

// A table's sets mapped into this process (the tables are BPF_F_MMAPABLE), unmapped when it goes.
class MappedTable {
 public:
  static Result<MappedTable> map(int table_fd, bool writable) {
    bpf_map_info info{};
    uint32_t len = sizeof(info);
    if (bpf_obj_get_info_by_fd(table_fd, &info, &len) != 0)
      return os_error("reading an XDP flow table's size", errno);
    if (info.value_size != sizeof(sl_flow_set))
      return make_error("an XDP flow table of " + std::to_string(info.value_size) +
                        "-byte sets, not " + std::to_string(sizeof(sl_flow_set)));
    MappedTable t;
    t.sets_ = info.max_entries;
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    t.bytes_ = (size_t(t.sets_) * sizeof(sl_flow_set) + page - 1) / page * page;
    void* m = mmap(nullptr, t.bytes_, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED,
                   table_fd, 0);
    if (m == MAP_FAILED) return os_error("mapping an XDP flow table", errno);
    t.base_ = static_cast<sl_flow_set*>(m);
    return t;
  }
  MappedTable(MappedTable&& o) noexcept : base_(o.base_), sets_(o.sets_), bytes_(o.bytes_) {
    o.base_ = nullptr;
  }
  MappedTable(const MappedTable&) = delete;
  MappedTable& operator=(const MappedTable&) = delete;
  MappedTable& operator=(MappedTable&&) = delete;
  ~MappedTable() {
    if (base_) munmap(base_, bytes_);
  }
  sl_flow_set* begin() const { return base_; }
  sl_flow_set* end() const { return base_ + sets_; }

 private:
  MappedTable() = default;
  sl_flow_set* base_ = nullptr;
  uint64_t sets_ = 0;
  size_t bytes_ = 0;
};

// One bucket's words, each read whole (the program writes them as it runs).
sl_bucket read_bucket(const sl_bucket& b) {
  sl_bucket out;
  out.seq = load(b.seq);
  out.w0 = load(b.w0);
  out.w1 = load(b.w1);
  out.last_seen_ns = load(b.last_seen_ns);
  out.gen = load(b.gen);
  out.packets = load(b.packets);
  out.bytes = load(b.bytes);
  return out;
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

sl_flow_meta flow_meta_for(const FlowTableSpec& spec) {
  const FlowTable::Geometry g =
      FlowTable::geometry(spec.max_flows, spec.idle_timeout_ns, SL_FT_MIN_EVICT_IDLE_NS);
  const FlowHashKeys k = flow_hash_keys(spec.hash_seed);
  sl_flow_meta m{};
  m.k0 = k.k0, m.k1 = k.k1, m.k2 = k.k2;
  m.sets = g.sets;
  m.capacity = spec.max_flows;
  m.tick_shift = g.tick_shift;
  m.expire_ticks = g.expire_ticks;
  m.evict_ticks = g.evict_ticks;
  m.protect_ticks = g.protect_ticks;
  if (spec.dense.slots != 0) {
    m.dense = 1;
    m.dense_src = spec.dense.src;
    m.dense_base = spec.dense.base;
    m.dense_shift = spec.dense.shift;
    m.dense_bits = uint8_t(std::countr_zero(spec.dense.slots));
  }
  return m;
}

uint64_t flow_table_bytes(uint64_t max_flows) {
  return FlowTable::geometry(max_flows, 0, 0).sets * sizeof(sl_flow_set);
}

Status put_flow_table(int outer_fd, int meta_fd, uint32_t slot, const FlowTableSpec& spec) {
  if (spec.max_flows == 0 || spec.max_flows > kMaxFlowTableEntries)
    return make_error("an XDP flow table holds 1 to " + std::to_string(kMaxFlowTableEntries) +
                      " flows (" + std::to_string(flow_table_bytes(kMaxFlowTableEntries) >> 20) +
                      " MB), not " + std::to_string(spec.max_flows));
  const sl_flow_meta meta = flow_meta_for(spec);
  // The flags of sl_flow_tables' template (sluice_maps.bpf.h): the kernel refuses an inner
  // map that differs in them, its size or its value size.
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP | BPF_F_MMAPABLE);
  Fd table(bpf_map_create(BPF_MAP_TYPE_ARRAY, "sl_flows", sizeof(uint32_t), sizeof(sl_flow_set),
                          uint32_t(meta.sets), &opts));
  if (!table)
    return os_error("creating an XDP flow table of " + std::to_string(spec.max_flows) +
                        " flows (" + std::to_string(flow_table_bytes(spec.max_flows) >> 20) +
                        " MB)",
                    errno);
  // The numbers first: the slot's rule is not running yet (a fresh slot), and its first
  // packet must find the table's own.
  if (bpf_map_update_elem(meta_fd, &slot, &meta, BPF_ANY) != 0)
    return os_error("writing an XDP flow table's numbers", errno);
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

Result<sl_flow_meta> read_flow_meta(int meta_fd, uint32_t slot) {
  sl_flow_meta m{};
  if (bpf_map_lookup_elem(meta_fd, &slot, &m) != 0)
    return os_error("reading sl_flow_meta", errno);
  return m;
}

Result<TableFlows> read_flow_table(int table_fd) {
  auto mapped = MappedTable::map(table_fd, false);
  if (!mapped) return mapped.error();
  TableFlows out;
  for (const sl_flow_set* s = mapped->begin(); s != mapped->end(); ++s)
    for (unsigned w = 0; w < SL_FT_WAYS; ++w) {
      if (!is_live(load(s->tag[w]))) continue;
      sl_flow_key k;
      for (unsigned i = 0; i < SL_FLOW_KEY_WORDS; ++i) k.w[i] = load(s->key[w].w[i]);
      out.keys.push_back(k);
      out.buckets.push_back(read_bucket(s->slot[w].b));
    }
  return out;
}

Status convert_flow_table(int table_fd,
                          const std::function<sl_bucket(const sl_bucket&)>& convert) {
  auto mapped = MappedTable::map(table_fd, true);
  if (!mapped) return mapped.error();
  for (sl_flow_set* s = mapped->begin(); s != mapped->end(); ++s)
    for (unsigned w = 0; w < SL_FT_WAYS; ++w) {
      if (!is_live(load(s->tag[w]))) continue;
      sl_bucket& b = s->slot[w].b;
      // The bucket's sequence claim (sluice_abi.h "Buckets"), as a meter's writer takes it; a
      // writer inside (odd) leaves within a few stores.
      for (int tries = 0; tries < 1000; ++tries) {
        uint64_t seq = load(b.seq);
        if (seq & 1) continue;
        const sl_bucket was = read_bucket(b);
        const sl_bucket next = convert(was);
        if (next.gen == was.gen && next.w0 == was.w0 && next.w1 == was.w1) break;
        if (!__atomic_compare_exchange_n(&b.seq, &seq, seq + 1, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
          continue;
        store(b.w0, next.w0);
        store(b.w1, next.w1);
        store(b.gen, next.gen);
        store(b.seq, seq + 2);
        break;
      }
    }
  return Ok{};
}

}  // namespace sluice::xdp
