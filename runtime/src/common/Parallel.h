//===- Parallel.h - Tensor-parallel models in the runtime -------*- C++ -*-===//
//
// What the C API's files share of tensor-parallel models (abi.h, "Tensor
// parallelism"; parallel.h): joining the MPI job when one loads, binding a
// rank's part of a split weight, and the all-reduce's failures, which a
// run returns.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_PARALLEL_H
#define TFC_RUNTIME_COMMON_PARALLEL_H

#include "ModelImpl.h"

namespace tfc::rt {

/// Checks the split `parallel` of model `file` (of `manifest`) and joins
/// the MPI job of its ranks; records both in `model` (a GPU model then
/// joins their NCCL communicator: Nccl.h). Null, or the status of the
/// load's failure.
tfc_status joinParallel(tfc_model *model, const std::string &file,
                        const tfc_manifest &manifest,
                        const tfc_tensor_parallel *parallel);

/// The split of weight argument `arg` of `model`; null when it is whole.
const tfc_tensor_split *weightSplit(const tfc_model *model, int32_t arg);

/// Binds this rank's part of `tensor` (the whole, from weights file
/// `path`) to the split weight argument `arg`: `data` points into the
/// file where the part lies there in one piece of its dtype, aligned and
/// not padded; else into `copy`, which it fills (converting the file's
/// float type; zeros past a padded tensor's whole). Null, or a status
/// naming the file, the tensor and the model.
tfc_status bindWeightPart(const tfc_model *model, int32_t arg,
                          const tfc::SafetensorsTensor &tensor,
                          const std::string &path, const void *&data,
                          tfc::AlignedBuffer &copy);

/// The first collective failure since the last call (empty: none), which
/// the run that met it returns.
std::string takeCollectiveFailure();

} // namespace tfc::rt

#endif // TFC_RUNTIME_COMMON_PARALLEL_H
