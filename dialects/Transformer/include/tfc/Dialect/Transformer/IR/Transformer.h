//===- Transformer.h - The transformer dialect ------------------*- C++ -*-===//
//
// Declares the transformer dialect and its ops (attention, softmax,
// layer_norm).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_DIALECT_TRANSFORMER_IR_TRANSFORMER_H
#define TFC_DIALECT_TRANSFORMER_IR_TRANSFORMER_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tfc::transformer {
// Upstream interface declarations (AggregatedOpInterface) name these types
// unqualified.
using ::llvm::FailureOr;
using ::llvm::SmallVector;
using ::mlir::OpBuilder;
using ::mlir::Value;
} // namespace tfc::transformer

#include "tfc/Dialect/Transformer/IR/TransformerOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "tfc/Dialect/Transformer/IR/TransformerOps.h.inc"

#endif // TFC_DIALECT_TRANSFORMER_IR_TRANSFORMER_H
