#include "lib/util/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>

namespace memsim {
namespace {

std::string ErrnoText(int err) { return err != 0 ? std::strerror(err) : "unknown error"; }

}  // namespace

Result<AtomicFileWriter> AtomicFileWriter::Open(const std::string& path) {
  static std::atomic<int> counter{0};
  const std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                           std::to_string(counter.fetch_add(1));
  std::FILE* f = std::fopen(temp.c_str(), "wbx");  // x: never clobber an existing file
  if (f == nullptr)
    return Status::InvalidArgument(path + ": cannot create output file (" + ErrnoText(errno) +
                                   ")");
  return AtomicFileWriter(path, temp, f);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& o) noexcept
    : path_(std::move(o.path_)), temp_(std::move(o.temp_)), f_(std::exchange(o.f_, nullptr)),
      error_(std::move(o.error_)) {
  o.temp_.clear();
}

AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& o) noexcept {
  if (this != &o) {
    Abandon();
    path_ = std::move(o.path_);
    temp_ = std::exchange(o.temp_, std::string());
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
  if (std::rename(temp_.c_str(), path_.c_str()) != 0) return Fail("rename");
  temp_.clear();  // committed: nothing to remove
  return Status::OK();
}

Status WriteFileAtomic(const std::string& path, std::string_view content) {
  // A device or pipe (/dev/stdout, a FIFO) cannot be renamed over: write it in place, checked.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return Status::InvalidArgument(path + ": cannot write (" + ErrnoText(errno) + ")");
    Status written = WriteStdout(content, f);
    if (std::fclose(f) != 0 && written.ok()) return Status::InvalidArgument(path + ": close failed (" + ErrnoText(errno) + ")");
    if (!written.ok()) return Status::InvalidArgument(path + ": write failed");
    return Status::OK();
  }
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
