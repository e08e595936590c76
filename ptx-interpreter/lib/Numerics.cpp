//===- Numerics.cpp - Number formats and rounding of PTX ------------------===//
//
// See Numerics.h. Conversions to f16 and bf16 round to nearest even,
// computed on the bits; arithmetic in another rounding mode than the
// nearest switches the host's floating-point environment around it.
//
//===----------------------------------------------------------------------===//

#include "Numerics.h"

#include <cfenv>

namespace ptxi {

uint16_t f32ToF16(float f) {
  uint32_t x = (uint32_t)bitsOf(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
  if (exp == 0xff)
    return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
  int e = (int)exp - 127 + 15;
  if (e >= 31)
    return (uint16_t)(sign | 0x7c00);
  if (e <= 0) {
    if (e < -10)
      return (uint16_t)sign;
    mant |= 0x800000;
    int shift = 14 - e;
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // may carry into the exponent, up to infinity: correct
  return (uint16_t)(sign | half);
}

float f16ToF32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0x1f)
    return asF32(sign | 0x7f800000 | (mant << 13));
  if (exp == 0) {
    float v = std::ldexp((float)mant, -24);
    return sign ? -v : v;
  }
  return asF32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t f32ToBf16(float f) {
  uint32_t x = (uint32_t)bitsOf(f);
  if (std::isnan(f))
    return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}
float bf16ToF32(uint16_t h) { return asF32((uint64_t)h << 16); }

/// A 16-bit float of `kind` (f16 or bf16) as a double (exact).
double halfToF64(Ty kind, uint64_t bits) {
  return kind == Ty::F16 ? f16ToF32((uint16_t)bits) : bf16ToF32((uint16_t)bits);
}

/// `v` rounded once to the nearest f16 or bf16 (ties to even): through an
/// f32 rounded to odd (toward zero, the last bit set where that was
/// inexact), which keeps the 13 or 16 bits below the 16-bit float's last
/// one exact enough for the second rounding to be the only one.
uint16_t f64ToHalf(Ty kind, double v) {
  int mode = fegetround();
  fesetround(FE_TOWARDZERO);
  volatile float f = (float)v;
  fesetround(mode);
  if (std::isfinite(f) && (double)f != v)
    f = asF32(bitsOf((float)f) | 1);
  return kind == Ty::F16 ? f32ToF16(f) : f32ToBf16(f);
}

static int fenvMode(int rounding) {
  static const int kModes[] = {FE_TONEAREST, FE_TOWARDZERO, FE_DOWNWARD,
                               FE_UPWARD};
  return kModes[rounding & 3];
}

#pragma STDC FENV_ACCESS ON
// a op b (op: 0 add, 1 sub, 2 mul, 3 fma with c, 4 div) in a rounding mode,
// in float or double.
template <typename T> T rounded(int op, T a, T b, T c, int rounding) {
  if (rounding != 0)
    fesetround(fenvMode(rounding));
  volatile T r = op == 0   ? a + b
                 : op == 1 ? a - b
                 : op == 2 ? a * b
                 : op == 3 ? std::fma(a, b, c)
                           : a / b;
  if (rounding != 0)
    fesetround(FE_TONEAREST);
  return r;
}
template float rounded<float>(int, float, float, float, int);
template double rounded<double>(int, double, double, double, int);
#pragma STDC FENV_ACCESS OFF

double roundToInt(double v, int rounding) {
  switch (rounding) {
  case 0:
    return std::nearbyint(v); // ties to even in the default mode
  case 1:
    return std::trunc(v);
  case 2:
    return std::floor(v);
  default:
    return std::ceil(v);
  }
}

bool compare(int cmp, bool isFloat, bool isSigned, int bits, uint64_t a,
             uint64_t b) {
  if (isFloat) {
    double x = bits == 64 ? asF64(a) : asF32(a);
    double y = bits == 64 ? asF64(b) : asF32(b);
    bool unordered = std::isnan(x) || std::isnan(y);
    switch (cmp) {
    case EQ:
      return !unordered && x == y;
    case NE:
      return !unordered && x != y;
    case LT:
      return !unordered && x < y;
    case LE:
      return !unordered && x <= y;
    case GT:
      return !unordered && x > y;
    case GE:
      return !unordered && x >= y;
    case EQU:
      return unordered || x == y;
    case NEU:
      return unordered || x != y;
    case LTU:
      return unordered || x < y;
    case LEU:
      return unordered || x <= y;
    case GTU:
      return unordered || x > y;
    case GEU:
      return unordered || x >= y;
    case NUM:
      return !unordered;
    case NAN_:
      return unordered;
    default:
      return false;
    }
  }
  if (isSigned && cmp >= LT && cmp <= GE) {
    int64_t x = sext(a, bits), y = sext(b, bits);
    switch (cmp) {
    case LT:
      return x < y;
    case LE:
      return x <= y;
    case GT:
      return x > y;
    default:
      return x >= y;
    }
  }
  uint64_t x = zext(a, bits), y = zext(b, bits);
  switch (cmp) {
  case EQ:
    return x == y;
  case NE:
    return x != y;
  case LT:
  case LO:
    return x < y;
  case LE:
  case LS:
    return x <= y;
  case GT:
  case HI:
    return x > y;
  default:
    return x >= y;
  }
}

} // namespace ptxi
