// Ledger: reference-counted storages, the way PyTorch frees a tensor's memory when its last
// holder (a Python name, an autograd node, a grad buffer, optimizer state) lets go. Every
// allocation and final release is appended to an EventStream tagged with the current phase and
// op. One Ledger per simulated step; not shared between threads.
#ifndef MEMSIM_LIB_STREAM_LEDGER_H_
#define MEMSIM_LIB_STREAM_LEDGER_H_

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/stream/events.h"
#include "lib/util/status.h"

namespace memsim {

class Ledger {
 public:
  using StorageId = uint32_t;

  /// Allocates a storage with one reference. Zero-byte storages are tracked but emit nothing
  /// (PyTorch's allocators are not called for them).
  StorageId Alloc(int64_t bytes, std::string_view name, Category category, std::string_view module = {});
  /// Alloc named by the concatenation of |name_parts| (joined only when names are recorded).
  StorageId AllocJoined(int64_t bytes, std::initializer_list<std::string_view> name_parts, Category category,
                        std::string_view module = {});
  /// false: buffers keep no name and no module (a sweep's rows need only the sizes and the order;
  /// Note [Compiled step] in docs/sweeps.md). Set before the first Alloc.
  void set_record_names(bool on) { names_ = on; }
  bool record_names() const { return names_; }
  /// Reserves room for about |buffers| buffers and |events| events.
  void Reserve(size_t buffers, size_t events) {
    stream_.buffers.reserve(buffers);
    stream_.events.reserve(events);
    refs_.reserve(buffers);
  }
  void Ref(StorageId s) { ++refs_[s]; }
  /// Drops one reference; the storage is freed when none remain.
  void Unref(StorageId s);
  int refs(StorageId s) const { return refs_[s]; }
  int64_t bytes(StorageId s) const { return stream_.buffers[s].bytes; }
  /// The storage's buffer name ("" when names are not recorded).
  std::string_view name(StorageId s) const { return stream_.buffers[s].name; }

  void set_phase(Phase p) { phase_ = p; }
  void set_op(uint32_t op) { op_ = op; }
  /// The stream the next allocations are made on (Buffer::stream; 0: the current stream).
  void set_side_stream(uint8_t stream) { side_stream_ = stream; }
  /// A new training step starts with the next event (EventStream::step_starts).
  void MarkStep() { stream_.step_starts.push_back(stream_.events.size()); }
  /// A pipeline schedule's action starts with the next event (EventStream::actions).
  void MarkAction(std::string label) { stream_.actions.push_back({stream_.events.size(), std::move(label)}); }
  uint32_t op() const { return op_; }

  /// Calls |probe| right after event number |event_index| is emitted (to inspect the state at
  /// that moment, e.g. the peak).
  void set_probe(size_t event_index, std::function<void()> probe) {
    probe_at_ = event_index;
    probe_ = std::move(probe);
  }
  /// A tensor packed off the device into host memory (torch.autograd.graph.save_on_cpu): a
  /// storage with references like any other, but no device event; its |bytes| count toward
  /// EventStream::host_bytes until its last reference goes.
  /// |held|: the bytes the host allocator holds for it (the pinned CachingHostAllocator rounds
  /// a request up to a power of two; 0 = |bytes|), what host_bytes counts.
  StorageId AllocHost(int64_t bytes, std::string_view name, int64_t held = 0);
  /// The host bytes of a storage made by AllocHost (0 for a device storage).
  int64_t host_bytes(StorageId s) const {
    auto it = std::find_if(host_.begin(), host_.end(), [s](const HostStorage& h) { return h.id == s; });
    return it == host_.end() ? 0 : it->bytes;
  }
  /// Host memory held outside the device stream (offloaded state): |bytes| more (or less).
  void AddHostBytes(int64_t bytes) {
    host_now_ += bytes;
    stream_.host_bytes = std::max(stream_.host_bytes, host_now_);
  }
  /// Storages alive now.
  std::vector<StorageId> Live() const;

  /// Every storage is at most kMaxTensorBytes and their sum at most kMaxTotalBytes (so no byte
  /// total of the stream can overflow); otherwise an error naming the first storage past it.
  Status CheckBytes() const;

  EventStream Finish() && { return std::move(stream_); }

 private:
  EventStream stream_;
  std::vector<int> refs_;
  Phase phase_ = Phase::kSetup;
  uint32_t op_ = kNoOp;
  uint8_t side_stream_ = 0;
  int64_t host_now_ = 0;
  struct HostStorage {
    StorageId id;
    int64_t bytes, held;
  };
  std::vector<HostStorage> host_;  ///< AllocHost's storages still referenced
  int64_t requested_ = 0;                ///< sum of the bytes of every storage so far
  StorageId too_large_ = UINT32_MAX;     ///< the first storage past the limits of CheckBytes
  bool names_ = true;
  size_t probe_at_ = SIZE_MAX;
  std::function<void()> probe_;

  void Emit(EventKind kind, StorageId s);
};

}  // namespace memsim

#endif  // MEMSIM_LIB_STREAM_LEDGER_H_
