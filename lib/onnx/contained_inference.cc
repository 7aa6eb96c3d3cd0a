#include "lib/onnx/contained_inference.h"

#include <fcntl.h>
#include <onnx/shape_inference/implementation.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>

namespace memsim::onnx_import {
namespace {

constexpr unsigned kChildSeconds = 60;  // a model inference has not finished by then never will
constexpr uint64_t kMaxMessage = uint64_t{1} << 31;  // protobuf's own limit is 2 GiB

// Whole-buffer I/O on the worker's socket, retrying short transfers and EINTR. send() with
// MSG_NOSIGNAL: a worker that died must give the parent an error, not a SIGPIPE.
bool SendAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

/// Reads exactly |size| bytes; |timeout_ms| < 0 waits forever. false on EOF, error or timeout
/// (|*timed_out| set for the last).
bool RecvAll(int fd, void* data, size_t size, int timeout_ms, bool* timed_out) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (timeout_ms >= 0) {
      pollfd pfd{fd, POLLIN, 0};
      int r = poll(&pfd, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) {
        if (timed_out) *timed_out = true;
        return false;
      }
      if (r < 0) return false;
    }
    ssize_t n = recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool SendMessage(int fd, const std::string& bytes) {
  uint64_t n = bytes.size();
  return SendAll(fd, &n, sizeof n) && SendAll(fd, bytes.data(), bytes.size());
}

bool RecvMessage(int fd, std::string* bytes, int timeout_ms, bool* timed_out) {
  uint64_t n = 0;
  if (!RecvAll(fd, &n, sizeof n, timeout_ms, timed_out) || n > kMaxMessage) return false;
  bytes->resize(n);
  return RecvAll(fd, bytes->data(), n, timeout_ms, timed_out);
}

/// The worker's loop: each request is one byte (data propagation on/off) and a serialized
/// ModelProto; each answer the inferred value_info and outputs as a serialized GraphProto.
/// Exits when the parent closes its end. Never returns.
[[noreturn]] void ServeInference(int fd) {
  // libonnx's (or a sanitizer's) report of a fault is the worker's business: the parent says
  // what happened in one line.
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, STDERR_FILENO);
  // A fault or the alarm must end the worker with its signal: handlers inherited from the parent
  // (a sanitizer's or libFuzzer's, which write crash reports and artifacts, or a command's own
  // SIGTERM cleanup) are the parent's business, not the worker's.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGTERM, SIGINT, SIGXFSZ})
    signal(sig, SIG_DFL);
  for (;;) {
    char data_propagation = 0;
    std::string request;
    if (!RecvAll(fd, &data_propagation, 1, -1, nullptr) || !RecvMessage(fd, &request, -1, nullptr)) _exit(0);
    onnx::ModelProto model;
    if (!model.ParseFromString(request)) _exit(3);
    alarm(kChildSeconds);
    try {
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, data_propagation != 0));
    } catch (const std::exception&) {
      // As in-process: what inference filled in before failing is still used.
    }
    alarm(0);
    onnx::GraphProto out;
    *out.mutable_value_info() = model.graph().value_info();
    *out.mutable_output() = model.graph().output();
    std::string bytes;
    if (!out.SerializeToString(&bytes) || !SendMessage(fd, bytes)) _exit(4);
  }
}

/// One worker process, started on first use and kept for the next import (a fuzzer or a
/// program importing many models pays one fork, not one per model); restarted after it dies.
class InferenceWorker {
 public:
  ~InferenceWorker() { Stop(); }

  struct Outcome {
    bool ok = false;
    std::string how;  ///< why not ok: "signal 11 (Segmentation fault)", "exit 3"
    std::string bytes;
  };

  Outcome Infer(const std::string& model_bytes, bool data_propagation) {
    Outcome r;
    if (pid_ < 0 && !Start(&r.how)) return r;
    const char flag = data_propagation ? 1 : 0;
    bool timed_out = false;
    if (SendAll(fd_, &flag, 1) && SendMessage(fd_, model_bytes) &&
        RecvMessage(fd_, &r.bytes, static_cast<int>(kChildSeconds + 5) * 1000, &timed_out)) {
      r.ok = true;
      return r;
    }
    r.how = Reap(timed_out);
    return r;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;

  bool Start(std::string* how) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      *how = std::string("socketpair: ") + std::strerror(errno);
      return false;
    }
    pid_t pid = fork();
    if (pid < 0) {
      *how = std::string("fork: ") + std::strerror(errno);
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    if (pid == 0) {
      close(fds[0]);
      ServeInference(fds[1]);
    }
    close(fds[1]);
    pid_ = pid;
    fd_ = fds[0];
    return true;
  }

  /// The worker failed a request: kills it (if it hangs), waits for it and says how it ended.
  std::string Reap(bool timed_out) {
    if (timed_out) kill(pid_, SIGKILL);
    close(fd_);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    fd_ = -1;
    if (timed_out) return "no answer within " + std::to_string(kChildSeconds) + " s";
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      return sig == SIGALRM ? "no answer within " + std::to_string(kChildSeconds) + " s"
                            : "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    }
    return "exit " + std::to_string(WEXITSTATUS(status));
  }

  void Stop() {
    if (pid_ < 0) return;
    close(fd_);  // the worker reads EOF and exits
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
};

}  // namespace

Result<onnx::GraphProto> InferShapesContained(const onnx::ModelProto& model, const std::string& source) {
  static std::mutex mu;
  static InferenceWorker worker;
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Status::Unsupported(source + ": the model cannot be serialized for ONNX shape inference");
  std::lock_guard<std::mutex> lock(mu);
  std::string first_failure;
  for (bool data_propagation : {true, false}) {
    InferenceWorker::Outcome c = worker.Infer(bytes, data_propagation);
    onnx::GraphProto g;
    if (c.ok && g.ParseFromString(c.bytes)) return g;
    if (first_failure.empty()) first_failure = c.ok ? "unreadable answer" : c.how;
  }
  return Status::Unsupported(source + ": ONNX shape inference failed on this model (" + first_failure +
                             " inside libonnx, with and without data propagation); memsim cannot "
                             "read its shapes");
}

}  // namespace memsim::onnx_import
