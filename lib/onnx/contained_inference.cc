#include "lib/onnx/contained_inference.h"

#include <onnx/shape_inference/implementation.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>

namespace memsim::onnx_import {
namespace {

constexpr unsigned kChildSeconds = 60;  // a model inference has not finished by then never will

/// In the child: infers shapes on |model| (a copy-on-write copy of the parent's) and writes
/// the inferred value_info and outputs to |fd|. Never returns.
[[noreturn]] void InferInChild(onnx::ModelProto model, bool data_propagation, int fd) {
  alarm(kChildSeconds);
  try {
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(false, 0, data_propagation));
  } catch (const std::exception&) {
    // As in-process: what inference filled in before failing is still used.
  }
  onnx::GraphProto out;
  *out.mutable_value_info() = model.graph().value_info();
  *out.mutable_output() = model.graph().output();
  std::string bytes;
  if (!out.SerializeToString(&bytes)) _exit(3);
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4);
    p += n;
    left -= static_cast<size_t>(n);
  }
  _exit(0);
}

struct ChildOutcome {
  bool ok = false;
  std::string how;  ///< why not ok: "signal 11 (Segmentation fault)", "exit 3"
  std::string bytes;
};

ChildOutcome RunChild(const onnx::ModelProto& model, bool data_propagation) {
  ChildOutcome r;
  int fds[2];
  if (pipe(fds) != 0) {
    r.how = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  pid_t pid = fork();
  if (pid < 0) {
    r.how = std::string("fork: ") + std::strerror(errno);
    close(fds[0]);
    close(fds[1]);
    return r;
  }
  if (pid == 0) {
    close(fds[0]);
    InferInChild(model, data_propagation, fds[1]);
  }
  close(fds[1]);
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.bytes.append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    r.ok = true;
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    r.how = sig == SIGALRM ? "no answer within " + std::to_string(kChildSeconds) + " s"
                           : "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  } else {
    r.how = "exit " + std::to_string(WEXITSTATUS(status));
  }
  return r;
}

}  // namespace

Result<onnx::GraphProto> InferShapesContained(const onnx::ModelProto& model, const std::string& source) {
  std::string first_failure;
  for (bool data_propagation : {true, false}) {
    ChildOutcome c = RunChild(model, data_propagation);
    onnx::GraphProto g;
    if (c.ok && g.ParseFromString(c.bytes)) return g;
    if (first_failure.empty()) first_failure = c.ok ? "unreadable answer" : c.how;
  }
  return Status::Unsupported(source + ": ONNX shape inference failed on this model (" + first_failure +
                             " inside libonnx, with and without data propagation); memsim cannot "
                             "read its shapes");
}

}  // namespace memsim::onnx_import
