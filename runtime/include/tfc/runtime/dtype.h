//===- dtype.h - Element types of tensors in files and models ----*- C++
//-*-===//
//
// The element types the file readers know. The first six have the values of
// `tfc_dtype` in abi.h (what a compiled model can take); the others appear only
// in files (a safetensors file may hold tensors a model does not use; numpy has
// no bf16, so bf16 data travels in .npy files as '<u2').
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_DTYPE_H
#define TFC_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfc {

enum class DType : int32_t {
  F32 = 0,
  F16 = 1,
  BF16 = 2,
  I64 = 3,
  I32 = 4,
  Bool = 5,
  // Beyond the ABI: file formats only.
  F64 = 6,
  I8 = 7,
  U8 = 8,
  I16 = 9,
  U16 = 10,
  U32 = 11,
  U64 = 12,
  F8E4M3 = 13,
  F8E5M2 = 14,
};

constexpr int32_t kNumDTypes = 15;

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// Lower-case short name: "f32", "bf16", "bool", ...
const char *dtypeName(DType dtype);
/// Whether `value` is one of the DType values.
bool isValidDType(int64_t value);

/// Product of `shape` times `elementSize`, or nullopt on a negative dimension
/// or overflow of size_t.
std::optional<size_t> tensorBytes(const std::vector<int64_t> &shape,
                                  size_t elementSize);

/// Whether elements of `from` convert to `to` when a weight is bound: the
/// floating-point types a model computes in (f32, f16, bf16), either way.
bool isFloatConvertible(DType from, DType to);

/// Converts `count` elements of `src` (`from`) into `dst` (`to`), both
/// isFloatConvertible types: widening is exact; narrowing rounds to nearest,
/// ties to even (as PyTorch's `tensor.to(dtype)`), keeps NaN a NaN and
/// takes values past the largest finite one to infinity.
void convertFloats(const void *src, DType from, void *dst, DType to,
                   size_t count);

/// "[2, 3]"
std::string shapeString(const int64_t *shape, size_t rank);
inline std::string shapeString(const std::vector<int64_t> &shape) {
  return shapeString(shape.data(), shape.size());
}

} // namespace tfc

#endif // TFC_RUNTIME_DTYPE_H
