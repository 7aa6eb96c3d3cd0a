// Library workspaces that live for the whole process once created: cuBLAS allocates one per
// handle (one per thread that runs GEMMs) through the caching allocator, inside the thread's
// first GEMM right after that GEMM's output, and never frees it; cuBLASLt one more at the
// thread's first Lt GEMM (a GEMM with a bias epilogue). Driven by the profile's
// cublas_workspace_bytes and cublaslt_workspace_bytes (0 on CPU: none). See Note [cuBLAS
// workspace] in docs/op-rules.md.
#ifndef MEMSIM_LIB_AUTODIFF_WORKSPACE_H_
#define MEMSIM_LIB_AUTODIFF_WORKSPACE_H_

#include <optional>
#include <vector>

#include "lib/ir/graph.h"
#include "lib/ops/profile.h"
#include "lib/stream/ledger.h"

namespace memsim {

/// A GEMM that runs through cuBLASLt on CUDA: linear with a bias (addmm's `gemm_and_bias`
/// epilogue, 2-d or folded N-d input; ATen Blas.cpp addmm_out_cuda_impl useLtInterface).
bool IsLtGemm(const Op& op);

class LibraryWorkspaces {
 public:
  /// The thread a GEMM runs on: Python's (forward, optimizer) or the autograd engine's device
  /// thread (backward), each with its own cuBLAS handle.
  enum Thread : int { kMainThread = 0, kAutogradThread = 1 };

  explicit LibraryWorkspaces(const Profile& p)
      : bytes_(p.cublas_workspace_bytes), lt_bytes_(p.cublaslt_workspace_bytes) {}

  /// A GEMM runs on |thread|: its handle's workspace is created now if it does not exist yet;
  /// |lt|: a cuBLASLt GEMM, whose own workspace follows.
  void OnGemm(Thread thread, Ledger* ledger, bool lt = false);
  /// A steady step: both handles were created by an earlier step, before this one starts (and
  /// the main thread's cuBLASLt workspace when the step runs Lt GEMMs, |lt|).
  void CreateFromEarlierStep(Ledger* ledger, bool lt);
  /// The workspace of |thread|, if created.
  const std::optional<Ledger::StorageId>& of(Thread thread) const { return ws_[thread]; }
  /// The cuBLASLt workspace of |thread|, if created.
  const std::optional<Ledger::StorageId>& lt_of(Thread thread) const { return lt_[thread]; }

 private:
  int64_t bytes_, lt_bytes_;
  std::optional<Ledger::StorageId> ws_[2], lt_[2];
};

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_WORKSPACE_H_
