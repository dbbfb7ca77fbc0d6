#include "output_file.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

namespace sluice {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// How an output path is written (see output_file.hpp).
struct Target {
  enum Kind { new_file, regular, in_place, descriptor, refused, unknown } kind = unknown;
  int fd = -1;            // descriptor: which of ours
  mode_t mode = 0;        // regular: its permission bits, kept by the replacement
  std::string why;        // refused / unknown: what to tell the user
};

// /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N: one of our own descriptors.
std::optional<int> descriptor_alias(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (const std::string prefix : {"/dev/fd/", "/proc/self/fd/"}) {
    if (path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string n = path.substr(prefix.size());
    if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    return std::stoi(n);
  }
  return std::nullopt;
}

bool written_in_place(mode_t m) { return S_ISCHR(m) || S_ISFIFO(m); }

Target classify(const std::string& path) {
  Target t;
  if (auto fd = descriptor_alias(path)) {
    t.kind = Target::descriptor;
    t.fd = *fd;
    return t;
  }
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      t.kind = Target::new_file;
    } else {
      t.why = errno_text(errno);
    }
    return t;
  }
  if (S_ISLNK(st.st_mode)) {
    struct stat to{};
    if (::stat(path.c_str(), &to) == 0 && written_in_place(to.st_mode)) {
      t.kind = Target::in_place;  // e.g. a link to /dev/null: the device is written
      return t;
    }
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(path, ec).string();
    t.kind = Target::refused;
    t.why = "is a symbolic link" + (target.empty() ? "" : " (to " + target + ")") +
            "; outputs are not written through links to files: name the file itself";
    return t;
  }
  if (S_ISREG(st.st_mode)) {
    t.kind = Target::regular;
    t.mode = st.st_mode & 07777;
  } else if (written_in_place(st.st_mode)) {
    t.kind = Target::in_place;
  } else {
    t.kind = Target::refused;
    t.why = S_ISDIR(st.st_mode)   ? "is a directory"
            : S_ISBLK(st.st_mode) ? "is a block device; outputs are never written to one"
            : S_ISSOCK(st.st_mode) ? "is a socket"
                                   : "is not a file an output can be written to";
  }
  return t;
}

// What makes two paths one file: device and inode where it exists, else the normalised
// absolute path.
struct Identity {
  bool exists = false;
  bool char_device = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string normalised;
};

Identity identity_of(const std::string& path) {
  Identity id;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0) {
    id.exists = true;
    id.char_device = S_ISCHR(st.st_mode);
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  id.normalised = ec ? path : p.lexically_normal().string();
  return id;
}

bool same_file(const Identity& a, const Identity& b) {
  if (a.char_device || b.char_device) return false;  // /dev/null twice loses nothing
  if (a.exists != b.exists) return false;
  return a.exists ? a.dev == b.dev && a.ino == b.ino : a.normalised == b.normalised;
}

// A name beside `path` that nobody can predict: ".NAME.tmp-<64 random bits>".
std::string temporary_name(const std::string& path) {
  const std::filesystem::path p(path);
  uint64_t r = 0;
  if (::getrandom(&r, sizeof r, 0) != ssize_t(sizeof r)) {
    r = uint64_t(::getpid()) << 32 ^ uint64_t(reinterpret_cast<uintptr_t>(&r));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return (p.parent_path() / ("." + p.filename().string() + ".tmp-" + hex)).string();
}

void sync_directory_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // the rename happened; durability of the entry is best effort
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

Status check_outputs(const std::vector<NamedPath>& inputs, const std::vector<NamedPath>& outputs) {
  std::vector<Identity> input_ids, output_ids;
  for (const NamedPath& in : inputs) input_ids.push_back(identity_of(in.path));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    const Target t = classify(out.path);
    if (t.kind == Target::refused) return invalid_input(out.option + " " + out.path + ": " + t.why);
    const Identity id = identity_of(out.path);
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (same_file(id, input_ids[k]))
        return invalid_input(out.option + " " + out.path + " is the same file as " +
                             inputs[k].option + " " + inputs[k].path +
                             ": refusing to overwrite an input");
    }
    for (size_t k = 0; k < i; ++k) {
      if (same_file(id, output_ids[k]))
        return invalid_input(outputs[k].option + " " + outputs[k].path + " and " + out.option + " " +
                             out.path + " are the same file: refusing to write both to it");
    }
    output_ids.push_back(id);
  }
  return Ok{};
}

Result<std::unique_ptr<OutputFile>> OutputFile::open(const std::string& path) {
  const Target t = classify(path);
  switch (t.kind) {
    case Target::refused:
      return make_error(path + ": " + t.why);
    case Target::unknown:
      return make_error(path + ": cannot create: " + t.why);
    case Target::descriptor: {
      const int fd = ::fcntl(t.fd, F_DUPFD_CLOEXEC, 3);
      if (fd < 0) return make_error(path + ": descriptor " + std::to_string(t.fd) + " is not open");
      return std::unique_ptr<OutputFile>(new OutputFile(path, "", fd));
    }
    case Target::in_place: {
      // Blocks on a FIFO until a reader opens it, as any writer of a FIFO does.
      const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
      if (fd < 0) return make_error(path + ": cannot open: " + errno_text(errno));
      // It must still be what we decided to write in place (not swapped for a file since).
      struct stat st{};
      if (::fstat(fd, &st) != 0 || !written_in_place(st.st_mode)) {
        ::close(fd);
        return make_error(path + ": changed while being opened; not written");
      }
      return std::unique_ptr<OutputFile>(new OutputFile(path, "", fd));
    }
    case Target::new_file:
    case Target::regular:
      break;
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    std::string temp = temporary_name(path);
    // 0666 less the umask, like any new file; a replaced file's own mode below.
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) return make_error(path + ": cannot create: " + errno_text(errno));
    if (t.kind == Target::regular) ::fchmod(fd, t.mode & 0777);
    return std::unique_ptr<OutputFile>(new OutputFile(path, std::move(temp), fd));
  }
  return make_error(path + ": cannot create a temporary file beside it");
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_path_.empty()) ::unlink(temp_path_.c_str());
}

Result<FILE*> OutputFile::open_stream() {
  const int fd = fd_ < 0 ? -1 : ::fcntl(fd_, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return make_error(path_ + ": cannot write: " + errno_text(errno));
  FILE* f = ::fdopen(fd, "w");
  if (f == nullptr) {
    const int e = errno;
    ::close(fd);
    return make_error(path_ + ": cannot write: " + errno_text(e));
  }
  return f;
}

Status OutputFile::commit() {
  if (fd_ < 0) return make_error(path_ + ": already committed");
  if (in_place()) {
    const int rc = ::close(fd_);
    fd_ = -1;
    if (rc != 0) return make_error(path_ + ": write failed: " + errno_text(errno));
    committed_ = true;
    return Ok{};
  }
  const bool synced = ::fsync(fd_) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd_) == 0;
  const int close_errno = errno;
  fd_ = -1;
  if (!synced || !closed)
    return make_error(path_ + ": write failed: " + errno_text(!synced ? sync_errno : close_errno));
  // Only a file, or nothing, is ever replaced: not a link, device or directory that appeared
  // at the final path while we wrote.
  const Target now = classify(path_);
  if (now.kind != Target::regular && now.kind != Target::new_file)
    return make_error(path_ + ": " + (now.why.empty() ? "changed while being written" : now.why) +
                      "; not replaced");
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0)
    return make_error(path_ + ": cannot create: " + errno_text(errno));
  committed_ = true;
  sync_directory_of(path_);
  return Ok{};
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  auto out = OutputFile::open(path);
  if (!out) return out.error();
  auto stream = (*out)->open_stream();
  if (!stream) return stream.error();
  FILE* f = *stream;
  const size_t n = std::fwrite(text.data(), 1, text.size(), f);
  int write_errno = errno;
  bool failed = n != text.size() || std::fflush(f) != 0;
  if (failed) write_errno = errno;
  if (std::fclose(f) != 0 && !failed) {
    failed = true;
    write_errno = errno;
  }
  if (failed) return make_error(path + ": write failed: " + errno_text(write_errno));
  return (*out)->commit();
}

}  // namespace sluice
