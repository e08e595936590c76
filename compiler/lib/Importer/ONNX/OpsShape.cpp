//===- OpsShape.cpp - ONNX shape and data-movement operators
//---------------===//
//
// Shape, Reshape, Transpose, (Un)Squeeze, Flatten, Concat, Split, Slice,
// Gather, Expand, Tile.
// Shapes, axes, starts and repeats must be known when the model compiles
// (exporters compute them from Shape and constants, which fold here); the
// data may be computed at run time.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "llvm/Support/CheckedArithmetic.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

/// Input i's elements, which must be known when the model compiles.
FailureOr<SmallVector<int64_t>> constInts(NodeContext &ctx, size_t i,
                                          StringRef what) {
  const HostTensor *c = ctx.constant(i);
  if (!c)
    return ctx.fail(what + " (input " + Twine(i) +
                    ") must be known when the model compiles (computed from "
                    "shapes and constants only)");
  SmallVector<int64_t> values;
  for (int64_t k = 0; k < c->size(); ++k)
    values.push_back(c->integer(k));
  return values;
}

/// The axes of an op that took them as an attribute before opset
/// `inputSince` and as input `index` since; nullopt when absent.
FailureOr<std::optional<SmallVector<int64_t>>>
axesOf(NodeContext &ctx, int64_t inputSince, size_t index) {
  if (ctx.opset < inputSince)
    return ctx.attrInts("axes");
  if (!ctx.has(index))
    return std::optional<SmallVector<int64_t>>();
  FailureOr<SmallVector<int64_t>> axes = constInts(ctx, index, "axes");
  if (failed(axes))
    return failure();
  return std::optional<SmallVector<int64_t>>(*axes);
}

LogicalResult normalizeAll(NodeContext &ctx, SmallVectorImpl<int64_t> &axes,
                           int64_t rank) {
  for (int64_t &a : axes) {
    FailureOr<int64_t> n = ctx.normalizeAxis(a, rank, "axis");
    if (failed(n))
      return failure();
    a = *n;
  }
  SmallVector<int64_t> sorted(axes.begin(), axes.end());
  llvm::sort(sorted);
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return ctx.fail("an axis is named twice");
  return success();
}

/// Input 0 with a new shape of as many elements.
LogicalResult reshapeTo(NodeContext &ctx, ArrayRef<int64_t> shape) {
  if (const HostTensor *c = ctx.constant(0)) {
    HostTensor t = *c;
    t.shape.assign(shape.begin(), shape.end());
    return ctx.setConstant(0, std::move(t));
  }
  return ctx.setResult(0, ctx.tb.reshape(ctx.value(0), shape));
}

LogicalResult reshape(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> target = constInts(ctx, 1, "shape");
  if (failed(target))
    return failure();
  bool allowZero = ctx.attrInt("allowzero", 0) != 0;
  ArrayRef<int64_t> in = ctx.shape(0);
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (auto [i, d] : llvm::enumerate(*target)) {
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return ctx.fail("shape copies dimension " + Twine(i) +
                        " (0), which the input lacks");
      d = in[i];
    }
    if (d == -1) {
      if (inferred >= 0)
        return ctx.fail("shape has more than one -1");
      inferred = int64_t(i);
      shape.push_back(1);
      continue;
    }
    if (d < 0)
      return ctx.fail("shape has a negative dimension " + Twine(d));
    std::optional<int64_t> product = checkedMul(known, d);
    if (!product)
      return ctx.fail("shape has more than 2^63 elements");
    known = *product;
    shape.push_back(d);
  }
  int64_t total = numElements(in);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.fail("cannot infer the -1 dimension of a " + Twine(total) +
                      "-element input");
    shape[size_t(inferred)] = total / known;
  } else if (known != total) {
    return ctx.fail("shape has " + Twine(known) + " elements, the input " +
                    Twine(total));
  }
  return reshapeTo(ctx, shape);
}

LogicalResult transpose(NodeContext &ctx) {
  int64_t rank = ctx.rank(0);
  SmallVector<int64_t> perm;
  if (auto p = ctx.attrInts("perm"))
    perm = *p;
  else
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  SmallVector<int64_t> sorted(perm);
  llvm::sort(sorted);
  for (auto [i, p] : llvm::enumerate(sorted))
    if (p != int64_t(i) || int64_t(perm.size()) != rank)
      return ctx.fail("perm is not a permutation of the " + Twine(rank) +
                      " axes");
  ArrayRef<int64_t> in = ctx.shape(0);
  if (const HostTensor *c = ctx.constant(0)) {
    SmallVector<int64_t> out, inStrides = strides(in);
    for (int64_t p : perm)
      out.push_back(in[size_t(p)]);
    return ctx.setConstant(0, remap(*c, out, [&](ArrayRef<int64_t> idx) {
                             int64_t at = 0;
                             for (size_t k = 0; k < idx.size(); ++k)
                               at += idx[k] * inStrides[size_t(perm[k])];
                             return at;
                           }));
  }
  SmallVector<int32_t> perm32(perm.begin(), perm.end());
  return ctx.setResult(0, ctx.tb.transpose(ctx.value(0), perm32));
}

LogicalResult squeeze(NodeContext &ctx) {
  auto axes = axesOf(ctx, 13, 1);
  if (failed(axes))
    return failure();
  ArrayRef<int64_t> in = ctx.shape(0);
  SmallVector<int64_t> drop;
  if (*axes) {
    drop = **axes;
    if (failed(normalizeAll(ctx, drop, int64_t(in.size()))))
      return failure();
    for (int64_t a : drop)
      if (in[size_t(a)] != 1)
        return ctx.fail("axis " + Twine(a) + " has size " +
                        Twine(in[size_t(a)]) + ", not 1");
  } else {
    for (auto [i, d] : llvm::enumerate(in))
      if (d == 1)
        drop.push_back(int64_t(i));
  }
  SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(in))
    if (!llvm::is_contained(drop, int64_t(i)))
      shape.push_back(d);
  return reshapeTo(ctx, shape);
}

LogicalResult unsqueeze(NodeContext &ctx) {
  auto axes = axesOf(ctx, 13, 1);
  if (failed(axes))
    return failure();
  if (!*axes)
    return ctx.fail("axes are missing");
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t rank = int64_t(in.size() + (*axes)->size());
  SmallVector<int64_t> add = **axes;
  if (failed(normalizeAll(ctx, add, rank)))
    return failure();
  SmallVector<int64_t> shape;
  size_t next = 0;
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(llvm::is_contained(add, i) ? 1 : in[next++]);
  return reshapeTo(ctx, shape);
}

LogicalResult flatten(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t axis = ctx.attrInt("axis", 1);
  if (axis < 0)
    axis += int64_t(in.size());
  if (axis < 0 || axis > int64_t(in.size()))
    return ctx.fail("axis " + Twine(ctx.attrInt("axis", 1)) +
                    " is out of range");
  return reshapeTo(ctx, {numElements(in.take_front(size_t(axis))),
                         numElements(in.drop_front(size_t(axis)))});
}

LogicalResult concat(NodeContext &ctx) {
  int64_t rank = ctx.rank(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(ctx.shape(0));
  shape[size_t(*axis)] = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    ArrayRef<int64_t> s = ctx.shape(i);
    if (int64_t(s.size()) != rank ||
        ctx.type(i).getElementType() != ctx.type(0).getElementType())
      return ctx.fail("input " + Twine(i) +
                      " differs from input 0 in rank or element type");
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && s[size_t(d)] != shape[size_t(d)])
        return ctx.fail("input " + Twine(i) + " differs in dimension " +
                        Twine(d));
    shape[size_t(*axis)] += s[size_t(*axis)];
  }
  if (ctx.allConstant()) {
    // Element e of the result comes from the input whose slab along the
    // axis holds its index there.
    HostTensor joined;
    joined.type = ctx.constant(0)->type;
    joined.shape = shape;
    SmallVector<int64_t> starts;
    int64_t at = 0;
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      starts.push_back(at);
      at += ctx.shape(i)[size_t(*axis)];
    }
    SmallVector<int64_t> index(shape.size(), 0);
    for (int64_t e = 0, n = numElements(shape); e < n; ++e) {
      size_t k = size_t(
          std::upper_bound(starts.begin(), starts.end(), index[size_t(*axis)]) -
          starts.begin() - 1);
      while (ctx.shape(k)[size_t(*axis)] == 0)
        ++k;
      const HostTensor &src = *ctx.constant(k);
      SmallVector<int64_t> st = strides(src.shape);
      int64_t from = 0;
      for (size_t d = 0; d < index.size(); ++d)
        from += (d == size_t(*axis) ? index[d] - starts[k] : index[d]) * st[d];
      if (src.isFloat())
        joined.floats.push_back(src.floats[size_t(from)]);
      else
        joined.ints.push_back(src.ints[size_t(from)]);
      nextIndex(index, shape);
    }
    return ctx.setConstant(0, std::move(joined));
  }
  SmallVector<Value> parts;
  for (size_t i = 0; i < ctx.numInputs(); ++i)
    if (ctx.shape(i)[size_t(*axis)] > 0)
      parts.push_back(ctx.value(i));
  if (parts.empty()) // every input is empty along the axis, as the result
    return ctx.setResult(0, ctx.value(0));
  if (parts.size() == 1)
    return ctx.setResult(0, parts.front());
  return ctx.setResult(0, ctx.tb.concat(parts, int32_t(*axis)));
}

/// Input 0's elements [start, start + size) along each axis.
LogicalResult sliceTo(NodeContext &ctx, size_t result, ArrayRef<int64_t> start,
                      ArrayRef<int64_t> size) {
  if (const HostTensor *c = ctx.constant(0)) {
    SmallVector<int64_t> st = strides(c->shape);
    return ctx.setConstant(result, remap(*c, size, [&](ArrayRef<int64_t> idx) {
                             int64_t at = 0;
                             for (size_t d = 0; d < idx.size(); ++d)
                               at += (idx[d] + start[d]) * st[d];
                             return at;
                           }));
  }
  return ctx.setResult(result, ctx.tb.slice(ctx.value(0), start, size));
}

LogicalResult split(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), int64_t(in.size()), "axis");
  if (failed(axis))
    return failure();
  int64_t dim = in[size_t(*axis)];
  SmallVector<int64_t> sizes;
  if (ctx.opset >= 13 && ctx.has(1)) {
    FailureOr<SmallVector<int64_t>> s = constInts(ctx, 1, "split");
    if (failed(s))
      return failure();
    sizes = *s;
  } else if (auto s = ctx.attrInts("split")) {
    sizes = *s;
  } else {
    int64_t parts = ctx.attrInt("num_outputs", int64_t(ctx.numResults()));
    if (parts <= 0)
      return ctx.fail("num_outputs must be positive");
    if (parts != int64_t(ctx.numResults()))
      return ctx.fail("num_outputs is " + Twine(parts) + ", the node has " +
                      Twine(ctx.numResults()) + " outputs");
    int64_t each = dim / parts + (dim % parts != 0);
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  }
  std::optional<int64_t> total = 0;
  for (int64_t s : sizes)
    total = s < 0 || !total ? std::nullopt : checkedAdd(*total, s);
  if (sizes.size() != ctx.numResults() || total != dim)
    return ctx.fail("split sizes do not add up to dimension " + Twine(*axis) +
                    " (" + Twine(dim) + ") over " + Twine(ctx.numResults()) +
                    " outputs");
  int64_t at = 0;
  for (auto [i, s] : llvm::enumerate(sizes)) {
    SmallVector<int64_t> start(in.size(), 0), size(in);
    start[size_t(*axis)] = at;
    size[size_t(*axis)] = s;
    if (failed(sliceTo(ctx, i, start, size)))
      return failure();
    at += s;
  }
  return success();
}

LogicalResult slice(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0);
  int64_t rank = int64_t(in.size());
  SmallVector<int64_t> starts, ends, axes, steps;
  if (ctx.opset < 10) {
    starts = ctx.attrInts("starts").value_or(SmallVector<int64_t>());
    ends = ctx.attrInts("ends").value_or(SmallVector<int64_t>());
    axes = ctx.attrInts("axes").value_or(SmallVector<int64_t>());
  } else {
    FailureOr<SmallVector<int64_t>> s = constInts(ctx, 1, "starts");
    if (failed(s))
      return failure();
    FailureOr<SmallVector<int64_t>> e = constInts(ctx, 2, "ends");
    if (failed(e))
      return failure();
    starts = *s;
    ends = *e;
    if (ctx.has(3)) {
      auto a = constInts(ctx, 3, "axes");
      if (failed(a))
        return failure();
      axes = *a;
    }
    if (ctx.has(4)) {
      auto st = constInts(ctx, 4, "steps");
      if (failed(st))
        return failure();
      steps = *st;
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.fail("starts, ends, axes and steps differ in length");
  if (failed(normalizeAll(ctx, axes, rank)))
    return failure();
  SmallVector<int64_t> first(rank, 0), size(in), step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t d = in[size_t(axes[k])], s = steps[k];
    if (s == 0)
      return ctx.fail("a step is 0");
    int64_t b = starts[k] < 0 ? starts[k] + d : starts[k];
    int64_t e = ends[k] < 0 ? ends[k] + d : ends[k];
    if (s > 0) {
      b = std::clamp<int64_t>(b, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      b = std::clamp<int64_t>(b, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    int64_t n = s > 0 ? (e - b + s - 1) / s : (b - e - s - 1) / -s;
    first[size_t(axes[k])] = b;
    size[size_t(axes[k])] = std::max<int64_t>(n, 0);
    step[size_t(axes[k])] = s;
  }
  bool unit = llvm::all_of(step, [](int64_t s) { return s == 1; });
  if (const HostTensor *c = ctx.constant(0)) {
    SmallVector<int64_t> st = strides(c->shape);
    return ctx.setConstant(0, remap(*c, size, [&](ArrayRef<int64_t> idx) {
                             int64_t at = 0;
                             for (size_t d = 0; d < idx.size(); ++d)
                               at += (first[d] + idx[d] * step[d]) * st[d];
                             return at;
                           }));
  }
  if (unit)
    return ctx.setResult(0, ctx.tb.slice(ctx.value(0), first, size));
  // Reversals (step -1): slice the range, then reverse those axes.
  Value v = ctx.value(0);
  SmallVector<int64_t> lo(first);
  for (int64_t d = 0; d < rank; ++d) {
    if (step[size_t(d)] == 1)
      continue;
    if (step[size_t(d)] != -1)
      return ctx.fail("steps other than 1 and -1 on a tensor computed at "
                      "run time are not supported");
    lo[size_t(d)] = first[size_t(d)] - size[size_t(d)] + 1;
  }
  v = ctx.tb.slice(v, lo, size);
  for (int64_t d = 0; d < rank; ++d)
    if (step[size_t(d)] == -1)
      v = tosa::ReverseOp::create(ctx.b(), ctx.tb.getLoc(), v.getType(), v,
                                  ctx.b().getI32IntegerAttr(int32_t(d)));
  return ctx.setResult(0, v);
}

/// Input 0 rearranged: element `outIndex` of the result is input 0's
/// element at linear index `source(outIndex)`, all known when the model
/// compiles. Folded for a constant input, else one tosa.gather of single
/// elements at constant indices.
LogicalResult pick(NodeContext &ctx, ArrayRef<int64_t> outShape,
                   llvm::function_ref<int64_t(ArrayRef<int64_t>)> source) {
  if (const HostTensor *c = ctx.constant(0))
    return ctx.setConstant(0, remap(*c, outShape, source));
  int64_t n = numElements(ctx.shape(0)), count = numElements(outShape);
  if (n > int64_t(INT32_MAX))
    return ctx.fail("the input has more than 2^31 elements");
  HostTensor at;
  at.type = onnx::TensorProto::INT32;
  at.shape = {1, count};
  SmallVector<int64_t> index(outShape.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    at.ints.push_back(source(index));
    nextIndex(index, outShape);
  }
  Value ids = ctx.constantOp(at);
  Value table = ctx.tb.reshape(ctx.value(0), {1, n, 1});
  return ctx.setResult(0, ctx.tb.reshape(ctx.tb.gather(table, ids), outShape));
}

/// Input 1's elements as non-negative indices into a dimension of `n`.
FailureOr<SmallVector<int64_t>> indicesInto(NodeContext &ctx, int64_t n,
                                            StringRef what) {
  FailureOr<SmallVector<int64_t>> idx = constInts(ctx, 1, what);
  if (failed(idx))
    return failure();
  for (int64_t &i : *idx) {
    if (i < -n || i >= n)
      return ctx.fail("index " + Twine(i) +
                      " is out of range for a "
                      "dimension of " +
                      Twine(n));
    if (i < 0)
      i += n;
  }
  return idx;
}

LogicalResult gatherElements(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0), out = ctx.shape(1);
  if (in.size() != out.size())
    return ctx.fail("data and indices differ in rank");
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), int64_t(in.size()), "axis");
  if (failed(axis))
    return failure();
  FailureOr<SmallVector<int64_t>> idx =
      indicesInto(ctx, in[size_t(*axis)], "indices");
  if (failed(idx))
    return failure();
  SmallVector<int64_t> st = strides(in), outStrides = strides(out);
  return pick(ctx, out, [&](ArrayRef<int64_t> o) {
    int64_t flat = 0, at = 0;
    for (size_t d = 0; d < o.size(); ++d)
      flat += o[d] * outStrides[d];
    for (size_t d = 0; d < o.size(); ++d)
      at += (d == size_t(*axis) ? (*idx)[size_t(flat)] : o[d]) * st[d];
    return at;
  });
}

LogicalResult gatherND(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0), ids = ctx.shape(1);
  int64_t b = ctx.attrInt("batch_dims", 0);
  if (ids.empty() || b < 0 || b >= int64_t(std::min(in.size(), ids.size())))
    return ctx.fail("batch_dims " + Twine(b) + " does not fit the ranks");
  int64_t k = ids.back();
  if (k < 1 || b + k > int64_t(in.size()))
    return ctx.fail("indices' last dimension " + Twine(k) +
                    " does not fit the data's rank");
  FailureOr<SmallVector<int64_t>> idx = constInts(ctx, 1, "indices");
  if (failed(idx))
    return failure();
  SmallVector<int64_t> out(ids.drop_back());
  llvm::append_range(out, in.drop_front(size_t(b + k)));
  SmallVector<int64_t> st = strides(in), idStrides = strides(ids);
  size_t lead = ids.size() - 1; // output dims that index `indices`
  for (auto [e, i] : llvm::enumerate(*idx)) {
    int64_t n = in[size_t(b) + e % size_t(k)];
    if (i < -n || i >= n)
      return ctx.fail("index " + Twine(i) + " is out of range");
    if (i < 0)
      i += n;
  }
  return pick(ctx, out, [&](ArrayRef<int64_t> o) {
    int64_t row = 0, at = 0;
    for (size_t d = 0; d < lead; ++d)
      row += o[d] * idStrides[d];
    for (size_t d = 0; d < size_t(b); ++d)
      at += o[d] * st[d];
    for (size_t j = 0; j < size_t(k); ++j)
      at += (*idx)[size_t(row) + j] * st[size_t(b) + j];
    for (size_t d = lead; d < o.size(); ++d)
      at += o[d] * st[size_t(b + k) + (d - lead)];
    return at;
  });
}

LogicalResult gather(NodeContext &ctx) {
  ArrayRef<int64_t> in = ctx.shape(0), idxShape = ctx.shape(1);
  int64_t rank = int64_t(in.size());
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(ctx.attrInt("axis", 0), rank, "axis");
  if (failed(axis))
    return failure();
  if (!ctx.type(1).getElementType().isInteger(64) &&
      !ctx.type(1).getElementType().isInteger(32))
    return ctx.fail("indices are not int32 or int64");
  int64_t n = in[size_t(*axis)];
  SmallVector<int64_t> outShape(in.take_front(size_t(*axis)));
  llvm::append_range(outShape, idxShape);
  llvm::append_range(outShape, in.drop_front(size_t(*axis) + 1));
  const HostTensor *indices = ctx.constant(1);
  SmallVector<int64_t> idx;
  if (indices) {
    for (int64_t k = 0; k < indices->size(); ++k) {
      int64_t i = indices->integer(k);
      if (i < -n || i >= n)
        return ctx.fail("index " + Twine(i) + " is out of range for axis " +
                        "size " + Twine(n));
      idx.push_back(i < 0 ? i + n : i);
    }
  }
  if (indices && ctx.constant(0)) {
    const HostTensor &data = *ctx.constant(0);
    SmallVector<int64_t> st = strides(in);
    size_t ir = idxShape.size();
    SmallVector<int64_t> idxStrides = strides(idxShape);
    return ctx.setConstant(0, remap(data, outShape, [&](ArrayRef<int64_t> o) {
                             int64_t at = 0, flat = 0;
                             for (size_t k = 0; k < ir; ++k)
                               flat += o[size_t(*axis) + k] * idxStrides[k];
                             for (size_t d = 0; d < size_t(rank); ++d) {
                               int64_t i = d < size_t(*axis) ? o[d]
                                           : d == size_t(*axis)
                                               ? idx[size_t(flat)]
                                               : o[d + ir - 1];
                               at += i * st[d];
                             }
                             return at;
                           }));
  }
  // Known contiguous indices: a slice.
  if (indices && !idx.empty() &&
      llvm::all_of(llvm::seq<size_t>(1, idx.size()),
                   [&](size_t k) { return idx[k] == idx[k - 1] + 1; })) {
    SmallVector<int64_t> start(rank, 0), size(in);
    start[size_t(*axis)] = idx.front();
    size[size_t(*axis)] = int64_t(idx.size());
    Value v = ctx.tb.slice(ctx.value(0), start, size);
    return ctx.setResult(0, ctx.tb.reshape(v, outShape));
  }
  // tosa.gather: the axis first, the rest as channels.
  SmallVector<int32_t> perm = {int32_t(*axis)};
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      perm.push_back(int32_t(d));
  Value data = ctx.value(0);
  if (*axis != 0)
    data = ctx.tb.transpose(data, perm);
  int64_t channels = numElements(in) / std::max<int64_t>(n, 1);
  int64_t count = numElements(idxShape);
  Value table = ctx.tb.reshape(data, {1, n, channels});
  Value ids = ctx.tb.reshape(ctx.tb.cast(ctx.value(1), ctx.b().getI32Type()),
                             {1, count});
  Value rows = ctx.tb.gather(table, ids); // [1, count, channels]
  // rows as idxShape + in[:axis] + in[axis+1:], then into outShape's order.
  SmallVector<int64_t> gathered(idxShape);
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis)
      gathered.push_back(in[size_t(d)]);
  Value v = ctx.tb.reshape(rows, gathered);
  if (*axis != 0) {
    int32_t ir = int32_t(idxShape.size());
    SmallVector<int32_t> back;
    for (int32_t d = 0; d < int32_t(*axis); ++d)
      back.push_back(ir + d);
    for (int32_t k = 0; k < ir; ++k)
      back.push_back(k);
    for (int32_t d = int32_t(*axis) + 1; d < int32_t(rank); ++d)
      back.push_back(ir + d - 1);
    v = ctx.tb.transpose(v, back);
  }
  return ctx.setResult(0, v);
}

/// Input 0 broadcast (numpy rules) to `shape`.
LogicalResult broadcastTo(NodeContext &ctx, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> in = ctx.shape(0);
  const HostTensor *c = ctx.constant(0);
  if (c && numElements(shape) <= kMaxFoldElements) {
    SmallVector<int64_t> st = broadcastStrides(in, shape);
    return ctx.setConstant(0, remap(*c, shape, [&](ArrayRef<int64_t> idx) {
                             int64_t at = 0;
                             for (size_t d = 0; d < idx.size(); ++d)
                               at += idx[d] * st[d];
                             return at;
                           }));
  }
  Value v = ctx.tb.expandToRank(ctx.value(0), int64_t(shape.size()));
  ArrayRef<int64_t> have = cast<RankedTensorType>(v.getType()).getShape();
  SmallVector<int64_t> multiples;
  for (auto [h, w] : llvm::zip_equal(have, shape))
    multiples.push_back(h == w ? 1 : w);
  if (llvm::any_of(multiples, [](int64_t m) { return m != 1; }))
    v = ctx.tb.tile(v, multiples);
  return ctx.setResult(0, v);
}

LogicalResult expand(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> target = constInts(ctx, 1, "shape");
  if (failed(target))
    return failure();
  auto shape = broadcastShapes(ctx.shape(0), *target);
  if (!shape)
    return ctx.fail("the input does not broadcast to the shape");
  return broadcastTo(ctx, *shape);
}

LogicalResult tile(NodeContext &ctx) {
  FailureOr<SmallVector<int64_t>> repeats = constInts(ctx, 1, "repeats");
  if (failed(repeats))
    return failure();
  ArrayRef<int64_t> in = ctx.shape(0);
  if (repeats->size() != in.size() ||
      llvm::any_of(*repeats, [](int64_t r) { return r < 0; }))
    return ctx.fail("repeats must give one non-negative count per axis");
  SmallVector<int64_t> out;
  for (auto [d, r] : llvm::zip_equal(in, *repeats)) {
    std::optional<int64_t> n = checkedMul(d, r);
    if (!n)
      return ctx.fail("the result has more than 2^63 elements");
    out.push_back(*n);
  }
  const HostTensor *c = ctx.constant(0);
  if (c && numElements(out) <= kMaxFoldElements) {
    SmallVector<int64_t> st = strides(in);
    return ctx.setConstant(0, remap(*c, out, [&](ArrayRef<int64_t> idx) {
                             int64_t at = 0;
                             for (size_t d = 0; d < idx.size(); ++d)
                               at += (idx[d] % in[d]) * st[d];
                             return at;
                           }));
  }
  return ctx.setResult(0, ctx.tb.tile(ctx.value(0), *repeats));
}

} // namespace

void registerShapeOps(ConverterMap &map) {
  map["Reshape"] = reshape;
  map["Transpose"] = transpose;
  map["Squeeze"] = squeeze;
  map["Unsqueeze"] = unsqueeze;
  map["Flatten"] = flatten;
  map["Concat"] = concat;
  map["Split"] = split;
  map["Slice"] = slice;
  map["Gather"] = gather;
  map["GatherElements"] = gatherElements;
  map["GatherND"] = gatherND;
  map["Expand"] = expand;
  map["Tile"] = tile;
}

} // namespace tfc::onnx_import
