//===- DType.cpp - Element types ------------------------------------------===//

#include "tfc/runtime/dtype.h"

#include <cstring>

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

namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  if (exponent == 0x1f) // infinity or NaN
    return floatOf(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) // zero or subnormal: mantissa * 2^-24, exact in f32
    return floatOf(sign | bitsOf(float(mantissa) * 0x1p-24f));
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToHalf(float f) {
  uint32_t x = bitsOf(f);
  uint16_t sign = uint16_t((x >> 16) & 0x8000);
  x &= 0x7fffffff;
  if (x > 0x7f800000) // NaN: quiet, with the top of its payload
    return sign | 0x7e00 | uint16_t((x >> 13) & 0x3ff);
  if (x >= 0x477ff000) // 65520 and up round to infinity
    return sign | 0x7c00;
  if (x < 0x38800000) { // below 2^-14: an f16 subnormal (or zero)
    // Adding 0.5 places the value's 2^-24 units in the low mantissa bits of
    // an f32 in [0.5, 1), rounded to nearest even by the addition itself.
    float shifted = floatOf(x) + 0.5f;
    return sign | uint16_t(bitsOf(shifted) - bitsOf(0.5f));
  }
  // Normal: rebias the exponent, round the 13 dropped bits to nearest even
  // (a carry out of the mantissa moves into the exponent, as it should).
  uint32_t odd = (x >> 13) & 1;
  x += 0xc8000fffu + odd; // (15 - 127) << 23, plus half an ulp minus one
  return sign | uint16_t(x >> 13);
}

float bfloatToFloat(uint16_t b) { return floatOf(uint32_t(b) << 16); }

uint16_t floatToBfloat(float f) {
  uint32_t x = bitsOf(f);
  if ((x & 0x7fffffff) > 0x7f800000) // NaN: quiet
    return uint16_t((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

float loadFloat(const void *src, DType type, size_t i) {
  if (type == DType::F32) {
    float f;
    std::memcpy(&f, static_cast<const char *>(src) + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char *>(src) + 2 * i, 2);
  return type == DType::F16 ? halfToFloat(h) : bfloatToFloat(h);
}

void storeFloat(void *dst, DType type, size_t i, float f) {
  if (type == DType::F32) {
    std::memcpy(static_cast<char *>(dst) + 4 * i, &f, 4);
    return;
  }
  uint16_t h = type == DType::F16 ? floatToHalf(f) : floatToBfloat(f);
  std::memcpy(static_cast<char *>(dst) + 2 * i, &h, 2);
}

bool isComputeFloat(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

} // namespace

bool isFloatConvertible(DType from, DType to) {
  return isComputeFloat(from) && isComputeFloat(to);
}

namespace {

/// convertFloats for one pair of types, known at compile time: the loop
/// holds no branch on them, and the compiler vectorizes it (the types
/// looked up per element had made binding an f32 checkpoint to a bf16
/// model the largest part of its first run's process:
/// docs/performance/reports/2026-12-03-xeon-amx.md, "The first run").
template <DType From, DType To>
void convertAll(const void *src, void *dst, size_t count) {
  for (size_t i = 0; i < count; ++i)
    storeFloat(dst, To, i, loadFloat(src, From, i));
}

template <DType From>
void convertFrom(const void *src, void *dst, DType to, size_t count) {
  switch (to) {
  case DType::F32:
    return convertAll<From, DType::F32>(src, dst, count);
  case DType::F16:
    return convertAll<From, DType::F16>(src, dst, count);
  default:
    return convertAll<From, DType::BF16>(src, dst, count);
  }
}

} // namespace

void convertFloats(const void *src, DType from, void *dst, DType to,
                   size_t count) {
  // Every f16 and bf16 value is exact in f32, so one rounding at most.
  switch (from) {
  case DType::F32:
    return convertFrom<DType::F32>(src, dst, to, count);
  case DType::F16:
    return convertFrom<DType::F16>(src, dst, to, count);
  default:
    return convertFrom<DType::BF16>(src, dst, to, count);
  }
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
