//===- Gemm.h - Matmul kernels for NVIDIA GPUs ------------------*- C++ -*-===//
//
// Builds the GPU kernel of one matmul (C += A·B on buffers of static shapes,
// optionally batched), specialised to its shapes and element types.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_GEMM_H
#define TFC_CODEGEN_NVPTX_GEMM_H

#include "tfc/Codegen/NVPTX/KernelLaunch.h"

namespace tfc {

/// A matmul as the kernels take it: C [batch][m][n] (+)= A [batch][m][k] ·
/// B [batch][k][n], the batch dimension only where `batched`.
struct GemmShape {
  bool batched;
  int64_t batch, m, n, k;
  mlir::Type t, acc; // operand and accumulator element types
  /// C += A·B; false: C = A·B (C was all zeros, its fill gone).
  bool accumulate = true;
  /// B is given as [batch..., N, K] (a weight as stored, its transpose
  /// folded into the kernel: foldableTranspose).
  bool bTransposed = false;
};

/// Whether the grid of the tiled GEMM kernels holds the matmul: row blocks
/// on gridDim.y (at most 65535), (batch, column blocks) on x.
bool gemmGridFits(const GemmShape &s);

/// Appends the kernel for `s` to `module`: arguments the buffers A, B, C
/// (`buffers`, dense memrefs of the shapes in `s`), then the device
/// addresses of the launch's tensor maps. A GEMV kernel where A has few
/// rows; else f16/bf16 on tensor cores (mma.sync, or with `wgmma` on sm_90a
/// wgmma, with `tma` its tiles copied by TMA), f32 by FMA.
KernelLaunch buildMatmulKernel(mlir::OpBuilder &builder,
                               mlir::gpu::GPUModuleOp module,
                               llvm::StringRef name, const GemmShape &s,
                               mlir::TypeRange buffers, bool wgmma, bool tma);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_GEMM_H
