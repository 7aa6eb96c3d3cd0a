// The training setups a configuration asks for, as data (SetupOptions, carried in StepConfig)
// and the factory that makes a fresh set of setup objects for one simulated step. Each setup
// is one file in this folder, plugged into the step's hook points (lib/autodiff/setup.h).
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_

#include <memory>
#include <string>
#include <vector>

#include "lib/autodiff/setup.h"
#include "lib/ops/profile.h"

namespace memsim {

struct SetupOptions {
  /// torch.nn.utils.clip_grad_norm_(params, max_norm) before optimizer.step(); 0 = off.
  double clip_grad_norm = 0;
  /// torch.utils.checkpoint (non-reentrant) around the forward of each of these modules
  /// (dotted module paths; a module inside another one listed is part of the outer one).
  std::vector<std::string> checkpoint_modules;
  /// torch.autocast around forward and loss (the dtypes are bound: BindOptions::autocast).
  bool autocast = false;
  /// torch.amp.GradScaler: scale(loss).backward(), step() (unscale_), update().
  bool grad_scaler = false;
};

/// One object per enabled setup, in hook order.
std::vector<std::unique_ptr<TrainingSetup>> MakeSetups(const SetupOptions& options, const Profile& profile);

// The setups (one file each).
std::unique_ptr<TrainingSetup> MakeClipGradNorm(const Profile& profile);           // clip_grad_norm.cc
std::unique_ptr<TrainingSetup> MakeCheckpoint(const std::vector<std::string>& modules);  // checkpoint.cc
std::unique_ptr<TrainingSetup> MakeAutocast();                                     // autocast.cc
std::unique_ptr<TrainingSetup> MakeGradScaler();                                   // grad_scaler.cc

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_SETUPS_H_
