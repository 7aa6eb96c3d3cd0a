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

/// A fault or the alarm must end a child with its signal: handlers inherited from the parent (a
/// sanitizer's or libFuzzer's, which write crash reports and artifacts, or a command's own
/// SIGTERM cleanup) are the parent's business, not the child's.
void ResetSignals() {
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM, SIGTERM, SIGINT, SIGXFSZ})
    signal(sig, SIG_DFL);
}

/// The worker's loop: each request is one byte (data propagation on/off) and a serialized
/// ModelProto; each answer the inferred value_info and outputs as a serialized GraphProto.
/// Exits when its supervisor closes its end. Never returns.
[[noreturn]] void ServeInference(int fd) {
  // libonnx's (or a sanitizer's) report of a fault is the worker's business: the parent says
  // what happened in one line.
  int devnull = open("/dev/null", O_WRONLY);
  if (devnull >= 0) dup2(devnull, STDERR_FILENO);
  ResetSignals();
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

/// A child process at the other end of a socket, serving requests (a flag byte and a message)
/// with one message each; stopped by closing the socket.
class Child {
 public:
  ~Child() { Stop(); }
  bool running() const { return pid_ >= 0; }

  /// Forks a child running |serve(fd)| (which never returns); the child first closes
  /// |close_in_child| (-1: none), a socket of its parent's that must not outlive the parent.
  bool Start(void (*serve)(int), int close_in_child, std::string* how) {
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
      if (close_in_child >= 0) close(close_in_child);
      serve(fds[1]);
    }
    close(fds[1]);
    pid_ = pid;
    fd_ = fds[0];
    return true;
  }

  /// One request and its answer. false: the child failed it (it is then reaped, and |how| says
  /// how it ended).
  bool Exchange(char flag, const std::string& request, int timeout_ms, std::string* answer, std::string* how) {
    bool timed_out = false;
    if (SendAll(fd_, &flag, 1) && SendMessage(fd_, request) && RecvMessage(fd_, answer, timeout_ms, &timed_out))
      return true;
    *how = Reap(timed_out);
    return false;
  }

  void Stop() {
    if (pid_ >= 0) End(false);  // the child reads EOF and exits
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;

  /// Closes the socket (after killing the child if |kill_first|), waits for the child and
  /// returns its wait status.
  int End(bool kill_first) {
    if (kill_first) kill(pid_, SIGKILL);
    close(fd_);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    fd_ = -1;
    return status;
  }

  /// The child failed a request: kills it (if it hangs), waits for it and says how it ended.
  std::string Reap(bool timed_out) {
    const int status = End(timed_out);
    if (timed_out) return "no answer within " + std::to_string(kChildSeconds) + " s";
    if (WIFSIGNALED(status)) {
      int sig = WTERMSIG(status);
      return sig == SIGALRM ? "no answer within " + std::to_string(kChildSeconds) + " s"
                            : "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    }
    return "exit " + std::to_string(WEXITSTATUS(status));
  }
};

/// The supervisor's loop: relays each request to its worker (forked from the supervisor, which
/// stays small, and replaced after a fault) and answers with a status byte (0: the worker's
/// answer follows; 1: how the worker ended). Exits when the parent closes its end.
[[noreturn]] void Supervise(int fd) {
  ResetSignals();
  Child worker;
  for (;;) {
    char flag = 0;
    std::string request;
    if (!RecvAll(fd, &flag, 1, -1, nullptr) || !RecvMessage(fd, &request, -1, nullptr)) break;
    std::string answer, how;
    const bool ok = (worker.running() || worker.Start(ServeInference, fd, &how)) &&
                    worker.Exchange(flag, request, static_cast<int>(kChildSeconds + 5) * 1000, &answer, &how);
    if (!SendMessage(fd, std::string(1, ok ? '\0' : '\1') + (ok ? answer : how))) break;
  }
  worker.Stop();
  _exit(0);
}

/// The inference service: a supervisor process started on first use and kept (a fuzzer or a
/// program importing many models pays one fork of itself, not one per model or per fault: a
/// worker that faults is replaced by the supervisor, whose fork copies a small process, not this
/// one); restarted if the supervisor itself dies.
class InferenceService {
 public:
  struct Outcome {
    bool ok = false;
    std::string how;  ///< why not ok: "signal 11 (Segmentation fault)", "exit 3"
    std::string bytes;
  };

  Outcome Infer(const std::string& model_bytes, bool data_propagation) {
    Outcome r;
    if (!supervisor_.running() && !supervisor_.Start(Supervise, -1, &r.how)) return r;
    std::string answer;
    if (!supervisor_.Exchange(data_propagation ? 1 : 0, model_bytes, static_cast<int>(kChildSeconds + 15) * 1000,
                              &answer, &r.how)) {
      r.how = "the inference supervisor ended: " + r.how;
      return r;
    }
    if (answer.empty()) {
      r.how = "an empty answer";
      return r;
    }
    r.ok = answer[0] == 0;
    (r.ok ? r.bytes : r.how) = answer.substr(1);
    return r;
  }

 private:
  Child supervisor_;
};

}  // namespace

Result<onnx::GraphProto> InferShapesContained(const onnx::ModelProto& model, const std::string& source) {
  static std::mutex mu;
  static InferenceService service;
  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return Status::Unsupported(source + ": the model cannot be serialized for ONNX shape inference");
  std::lock_guard<std::mutex> lock(mu);
  std::string first_failure;
  for (bool data_propagation : {true, false}) {
    InferenceService::Outcome c = service.Infer(bytes, data_propagation);
    onnx::GraphProto g;
    if (c.ok && g.ParseFromString(c.bytes)) return g;
    if (first_failure.empty()) first_failure = c.ok ? "unreadable answer" : c.how;
  }
  return Status::Unsupported(source + ": ONNX shape inference failed on this model (" + first_failure +
                             " inside libonnx, with and without data propagation); memsim cannot "
                             "read its shapes");
}

}  // namespace memsim::onnx_import
