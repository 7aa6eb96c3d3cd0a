#include "lib/stream/ledger.h"

#include <algorithm>

#include "lib/util/check.h"
#include "lib/util/checked.h"

namespace memsim {

Ledger::StorageId Ledger::Alloc(int64_t bytes, std::string_view name, Category category,
                                std::string_view module) {
  MEMSIM_CHECK(bytes >= 0);
  StorageId id = static_cast<StorageId>(stream_.buffers.size());
  if (names_) stream_.buffers.push_back(Buffer{std::string(name), bytes, category, op_, std::string(module), side_stream_});
  else stream_.buffers.push_back(Buffer{std::string(), bytes, category, op_, std::string(), side_stream_});
  refs_.push_back(1);
  if (too_large_ == UINT32_MAX) {
    if (bytes > kMaxTensorBytes || requested_ > kMaxTotalBytes - bytes) too_large_ = id;
    else requested_ += bytes;
  }
  if (bytes > 0) Emit(EventKind::kAlloc, id);
  return id;
}

Status Ledger::CheckBytes() const {
  if (too_large_ == UINT32_MAX) return Status::OK();
  const Buffer& b = stream_.buffers[too_large_];
  std::string what = names_ ? "tensor \"" + b.name + "\"" : "buffer " + std::to_string(too_large_);
  if (b.bytes > kMaxTensorBytes)
    return Status::InvalidArgument(what + ": " + std::to_string(b.bytes) +
                                   " bytes is more than memsim models (2^50 bytes = 1 PiB)");
  return Status::InvalidArgument(what + ": the bytes requested by the whole step exceed 2^62; the totals "
                                        "would overflow 64-bit arithmetic");
}

Ledger::StorageId Ledger::AllocJoined(int64_t bytes, std::initializer_list<std::string_view> name_parts,
                                      Category category, std::string_view module) {
  if (!names_) return Alloc(bytes, {}, category);
  std::string joined;
  for (std::string_view p : name_parts) joined.append(p);
  return Alloc(bytes, joined, category, module);
}

void Ledger::Emit(EventKind kind, StorageId s) {
  stream_.events.push_back(MemEvent{kind, phase_, s, op_});
  if (stream_.events.size() == probe_at_ + 1 && probe_) probe_();
}

std::vector<Ledger::StorageId> Ledger::Live() const {
  std::vector<StorageId> live;
  for (StorageId s = 0; s < refs_.size(); ++s)
    if (refs_[s] > 0 && stream_.buffers[s].bytes > 0) live.push_back(s);
  return live;
}

Ledger::StorageId Ledger::AllocHost(int64_t bytes, std::string_view name, int64_t held) {
  StorageId id = Alloc(0, name, Category::kActivation);
  if (held == 0) held = bytes;
  host_.push_back({id, bytes, held});
  AddHostBytes(held);
  return id;
}

void Ledger::Unref(StorageId s) {
  MEMSIM_CHECK(refs_[s] > 0);
  if (--refs_[s] != 0) return;
  if (stream_.buffers[s].bytes > 0) Emit(EventKind::kFree, s);
  if (host_.empty()) return;
  auto it = std::find_if(host_.begin(), host_.end(), [s](const HostStorage& h) { return h.id == s; });
  if (it == host_.end()) return;
  AddHostBytes(-it->held);
  host_.erase(it);
}

}  // namespace memsim
