// An output written under a temporary name beside its final path and renamed into place only
// when the run succeeded, so a failed or interrupted run never leaves a partial OUT.pcap or
// REPORT.json behind (and never clobbers the previous one).
#pragma once

#include <string>

#include "result.hpp"

namespace sluice {

class OutputFile {
 public:
  explicit OutputFile(std::string final_path);
  ~OutputFile();  // removes the temporary file unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& temp_path() const { return temp_path_; }
  const std::string& final_path() const { return final_path_; }

  // Renames the temporary file to the final path (atomic within one filesystem).
  Status commit();

 private:
  std::string final_path_;
  std::string temp_path_;
  bool committed_ = false;
};

// Writes `text` to `path` in one go, reporting any write error.
Status write_text_file(const std::string& path, const std::string& text);

// write_text_file to an OutputFile, committed: `path` holds either its old content or all of
// `text`, never a part (REPORT.json of a live run, sluicectl config save).
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sluice
