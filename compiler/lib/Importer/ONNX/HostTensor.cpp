//===- HostTensor.cpp - ONNX tensors known when the model compiles --------===//

#include "HostTensor.h"
#include "Folding.h"
#include "OnnxFile.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace llvm;
using onnx::TensorProto;

namespace tfc::onnx_import {

bool isFloatType(OnnxType type) {
  return type == TensorProto::FLOAT || type == TensorProto::FLOAT16 ||
         type == TensorProto::BFLOAT16 || type == TensorProto::DOUBLE;
}

std::string typeName(OnnxType type) {
  switch (type) {
  case TensorProto::FLOAT:
    return "float32";
  case TensorProto::FLOAT16:
    return "float16";
  case TensorProto::BFLOAT16:
    return "bfloat16";
  case TensorProto::DOUBLE:
    return "float64";
  case TensorProto::INT8:
    return "int8";
  case TensorProto::INT16:
    return "int16";
  case TensorProto::INT32:
    return "int32";
  case TensorProto::INT64:
    return "int64";
  case TensorProto::UINT8:
    return "uint8";
  case TensorProto::BOOL:
    return "bool";
  default:
    if (TensorProto::DataType_IsValid(type))
      return TensorProto::DataType_Name(TensorProto::DataType(type));
    return "data type " + std::to_string(type);
  }
}

Type elementType(MLIRContext *context, OnnxType type) {
  Builder b(context);
  switch (type) {
  case TensorProto::FLOAT:
    return b.getF32Type();
  case TensorProto::FLOAT16:
    return b.getF16Type();
  case TensorProto::BFLOAT16:
    return b.getBF16Type();
  case TensorProto::DOUBLE:
    return b.getF64Type();
  case TensorProto::INT8:
    return b.getI8Type();
  case TensorProto::INT16:
    return b.getI16Type();
  case TensorProto::INT32:
    return b.getI32Type();
  case TensorProto::INT64:
    return b.getI64Type();
  case TensorProto::BOOL:
    return b.getI1Type();
  default:
    return nullptr;
  }
}

OnnxType onnxType(Type type) {
  if (type.isF32())
    return TensorProto::FLOAT;
  if (type.isF16())
    return TensorProto::FLOAT16;
  if (type.isBF16())
    return TensorProto::BFLOAT16;
  if (type.isF64())
    return TensorProto::DOUBLE;
  if (type.isInteger(1))
    return TensorProto::BOOL;
  if (type.isInteger(8))
    return TensorProto::INT8;
  if (type.isInteger(16))
    return TensorProto::INT16;
  if (type.isInteger(32))
    return TensorProto::INT32;
  if (type.isInteger(64))
    return TensorProto::INT64;
  return TensorProto::UNDEFINED;
}

int64_t typeSize(OnnxType type) {
  switch (type) {
  case TensorProto::DOUBLE:
  case TensorProto::INT64:
  case TensorProto::UINT64:
    return 8;
  case TensorProto::FLOAT:
  case TensorProto::INT32:
  case TensorProto::UINT32:
    return 4;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
  case TensorProto::INT16:
  case TensorProto::UINT16:
    return 2;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL:
    return 1;
  default:
    return 0;
  }
}

static const fltSemantics *semanticsOf(OnnxType type) {
  switch (type) {
  case TensorProto::FLOAT16:
    return &APFloat::IEEEhalf();
  case TensorProto::BFLOAT16:
    return &APFloat::BFloat();
  case TensorProto::FLOAT:
    return &APFloat::IEEEsingle();
  default:
    return nullptr;
  }
}

double roundToType(double value, OnnxType type) {
  const fltSemantics *semantics = semanticsOf(type);
  if (!semantics)
    return value;
  APFloat f(value);
  bool lost;
  f.convert(*semantics, APFloat::rmNearestTiesToEven, &lost);
  f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

static double halfBits(uint16_t bits, OnnxType type) {
  APFloat f(*semanticsOf(type), APInt(16, bits));
  bool lost;
  f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return f.convertToDouble();
}

int64_t HostTensor::size() const { return numElements(shape); }

HostTensor HostTensor::ofInts(OnnxType type, ArrayRef<int64_t> shape,
                              std::vector<int64_t> values) {
  HostTensor t;
  t.type = type;
  t.shape.assign(shape.begin(), shape.end());
  t.ints = std::move(values);
  return t;
}

HostTensor HostTensor::ofFloats(OnnxType type, ArrayRef<int64_t> shape,
                                std::vector<double> values) {
  HostTensor t;
  t.type = type;
  t.shape.assign(shape.begin(), shape.end());
  t.floats = std::move(values);
  return t;
}

HostTensor HostTensor::filled(OnnxType type, ArrayRef<int64_t> shape,
                              double value) {
  HostTensor t;
  t.type = type;
  t.shape.assign(shape.begin(), shape.end());
  if (t.isFloat())
    t.floats.assign(size_t(t.size()), roundToType(value, type));
  else
    t.ints.assign(size_t(t.size()), toInt64(value));
  return t;
}

HostTensor HostTensor::castTo(OnnxType to) const {
  HostTensor out;
  out.type = to;
  out.shape = shape;
  int64_t n = size();
  if (isFloatType(to)) {
    out.floats.resize(size_t(n));
    for (int64_t i = 0; i < n; ++i)
      out.floats[size_t(i)] = roundToType(number(i), to);
    return out;
  }
  out.ints.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    if (to == TensorProto::BOOL) {
      out.ints[size_t(i)] = number(i) != 0;
      continue;
    }
    int64_t v = integer(i);
    // Wrap to the target width, as a C cast does.
    switch (to) {
    case TensorProto::INT32:
      v = int32_t(uint32_t(uint64_t(v)));
      break;
    case TensorProto::INT16:
      v = int16_t(uint16_t(uint64_t(v)));
      break;
    case TensorProto::INT8:
      v = int8_t(uint8_t(uint64_t(v)));
      break;
    case TensorProto::UINT8:
      v = uint8_t(uint64_t(v));
      break;
    default:
      break;
    }
    out.ints[size_t(i)] = v;
  }
  return out;
}

DenseElementsAttr HostTensor::toAttr(MLIRContext *context) const {
  Type et = elementType(context, type);
  auto tensorType = RankedTensorType::get(shape, et);
  int64_t n = size();
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<APFloat> values;
    values.reserve(size_t(n));
    for (double v : floats) {
      APFloat f(v);
      bool lost;
      f.convert(ft.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(f);
    }
    return DenseElementsAttr::get(tensorType, values);
  }
  unsigned width = et.getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  values.reserve(size_t(n));
  for (int64_t v : ints)
    values.push_back(APInt(width, uint64_t(v), /*isSigned=*/true,
                           /*implicitTrunc=*/true));
  return DenseElementsAttr::get(tensorType, values);
}

/// Decodes `n` little-endian elements of `type` from `bytes`.
static bool decodeRaw(StringRef bytes, OnnxType type, int64_t n,
                      HostTensor &out, std::string &error) {
  int64_t size = typeSize(type);
  if (size == 0 || int64_t(bytes.size()) != n * size) {
    error = "holds " + std::to_string(bytes.size()) + " bytes of data, not " +
            std::to_string(n) + " " + typeName(type) + " elements";
    return false;
  }
  const char *p = bytes.data();
  auto load = [&](auto value, int64_t i) {
    std::memcpy(&value, p + i * size, size_t(size));
    return value;
  };
  for (int64_t i = 0; i < n; ++i) {
    switch (type) {
    case TensorProto::FLOAT:
      out.floats.push_back(load(float(), i));
      break;
    case TensorProto::DOUBLE:
      out.floats.push_back(load(double(), i));
      break;
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      out.floats.push_back(halfBits(load(uint16_t(), i), type));
      break;
    case TensorProto::INT64:
    case TensorProto::UINT64:
      out.ints.push_back(load(int64_t(), i));
      break;
    case TensorProto::INT32:
      out.ints.push_back(load(int32_t(), i));
      break;
    case TensorProto::UINT32:
      out.ints.push_back(load(uint32_t(), i));
      break;
    case TensorProto::INT16:
      out.ints.push_back(load(int16_t(), i));
      break;
    case TensorProto::UINT16:
      out.ints.push_back(load(uint16_t(), i));
      break;
    case TensorProto::INT8:
      out.ints.push_back(load(int8_t(), i));
      break;
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      out.ints.push_back(load(uint8_t(), i));
      break;
    default:
      error = "has unsupported data type " + typeName(type);
      return false;
    }
  }
  return true;
}

bool readTensor(const TensorProto &proto, const OnnxFile &file, HostTensor &out,
                std::string &error) {
  out = HostTensor();
  out.type = proto.data_type();
  int64_t n = 1;
  for (int64_t d : proto.dims()) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 40) / d)) {
      error = "has dims that are negative or too large";
      return false;
    }
    n *= d;
    out.shape.push_back(d);
  }
  if (typeSize(out.type) == 0) {
    error = "has unsupported data type " + typeName(out.type);
    return false;
  }
  if (proto.data_location() == TensorProto::EXTERNAL) {
    const TensorLocation *location = file.location(proto.name());
    if (!location) {
      error = "names external data the importer did not find";
      return false;
    }
    SmallString<256> path(sys::path::parent_path(file.path()));
    sys::path::append(path, location->file);
    auto buffer = MemoryBuffer::getFileSlice(path, uint64_t(location->nbytes),
                                             uint64_t(location->offset));
    if (!buffer) {
      error = "external data file " + std::string(path) + ": " +
              buffer.getError().message();
      return false;
    }
    return decodeRaw((*buffer)->getBuffer(), out.type, n, out, error);
  }
  if (proto.has_raw_data())
    return decodeRaw(proto.raw_data(), out.type, n, out, error);
  auto expect = [&](int64_t count) {
    if (count == n)
      return true;
    error = "holds " + std::to_string(count) + " elements, its dims say " +
            std::to_string(n);
    return false;
  };
  switch (out.type) {
  case TensorProto::FLOAT:
    if (!expect(proto.float_data_size()))
      return false;
    out.floats.assign(proto.float_data().begin(), proto.float_data().end());
    return true;
  case TensorProto::DOUBLE:
    if (!expect(proto.double_data_size()))
      return false;
    out.floats.assign(proto.double_data().begin(), proto.double_data().end());
    return true;
  case TensorProto::INT64:
    if (!expect(proto.int64_data_size()))
      return false;
    out.ints.assign(proto.int64_data().begin(), proto.int64_data().end());
    return true;
  case TensorProto::UINT32:
  case TensorProto::UINT64:
    if (!expect(proto.uint64_data_size()))
      return false;
    out.ints.assign(proto.uint64_data().begin(), proto.uint64_data().end());
    return true;
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
    if (!expect(proto.int32_data_size()))
      return false;
    for (int32_t bits : proto.int32_data())
      out.floats.push_back(halfBits(uint16_t(bits), out.type));
    return true;
  default: // int32, int16, int8, uint16, uint8, bool
    if (!expect(proto.int32_data_size()))
      return false;
    out.ints.assign(proto.int32_data().begin(), proto.int32_data().end());
    return true;
  }
}

} // namespace tfc::onnx_import
