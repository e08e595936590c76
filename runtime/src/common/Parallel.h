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

/// Checks the split `parallel` of model `file` (of `manifest`, on the GPU
/// when `gpu`: refused) and joins the MPI job of its ranks; records both
/// in `model`. Null, or the status of the load's failure.
tfc_status joinParallel(tfc_model *model, const std::string &file,
                        const tfc_manifest &manifest,
                        const tfc_tensor_parallel *parallel, bool gpu);

/// The split of weight argument `arg` of `model`; null when it is whole.
const tfc_tensor_split *weightSplit(const tfc_model *model, int32_t arg);

/// Binds this rank's part of `tensor` (the whole, from weights file
/// `path`) to the weight `desc`, split as `split`: `data` points into the
/// file where the part lies there in one piece of desc's dtype, aligned;
/// else into `copy`, which it fills (converting the file's float type).
/// Null, or a status naming the file, the tensor and the model.
tfc_status bindWeightPart(const tfc_model *model, const tfc_tensor_desc &desc,
                          const tfc_tensor_split &split,
                          const tfc::SafetensorsTensor &tensor,
                          const std::string &path, const void *&data,
                          tfc::AlignedBuffer &copy);

/// The first collective failure since the last call (empty: none), which
/// the run that met it returns.
std::string takeCollectiveFailure();

} // namespace tfc::rt

#endif // TFC_RUNTIME_COMMON_PARALLEL_H
