// Runs the real `sluiced --replay` binary on files the test writes, and reads back what it
// produced: exit status, stderr, OUT.pcap and REPORT.json. Each test gets its own temporary
// directory, removed when the test ends.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "mini_json.hpp"
#include "replay/pcap_io.hpp"

extern char** environ;

namespace sluice::testing {

inline std::string env_or_die(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0')
    throw std::runtime_error(std::string("environment variable ") + name +
                             " is not set (run through `meson test`)");
  return v;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-e2e-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ProcessResult {
  int exit_code = -1;  // -1: killed by a signal
  std::string err;     // stderr
};

// Runs argv[0] with argv, stdout discarded, stderr captured.
inline ProcessResult run_process(const std::vector<std::string>& argv, const TempDir& dir) {
  std::string err_path = dir.file("stderr.txt");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot run " + argv[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ProcessResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.err = read_file(err_path);
  return r;
}

struct Frame {
  uint64_t ts_ns = 0;
  std::vector<uint8_t> bytes;
};

inline void write_pcap(const std::string& path, const std::vector<Frame>& frames) {
  auto w = PcapWriter::create(path);
  if (!w) throw std::runtime_error(w.error().message);
  for (const Frame& f : frames) {
    if (!(*w)->write(f.ts_ns, f.bytes.data(), uint32_t(f.bytes.size())))
      throw std::runtime_error("write failed");
  }
  if (!(*w)->close()) throw std::runtime_error("close failed");
}

inline std::vector<Frame> read_pcap(const std::string& path) {
  auto r = PcapReader::open(path);
  if (!r) throw std::runtime_error(r.error().message);
  std::vector<Frame> out;
  PcapPacket p;
  for (;;) {
    auto more = (*r)->next(&p);
    if (!more) throw std::runtime_error(more.error().message);
    if (!more.value()) break;
    out.push_back(Frame{p.ts_ns, p.data});
  }
  return out;
}

// One replay: the test writes rules and input, run() executes sluiced, and the accessors
// read the results.
class Replay {
 public:
  Replay() : sluiced_(env_or_die("SLUICED")) {}

  std::string in() const { return dir_.file("in.pcap"); }
  std::string out() const { return dir_.file("out.pcap"); }
  std::string report() const { return dir_.file("report.json"); }
  std::string rules() const { return dir_.file("rules.yaml"); }
  const TempDir& dir() const { return dir_; }

  void set_rules(const std::string& yaml) { write_file(rules(), yaml); }
  void set_input(const std::vector<Frame>& frames) { write_pcap(in(), frames); }

  ProcessResult run(std::vector<std::string> extra = {"--hash-seed", "12345"}) {
    std::vector<std::string> argv = {sluiced_, "--replay", in(),    "--out",    out(),
                                     "--report", report(), "--config", rules()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv, dir_);
  }

  std::vector<Frame> output() const { return read_pcap(out()); }
  Json report_json() const { return Json::parse(read_file(report())); }

  // The counters of one rule (or "default") from REPORT.json.
  Json rule(const std::string& name) const {
    Json r = report_json();
    if (name == "default") return r.at("default");
    for (const Json& j : r.at("rules").items)
      if (j.at("name").str == name) return j;
    throw std::runtime_error("no rule \"" + name + "\" in REPORT.json");
  }

 private:
  std::string sluiced_;
  TempDir dir_;
};

}  // namespace sluice::testing
