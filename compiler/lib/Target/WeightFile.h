//===- WeightFile.h - Where a model's weights lie in its file ----*- C++
//-*-===//
//
// Emits `tfc_model_weight_file()` (abi.h, "Weights in the model's own
// file") for a model imported from an ONNX file.
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

} // namespace tfc

#endif // TFC_LIB_TARGET_WEIGHTFILE_H
