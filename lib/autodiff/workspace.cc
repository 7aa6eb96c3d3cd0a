#include "lib/autodiff/workspace.h"

namespace memsim {

void LibraryWorkspaces::OnGemm(Thread thread, Ledger* ledger) {
  if (bytes_ <= 0 || ws_[thread]) return;
  ws_[thread] = ledger->Alloc(bytes_, thread == kMainThread ? "cuBLAS workspace" : "cuBLAS workspace (autograd thread)",
                              Category::kWorkspace);
}

void LibraryWorkspaces::CreateFromEarlierStep(Ledger* ledger) {
  OnGemm(kMainThread, ledger);
  OnGemm(kAutogradThread, ledger);
}

}  // namespace memsim
