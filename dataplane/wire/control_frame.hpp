// Framing of the control protocol v2 (docs/CONTROL.md): every message, request or reply, is
//
//   LENGTH "\n" BODY
//
// LENGTH the body's size in bytes, in decimal (1 to 8 digits, no sign, no spaces), BODY one
// JSON document of exactly that many bytes. A decimal line rather than a binary prefix, so a
// person can type a request into `socat` (docs/CONTROL.md shows how). Several messages may
// follow each other on one connection.
//
// FrameReader takes bytes as they arrive, however they are split, and never holds more than
// one frame: a header that announces more than the limit is refused before its body is read.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::wire {

// A whole rules file of several MB fits in one request.
constexpr size_t kMaxFrameBytes = size_t{16} << 20;  // 16 MiB
constexpr size_t kMaxLengthDigits = 8;

std::string encode_frame(std::string_view body);

class FrameReader {
 public:
  explicit FrameReader(size_t max_body_bytes = kMaxFrameBytes) : max_body_(max_body_bytes) {}

  // Appends what arrived. After an error, further bytes are ignored.
  void feed(std::string_view bytes);

  // The next whole body, if one has arrived; removes it from the buffer.
  std::optional<std::string> next();

  // Set when the stream cannot be a sequence of frames (then no frame follows).
  const std::string& error() const { return error_; }
  // Bytes of a frame begun and not finished (0 between frames).
  size_t pending_bytes() const { return buffer_.size(); }
  // The length the current header announced, once it has been read.
  std::optional<size_t> announced() const { return announced_; }

 private:
  void parse_header();

  const size_t max_body_;
  std::string buffer_;
  std::optional<size_t> announced_;
  std::string error_;
};

}  // namespace sluice::wire
