#include "lib/autodiff/workspace.h"

namespace memsim {

void LibraryWorkspaces::OnGemm(Thread thread, Ledger* ledger, bool lt) {
  if (bytes_ > 0 && !ws_[thread])
    ws_[thread] = ledger->Alloc(bytes_, thread == kMainThread ? "cuBLAS workspace" : "cuBLAS workspace (autograd thread)",
                                Category::kWorkspace);
  if (lt && lt_bytes_ > 0 && !lt_[thread])
    lt_[thread] = ledger->Alloc(lt_bytes_, thread == kMainThread ? "cuBLASLt workspace" : "cuBLASLt workspace (autograd thread)",
                                Category::kWorkspace);
}

void LibraryWorkspaces::CreateFromEarlierStep(Ledger* ledger, bool lt) {
  OnGemm(kMainThread, ledger, lt);
  OnGemm(kAutogradThread, ledger);
}

bool IsLtGemm(const Op& op) { return op.kind == OpKind::kLinear && op.inputs.size() == 3; }

}  // namespace memsim
