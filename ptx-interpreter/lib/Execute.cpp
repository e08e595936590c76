//===- Execute.cpp - One thread's PTX instruction -------------------------===//
//
// The instructions a thread executes on its own: moves, loads and stores
// in every state space, integer and floating-point arithmetic (f32 and f64
// in the rounding mode the instruction names, f16 and bf16 rounded once),
// comparisons, conversions and the approximate functions (rcp, sqrt, ex2,
// lg2), computed exactly here. Asynchronous copies and mbarriers go to
// AsyncCopy.cpp and Mbarrier.cpp.
//
//===----------------------------------------------------------------------===//

#include "Launch.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ptxi {

void Launch::execute(Thread &t, const Inst &in) {
  const std::vector<Operand> &o = in.ops;
  const Type &ty = in.type;
  const int w = ty.bits;
  auto need = [&](size_t n) { needOperands(t, in, n); };
  auto arith = [&](int op) {
    need(3);
    if (ty.kind == Ty::F && w == 32) {
      float r =
          rounded<float>(op, f32In(in, t, o[1]), f32In(in, t, o[2]),
                         op == 3 ? f32In(in, t, o[3]) : 0.0f, in.rounding);
      set(t, o[0], f32Out(in, r));
    } else if (ty.kind == Ty::F && w == 64) {
      set(t, o[0],
          bitsOf(rounded<double>(op, asF64(get(t, o[1])), asF64(get(t, o[2])),
                                 op == 3 ? asF64(get(t, o[3])) : 0.0,
                                 in.rounding)));
    } else if (ty.isHalf()) {
      // Sums and products of two f16/bf16 are exact in a double, so one
      // rounding to the 16-bit type is the instruction's (.rn only; an fma
      // rounds its product-sum to a double first).
      if (in.rounding != 0 || in.ftz)
        fault(t, PTXEMU_LAUNCH_FAILED, "unsupported f16/bf16 rounding or .ftz");
      double a = halfToF64(ty.kind, get(t, o[1]));
      double b = halfToF64(ty.kind, get(t, o[2]));
      double r = op == 0   ? a + b
                 : op == 1 ? a - b
                 : op == 2 ? a * b
                           : std::fma(a, b, halfToF64(ty.kind, get(t, o[3])));
      if (in.sat)
        r = std::isnan(r) ? 0.0 : std::min(1.0, std::max(0.0, r));
      set(t, o[0], f64ToHalf(ty.kind, r));
    } else {
      fault(t, PTXEMU_LAUNCH_FAILED, "unsupported type");
    }
  };
  switch (in.op) {
  case Op::Nop:
    return;
  case Op::Mov: {
    need(2);
    if (o[0].kind == Operand::Vec) { // unpack
      uint64_t v = get(t, o[1]);
      size_t n = o[0].elems.size();
      int part = w / (int)n;
      for (size_t i = 0; i < n; ++i)
        set(t, o[0].elems[i], zext(v >> (i * part), part));
    } else if (o[1].kind == Operand::Vec) { // pack
      size_t n = o[1].elems.size();
      int part = w / (int)n;
      uint64_t v = 0;
      for (size_t i = 0; i < n; ++i)
        v |= zext(get(t, o[1].elems[i]), part) << (i * part);
      set(t, o[0], v);
    } else {
      uint64_t v = get(t, o[1]);
      set(t, o[0], ty.kind == Ty::Pred ? (v != 0) : zext(v, w));
    }
    return;
  }
  case Op::Ld:
  case Op::St: {
    need(2);
    const Operand &addr = in.op == Op::Ld ? o[1] : o[0];
    const Operand &val = in.op == Op::Ld ? o[0] : o[1];
    size_t elem = (size_t)std::max(w, 8) / 8;
    size_t n = val.kind == Operand::Vec ? val.elems.size() : 1;
    char *p = memory(t, addrSpace(in, addr), get(t, addr), elem * n, elem * n);
    if (Space sp = addrSpace(in, addr);
        sp != Space::Param && sp != Space::Local)
      traceAccess(t, sp, get(t, addr), unsigned(elem * n));
    for (size_t i = 0; i < n; ++i) {
      const Operand &v = val.kind == Operand::Vec ? val.elems[i] : val;
      if (in.op == Op::Ld) {
        uint64_t x = 0;
        memcpy(&x, p + i * elem, elem);
        set(t, v, ty.isSigned() ? (uint64_t)sext(x, w) : x);
      } else {
        uint64_t x = get(t, v);
        memcpy(p + i * elem, &x, elem);
      }
    }
    return;
  }
  case Op::Atom: { // d = [a]; [a] = d + b
    need(3);
    size_t elem = (size_t)w / 8;
    char *p = memory(t, addrSpace(in, o[1]), get(t, o[1]), elem, elem);
    uint64_t old = 0;
    memcpy(&old, p, elem);
    uint64_t sum = zext(old + get(t, o[2]), w);
    memcpy(p, &sum, elem);
    set(t, o[0], old);
    return;
  }
  case Op::Add:
  case Op::Sub:
    if (ty.kind == Ty::F || ty.isHalf())
      return arith(in.op == Op::Add ? 0 : 1);
    need(3);
    set(t, o[0],
        zext(in.op == Op::Add ? get(t, o[1]) + get(t, o[2])
                              : get(t, o[1]) - get(t, o[2]),
             w));
    return;
  case Op::Mul:
  case Op::Mad: {
    if (ty.kind == Ty::F || ty.isHalf())
      return arith(in.op == Op::Mul ? 2 : 3);
    need(in.op == Op::Mad ? 4 : 3);
    uint64_t a = get(t, o[1]), b = get(t, o[2]), r;
    bool s = ty.isSigned();
    if (in.mulMode == 2) {
      int64_t x = s ? sext(a, w) : (int64_t)zext(a, w);
      int64_t y = s ? sext(b, w) : (int64_t)zext(b, w);
      r = zext((uint64_t)(x * y), 2 * w);
    } else if (in.mulMode == 1) {
      __int128 x = s ? (__int128)sext(a, w) : (__int128)zext(a, w);
      __int128 y = s ? (__int128)sext(b, w) : (__int128)zext(b, w);
      r = zext((uint64_t)((x * y) >> w), w);
    } else {
      r = zext(a * b, w);
    }
    if (in.op == Op::Mad)
      r = zext(r + get(t, o[3]), in.mulMode == 2 ? 2 * w : w);
    set(t, o[0], r);
    return;
  }
  case Op::Div:
  case Op::Rem: {
    need(3);
    if (ty.kind == Ty::F) {
      if (in.op == Op::Rem)
        fault(t, PTXEMU_LAUNCH_FAILED, "unsupported type");
      return arith(4);
    }
    uint64_t a = get(t, o[1]), b = get(t, o[2]), r;
    if (ty.isSigned()) {
      int64_t x = sext(a, w), y = sext(b, w);
      if (y == 0)
        r = in.op == Op::Div ? ~0ull : (uint64_t)x;
      else if (y == -1)
        r = in.op == Op::Div ? (uint64_t)(0 - (uint64_t)x) : 0;
      else
        r = (uint64_t)(in.op == Op::Div ? x / y : x % y);
    } else {
      uint64_t x = zext(a, w), y = zext(b, w);
      r = y == 0 ? (in.op == Op::Div ? ~0ull : x)
                 : (in.op == Op::Div ? x / y : x % y);
    }
    set(t, o[0], zext(r, w));
    return;
  }
  case Op::Min:
  case Op::Max: {
    need(3);
    bool isMax = in.op == Op::Max;
    if (ty.kind == Ty::F && w == 32) {
      float a = f32In(in, t, o[1]), b = f32In(in, t, o[2]), r;
      if (std::isnan(a) || std::isnan(b))
        r = in.nan ? NAN : std::isnan(a) ? b : a;
      else if (a == b)
        r = isMax ? (std::signbit(a) ? b : a) : (std::signbit(a) ? a : b);
      else
        r = isMax ? std::max(a, b) : std::min(a, b);
      set(t, o[0], f32Out(in, r));
      return;
    }
    if (ty.isHalf()) {
      double a = halfToF64(ty.kind, get(t, o[1]));
      double b = halfToF64(ty.kind, get(t, o[2]));
      uint64_t r;
      if (std::isnan(a) || std::isnan(b))
        r = in.nan          ? 0x7fff // the canonical NaN of both
            : std::isnan(a) ? get(t, o[2])
                            : get(t, o[1]);
      else if (a == b)
        r = (isMax ? !std::signbit(a) : std::signbit(a)) ? get(t, o[1])
                                                         : get(t, o[2]);
      else
        r = (isMax ? a > b : a < b) ? get(t, o[1]) : get(t, o[2]);
      set(t, o[0], zext(r, 16));
      return;
    }
    if (ty.kind == Ty::F)
      fault(t, PTXEMU_LAUNCH_FAILED, "unsupported type");
    uint64_t a = get(t, o[1]), b = get(t, o[2]);
    bool less =
        ty.isSigned() ? sext(a, w) < sext(b, w) : zext(a, w) < zext(b, w);
    set(t, o[0], zext(isMax ? (less ? b : a) : (less ? a : b), w));
    return;
  }
  case Op::And:
  case Op::Or:
  case Op::Xor: {
    need(3);
    uint64_t a = get(t, o[1]), b = get(t, o[2]);
    uint64_t r = in.op == Op::And ? a & b : in.op == Op::Or ? a | b : a ^ b;
    set(t, o[0], ty.kind == Ty::Pred ? (r & 1) : zext(r, w));
    return;
  }
  case Op::Not:
    need(2);
    set(t, o[0], ty.kind == Ty::Pred ? !get(t, o[1]) : zext(~get(t, o[1]), w));
    return;
  case Op::Shl:
  case Op::Shr: {
    need(3);
    uint64_t a = get(t, o[1]), b = zext(get(t, o[2]), 32), r;
    if (in.op == Op::Shl)
      r = b >= (uint64_t)w ? 0 : a << b;
    else if (ty.isSigned())
      r = (uint64_t)(sext(a, w) >> std::min<uint64_t>(b, 63));
    else
      r = b >= (uint64_t)w ? 0 : zext(a, w) >> b;
    set(t, o[0], zext(r, w));
    return;
  }
  case Op::Neg:
  case Op::Abs: {
    need(2);
    if (ty.kind == Ty::F && w == 32) {
      float a = f32In(in, t, o[1]);
      set(t, o[0], f32Out(in, in.op == Op::Neg ? -a : std::fabs(a)));
    } else if (ty.kind == Ty::F) {
      double a = asF64(get(t, o[1]));
      set(t, o[0], bitsOf(in.op == Op::Neg ? -a : std::fabs(a)));
    } else if (ty.isHalf()) { // the sign bit
      uint64_t a = zext(get(t, o[1]), 16);
      set(t, o[0], in.op == Op::Neg ? a ^ 0x8000 : a & 0x7fff);
    } else {
      int64_t a = sext(get(t, o[1]), w);
      set(t, o[0], zext((uint64_t)(in.op == Op::Neg || a < 0 ? -a : a), w));
    }
    return;
  }
  case Op::Bfe: {
    need(4);
    uint64_t a = zext(get(t, o[1]), w);
    unsigned pos = get(t, o[2]) & 0xff, len = get(t, o[3]) & 0xff;
    uint64_t r = 0;
    if (len > 0) {
      uint64_t field = pos >= (unsigned)w ? 0 : a >> pos;
      if (len < 64)
        field &= (1ull << len) - 1;
      r = field;
      if (ty.isSigned()) {
        unsigned top = std::min(pos + len - 1, (unsigned)w - 1);
        bool sign = (a >> top) & 1;
        if (sign && len < 64)
          r |= ~((1ull << len) - 1);
      }
    }
    set(t, o[0], zext(r, w));
    return;
  }
  case Op::Setp: {
    need(3);
    uint64_t x = get(t, o[1]), y = get(t, o[2]);
    int bits = w;
    if (ty.isHalf()) { // compared as f32 (exact)
      x = bitsOf((float)halfToF64(ty.kind, x));
      y = bitsOf((float)halfToF64(ty.kind, y));
      bits = 32;
    }
    bool r =
        compare(in.cmp, ty.isFloat() || ty.isHalf(), ty.isSigned(), bits, x, y);
    bool q = !r;
    if (in.combine) {
      need(4);
      bool c = get(t, o[3]) != 0;
      auto comb = [&](bool x) {
        return in.combine == 1 ? x && c : in.combine == 2 ? x || c : x != c;
      };
      r = comb(r), q = comb(q);
    }
    set(t, o[0], r);
    if (o[0].reg2 > 0)
      t.r[o[0].reg2] = q;
    return;
  }
  case Op::Selp:
    need(4);
    set(t, o[0], zext(get(t, o[3]) ? get(t, o[1]) : get(t, o[2]), w));
    return;
  case Op::Cvt: {
    need(2);
    const Type &d = in.type, &s = in.type2;
    uint64_t a = get(t, o[1]);
    if (d.kind == Ty::F16x2 || d.kind == Ty::BF16x2) {
      need(3);
      if (s.kind != Ty::F || s.bits != 32 || in.rounding != 0)
        fault(t, PTXEMU_LAUNCH_FAILED, "unsupported conversion");
      auto one = [&](uint64_t x) -> uint64_t {
        return d.kind == Ty::F16x2 ? f32ToF16(asF32(x)) : f32ToBf16(asF32(x));
      };
      set(t, o[0], (one(a) << 16) | one(get(t, o[2])));
      return;
    }
    // Source as a double (exact for every source type here) or integer.
    bool srcFloat = s.kind == Ty::F || s.kind == Ty::F16 || s.kind == Ty::BF16;
    double x = 0;
    if (s.kind == Ty::F)
      x = s.bits == 64 ? asF64(a)
                       : (double)(in.ftz ? flush(asF32(a)) : asF32(a));
    else if (s.kind == Ty::F16)
      x = f16ToF32((uint16_t)a);
    else if (s.kind == Ty::BF16)
      x = bf16ToF32((uint16_t)a);
    if (d.kind == Ty::F16 || d.kind == Ty::BF16) {
      if (!srcFloat) {
        // Integers below 2^24 are exact in f32, so one rounding to f16/bf16
        // is cvt's (larger ones would round twice here).
        x = s.isSigned() ? (double)(int64_t)sext(a, s.bits)
                         : (double)zext(a, s.bits);
        if (std::fabs(x) >= 16777216.0)
          fault(t, PTXEMU_LAUNCH_FAILED,
                "unsupported conversion (integer of 2^24 or more to f16/bf16)");
      }
      if (in.rounding != 0)
        fault(t, PTXEMU_LAUNCH_FAILED, "unsupported conversion");
      set(t, o[0],
          d.kind == Ty::F16 ? f32ToF16((float)x) : f32ToBf16((float)x));
      return;
    }
    if (d.kind == Ty::F) {
      double v;
      if (srcFloat)
        v = in.roundInt ? roundToInt(x, in.rounding) : x;
      else
        v = s.isSigned() ? (double)sext(a, s.bits) : (double)zext(a, s.bits);
      if (d.bits == 32) {
        float f = (float)v; // f64 -> f32 and 64-bit ints round to nearest
        if (!srcFloat && s.bits == 64 && in.rounding != 0)
          fault(t, PTXEMU_LAUNCH_FAILED, "unsupported conversion rounding");
        set(t, o[0], f32Out(in, f));
      } else {
        set(t, o[0], bitsOf(v));
      }
      return;
    }
    if (srcFloat) { // float -> integer, saturating, NaN -> 0
      double v =
          std::isnan(x) ? 0 : roundToInt(x, in.roundInt ? in.rounding : 1);
      double lo = d.isSigned() ? -std::ldexp(1.0, d.bits - 1) : 0;
      double hi = d.isSigned() ? std::ldexp(1.0, d.bits - 1) - 1
                               : std::ldexp(1.0, d.bits) - 1;
      v = std::min(std::max(v, lo), hi);
      set(t, o[0],
          zext(d.isSigned() ? (uint64_t)(int64_t)v : (uint64_t)v, d.bits));
      return;
    }
    uint64_t v = s.isSigned() ? (uint64_t)sext(a, s.bits) : zext(a, s.bits);
    set(t, o[0], zext(v, d.bits));
    return;
  }
  case Op::Cvta: {
    need(2);
    uint64_t a = get(t, o[1]);
    uint64_t base = in.space == Space::Shared
                        ? (uint64_t)(uintptr_t)shared_.get()
                    : in.space == Space::Local ? (uint64_t)(uintptr_t)t.local
                    : in.space == Space::Param ? (uint64_t)(uintptr_t)paramBase_
                                               : 0;
    set(t, o[0], zext(in.toSpace ? a - base : a + base, w));
    return;
  }
  case Op::Fma:
    return arith(3);
  case Op::Rcp:
  case Op::Sqrt:
  case Op::Rsqrt:
  case Op::Ex2:
  case Op::Lg2: {
    need(2);
    if (ty.kind == Ty::F && w == 64) {
      double a = asF64(get(t, o[1]));
      double r = in.op == Op::Rcp     ? 1.0 / a
                 : in.op == Op::Sqrt  ? std::sqrt(a)
                 : in.op == Op::Rsqrt ? 1.0 / std::sqrt(a)
                 : in.op == Op::Ex2   ? std::exp2(a)
                                      : std::log2(a);
      set(t, o[0], bitsOf(r));
      return;
    }
    float a = f32In(in, t, o[1]);
    float r = in.op == Op::Rcp     ? 1.0f / a
              : in.op == Op::Sqrt  ? std::sqrt(a)
              : in.op == Op::Rsqrt ? 1.0f / std::sqrt(a)
              : in.op == Op::Ex2   ? std::exp2(a)
                                   : std::log2(a);
    set(t, o[0], f32Out(in, r));
    return;
  }
  case Op::Copysign: {
    need(3);
    if (w == 64) {
      set(t, o[0],
          bitsOf(std::copysign(asF64(get(t, o[2])), asF64(get(t, o[1])))));
      return;
    }
    set(t, o[0],
        bitsOf(std::copysign(asF32(get(t, o[2])), asF32(get(t, o[1])))));
    return;
  }
  case Op::CpAsync:
  case Op::CpAsyncCommit:
  case Op::CpAsyncWait:
    return cpAsync(t, in);
  case Op::Mbarrier:
    return mbarrierOp(t, in);
  case Op::Tma:
    return issueTma(t, in);
  case Op::TmaStore:
    return issueTmaStore(t, in);
  case Op::BulkCommit:
  case Op::BulkWait:
    return bulkGroup(t, in);
  default:
    fault(t, PTXEMU_LAUNCH_FAILED, "not implemented");
  }
}

} // namespace ptxi
