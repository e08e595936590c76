//===- ModelFileWeights.h - Weights in a model's own file -------*- C++ -*-===//
//
// A model compiled from an ONNX file reads its weights in that file (and
// its external data files) at the places the compiler recorded
// (tfc_model_weight_file, abi.h), without parsing protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_FORMATS_MODELFILEWEIGHTS_H
#define TFC_RUNTIME_FORMATS_MODELFILEWEIGHTS_H

#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"
#include "tfc/runtime/safetensors.h"

#include <memory>
#include <string>
#include <vector>

namespace tfc {

/// Maps `path` and the external data files `where` names (relative to its
/// folder) and returns the weights `weights` (the manifest's, in order) as
/// tensors in those maps. Refuses, with `error` naming the file and the
/// tensor, a file where a weight's recorded header bytes are not right
/// before its data, a range past a file's end, or bytes compiled into
/// `model` (constants, the graph's nodes) that changed: such a file is not
/// the one the model was compiled from.
std::unique_ptr<SafetensorsFile>
openModelFileWeights(const std::string &path, const tfc_weight_file &where,
                     const std::vector<const tfc_tensor_desc *> &weights,
                     const std::string &model, std::string &error);

} // namespace tfc

#endif // TFC_RUNTIME_FORMATS_MODELFILEWEIGHTS_H
