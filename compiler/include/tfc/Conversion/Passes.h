//===- Passes.h - tfc conversion passes -------------------------*- C++ -*-===//

#ifndef TFC_CONVERSION_PASSES_H
#define TFC_CONVERSION_PASSES_H

#include "tfc/Conversion/TransformerToCPU/TransformerToCPU.h"
#include "tfc/Pipelines/Options.h"

#include "mlir/Pass/Pass.h"

namespace tfc {

#define GEN_PASS_DECL
#include "tfc/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tfc/Conversion/Passes.h.inc"

} // namespace tfc

#endif // TFC_CONVERSION_PASSES_H
