//===- DType.cpp - Element types ------------------------------------------===//

#include "tfc/runtime/dtype.h"

namespace tfc {

size_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
  case DType::U64:
    return 8;
  case DType::F32:
  case DType::I32:
  case DType::U32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
  case DType::F8E4M3:
  case DType::F8E5M2:
    return 1;
  }
  return 0;
}

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::Bool:
    return "bool";
  case DType::F64:
    return "f64";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  case DType::I16:
    return "i16";
  case DType::U16:
    return "u16";
  case DType::U32:
    return "u32";
  case DType::U64:
    return "u64";
  case DType::F8E4M3:
    return "f8e4m3";
  case DType::F8E5M2:
    return "f8e5m2";
  }
  return "?";
}

bool isValidDType(int64_t value) { return value >= 0 && value < kNumDTypes; }

std::optional<size_t> tensorBytes(const std::vector<int64_t> &shape,
                                  size_t elementSize) {
  size_t total = elementSize;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    size_t result;
    if (__builtin_mul_overflow(total, static_cast<uint64_t>(dim), &result))
      return std::nullopt;
    total = result;
  }
  return total;
}

std::string shapeString(const int64_t *shape, size_t rank) {
  std::string text = "[";
  for (size_t i = 0; i < rank; ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

} // namespace tfc
