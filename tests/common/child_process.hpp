// Runs a command for the binary-level tests: stdout and stderr captured through pipes, read
// while it runs (so a test can wait for a line), a signal to stop it, and the exit status.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sluice::testing {

class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv) {
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      dup2(out[1], 1);
      dup2(err[1], 2);
      close(out[0]);
      close(err[0]);
      close(out[1]);
      close(err[1]);
      std::vector<char*> args;
      for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    fcntl(out_fd_, F_SETFL, O_NONBLOCK);
    fcntl(err_fd_, F_SETFL, O_NONBLOCK);
  }
  ~ChildProcess() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);  // only our own child, by its pid
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Reads output until pred(stdout) holds or the timeout passes; false on timeout or exit.
  bool wait_for_output(const std::function<bool(const std::string&)>& pred,
                       std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (!pred(out_)) {
      if (std::chrono::steady_clock::now() > end || !pump(50)) return pred(out_);
    }
    return true;
  }

  void signal(int sig) { kill(pid_, sig); }

  // Waits for the exit (reading output meanwhile); the exit code, or 128 + signal, or -1 if it
  // is still running at the timeout.
  int wait_exit(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (status_ < 0) {
      pump(20);
      int st;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        break;
      }
      if (std::chrono::steady_clock::now() > end) return -1;
    }
    while (pump(0)) {
    }
    return status_;
  }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // One poll round; false once both pipes are closed.
  bool pump(int timeout_ms) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (poll(fds, 2, timeout_ms) < 0) return false;
    bool open = false;
    open |= drain(out_fd_, out_);
    open |= drain(err_fd_, err_);
    return open;
  }
  static bool drain(int fd, std::string& into) {
    char buf[4096];
    for (;;) {
      const ssize_t n = read(fd, buf, sizeof buf);
      if (n > 0) {
        into.append(buf, size_t(n));
        continue;
      }
      return n < 0;  // EAGAIN: still open; 0: closed
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  int status_ = -1;
  std::string out_, err_;
};

}  // namespace sluice::testing
