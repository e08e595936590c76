//===- TensorMap.h - TMA tensor maps made by the host code ------*- C++ -*-===//
//
// Kernels that copy tiles with TMA (cp.async.bulk.tensor) name the tensor
// in global memory by a tensor map: 128 bytes the CUDA driver encodes on the
// host. The host code asks the runtime for it before the launch
// (tfc_gpu_tensor_map, which caches maps in device memory) and passes its
// device address to the kernel as an i64 argument.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_TENSORMAP_H
#define TFC_CODEGEN_NVPTX_TENSORMAP_H

#include "mlir/IR/Builders.h"

#include <array>

namespace tfc {

/// CUtensorMapSwizzle: 16-byte chunks of each 128-byte row permuted by the
/// row's index in its group of 8 rows.
constexpr int32_t kTensorMapSwizzle128B = 3;

/// A rank-3 tiled view of one launch operand, innermost dimension first.
struct TensorMapSpec {
  /// The launch operand (a dense memref) the map views.
  unsigned operand;
  std::array<int64_t, 3> dims;    // elements
  std::array<int64_t, 2> strides; // bytes, of dims 1 and 2
  std::array<int32_t, 3> box;     // elements per copy
  int32_t swizzle;                // CUtensorMapSwizzle
};

/// Calls the runtime for the map of `buffer` (a device memref of element
/// type f16, bf16 or f32) before a launch; returns its device address (i64).
mlir::Value createTensorMap(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value buffer, const TensorMapSpec &spec);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_TENSORMAP_H
