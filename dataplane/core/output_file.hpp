// Output files (--out, --report, sluicectl config save), written so that a failed or
// interrupted run never leaves a partial file behind, never clobbers the previous one, and
// can never be turned against another file:
//
// - A regular file (or a new one) is written to a fresh temporary beside it, created with
//   O_CREAT | O_EXCL | O_NOFOLLOW under an unpredictable name (mode 0666 less the umask, or
//   the mode of the file it replaces), synced, and renamed over the final path on commit().
// - A character device or FIFO (/dev/null, a named pipe), or a symbolic link to one, is
//   written in place: renaming over it would replace the device node with a regular file.
// - /dev/stdout, /dev/stderr, /dev/fd/N and /proc/self/fd/N write to that descriptor of
//   ours (a duplicate of it), whatever it is open on, keeping its offset and append mode.
// - A symbolic link to anything else (a regular file, nothing), a directory, a block
//   device or a socket is refused: writing through a link lets whoever can write the
//   directory aim our output (as root) at any file; replacing it would silently lose it.
//
// check_outputs() makes the same decisions up front, so that main() reports them as usage
// errors (exit 2) before anything runs, and also refuses an output that is the same file as
// an input or as another output.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "result.hpp"

namespace sluice {

// A path as the user named it, with the option it was given to ("--out").
struct NamedPath {
  std::string option;
  std::string path;
};

// Usage errors in the outputs: a kind of file we refuse (see above), or an output that is
// the same file as an input or as another output (same st_dev/st_ino where the file exists,
// else the same normalised path). Character devices are exempt from the sameness rule
// (both reports may go to /dev/null). Messages name the options and both paths.
Status check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs);

class OutputFile {
 public:
  // Decides how `path` is written and opens it (the temporary, or the file in place).
  // Errors name `path`: a refused kind of file, or the system's refusal (no such directory,
  // permission denied).
  static Result<std::unique_ptr<OutputFile>> open(const std::string& path);
  ~OutputFile();  // removes the temporary unless commit() succeeded
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  const std::string& path() const { return path_; }
  bool in_place() const { return temp_path_.empty(); }

  // A stream on the output (on a duplicate of its descriptor): the caller writes the
  // content and fcloses it before commit(). Errors name path().
  Result<FILE*> open_stream();

  // Regular files: syncs the temporary and renames it over the final path (atomic within
  // one filesystem). In place: closes. Errors name path().
  Status commit();

 private:
  OutputFile(std::string path, std::string temp_path, int fd)
      : path_(std::move(path)), temp_path_(std::move(temp_path)), fd_(fd) {}

  std::string path_;
  std::string temp_path_;  // empty: written in place
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `text` to `path` through an OutputFile, committed: `path` holds either its old
// content or all of `text`, never a part (REPORT.json, sluicectl config save). In place
// outputs (a device, a pipe) get what was written before any error.
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sluice
