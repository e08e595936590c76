//===- TransformerToCPU.h - transformer ops to CPU kernels ------*- C++ -*-===//

#ifndef TFC_CONVERSION_TRANSFORMERTOCPU_TRANSFORMERTOCPU_H
#define TFC_CONVERSION_TRANSFORMERTOCPU_TRANSFORMERTOCPU_H

namespace mlir {
class DialectRegistry;
class RewritePatternSet;
} // namespace mlir

namespace tfc {

/// Patterns that put transformer ops in the form the CPU micro-kernels take
/// (f32, rank-4 mask, [rows, n] for softmax and layer_norm).
void populateTransformerToCPUPatterns(mlir::RewritePatternSet &patterns);

/// Bufferization of transformer ops in kernel form into micro-kernel calls
/// (one-shot bufferization then sees each call read its operands where the
/// op stands). Register it where the CPU pipeline runs.
void registerKernelCallBufferization(mlir::DialectRegistry &registry);

} // namespace tfc

#endif // TFC_CONVERSION_TRANSFORMERTOCPU_TRANSFORMERTOCPU_H
