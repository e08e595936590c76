//===- Folding.h - Computing ONNX ops on compile-time tensors -----*- C++
//-*-===//
//
// The host side of constant folding: numpy broadcasting over HostTensors
// and the index arithmetic the shape ops share.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ONNX_FOLDING_H
#define TFC_LIB_IMPORTER_ONNX_FOLDING_H

#include "HostTensor.h"

#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

namespace tfc::onnx_import {

/// Constants are folded up to this many elements; larger results are
/// computed by the graph.
constexpr int64_t kMaxFoldElements = int64_t(1) << 20;

/// The constant masks and triangles written for tensors computed at run
/// time (Trilu, CumSum) have at most this many elements.
constexpr int64_t kMaxMaskElements = int64_t(1) << 26;

/// The numpy broadcast of two shapes; nullopt where they do not broadcast.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Row-major strides of `shape`, with 0 for broadcast (size-1) dims when
/// `shape` is aligned to the right of `out`.
llvm::SmallVector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<int64_t> out);

/// Elementwise `f` over the broadcast of `inputs` into `out` elements of
/// `type`: f gets each input's element as a double (integers exact up to
/// 2^53) or, for integer results, computes on int64 through `g` when given.
HostTensor
foldElementwise(llvm::ArrayRef<const HostTensor *> inputs,
                llvm::ArrayRef<int64_t> outShape, OnnxType type,
                llvm::function_ref<double(llvm::ArrayRef<double>)> f,
                llvm::function_ref<int64_t(llvm::ArrayRef<int64_t>)> g = {});

/// Product of `shape`'s dims; INT64_MAX where it would overflow.
int64_t numElements(llvm::ArrayRef<int64_t> shape);

} // namespace tfc::onnx_import

namespace tfc::onnx_import {

/// A tensor of `outShape` whose element at each index is `in`'s element at
/// the linear index `source(outIndex)`.
HostTensor remap(const HostTensor &in, llvm::ArrayRef<int64_t> outShape,
                 llvm::function_ref<int64_t(llvm::ArrayRef<int64_t>)> source);

/// Steps the row-major multi-index `index` of `shape` to the next element;
/// false after the last.
bool nextIndex(llvm::MutableArrayRef<int64_t> index,
               llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> strides(llvm::ArrayRef<int64_t> shape);

} // namespace tfc::onnx_import

#endif // TFC_LIB_IMPORTER_ONNX_FOLDING_H
