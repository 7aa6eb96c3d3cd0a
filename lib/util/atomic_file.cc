#include "lib/util/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace memsim {
namespace {

std::string ErrnoText(int err) { return err != 0 ? std::strerror(err) : "unknown error"; }

}  // namespace

// Note [Output destinations]: one rule for every file memsim writes.
Result<std::string> OutputTarget(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {  // it exists, symlinks followed
    if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory: give a file name");
    if (!S_ISREG(st.st_mode)) return path;  // a FIFO, device or pipe (/dev/stdout): written in place
    // /dev/stdout, /dev/fd/N, /proc/self/fd/N: a descriptor already open (a shell's redirection),
    // written in place, never replaced under it.
    if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0) return path;
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return Status::InvalidArgument(path + ": cannot resolve (" + ErrnoText(errno) + ")");
    std::string resolved(real);
    std::free(real);
    return resolved;
  }
  // Missing, or a dangling symlink: the file its chain of links names is created.
  std::string target = path;
  for (int hops = 0;; ++hops) {
    struct stat st;
    if (::lstat(target.c_str(), &st) != 0) {
      if (errno == ENOENT) return target;  // a new file (or the missing file a symlink names)
      return Status::InvalidArgument(path + ": cannot write (" + ErrnoText(errno) + ")");
    }
    if (S_ISDIR(st.st_mode)) return Status::InvalidArgument(path + ": is a directory: give a file name");
    if (!S_ISLNK(st.st_mode)) return target;
    if (hops == 8) return Status::InvalidArgument(path + ": too many levels of symbolic links");
    char buf[4096];
    const ssize_t n = ::readlink(target.c_str(), buf, sizeof buf - 1);
    if (n < 0) return Status::InvalidArgument(path + ": cannot read the symbolic link (" + ErrnoText(errno) + ")");
    std::string next(buf, static_cast<size_t>(n));
    const size_t slash = target.rfind('/');
    if (next.empty() || next[0] != '/') next = (slash == std::string::npos ? "" : target.substr(0, slash + 1)) + next;
    target = next;
  }
}

Result<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path) {
  MEMSIM_ASSIGN_OR_RETURN(const std::string target, OutputTarget(path));
  struct stat st;
  if (::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    // A FIFO or device (/dev/stdout, /dev/null) cannot be renamed over: written in place, checked.
    std::FILE* f = std::fopen(target.c_str(), "wb");
    if (f == nullptr) return Status::InvalidArgument(path + ": cannot write (" + ErrnoText(errno) + ")");
    return AtomicFileWriter(path, std::string(), f);
  }
  static std::atomic<int> counter{0};
  const std::string temp = target + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter.fetch_add(1));
  std::FILE* f = std::fopen(temp.c_str(), "wbx");  // x: never clobber an existing file
  if (f == nullptr)
    return Status::InvalidArgument(path + ": cannot create output file (" + ErrnoText(errno) +
                                   ")");
  return AtomicFileWriter(path, temp, f, target);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), temp_(std::move(o.temp_)), target_(std::move(o.target_)), f_(std::exchange(o.f_, nullptr)),
      error_(std::move(o.error_)) {
  o.temp_.clear();
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& o) noexcept {
  if (this != &o) {
    Abandon();
    path_ = std::move(o.path_);
    temp_ = std::exchange(o.temp_, std::string());
    target_ = std::move(o.target_);
    f_ = std::exchange(o.f_, nullptr);
    error_ = std::move(o.error_);
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (f_ != nullptr) std::fclose(f_);
  f_ = nullptr;
  if (!temp_.empty()) std::remove(temp_.c_str());
  temp_.clear();
}

Status AtomicFileWriter::Fail(const std::string& what) {
  if (error_.ok())
    error_ = Status::InvalidArgument(path_ + ": " + what + " failed (" + ErrnoText(errno) + ")");
  return error_;
}

Status AtomicFileWriter::Write(std::string_view data) {
  if (!error_.ok()) return error_;
  if (f_ == nullptr) return Fail("write after commit");
  if (!data.empty() && std::fwrite(data.data(), 1, data.size(), f_) != data.size())
    return Fail("write");
  return Status::OK();
}

Status AtomicFileWriter::Commit() {
  if (!error_.ok()) return error_;
  if (f_ == nullptr) return Fail("commit of a closed file");
  if (std::fflush(f_) != 0) return Fail("write");
  if (::fsync(::fileno(f_)) != 0 && errno != EINVAL && errno != EROFS) return Fail("sync");
  std::FILE* f = std::exchange(f_, nullptr);
  if (std::fclose(f) != 0) return Fail("close");
  if (temp_.empty()) return Status::OK();  // a FIFO or device, written in place
  if (std::rename(temp_.c_str(), target_.c_str()) != 0) return Fail("rename");
  temp_.clear();  // committed: nothing to remove
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view content) {
  MEMSIM_ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Open(path));
  MEMSIM_RETURN_IF_ERROR(w.Write(content));
  return w.Commit();
}

Status WriteStdout(std::string_view content, std::FILE* stream) {
  errno = 0;
  if (!content.empty() && std::fwrite(content.data(), 1, content.size(), stream) != content.size())
    return Status::InvalidArgument("standard output: write failed (" + ErrnoText(errno) + ")");
  if (std::fflush(stream) != 0 || std::ferror(stream))
    return Status::InvalidArgument("standard output: write failed (" + ErrnoText(errno) + ")");
  return Status::OK();
}

}  // namespace memsim
