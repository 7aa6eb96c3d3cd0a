#include "lib/analysis/ledger.h"

#include "lib/util/check.h"

namespace memsim {

Ledger::StorageId Ledger::Alloc(int64_t bytes, std::string name, Category category,
                                std::string module) {
  MEMSIM_CHECK(bytes >= 0);
  StorageId id = static_cast<StorageId>(stream_.buffers.size());
  stream_.buffers.push_back(Buffer{std::move(name), bytes, category, op_, std::move(module)});
  refs_.push_back(1);
  if (bytes > 0) stream_.events.push_back(MemEvent{EventKind::kAlloc, phase_, id, op_});
  return id;
}

void Ledger::Unref(StorageId s) {
  MEMSIM_CHECK(refs_[s] > 0);
  if (--refs_[s] == 0 && stream_.buffers[s].bytes > 0)
    stream_.events.push_back(MemEvent{EventKind::kFree, phase_, s, op_});
}

}  // namespace memsim
