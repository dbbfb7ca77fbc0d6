#include "control_frame.hpp"

namespace sluice::wire {

std::string encode_frame(std::string_view body) {
  std::string out = std::to_string(body.size());
  out += '\n';
  out += body;
  return out;
}

void FrameReader::feed(std::string_view bytes) {
  if (!error_.empty()) return;
  buffer_.append(bytes);
  if (!announced_) parse_header();
}

void FrameReader::parse_header() {
  const size_t nl = buffer_.find('\n');
  const size_t digits = nl == std::string::npos ? buffer_.size() : nl;
  for (size_t i = 0; i < digits; ++i) {
    if (buffer_[i] < '0' || buffer_[i] > '9') {
      error_ = "a message starts with its length in decimal and a newline (got byte " +
               std::to_string(static_cast<unsigned char>(buffer_[i])) + " at offset " +
               std::to_string(i) + ")";
      buffer_.clear();
      return;
    }
  }
  if (digits > kMaxLengthDigits) {
    error_ = "a message over the limit of " + std::to_string(max_body_) +
             " bytes (its length has more than " + std::to_string(kMaxLengthDigits) + " digits)";
    buffer_.clear();
    return;
  }
  if (nl == std::string::npos) return;
  if (nl == 0) {
    error_ = "empty length header";
    buffer_.clear();
    return;
  }
  const size_t length = std::stoull(buffer_.substr(0, nl));  // at most 8 digits: no overflow
  if (length == 0) {
    error_ = "a message of 0 bytes (a JSON document was expected)";
    buffer_.clear();
    return;
  }
  if (length > max_body_) {
    error_ = "a message of " + std::to_string(length) + " bytes is over the limit of " +
             std::to_string(max_body_) + " bytes";
    buffer_.clear();
    return;
  }
  announced_ = length;
  buffer_.erase(0, nl + 1);
}

std::optional<std::string> FrameReader::next() {
  if (!error_.empty() || !announced_ || buffer_.size() < *announced_) return std::nullopt;
  std::string body = buffer_.substr(0, *announced_);
  buffer_.erase(0, *announced_);
  announced_.reset();
  parse_header();  // the next frame may be here already
  return body;
}

}  // namespace sluice::wire
