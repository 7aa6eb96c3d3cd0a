// Pipeline parallel, one stage rank (Note [Pipeline parallel] in docs/parallel.md): the split of
// a graph into stages at its repeated blocks, as torchtitan's pipeline_llm makes it, and the
// setup that gives the stage rank only its own parameters, buffers, inputs and optimizer state.
// The schedule itself is the step engine's (lib/autodiff/pipeline.h).
#ifndef MEMSIM_LIB_AUTODIFF_SETUPS_PIPELINE_H_
#define MEMSIM_LIB_AUTODIFF_SETUPS_PIPELINE_H_

#include <memory>
#include <vector>

#include "lib/autodiff/pipeline.h"
#include "lib/autodiff/setup.h"
#include "lib/util/status.h"

namespace memsim {

/// The blocks per stage torchtitan's generate_llm_fqn_per_model_part(stages, blocks,
/// input_weight=1, output_weight=1) gives: the embedding and the norm + head each weigh one
/// block; the stages get ⌊(blocks + 2) / stages⌋ each, the first ones one more for the
/// remainder; the first stage's share includes the embedding, the last's the norm + head.
std::vector<int> TorchtitanSplit(int blocks, int stages);

/// Rank |rank| of |ranks| of |g| under |schedule| with |per_rank| stages each (1 for GPipe and
/// 1F1B): its stages (PpStagesOfRank) of the ranks × per_rank, each with its ops (the ones
/// before the first block on the first stage, those after the last block — norm, head, loss — on
/// the last, each block's on the stage |split| gives it; empty |split| = TorchtitanSplit) and
/// the one activation crossing into it and out of it; the rank's parameters, buffers and inputs.
/// Errors (one line): no repeated blocks, a split that does not cover them, a stage without
/// ops, a boundary crossed by more than one activation.
Result<PipelineStagePlan> PlanPipelineStage(const Graph& g, PpSchedule schedule, int ranks, int per_rank, int rank,
                                            const std::vector<int>& split);

/// The stage's model.to(), batch and optimizer: the other stages' parameters and buffers are not
/// on this rank, the inputs it uses are the whole batch (schedule.step() splits them into views).
std::unique_ptr<TrainingSetup> MakePipelineStage(const PipelineStagePlan& plan);

}  // namespace memsim

#endif  // MEMSIM_LIB_AUTODIFF_SETUPS_PIPELINE_H_
