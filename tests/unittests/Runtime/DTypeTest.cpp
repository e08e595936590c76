//===- DTypeTest.cpp - Float conversions of weights at bind time ----------===//
//
// tfc::convertFloats against the compiler's own _Float16 and __bf16
// conversions (round to nearest even): every f16 and bf16 value widened
// and narrowed back, f32 values at and around every rounding boundary
// (ties, subnormals, overflow to infinity), NaN and infinities, and random
// f32 values.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using tfc::DType;

template <typename To, typename From> To bitCast(From x) {
  static_assert(sizeof(To) == sizeof(From));
  To y;
  std::memcpy(&y, &x, sizeof(To));
  return y;
}

uint16_t bits16(_Float16 h) { return bitCast<uint16_t>(h); }
uint16_t bits16(__bf16 h) { return bitCast<uint16_t>(h); }
uint32_t bits32(float f) { return bitCast<uint32_t>(f); }
float fromBits(uint32_t b) { return bitCast<float>(b); }

/// f32 values that probe every rounding case of both 16-bit formats.
std::vector<float> probes() {
  std::vector<float> v = {0.0f,
                          -0.0f,
                          1.0f,
                          -1.5f,
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          70000.0f,
                          0x1p-14f,
                          0x1p-24f,
                          0x1p-25f,
                          0x1.8p-25f,
                          0x1p-26f,
                          3e-8f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::min(),
                          std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
  // Around every f16 and bf16 boundary: exact ties and one f32 ulp off.
  for (uint32_t h = 0; h < 0x7c00; h += 7) {
    float lo = float(bitCast<_Float16>(uint16_t(h)));
    float hi = float(bitCast<_Float16>(uint16_t(h + 1)));
    float mid = (lo + hi) / 2;
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, hi)})
      v.insert(v.end(), {x, -x});
  }
  for (uint32_t e = 0; e < 255; ++e)
    for (uint32_t low : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0x18000u})
      v.push_back(fromBits((e << 23) | low));
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 100000; ++i) {
    float x = fromBits(any(rng));
    if (!std::isnan(x))
      v.push_back(x);
  }
  return v;
}

TEST(ConvertFloats, NarrowsLikeTheCompiler) {
  std::vector<float> x = probes();
  std::vector<uint16_t> half(x.size()), bf(x.size());
  tfc::convertFloats(x.data(), DType::F32, half.data(), DType::F16, x.size());
  tfc::convertFloats(x.data(), DType::F32, bf.data(), DType::BF16, x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(half[i], bits16(_Float16(x[i])))
        << "f16 of " << x[i] << " (bits " << std::hex << bits32(x[i]) << ")";
    ASSERT_EQ(bf[i], bits16(__bf16(x[i])))
        << "bf16 of " << x[i] << " (bits " << std::hex << bits32(x[i]) << ")";
  }
}

TEST(ConvertFloats, EveryHalfWidensExactlyAndNarrowsBack) {
  for (DType t : {DType::F16, DType::BF16}) {
    std::vector<uint16_t> all(65536), back(65536);
    for (uint32_t i = 0; i < 65536; ++i)
      all[i] = uint16_t(i);
    std::vector<float> wide(65536);
    tfc::convertFloats(all.data(), t, wide.data(), DType::F32, 65536);
    tfc::convertFloats(wide.data(), DType::F32, back.data(), t, 65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      float want = t == DType::F16 ? float(bitCast<_Float16>(all[i]))
                                   : float(bitCast<__bf16>(all[i]));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(wide[i])) << i;
        EXPECT_TRUE(std::isnan(t == DType::F16
                                   ? float(bitCast<_Float16>(back[i]))
                                   : float(bitCast<__bf16>(back[i]))))
            << i;
        continue;
      }
      ASSERT_EQ(bits32(wide[i]), bits32(want)) << tfc::dtypeName(t) << " " << i;
      ASSERT_EQ(back[i], all[i]) << tfc::dtypeName(t) << " " << i;
    }
  }
}

TEST(ConvertFloats, NaNStaysNaN) {
  float nans[] = {std::numeric_limits<float>::quiet_NaN(),
                  -std::numeric_limits<float>::quiet_NaN(),
                  fromBits(0x7f800001), fromBits(0xff800001)};
  for (DType t : {DType::F16, DType::BF16}) {
    uint16_t h[4];
    float w[4];
    tfc::convertFloats(nans, DType::F32, h, t, 4);
    tfc::convertFloats(h, t, w, DType::F32, 4);
    for (int i = 0; i < 4; ++i)
      EXPECT_TRUE(std::isnan(w[i])) << tfc::dtypeName(t) << " " << i;
  }
}

TEST(ConvertFloats, Pairs) {
  EXPECT_TRUE(tfc::isFloatConvertible(DType::F32, DType::BF16));
  EXPECT_TRUE(tfc::isFloatConvertible(DType::BF16, DType::F16));
  EXPECT_FALSE(tfc::isFloatConvertible(DType::F64, DType::F32));
  EXPECT_FALSE(tfc::isFloatConvertible(DType::I32, DType::F32));
  EXPECT_FALSE(tfc::isFloatConvertible(DType::F32, DType::I64));
  // f16 to bf16 goes through f32: one rounding.
  _Float16 h = _Float16(0.1f);
  uint16_t in = bits16(h), out;
  tfc::convertFloats(&in, DType::F16, &out, DType::BF16, 1);
  EXPECT_EQ(out, bits16(__bf16(float(h))));
}

} // namespace
