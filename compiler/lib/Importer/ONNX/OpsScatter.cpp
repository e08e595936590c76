//===- OpsScatter.cpp - ONNX ScatterND -----------------------*- C++ -*-===//
//
// ScatterND with reduction none, add, mul, max or min, on any element type
// tfc computes in. The data is viewed as [1, S, C]: S slots (the dimensions
// the indices address) of C elements each, the updates as [1, W, C].
//
// - Everything known when the model compiles: folded on the host.
// - Indices known: the host works out which update each slot takes;
//   a tosa.gather of the updates and a select against a constant mask write
//   them. Slots updated more than once (a reduction over repeated indices)
//   take one round of gather, combine and select per repetition, in the
//   indices' order.
// - Indices computed at run time: each slot finds its update by comparing
//   the flattened indices with the slot numbers (the last update wins for
//   reduction none, as applying them in order does); a reduction applies
//   the updates one after the other.
//
//===----------------------------------------------------------------------===//

#include "Folding.h"
#include "GraphImporter.h"

#include "mlir/Dialect/Tosa/IR/TosaOps.h"

using namespace mlir;
using namespace llvm;

namespace tfc::onnx_import {

namespace {

/// Updates applied one by one when the indices are computed at run time,
/// at most.
constexpr int64_t kMaxRuntimeReductionUpdates = 256;

enum class Reduction { None, Add, Mul, Max, Min };

template <typename T> T combine(Reduction r, T a, T b) {
  switch (r) {
  case Reduction::None:
    return b;
  case Reduction::Add:
    return a + b;
  case Reduction::Mul:
    return a * b;
  case Reduction::Max:
    return std::max(a, b);
  case Reduction::Min:
    return std::min(a, b);
  }
  return b;
}

/// `a` combined with the update `u` (broadcast over size-1 dims).
Value combineValues(TosaBuilder &tb, Reduction r, Value a, Value u) {
  switch (r) {
  case Reduction::None:
    break;
  case Reduction::Add:
    return tb.add(a, u);
  case Reduction::Mul:
    return tb.mul(a, u);
  case Reduction::Max:
    return tb.maximum(a, u);
  case Reduction::Min:
    return tosa::MinimumOp::create(tb.builder(), tb.getLoc(),
                                   tb.broadcastType(a, u), a, u);
  }
  return u;
}

Value constInts(NodeContext &ctx, OnnxType type, ArrayRef<int64_t> shape,
                std::vector<int64_t> values) {
  return ctx.constantOp(HostTensor::ofInts(type, shape, std::move(values)));
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = i;
  return v;
}

/// The result with every element of the indices known: `slots[w]` is the
/// slot update w writes.
LogicalResult scatterKnown(NodeContext &ctx, Reduction r,
                           ArrayRef<int64_t> slots, int64_t s, int64_t c) {
  int64_t w = int64_t(slots.size());
  const HostTensor *data = ctx.constant(0), *updates = ctx.constant(2);
  if (data && updates) {
    HostTensor out = *data;
    for (int64_t k = 0; k < w; ++k)
      for (int64_t e = 0; e < c; ++e) {
        size_t to = size_t(slots[size_t(k)] * c + e), from = size_t(k * c + e);
        if (out.isFloat())
          out.floats[to] = roundToType(
              combine(r, out.floats[to], updates->floats[from]), out.type);
        else
          out.ints[to] = combine(r, out.ints[to], updates->ints[from]);
      }
    return ctx.setConstant(0, std::move(out));
  }
  // The updates of each slot in order (the last only, without reduction).
  std::vector<SmallVector<int64_t, 1>> bySlot(static_cast<size_t>(s));
  for (int64_t k = 0; k < w; ++k) {
    auto &list = bySlot[size_t(slots[size_t(k)])];
    if (r == Reduction::None)
      list.clear();
    list.push_back(k);
  }
  size_t rounds = 0;
  for (const auto &list : bySlot)
    rounds = std::max(rounds, list.size());
  TosaBuilder &tb = ctx.tb;
  Value out = tb.reshape(ctx.value(0), {1, s, c});
  Value upd = tb.reshape(ctx.value(2), {1, w, c});
  for (size_t round = 0; round < rounds; ++round) {
    std::vector<int64_t> which, hit;
    for (const auto &list : bySlot) {
      which.push_back(round < list.size() ? list[round] : 0);
      hit.push_back(round < list.size());
    }
    Value taken =
        tb.gather(upd, constInts(ctx, onnx::TensorProto::INT32, {1, s}, which));
    if (r == Reduction::None && llvm::all_of(hit, [](int64_t h) { return h; }))
      out = taken;
    else
      out = tb.select(
          constInts(ctx, onnx::TensorProto::BOOL, {1, s, 1}, std::move(hit)),
          combineValues(tb, r, out, taken), out);
  }
  return ctx.setResult(0, tb.reshape(out, ctx.shape(0)));
}

/// The result with indices computed at run time.
LogicalResult scatterComputed(NodeContext &ctx, Reduction r, int64_t s,
                              int64_t c) {
  ArrayRef<int64_t> dataShape = ctx.shape(0), idShape = ctx.shape(1);
  int64_t k = idShape.back(), w = numElements(idShape.drop_back());
  if (r != Reduction::None && w > kMaxRuntimeReductionUpdates)
    return ctx.fail("a reduction of " + Twine(w) +
                    " updates at indices computed at run time is not "
                    "supported (at most " +
                    Twine(kMaxRuntimeReductionUpdates) +
                    "; indices known when the model compiles have no limit)");
  TosaBuilder &tb = ctx.tb;
  constexpr OnnxType i32 = onnx::TensorProto::INT32;
  Type i32Type = ctx.b().getI32Type();
  // The flat slot number of each update, [W, 1]; negative indices count
  // from the end of their dimension.
  Value idx = tb.reshape(tb.cast(ctx.value(1), i32Type), {w, k});
  std::vector<int64_t> dims(dataShape.begin(), dataShape.begin() + k);
  SmallVector<int64_t> slotStrides = strides(dataShape.take_front(size_t(k)));
  Value zero = tb.splat(0, i32Type, 2);
  idx = tb.select(tb.greaterEqual(idx, zero), idx,
                  tb.add(idx, constInts(ctx, i32, {1, k}, dims)));
  Value flat = tb.reduceSum(
      tb.mul(idx, constInts(ctx, i32, {1, k},
                            std::vector<int64_t>(slotStrides.begin(),
                                                 slotStrides.end()))),
      1);
  Value out = tb.reshape(ctx.value(0), {1, s, c});
  Value upd = tb.reshape(ctx.value(2), {1, w, c});
  if (r == Reduction::None) {
    // Slot j takes the last update whose index is j, if any.
    Value match = tb.equal(flat, constInts(ctx, i32, {1, s}, iota(s)));
    Value which =
        tb.reduceMax(tb.select(match, constInts(ctx, i32, {w, 1}, iota(w)),
                               tb.splat(-1, i32Type, 2)),
                     0);
    Value hit = tb.reshape(tb.greaterEqual(which, zero), {1, s, 1});
    Value taken = tb.gather(upd, tb.clampInt(which, 0, w - 1));
    return ctx.setResult(0,
                         tb.reshape(tb.select(hit, taken, out), ctx.shape(0)));
  }
  Value slotIds = constInts(ctx, i32, {1, s, 1}, iota(s));
  for (int64_t j = 0; j < w; ++j) {
    Value at = tb.slice(flat, {j, 0}, {1, 1});
    Value row = tb.gather(out, tb.clampInt(at, 0, s - 1));
    Value u = tb.slice(upd, {0, j, 0}, {1, 1, c});
    Value mask = tb.equal(slotIds, tb.reshape(at, {1, 1, 1}));
    out = tb.select(mask, combineValues(tb, r, row, u), out);
  }
  return ctx.setResult(0, tb.reshape(out, ctx.shape(0)));
}

LogicalResult scatterND(NodeContext &ctx) {
  ArrayRef<int64_t> dataShape = ctx.shape(0), idShape = ctx.shape(1),
                    updShape = ctx.shape(2);
  if (idShape.empty() || idShape.back() < 1 ||
      idShape.back() > int64_t(dataShape.size()))
    return ctx.fail("indices' last dimension must be between 1 and the "
                    "data's rank (" +
                    Twine(dataShape.size()) + ")");
  int64_t k = idShape.back();
  SmallVector<int64_t> want(idShape.drop_back());
  llvm::append_range(want, dataShape.drop_front(size_t(k)));
  if (updShape != ArrayRef<int64_t>(want))
    return ctx.fail("updates' shape must be indices.shape[:-1] + "
                    "data.shape[indices.shape[-1]:]");
  if (ctx.type(2).getElementType() != ctx.type(0).getElementType())
    return ctx.fail("updates and data differ in element type");
  if (!ctx.type(1).getElementType().isInteger(64) &&
      !ctx.type(1).getElementType().isInteger(32))
    return ctx.fail("indices are not int32 or int64");
  std::string name = ctx.attrString("reduction", "none");
  std::optional<Reduction> r =
      llvm::StringSwitch<std::optional<Reduction>>(name)
          .Case("none", Reduction::None)
          .Case("add", Reduction::Add)
          .Case("mul", Reduction::Mul)
          .Case("max", Reduction::Max)
          .Case("min", Reduction::Min)
          .Default(std::nullopt);
  if (!r)
    return ctx.fail("reduction '" + name +
                    "' is not one of none, add, mul, max, min");
  int64_t s = numElements(dataShape.take_front(size_t(k)));
  int64_t c = numElements(dataShape.drop_front(size_t(k)));
  int64_t w = numElements(idShape.drop_back());
  if (s > int64_t(INT32_MAX) || w > int64_t(INT32_MAX))
    return ctx.fail("more than 2^31 slots or updates");
  if (w == 0) {
    if (const HostTensor *data = ctx.constant(0))
      return ctx.setConstant(0, *data);
    return ctx.setResult(0, ctx.value(0));
  }
  const HostTensor *indices = ctx.constant(1);
  if (!indices)
    return scatterComputed(ctx, *r, s, c);
  SmallVector<int64_t> slots, slotStrides = strides(dataShape.take_front(k));
  for (int64_t u = 0; u < w; ++u) {
    int64_t slot = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t i = indices->integer(u * k + j), n = dataShape[size_t(j)];
      if (i < -n || i >= n)
        return ctx.fail("index " + Twine(i) + " is out of range for a " +
                        "dimension of " + Twine(n));
      slot += (i < 0 ? i + n : i) * slotStrides[size_t(j)];
    }
    slots.push_back(slot);
  }
  return scatterKnown(ctx, *r, slots, s, c);
}

} // namespace

void registerScatterOps(ConverterMap &map) { map["ScatterND"] = scatterND; }

} // namespace tfc::onnx_import
