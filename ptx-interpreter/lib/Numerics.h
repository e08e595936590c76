//===- Numerics.h - Number formats and rounding of PTX ---------*- C++ -*-===//
//
// Registers hold bits (uint64_t); these read and write them as f32, f64,
// f16 and bf16, extend integers, round in the mode an instruction names and
// compare as setp does.
//
//===----------------------------------------------------------------------===//

#ifndef PTXI_LIB_NUMERICS_H
#define PTXI_LIB_NUMERICS_H

#include "Program.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ptxi {

inline float asF32(uint64_t v) {
  uint32_t u = (uint32_t)v;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline uint64_t bitsOf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
inline double asF64(uint64_t v) {
  double d;
  memcpy(&d, &v, 8);
  return d;
}
inline uint64_t bitsOf(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
inline int64_t sext(uint64_t v, int bits) {
  return bits >= 64 ? (int64_t)v : (int64_t)(v << (64 - bits)) >> (64 - bits);
}
inline uint64_t zext(uint64_t v, int bits) {
  return bits >= 64 ? v : v & ((1ull << bits) - 1);
}

inline float flush(float x) {
  return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
}

uint16_t f32ToF16(float f);
float f16ToF32(uint16_t h);
uint16_t f32ToBf16(float f);
float bf16ToF32(uint16_t h);
/// A 16-bit float of `kind` (f16 or bf16) as a double (exact).
double halfToF64(Ty kind, uint64_t bits);
/// `v` rounded once to the nearest f16 or bf16 (ties to even).
uint16_t f64ToHalf(Ty kind, double v);

/// a op b (op: 0 add, 1 sub, 2 mul, 3 fma with c, 4 div) in a rounding mode
/// (Inst::rounding), in float or double.
template <typename T> T rounded(int op, T a, T b, T c, int rounding);
extern template float rounded<float>(int, float, float, float, int);
extern template double rounded<double>(int, double, double, double, int);

/// `v` rounded to an integer in a rounding mode (cvt's .rni, .rzi, ...).
double roundToInt(double v, int rounding);

/// setp's comparison `cmp` (a Cmp) of two registers' values.
bool compare(int cmp, bool isFloat, bool isSigned, int bits, uint64_t a,
             uint64_t b);

} // namespace ptxi

#endif // PTXI_LIB_NUMERICS_H
