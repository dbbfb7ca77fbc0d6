// Reading and writing capture files through libpcap, with timestamps in nanoseconds.
// Readers accept classic pcap (microsecond or nanosecond) and pcapng, Ethernet only; the
// writer always produces classic nanosecond pcap. Every error names the file and says what
// was wrong with it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "result.hpp"

struct pcap;
struct pcap_dumper;

namespace sluice {

struct PcapPacket {
  uint64_t ts_ns = 0;         // capture time, ns since the epoch of the file
  uint32_t wire_len = 0;      // length on the wire (may exceed data.size() if snapped)
  std::vector<uint8_t> data;  // captured bytes
};

class PcapReader {
 public:
  // Fails if the file is missing, is not a capture file, or is not Ethernet.
  static Result<std::unique_ptr<PcapReader>> open(const std::string& path);
  ~PcapReader();
  PcapReader(const PcapReader&) = delete;
  PcapReader& operator=(const PcapReader&) = delete;

  // Reads the next record into *out. Returns true for a packet, false at the end of the
  // file, or an error (e.g. a truncated record, a timestamp fraction of a second or more)
  // naming the file and the record number.
  Result<bool> next(PcapPacket* out);

  const std::string& path() const { return path_; }
  uint64_t records_read() const { return records_; }

 private:
  PcapReader(std::string path, pcap* handle) : path_(std::move(path)), handle_(handle) {}
  std::string path_;
  pcap* handle_;
  uint64_t records_ = 0;
  bool microseconds_ = false;  // a classic pcap of microsecond timestamps (for messages)
};

class PcapWriter {
 public:
  static constexpr uint32_t kSnapLen = 262144;

  // Creates (truncates) `path` as a nanosecond-resolution Ethernet pcap.
  static Result<std::unique_ptr<PcapWriter>> create(const std::string& path);
  // The same on a stream the writer takes over (close() fcloses it); `name` for messages.
  static Result<std::unique_ptr<PcapWriter>> create(FILE* stream, const std::string& name);
  ~PcapWriter();
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;

  // Appends one record; wire_len 0 means "the same as len".
  Status write(uint64_t ts_ns, const uint8_t* data, uint32_t len, uint32_t wire_len = 0);
  // Flushes and closes; reports write errors (e.g. disk full) that buffered writes hid.
  Status close();

  const std::string& path() const { return path_; }
  uint64_t records_written() const { return records_; }

 private:
  PcapWriter(std::string path, pcap* dead, pcap_dumper* dumper)
      : path_(std::move(path)), dead_(dead), dumper_(dumper) {}
  std::string path_;
  pcap* dead_;
  pcap_dumper* dumper_;
  uint64_t records_ = 0;
};

}  // namespace sluice
