//===- OpsConv.cpp - ONNX Conv -------------------------------*- C++ -*-===//
//
// Conv over 1, 2 or 3 spatial dimensions of float tensors, mostly as a
// matmul of the input's patches with the flattened weight:
// [N * out..., C * kernel...] x [C * kernel..., M], which tfc computes with
// its GEMM kernels. A kernel equal to its stride, without padding or
// dilation (a ViT's patch embedding, a 1x1 conv), takes its patches by a
// reshape and a transpose; other 1-D and 2-D kernels of up to
// kMaxGatheredKernel positions by one slice of the zero-padded input per
// position (im2col). Larger kernels, depthwise convs (group == C) and 3-D
// ones are TOSA's convolutions, which take N<spatial>C inputs and
// O<spatial>I weights: the operands are transposed around them (1-D as 2-D
// with H = 1). Other groups are convolved one by one and concatenated.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Kernels of at most this many positions are computed as a matmul of the
/// input's patches (one slice of the input per position); larger ones, and
/// depthwise and 3-D convolutions, by TOSA's convolutions.
constexpr int64_t kMaxGatheredKernel = 64;

/// Per spatial dimension: the input's size and the kernel's, stride,
/// dilation, padding before and after, and the output's size.
struct Window {
  SmallVector<int64_t> in, kernel, stride, dilation, padBegin, padEnd, out;
  size_t rank() const { return in.size(); }
};

/// The spatial window of a Conv node with input x [N, C, in...] and weight
/// [M, C / group, kernel...]; failure through ctx.
FailureOr<Window> convWindow(NodeContext &ctx, ArrayRef<int64_t> x,
                             ArrayRef<int64_t> w) {
  size_t r = x.size() - 2;
  Window win;
  win.in.assign(x.begin() + 2, x.end());
  win.kernel.assign(w.begin() + 2, w.end());
  if (auto k = ctx.attrInts("kernel_shape"); k && *k != win.kernel)
    return ctx.fail("kernel_shape differs from the weight's spatial shape");
  auto ints = [&](StringRef name, size_t n,
                  int64_t fallback) -> FailureOr<SmallVector<int64_t>> {
    SmallVector<int64_t> v =
        ctx.attrInts(name).value_or(SmallVector<int64_t>(n, fallback));
    if (v.size() != n)
      return ctx.fail(name + " has " + Twine(v.size()) + " values, not " +
                      Twine(n));
    return v;
  };
  auto strides = ints("strides", r, 1);
  auto dilations = ints("dilations", r, 1);
  auto pads = ints("pads", 2 * r, 0);
  if (failed(strides) || failed(dilations) || failed(pads))
    return failure();
  win.stride = *strides;
  win.dilation = *dilations;
  if (llvm::any_of(win.stride, [](int64_t s) { return s < 1; }) ||
      llvm::any_of(win.dilation, [](int64_t d) { return d < 1; }))
    return ctx.fail("strides and dilations must be positive");
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  for (size_t i = 0; i < r; ++i) {
    int64_t span = (win.kernel[i] - 1) * win.dilation[i] + 1;
    int64_t begin = (*pads)[i], end = (*pads)[r + i];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (win.in[i] + win.stride[i] - 1) / win.stride[i];
      int64_t total =
          std::max<int64_t>(0, (out - 1) * win.stride[i] + span - win.in[i]);
      begin = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else if (autoPad == "VALID") {
      begin = end = 0;
    } else if (autoPad != "NOTSET") {
      return ctx.fail("auto_pad '" + autoPad +
                      "' is not one of NOTSET, "
                      "SAME_UPPER, SAME_LOWER, VALID");
    }
    if (begin < 0 || end < 0)
      return ctx.fail("pads must not be negative");
    int64_t padded = win.in[i] + begin + end;
    if (padded < span)
      return ctx.fail("the dilated kernel (" + Twine(span) +
                      ") is larger than the padded input (" + Twine(padded) +
                      ") in spatial dimension " + Twine(i));
    win.padBegin.push_back(begin);
    win.padEnd.push_back(end);
    win.out.push_back((padded - span) / win.stride[i] + 1);
  }
  return win;
}

/// x with `before` and `after` zeros around it along `axis`.
Value padAxis(TosaBuilder &tb, Value x, int32_t axis, int64_t before,
              int64_t after) {
  RankedTensorType t = typeOf(x);
  auto zeros = [&](int64_t n) {
    SmallVector<int64_t> shape(t.getShape());
    shape[size_t(axis)] = n;
    return tb.constant(t.clone(shape), 0.0);
  };
  SmallVector<Value> parts;
  if (before > 0)
    parts.push_back(zeros(before));
  parts.push_back(x);
  if (after > 0)
    parts.push_back(zeros(after));
  return parts.size() > 1 ? tb.concat(parts, axis) : x;
}

/// x's elements [start, start + size) along `axis`.
Value sliceAxis(TosaBuilder &tb, Value x, int32_t axis, int64_t start,
                int64_t size) {
  ArrayRef<int64_t> shape = typeOf(x).getShape();
  SmallVector<int64_t> first(shape.size(), 0), sizes(shape);
  first[size_t(axis)] = start;
  sizes[size_t(axis)] = size;
  return tb.slice(x, first, sizes);
}

/// x [N, C, in...] padded and cropped so that the window reads all of it:
/// TOSA wants (in + pads - span) to divide by the stride. Padding the
/// window does not read is dropped; where the input's own end is not read,
/// the padding is written out and the end sliced off.
Value fitInput(TosaBuilder &tb, Value x, Window &win) {
  for (size_t i = 0; i < win.rank(); ++i) {
    int64_t span = (win.kernel[i] - 1) * win.dilation[i] + 1;
    int64_t used = (win.out[i] - 1) * win.stride[i] + span;
    int64_t excess = win.in[i] + win.padBegin[i] + win.padEnd[i] - used;
    if (excess <= win.padEnd[i]) {
      win.padEnd[i] -= excess;
      continue;
    }
    int32_t axis = int32_t(i + 2);
    x = sliceAxis(tb, padAxis(tb, x, axis, win.padBegin[i], win.padEnd[i]),
                  axis, 0, used);
    win.in[i] = used;
    win.padBegin[i] = win.padEnd[i] = 0;
  }
  return x;
}

/// The permutation taking dimension 1 (channels) of a rank-`rank` tensor
/// last, and its inverse.
SmallVector<int32_t> channelsLast(int64_t rank) {
  SmallVector<int32_t> perm = {0};
  for (int32_t d = 2; d < int32_t(rank); ++d)
    perm.push_back(d);
  perm.push_back(1);
  return perm;
}
SmallVector<int32_t> channelsFirst(int64_t rank) {
  SmallVector<int32_t> perm = {0, int32_t(rank) - 1};
  for (int32_t d = 1; d < int32_t(rank) - 1; ++d)
    perm.push_back(d);
  return perm;
}

/// The convolution of `patches` [N, out..., C, kernel...] with
/// w [M, C, kernel...]: [N * out..., C * kernel...] x [C * kernel..., M].
Value matmulPatches(TosaBuilder &tb, Value patches, Value w, Value bias,
                    const Window &win) {
  int64_t n = typeOf(patches).getDimSize(0), m = typeOf(w).getDimSize(0);
  int64_t depth = numElements(typeOf(w).getShape().drop_front());
  Value lhs = tb.reshape(patches, {1, n * numElements(win.out), depth});
  Value rhs = tb.reshape(tb.transpose(tb.reshape(w, {m, depth}), {1, 0}),
                         {1, depth, m});
  Value y = tb.matmul(lhs, rhs);
  if (bias)
    y = tb.add(y, tb.reshape(bias, {1, 1, m}));
  SmallVector<int64_t> outShape = {n};
  llvm::append_range(outShape, win.out);
  outShape.push_back(m);
  return tb.transpose(tb.reshape(y, outShape),
                      channelsFirst(int64_t(win.rank()) + 2));
}

/// The patches of x [N, C, out * kernel...] (kernel == stride, no padding
/// or dilation): each input element once, by a reshape and a transpose.
Value tiledPatches(TosaBuilder &tb, Value x, const Window &win) {
  ArrayRef<int64_t> xs = typeOf(x).getShape();
  int64_t r = int64_t(win.rank());
  SmallVector<int64_t> split = {xs[0], xs[1]};
  SmallVector<int32_t> perm = {0};
  for (int64_t i = 0; i < r; ++i) {
    split.append({win.out[size_t(i)], win.kernel[size_t(i)]});
    perm.push_back(int32_t(2 + 2 * i));
  }
  perm.push_back(1);
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(int32_t(3 + 2 * i));
  return tb.transpose(tb.reshape(x, split), perm);
}

/// The patches of x [N, C, in...] for any window (im2col): per kernel
/// position, the input elements it meets, one slice of the zero-padded
/// input (strides taken by reshaping the slice to [out, stride] and
/// keeping the first column).
Value gatheredPatches(TosaBuilder &tb, Value x, const Window &win) {
  size_t r = win.rank();
  int64_t n = typeOf(x).getDimSize(0), c = typeOf(x).getDimSize(1);
  for (size_t i = 0; i < r; ++i) {
    // Room for the last kernel position's out * stride elements.
    int64_t need =
        (win.kernel[i] - 1) * win.dilation[i] + win.out[i] * win.stride[i];
    int64_t have = win.in[i] + win.padBegin[i] + win.padEnd[i];
    x = padAxis(tb, x, int32_t(i + 2), win.padBegin[i],
                win.padEnd[i] + std::max<int64_t>(0, need - have));
  }
  SmallVector<Value> columns;
  SmallVector<int64_t> at(r, 0), strided = {n, c}, picked = {n, c, 1};
  for (size_t i = 0; i < r; ++i) {
    strided.append({win.out[i], win.stride[i]});
    picked.push_back(win.out[i]);
  }
  do {
    Value v = x;
    for (size_t i = 0; i < r; ++i)
      v = sliceAxis(tb, v, int32_t(i + 2), at[i] * win.dilation[i],
                    win.out[i] * win.stride[i]);
    v = tb.reshape(v, strided);
    for (size_t i = 0; i < r; ++i)
      v = sliceAxis(tb, v, int32_t(3 + 2 * i), 0, 1);
    columns.push_back(tb.reshape(v, picked));
  } while (nextIndex(at, win.kernel));
  // [N, C, kernel, out...] -> [N, out..., C, kernel].
  Value all = columns.size() == 1 ? columns.front() : tb.concat(columns, 2);
  SmallVector<int32_t> perm = {0};
  for (size_t i = 0; i < r; ++i)
    perm.push_back(int32_t(3 + i));
  perm.append({1, 2});
  return tb.transpose(all, perm);
}

/// One TOSA convolution of x [N, C, in...] (2 or 3 spatial dims) with
/// w [M, C / groups, kernel...], groups 1 or C (depthwise, 2-D only).
Value tosaConv(TosaBuilder &tb, Value x, Value w, Value bias, const Window &win,
               bool depthwise) {
  OpBuilder &b = tb.builder();
  Location loc = tb.getLoc();
  RankedTensorType xt = typeOf(x), wt = typeOf(w);
  Type et = xt.getElementType();
  int64_t rank = xt.getRank(), m = wt.getDimSize(0);
  if (!bias)
    bias = tb.constant(RankedTensorType::get({m}, et), 0.0);
  Value zp = tb.constant(RankedTensorType::get({1}, et), 0.0);
  Value input = tb.transpose(x, channelsLast(rank));
  SmallVector<int64_t> pad;
  for (size_t i = 0; i < win.rank(); ++i)
    pad.append({win.padBegin[i], win.padEnd[i]});
  SmallVector<int64_t> outShape = {xt.getDimSize(0)};
  llvm::append_range(outShape, win.out);
  outShape.push_back(m);
  auto outType = RankedTensorType::get(outShape, et);
  Type acc = b.getF32Type();
  Value y;
  if (depthwise) {
    // [C * mult, 1, kh, kw] -> [kh, kw, C, mult].
    int64_t c = xt.getDimSize(1);
    Value hwcm = tb.transpose(
        tb.reshape(w, {c, m / c, wt.getDimSize(2), wt.getDimSize(3)}),
        {2, 3, 0, 1});
    y = tosa::DepthwiseConv2DOp::create(b, loc, outType, input, hwcm, bias, zp,
                                        zp, pad, win.stride, win.dilation, acc);
  } else if (win.rank() == 2) {
    Value ohwi = tb.transpose(w, channelsLast(rank));
    y = tosa::Conv2DOp::create(b, loc, outType, input, ohwi, bias, zp, zp, pad,
                               win.stride, win.dilation, acc);
  } else {
    Value odhwi = tb.transpose(w, channelsLast(rank));
    y = tosa::Conv3DOp::create(b, loc, outType, input, odhwi, bias, zp, zp, pad,
                               win.stride, win.dilation, acc);
  }
  return tb.transpose(y, channelsFirst(rank));
}

/// Group-1 convolution (or depthwise) of x [N, C, in...], the window fitted.
Value convolve(TosaBuilder &tb, Value x, Value w, Value bias, const Window &win,
               bool depthwise) {
  if (!depthwise && win.rank() <= 2) {
    bool tiles = llvm::all_of(llvm::seq<size_t>(0, win.rank()), [&](size_t i) {
      return win.kernel[i] == win.stride[i] && win.dilation[i] == 1 &&
             win.padBegin[i] == 0 && win.padEnd[i] == 0 &&
             win.in[i] == win.out[i] * win.kernel[i];
    });
    if (tiles)
      return matmulPatches(tb, tiledPatches(tb, x, win), w, bias, win);
    if (numElements(win.kernel) <= kMaxGatheredKernel)
      return matmulPatches(tb, gatheredPatches(tb, x, win), w, bias, win);
  }
  if (win.rank() != 1)
    return tosaConv(tb, x, w, bias, win, depthwise);
  // 1-D as 2-D with H = 1.
  auto withH = [&](Value v) {
    SmallVector<int64_t> shape(typeOf(v).getShape());
    shape.insert(shape.begin() + 2, 1);
    return tb.reshape(v, shape);
  };
  auto lift = [](ArrayRef<int64_t> v, int64_t first) {
    SmallVector<int64_t> r = {first};
    llvm::append_range(r, v);
    return r;
  };
  Window win2{lift(win.in, 1),       lift(win.kernel, 1),   lift(win.stride, 1),
              lift(win.dilation, 1), lift(win.padBegin, 0), lift(win.padEnd, 0),
              lift(win.out, 1)};
  Value y = tosaConv(tb, withH(x), withH(w), bias, win2, depthwise);
  SmallVector<int64_t> shape(typeOf(y).getShape());
  shape.erase(shape.begin() + 2);
  return tb.reshape(y, shape);
}

LogicalResult conv(NodeContext &ctx) {
  RankedTensorType xt = ctx.type(0), wt = ctx.type(1);
  Type et = xt.getElementType();
  if (!isa<FloatType>(et) || wt.getElementType() != et)
    return ctx.fail("X and W must be float tensors of one element type");
  if (xt.getRank() < 3 || xt.getRank() > 5)
    return ctx.fail("X has rank " + Twine(xt.getRank()) +
                    "; 1, 2 or 3 spatial dimensions are supported");
  if (wt.getRank() != xt.getRank())
    return ctx.fail("W has rank " + Twine(wt.getRank()) + ", X " +
                    Twine(xt.getRank()));
  int64_t c = xt.getDimSize(1), m = wt.getDimSize(0);
  int64_t group = ctx.attrInt("group", 1);
  if (group < 1 || c % group != 0 || m % group != 0 ||
      wt.getDimSize(1) * group != c)
    return ctx.fail("group " + Twine(group) + " does not divide X's " +
                    Twine(c) + " channels and W's " + Twine(m) +
                    " outputs of " + Twine(wt.getDimSize(1)) + " channels");
  if (ctx.has(2) && (ctx.rank(2) != 1 || ctx.shape(2)[0] != m ||
                     ctx.type(2).getElementType() != et))
    return ctx.fail("B must be a vector of the " + Twine(m) + " outputs");
  FailureOr<Window> win = convWindow(ctx, xt.getShape(), wt.getShape());
  if (failed(win))
    return failure();
  TosaBuilder &tb = ctx.tb;
  Value x = fitInput(tb, ctx.value(0), *win);
  Value w = ctx.value(1);
  Value bias = ctx.has(2) ? ctx.value(2) : Value();
  if (group == 1)
    return ctx.setResult(0, convolve(tb, x, w, bias, *win, false));
  if (group == c && win->rank() <= 2)
    return ctx.setResult(0, convolve(tb, x, w, bias, *win, true));
  // Each group on its own channels, the outputs concatenated.
  int64_t cg = c / group, mg = m / group;
  SmallVector<Value> outs;
  for (int64_t g = 0; g < group; ++g) {
    auto part = [&](Value v, int64_t at, int64_t n) {
      SmallVector<int64_t> start(typeOf(v).getRank(), 0),
          size(typeOf(v).getShape());
      start[size_t(at)] = g * n;
      size[size_t(at)] = n;
      return tb.slice(v, start, size);
    };
    outs.push_back(convolve(tb, part(x, 1, cg), part(w, 0, mg),
                            bias ? part(bias, 0, mg) : Value(), *win, false));
  }
  return ctx.setResult(0, tb.concat(outs, 1));
}

} // namespace

void registerConvOps(ConverterMap &map) { map["Conv"] = conv; }

} // namespace tfc::onnx_import
