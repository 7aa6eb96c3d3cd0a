// Library workspaces that live for the whole process once created: cuBLAS allocates one per
// handle (one per thread that runs GEMMs) through the caching allocator, inside the thread's
// first GEMM right after that GEMM's output, and never frees it. Driven by the profile's
// cublas_workspace_bytes (0 on CPU: none). See Note [cuBLAS workspace] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_WORKSPACE_H_
#define MEMSIM_LIB_AUTODIFF_WORKSPACE_H_

#include <optional>
#include <vector>

#include "lib/ops/profile.h"
#include "lib/stream/ledger.h"

namespace memsim {

class LibraryWorkspaces {
 public:
  /// The thread a GEMM runs on: Python's (forward, optimizer) or the autograd engine's device
  /// thread (backward), each with its own cuBLAS handle.
  enum Thread : int { kMainThread = 0, kAutogradThread = 1 };

  explicit LibraryWorkspaces(const Profile& p) : bytes_(p.cublas_workspace_bytes) {}

  /// A GEMM runs on |thread|: its handle's workspace is created now if it does not exist yet.
  void OnGemm(Thread thread, Ledger* ledger);
  /// A steady step: both handles were created by an earlier step, before this one starts.
  void CreateFromEarlierStep(Ledger* ledger);
  /// The workspace of |thread|, if created.
  const std::optional<Ledger::StorageId>& of(Thread thread) const { return ws_[thread]; }

 private:
  int64_t bytes_;
  std::optional<Ledger::StorageId> ws_[2];
};

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_WORKSPACE_H_
