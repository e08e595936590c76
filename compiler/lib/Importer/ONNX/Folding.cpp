//===- Folding.cpp - Computing ONNX ops on compile-time tensors -----------===//

#include "Folding.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <limits>

using namespace llvm;

namespace tfc::onnx_import {

int64_t numElements(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = checkedMul(n, d).value_or(std::numeric_limits<int64_t>::max());
  return n;
}

std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                    ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t x = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t y = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    size_t o = i + (out.size() - shape.size());
    strides[o] = shape[i] == 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

HostTensor foldElementwise(ArrayRef<const HostTensor *> inputs,
                           ArrayRef<int64_t> outShape, OnnxType type,
                           function_ref<double(ArrayRef<double>)> f,
                           function_ref<int64_t(ArrayRef<int64_t>)> g) {
  int64_t n = numElements(outShape);
  SmallVector<SmallVector<int64_t>> strides;
  for (const HostTensor *t : inputs)
    strides.push_back(broadcastStrides(t->shape, outShape));
  HostTensor out;
  out.type = type;
  out.shape.assign(outShape.begin(), outShape.end());
  bool useInts =
      !isFloatType(type) && g &&
      llvm::none_of(inputs, [](const HostTensor *t) { return t->isFloat(); });
  SmallVector<int64_t> index(outShape.size(), 0);
  SmallVector<double> args(inputs.size());
  SmallVector<int64_t> intArgs(inputs.size());
  for (int64_t e = 0; e < n; ++e) {
    for (size_t k = 0; k < inputs.size(); ++k) {
      int64_t at = 0;
      for (size_t d = 0; d < index.size(); ++d)
        at += index[d] * strides[k][d];
      if (useInts)
        intArgs[k] = inputs[k]->ints[size_t(at)];
      else
        args[k] = inputs[k]->number(at);
    }
    if (useInts)
      out.ints.push_back(g(intArgs));
    else if (isFloatType(type))
      out.floats.push_back(roundToType(f(args), type));
    else
      out.ints.push_back(toInt64(f(args)));
    nextIndex(index, outShape);
  }
  return out;
}

} // namespace tfc::onnx_import

namespace tfc::onnx_import {

bool nextIndex(MutableArrayRef<int64_t> index, ArrayRef<int64_t> shape) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < shape[d])
      return true;
    index[d] = 0;
  }
  return false;
}

SmallVector<int64_t> strides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = s[i] * shape[i];
  return s;
}

HostTensor remap(const HostTensor &in, ArrayRef<int64_t> outShape,
                 function_ref<int64_t(ArrayRef<int64_t>)> source) {
  HostTensor out;
  out.type = in.type;
  out.shape.assign(outShape.begin(), outShape.end());
  int64_t n = numElements(outShape);
  SmallVector<int64_t> index(outShape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t from = source(index);
    if (in.isFloat())
      out.floats.push_back(in.floats[size_t(from)]);
    else
      out.ints.push_back(in.ints[size_t(from)]);
    nextIndex(index, outShape);
  }
  return out;
}

} // namespace tfc::onnx_import
