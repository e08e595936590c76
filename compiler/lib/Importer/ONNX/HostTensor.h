//===- HostTensor.h - ONNX tensors known when the model compiles -*- C++
//-*-===//
//
// The importer folds what exporters compute from shapes and constants
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, ConstantOfShape,
// Range, Where on constants, ...) on the host, so that every shape the TOSA
// graph needs is static. A HostTensor holds such a value: integers and
// booleans exactly as int64, floating-point values as double (rounded to
// their type when they become an MLIR constant).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ONNX_HOSTTENSOR_H
#define TFC_LIB_IMPORTER_ONNX_HOSTTENSOR_H

#include "onnx/onnx_pb.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tfc::onnx_import {

class OnnxFile;

/// onnx::TensorProto::DataType values.
using OnnxType = int32_t;

/// Whether `type` is one of the floating-point types.
bool isFloatType(OnnxType type);
/// "float32", "int64", ...: the type's name in messages.
std::string typeName(OnnxType type);
/// The MLIR element type of `type`; null where tfc has none (string, complex,
/// unsigned 16-64 bit, float8).
mlir::Type elementType(mlir::MLIRContext *context, OnnxType type);
/// The ONNX type of an MLIR element type (the inverse of elementType).
OnnxType onnxType(mlir::Type type);
/// Bytes per element, 0 for types without a fixed size.
int64_t typeSize(OnnxType type);

/// `v` truncated toward zero, saturated to the int64 range (NaN gives 0):
/// ONNX leaves a float out of an integer type's range undefined.
inline int64_t toInt64(double v) {
  if (std::isnan(v))
    return 0;
  if (v >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  if (v < -0x1p63)
    return std::numeric_limits<int64_t>::min();
  return int64_t(v);
}

struct HostTensor {
  OnnxType type = onnx::TensorProto::FLOAT;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> ints;  ///< integer and bool types
  std::vector<double> floats; ///< floating-point types

  bool isFloat() const { return isFloatType(type); }
  int64_t size() const;
  double number(int64_t i) const {
    return isFloat() ? floats[size_t(i)] : double(ints[size_t(i)]);
  }
  int64_t integer(int64_t i) const {
    return isFloat() ? toInt64(floats[size_t(i)]) : ints[size_t(i)];
  }

  static HostTensor ofInts(OnnxType type, llvm::ArrayRef<int64_t> shape,
                           std::vector<int64_t> values);
  static HostTensor ofFloats(OnnxType type, llvm::ArrayRef<int64_t> shape,
                             std::vector<double> values);
  /// A tensor of `shape` and `type` whose elements are all `value`.
  static HostTensor filled(OnnxType type, llvm::ArrayRef<int64_t> shape,
                           double value);
  /// The same elements in `to` (ONNX Cast semantics: float to int
  /// truncates, to bool is "!= 0"; floats rounded to f16/bf16/f32).
  HostTensor castTo(OnnxType to) const;

  /// The tensor as an MLIR attribute of `elementType(type)`.
  mlir::DenseElementsAttr toAttr(mlir::MLIRContext *context) const;
};

/// Reads an initializer or a Constant's value: typed fields, raw_data, or
/// external data (read from `file`'s folder). Failure with `error` (without
/// a file name) where the data does not match the dims.
bool readTensor(const onnx::TensorProto &proto, const OnnxFile &file,
                HostTensor &out, std::string &error);

/// Rounds `value` to `type`'s precision (f32, f16, bf16; others unchanged).
double roundToType(double value, OnnxType type);

} // namespace tfc::onnx_import

#endif // TFC_LIB_IMPORTER_ONNX_HOSTTENSOR_H
