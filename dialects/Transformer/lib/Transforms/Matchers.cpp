//===- Matchers.cpp - Recognise transformer blocks in TOSA graphs ---------===//
//
// Read-only matchers shared by the fusion patterns and by `explain-missed`.
// Each returns the first condition that failed; the conditions are checked
// in the order a reader follows the graph, from the root upwards. This file
// holds the small building blocks the others share (constants, scales,
// reshapes of heads, repeated K/V); NormMatchers.cpp matches softmax,
// layer_norm and rms_norm, AttentionMatchers.cpp attention and its masks.
//
//===----------------------------------------------------------------------===//

#include "Matchers.h"

#include "mlir/Dialect/Tosa/Utils/ConversionUtils.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace tfc::transformer::fusion {

//===----------------------------------------------------------------------===//
// Small building blocks
//===----------------------------------------------------------------------===//

std::optional<double> getSplatFloat(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || !attr.isSplat() ||
      !isa<FloatType>(attr.getElementType()))
    return std::nullopt;
  return attr.getSplatValue<APFloat>().convertToDouble();
}

MatchOr<double> matchScale(Value v) {
  if (std::optional<double> c = getSplatFloat(v))
    return *c;
  if (auto rec = v.getDefiningOp<tosa::ReciprocalOp>())
    if (std::optional<double> c = getSplatFloat(rec.getInput1())) {
      if (*c == 0.0)
        return mismatch("scale is the reciprocal of zero");
      return 1.0 / *c;
    }
  return mismatch("scale is not a constant");
}

bool hasZeroShift(tosa::MulOp mul) {
  Value shift = mul.getShift();
  if (!shift)
    return true;
  DenseElementsAttr attr;
  if (!matchPattern(shift, m_Constant(&attr)))
    return false;
  return llvm::all_of(attr.getValues<APInt>(),
                      [](const APInt &x) { return x.isZero(); });
}

std::optional<HeadView> matchHeadReshape(tosa::ReshapeOp reshape) {
  RankedTensorType in = rankedType(reshape.getInput1());
  RankedTensorType out = rankedType(reshape.getOutput());
  if (!in || !out || !in.hasStaticShape() || !out.hasStaticShape())
    return std::nullopt;
  RankedTensorType wide = in, narrow = out;
  if (in.getRank() == 3 && out.getRank() == 4)
    std::swap(wide, narrow);
  if (wide.getRank() != 4 || narrow.getRank() != 3)
    return std::nullopt;
  ArrayRef<int64_t> w = wide.getShape(), n = narrow.getShape();
  if (w[0] * w[1] != n[0] || w[2] != n[1] || w[3] != n[2])
    return std::nullopt;
  return HeadView{w[0], w[1]};
}

static std::optional<SmallVector<int64_t>> getMultiples(tosa::TileOp tile) {
  SmallVector<int64_t> multiples;
  Operation *def = tile.getMultiples().getDefiningOp();
  if (!def || !tosa::getConstShapeValues(def, multiples))
    return std::nullopt;
  return multiples;
}

MatchOr<RepeatedKV> matchRepeatedKV(Value v) {
  // tile(x, [1, G, 1, 1]): head h of the result is head h % Hkv of x.
  if (auto tile = v.getDefiningOp<tosa::TileOp>()) {
    RankedTensorType in = rankedType(tile.getInput1());
    std::optional<SmallVector<int64_t>> m = getMultiples(tile);
    if (!in || !in.hasStaticShape() || in.getRank() != 4 || !m ||
        (*m)[0] != 1 || (*m)[2] != 1 || (*m)[3] != 1)
      return mismatch("tile does not repeat the head dim of a 4-D tensor");
    RepeatedKV r;
    r.source = tile.getInput1();
    r.groups = (*m)[1];
    r.interleaved = true;
    r.repeatedView = {in.getDimSize(0), in.getDimSize(1) * r.groups};
    return r;
  }
  // reshape(tile(reshape(x, [B,Hkv,1,S,X]), [1,1,G,1,1]), [B,Hkv*G,S,X]):
  // head h of the result is head h / G of x.
  auto merge = v.getDefiningOp<tosa::ReshapeOp>();
  auto tile =
      merge ? merge.getInput1().getDefiningOp<tosa::TileOp>() : tosa::TileOp();
  auto split = tile ? tile.getInput1().getDefiningOp<tosa::ReshapeOp>()
                    : tosa::ReshapeOp();
  if (!split)
    return mismatch("not a repeat of K/V heads");
  RankedTensorType x = rankedType(split.getInput1());
  RankedTensorType x5 = rankedType(split.getOutput());
  RankedTensorType out = rankedType(merge.getOutput());
  std::optional<SmallVector<int64_t>> m = getMultiples(tile);
  if (!x || !x5 || !out || !x.hasStaticShape() || !out.hasStaticShape() ||
      x.getRank() != 4 || x5.getRank() != 5 ||
      (out.getRank() != 4 && out.getRank() != 3) || !m)
    return mismatch("not a repeat of K/V heads");
  ArrayRef<int64_t> xs = x.getShape(), s5 = x5.getShape();
  int64_t g = (*m)[2];
  // The merge may also fold the batch in: [B*Hq, S, X] (the matmul's
  // operand, as TorchScript exports repeat_kv before a batched matmul).
  SmallVector<int64_t> os(out.getShape());
  if (os.size() == 3 && xs[0] * xs[1] * g == os[0])
    os = {xs[0], xs[1] * g, os[1], os[2]};
  bool ok = os.size() == 4 && (*m)[0] == 1 && (*m)[1] == 1 && (*m)[3] == 1 &&
            (*m)[4] == 1 && s5[0] == xs[0] && s5[1] == xs[1] && s5[2] == 1 &&
            s5[3] == xs[2] && s5[4] == xs[3] && os[0] == xs[0] &&
            os[1] == xs[1] * g && os[2] == xs[2] && os[3] == xs[3];
  if (!ok)
    return mismatch("reshape/tile/reshape is not a repeat of K/V heads");
  RepeatedKV r;
  r.source = split.getInput1();
  r.groups = g;
  r.interleaved = false;
  r.repeatedView = {os[0], os[1]};
  return r;
}

} // namespace tfc::transformer::fusion
