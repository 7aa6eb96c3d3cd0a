// ONNX shape inference run in a worker process, so that a fault inside libonnx cannot take memsim
// down with it. Note [Contained ONNX shape inference] in docs/onnx-import.md.
#ifndef MEMSIM_LIB_ONNX_CONTAINED_INFERENCE_H_
#define MEMSIM_LIB_ONNX_CONTAINED_INFERENCE_H_

#include <onnx/onnx_pb.h>

#include <string>

#include "lib/util/status.h"

namespace memsim::onnx_import {

/// Runs ONNX shape inference (with data propagation; without it if that faults) on a copy of
/// |model| in the inference worker (forked on first use by a supervisor process that is itself
/// forked on first use; both kept for later imports; the supervisor replaces a worker that
/// dies) and returns the inferred graph's `value_info` and `output` (only those fields are
/// set). A failure inside inference leaves shapes unknown, as in-process inference does. Error
/// (naming |source|): inference faulted or timed out both ways, or the worker could not start.
Result<onnx::GraphProto> InferShapesContained(const onnx::ModelProto& model, const std::string& source);

}  // namespace memsim::onnx_import

#endif  // MEMSIM_LIB_ONNX_CONTAINED_INFERENCE_H_
