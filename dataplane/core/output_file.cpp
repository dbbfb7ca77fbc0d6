#include "output_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sluice {

OutputFile::OutputFile(std::string final_path)
    : final_path_(std::move(final_path)),
      // Same directory as the final file, so the rename cannot cross filesystems.
      temp_path_(final_path_ + ".tmp." + std::to_string(::getpid())) {}

OutputFile::~OutputFile() {
  if (!committed_) ::unlink(temp_path_.c_str());
}

Status OutputFile::commit() {
  if (std::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    return make_error(final_path_ + ": cannot create: " + std::strerror(errno));
  committed_ = true;
  return Ok{};
}

Status write_text_file(const std::string& path, const std::string& text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return make_error(path + ": cannot create: " + std::strerror(errno));
  size_t n = std::fwrite(text.data(), 1, text.size(), f);
  int write_errno = errno;
  bool failed = n != text.size() || std::fflush(f) != 0;
  if (failed) write_errno = errno;
  if (std::fclose(f) != 0 && !failed) {
    failed = true;
    write_errno = errno;
  }
  if (failed) return make_error(path + ": write failed: " + std::strerror(write_errno));
  return Ok{};
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  OutputFile out(path);
  if (Status s = write_text_file(out.temp_path(), text); !s) {
    // Said of the file the user named, not of our temporary one.
    std::string message = s.error().message;
    if (message.rfind(out.temp_path(), 0) == 0) message.replace(0, out.temp_path().size(), path);
    return make_error(message);
  }
  return out.commit();
}

}  // namespace sluice
