//===- OpsAttention.cpp - ONNX Attention (opsets 23 and 24) ---------------===//
//
// Attention written as the graph a framework computes, which the fusion
// pass turns into one transformer.attention: Q and K scaled by
// sqrt(scale), Q·Kᵀ (the MatMul translation), the soft cap as
// c * tanh(x / c), the causal mask as a select of -inf, attn_mask and
// nonpad_kv_seqlen as one additive bias, the softmax (the Softmax
// translation), rows without a visible key made zero, and ·V. 3-D inputs
// [B, S, H·D] are split into heads and merged back; K and V heads are
// repeated for grouped-query attention; past_key and past_value are
// concatenated in front of K and V (present_key, present_value).
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

enum Input { kQ, kK, kV, kMask, kPastKey, kPastValue, kNonpad };
enum Output { kY, kPresentKey, kPresentValue, kQkOutput };

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// [B, S, H·X] as [B, H, S, X]; a 4-D tensor as it is.
Value splitHeads(TosaBuilder &tb, Value x, int64_t heads) {
  ArrayRef<int64_t> s = typeOf(x).getShape();
  if (s.size() == 4)
    return x;
  Value split = tb.reshape(x, {s[0], s[1], heads, s[2] / heads});
  return tb.transpose(split, {0, 2, 1, 3});
}

/// [B, Hkv, T, X] as [B, Hkv·G, T, X], query head h reading kv head h / G
/// (numpy's repeat on the head axis).
Value repeatHeads(TosaBuilder &tb, Value x, int64_t groups) {
  if (groups == 1)
    return x;
  ArrayRef<int64_t> s = typeOf(x).getShape();
  Value one = tb.reshape(x, {s[0], s[1], 1, s[2], s[3]});
  Value tiled = tb.tile(one, {1, 1, groups, 1, 1});
  return tb.reshape(tiled, {s[0], s[1] * groups, s[2], s[3]});
}

/// The shapes of one node, checked.
struct Dims {
  int64_t batch, qHeads, kvHeads, qLen, kvLen, past = 0, headSize;
  bool threeD;
  int64_t total() const { return past + kvLen; }
};

/// Heads from the attribute `name` for 3-D inputs; for 4-D ones the
/// attribute, where given, must agree with `dim`.
FailureOr<int64_t> heads(NodeContext &ctx, StringRef name, bool threeD,
                         int64_t dim) {
  std::optional<int64_t> attr;
  if (ctx.attr(name))
    attr = ctx.attrInt(name, 0);
  if (threeD && (!attr || *attr < 1))
    return ctx.fail(name + " must be a positive count for 3-D inputs");
  if (!threeD && attr && *attr != dim)
    return ctx.fail(name + " " + Twine(*attr) + " differs from the " +
                    Twine(dim) + " heads of the 4-D inputs");
  return threeD ? *attr : dim;
}

FailureOr<Dims> checkShapes(NodeContext &ctx) {
  Type et = ctx.type(kQ).getElementType();
  if (!isa<FloatType>(et))
    return ctx.fail("Q is not a floating-point tensor");
  if (ctx.type(kK).getElementType() != et ||
      ctx.type(kV).getElementType() != et)
    return ctx.fail("Q, K and V have different element types");
  int64_t rank = ctx.rank(kQ);
  if ((rank != 3 && rank != 4) || ctx.rank(kK) != rank || ctx.rank(kV) != rank)
    return ctx.fail("Q, K and V must all be 3-D or all 4-D");
  ArrayRef<int64_t> q = ctx.shape(kQ), k = ctx.shape(kK), v = ctx.shape(kV);
  Dims d;
  d.threeD = rank == 3;
  FailureOr<int64_t> hq = heads(ctx, "q_num_heads", d.threeD, q[1]);
  if (failed(hq))
    return failure();
  FailureOr<int64_t> hkv = heads(ctx, "kv_num_heads", d.threeD, k[1]);
  if (failed(hkv))
    return failure();
  d.batch = q[0];
  d.qHeads = *hq;
  d.kvHeads = *hkv;
  d.qLen = q[rank - 2];
  d.kvLen = k[rank - 2];
  if (d.threeD) {
    if (q[2] % d.qHeads || k[2] % d.kvHeads || v[2] % d.kvHeads)
      return ctx.fail("hidden sizes " + Twine(q[2]) + ", " + Twine(k[2]) +
                      ", " + Twine(v[2]) + " of Q, K, V are not multiples of " +
                      "q_num_heads " + Twine(d.qHeads) + " and kv_num_heads " +
                      Twine(d.kvHeads));
    d.headSize = q[2] / d.qHeads;
    if (k[2] / d.kvHeads != d.headSize)
      return ctx.fail("Q and K have different head sizes");
  } else {
    d.headSize = q[3];
    if (k[3] != d.headSize)
      return ctx.fail("Q and K have different head sizes");
    if (v[1] != d.kvHeads)
      return ctx.fail("K and V have different numbers of heads");
  }
  if (k[0] != d.batch || v[0] != d.batch)
    return ctx.fail("Q, K and V have different batch sizes");
  if (v[rank - 2] != d.kvLen)
    return ctx.fail("K and V have different sequence lengths");
  if (d.qHeads % d.kvHeads)
    return ctx.fail(Twine(d.qHeads) + " query heads are not a multiple of " +
                    Twine(d.kvHeads) + " key/value heads");
  if (ctx.has(kPastKey) != ctx.has(kPastValue))
    return ctx.fail("past_key and past_value must be given together");
  if (ctx.has(kPastKey)) {
    if (ctx.has(kNonpad))
      return ctx.fail("nonpad_kv_seqlen cannot be combined with past_key "
                      "and past_value");
    for (size_t i : {kPastKey, kPastValue}) {
      ArrayRef<int64_t> p = ctx.shape(i);
      int64_t x =
          i == kPastKey ? d.headSize : (d.threeD ? v[2] / d.kvHeads : v[3]);
      if (ctx.type(i).getElementType() != et || p.size() != 4 ||
          p[0] != d.batch || p[1] != d.kvHeads || p[3] != x ||
          p[2] != ctx.shape(kPastKey)[2])
        return ctx.fail(Twine(i == kPastKey ? "past_key" : "past_value") +
                        " is not [batch, kv heads, past length, head size] "
                        "of the inputs' element type");
    }
    d.past = ctx.shape(kPastKey)[2];
  }
  return d;
}

Value concatPast(NodeContext &ctx, size_t past, Value x) {
  return ctx.has(past) ? ctx.tb.concat({ctx.value(past), x}, 2) : x;
}

/// attn_mask as an additive bias of element type `et` at rank 4, its key
/// dimension padded to `total` with hidden keys; null when absent.
FailureOr<Value> maskBias(NodeContext &ctx, Type et, int64_t total) {
  if (!ctx.has(kMask))
    return Value();
  TosaBuilder &tb = ctx.tb;
  Type mt = ctx.type(kMask).getElementType();
  bool boolean = mt.isInteger(1);
  if (!boolean && mt != et)
    return ctx.fail("attn_mask of " + typeName(ctx.onnxTypeOf(kMask)) +
                    " is neither bool nor of Q's element type");
  SmallVector<int64_t> shape(ctx.shape(kMask));
  if (shape.empty() || shape.size() > 4)
    return ctx.fail("attn_mask has rank " + Twine(shape.size()) +
                    " (1 to 4 broadcast to the scores)");
  if (shape.back() > total)
    return ctx.fail("attn_mask has " + Twine(shape.back()) +
                    " keys, more than the " + Twine(total) + " of K");
  Value mask = ctx.value(kMask);
  if (shape.back() < total) {
    SmallVector<int64_t> pad(shape);
    pad.back() = total - shape.back();
    Value hidden =
        tb.constant(RankedTensorType::get(pad, mt), boolean ? 0.0 : kNegInf);
    mask = tb.concat({mask, hidden}, int32_t(shape.size() - 1));
  }
  mask = tb.expandToRank(mask, 4);
  if (boolean)
    mask = tb.select(mask, tb.splat(0.0, et, 4), tb.splat(kNegInf, et, 4));
  return mask;
}

/// nonpad_kv_seqlen n [B] as an additive bias [B, 1, rows, T]: key j is
/// visible to query i where j < n[b], and with is_causal where
/// j <= i + n[b] - Sq (which implies it); null when absent.
FailureOr<Value> nonpadBias(NodeContext &ctx, const Dims &d, Type et,
                            bool causal) {
  if (!ctx.has(kNonpad))
    return Value();
  if (ctx.type(kNonpad).getElementType() != ctx.b().getI64Type() ||
      ctx.shape(kNonpad) != ArrayRef<int64_t>{d.batch})
    return ctx.fail("nonpad_kv_seqlen is not an int64 vector of the batch "
                    "size " +
                    Twine(d.batch));
  int64_t rows = causal ? d.qLen : 1, keys = d.total();
  // n >= limit[i, j]: j + 1 for the padding, j - i + Sq when causal.
  std::vector<int64_t> limits;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < keys; ++j)
      limits.push_back(causal ? j - i + d.qLen : j + 1);
  Value limit = ctx.constantOp(HostTensor::ofInts(
      onnx::TensorProto::INT64, {1, 1, rows, keys}, std::move(limits)));
  Value n = ctx.tb.reshape(ctx.value(kNonpad), {d.batch, 1, 1, 1});
  Value visible = ctx.tb.greaterEqual(n, limit);
  return ctx.tb.select(visible, ctx.tb.splat(0.0, et, 4),
                       ctx.tb.splat(kNegInf, et, 4));
}

/// The causal frontier without nonpad_kv_seqlen: key j visible to query i
/// where j <= i + past, as a constant [1, 1, Sq, T] condition.
Value causalCondition(NodeContext &ctx, const Dims &d) {
  std::vector<int64_t> visible;
  for (int64_t i = 0; i < d.qLen; ++i)
    for (int64_t j = 0; j < d.total(); ++j)
      visible.push_back(j <= i + d.past);
  return ctx.constantOp(HostTensor::ofInts(
      onnx::TensorProto::BOOL, {1, 1, d.qLen, d.total()}, std::move(visible)));
}

/// The element type softmax_precision asks for; `et` where not given.
FailureOr<Type> softmaxType(NodeContext &ctx, Type et) {
  if (!ctx.attr("softmax_precision"))
    return et;
  auto precision = OnnxType(ctx.attrInt("softmax_precision", 0));
  Type t = ctx.graphType(precision);
  if (!isFloatType(precision) || !t || !isa<FloatType>(t) ||
      precision == onnx::TensorProto::DOUBLE)
    return ctx.fail("softmax_precision " + typeName(precision) +
                    " is not supported (float, float16, bfloat16 are)");
  return t;
}

LogicalResult attention(NodeContext &ctx) {
  FailureOr<Dims> dims = checkShapes(ctx);
  if (failed(dims))
    return failure();
  const Dims &d = *dims;
  TosaBuilder &tb = ctx.tb;
  Type et = ctx.type(kQ).getElementType();
  int64_t mode = ctx.attrInt("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return ctx.fail("qk_matmul_output_mode " + Twine(mode) +
                    " is not 0, 1, 2 or 3");
  int64_t isCausal = ctx.attrInt("is_causal", 0);
  if (isCausal != 0 && isCausal != 1)
    return ctx.fail("is_causal " + Twine(isCausal) + " is not 0 or 1");
  FailureOr<Type> softmaxEt = softmaxType(ctx, et);
  if (failed(softmaxEt))
    return failure();
  double scale = ctx.attr("scale") ? ctx.attrFloat("scale", 1.0)
                                   : 1.0 / std::sqrt(double(d.headSize));
  double softcap = ctx.attrFloat("softcap", 0.0);

  Value q = splitHeads(tb, ctx.value(kQ), d.qHeads);
  Value k = concatPast(ctx, kPastKey, splitHeads(tb, ctx.value(kK), d.kvHeads));
  Value v =
      concatPast(ctx, kPastValue, splitHeads(tb, ctx.value(kV), d.kvHeads));
  (void)ctx.setResult(kPresentKey, k);
  (void)ctx.setResult(kPresentValue, v);

  FailureOr<Value> mask = maskBias(ctx, et, d.total());
  if (failed(mask))
    return failure();
  FailureOr<Value> nonpad = nonpadBias(ctx, d, et, isCausal);
  if (failed(nonpad))
    return failure();

  // Q·Kᵀ of Q and K each scaled by sqrt(scale), in the inputs' type.
  int64_t groups = d.qHeads / d.kvHeads;
  Value root = tb.splat(std::sqrt(scale), et, 4);
  Value kt =
      tb.transpose(tb.mul(repeatHeads(tb, k, groups), root), {0, 1, 3, 2});
  FailureOr<Value> qk = matmul(ctx, tb.mul(q, root), kt);
  if (failed(qk))
    return failure();
  Value scores = *qk;
  Value qkOutput = scores;
  if (softcap > 0) {
    Value inner = tb.mul(scores, tb.splat(1.0 / softcap, et, 4));
    scores = tb.mul(tb.tanh(inner), tb.splat(softcap, et, 4));
  }
  if (mode == 1)
    qkOutput = scores;
  Value hidden = tb.splat(kNegInf, et, 4);
  if (isCausal && !*nonpad)
    scores = tb.select(causalCondition(ctx, d), scores, hidden);
  Value bias =
      *mask && *nonpad ? tb.add(*mask, *nonpad) : (*mask ? *mask : *nonpad);
  if (bias)
    scores = tb.add(scores, bias);
  if (mode == 2)
    qkOutput = scores;

  Value probs = softmaxOn(tb, tb.cast(scores, *softmaxEt), 3, false);
  // A row whose every key is hidden is NaN after the softmax; ONNX makes
  // it zero (as the fused op does), and so the guard the fusion absorbs.
  if (bias) {
    Value isNumber = tb.equal(probs, probs);
    Value isNan = tosa::LogicalNotOp::create(ctx.b(), tb.getLoc(),
                                             isNumber.getType(), isNumber);
    probs = tb.select(isNan, tb.splat(0.0, *softmaxEt, 4), probs);
  }
  probs = tb.cast(probs, et);
  if (mode == 3)
    qkOutput = probs;
  (void)ctx.setResult(kQkOutput, qkOutput);

  FailureOr<Value> y = matmul(ctx, probs, repeatHeads(tb, v, groups));
  if (failed(y))
    return failure();
  Value out = *y;
  if (d.threeD) {
    ArrayRef<int64_t> s = typeOf(out).getShape();
    out =
        tb.reshape(tb.transpose(out, {0, 2, 1, 3}), {s[0], s[2], s[1] * s[3]});
  }
  return ctx.setResult(kY, out);
}

} // namespace

void registerAttentionOps(ConverterMap &map) { map["Attention"] = attention; }

} // namespace tfc::onnx_import
