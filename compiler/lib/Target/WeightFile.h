//===- WeightFile.h - Where a model's weights lie in its file ----*- C++
//-*-===//
//
// Emits `tfc_model_weight_file()` (abi.h, "Weights in the model's own
// file") for a model imported from an ONNX file, and the tables of where
// weights may lie (`tfc_model_weight_alignment`) and how a tensor-parallel
// model splits them.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_TARGET_WEIGHTFILE_H
#define TFC_LIB_TARGET_WEIGHTFILE_H

#include "tfc/Target/Manifest.h"

#include "llvm/IR/Module.h"

namespace tfc {

/// Adds `const tfc_weight_file *tfc_model_weight_file(void)` returning
/// `file` as constant data.
void addWeightFile(llvm::Module &mod, const WeightFile &file);

/// Adds `const tfc_tensor_parallel *tfc_model_tensor_parallel(void)` (abi.h,
/// "Tensor parallelism") for a model split across m.tensorParallel ranks:
/// each argument's and result's split.
void addTensorParallel(llvm::Module &mod, const Manifest &m);

/// Adds `const int32_t *tfc_model_weight_alignment(void)` (abi.h, "Weights
/// at any address") where the lowered `modules` record weights of `m` that
/// only the matmul kernel reads (kPackedOnlyWeightsAttr) in the function of
/// every variant (none: m.entry's): 1 for those, each other argument's
/// element size. Adds nothing where there are none.
void addWeightAlignment(llvm::Module &mod, const Manifest &m,
                        llvm::ArrayRef<mlir::ModuleOp> modules,
                        llvm::ArrayRef<ModelVariant> variants);

} // namespace tfc

#endif // TFC_LIB_TARGET_WEIGHTFILE_H
