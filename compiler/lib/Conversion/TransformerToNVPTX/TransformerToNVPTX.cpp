//===- TransformerToNVPTX.cpp - Fused attention as one GPU kernel ---------===//
//
// Fused attention, softmax and norms become kernel launches; a
// tensor-parallel model's all-reduce and all-gather become calls of the
// runtime, which sums or gathers the device buffers over the ranks with
// NCCL on the model's stream, and its rank a call that sets a device
// buffer to it.
//
//===----------------------------------------------------------------------===//

#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Codegen/NVPTX/AttentionKernel.h"
#include "tfc/Codegen/NVPTX/DecodeKernel.h"
#include "tfc/Codegen/NVPTX/RowKernels.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Dialect/Transformer/IR/Transformer.h"
#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tosa/IR/TosaOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_CONVERTTRANSFORMERTONVPTX
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The kernel's view of `op`, or nullopt when the op is left to the
/// decomposition (dynamic shapes, odd head dimensions in f16/bf16 beyond
/// the decode kernel). `decode`: shapes with few query rows per KV head
/// take the decode kernel.
std::optional<AttentionShape> kernelShape(transformer::AttentionOp op,
                                          bool decode, int64_t blocksPerSM,
                                          int64_t stages, bool mma) {
  auto q = op.getQuery().getType(), k = op.getKey().getType(),
       v = op.getValue().getType();
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape())
    return std::nullopt;
  // 16-bit keys under an f32 query, or an f32 mask under a 16-bit one (the
  // CPU kernels' forms): decomposed.
  if (k.getElementType() != q.getElementType())
    return std::nullopt;
  if (Value m = op.getMask();
      m && cast<RankedTensorType>(m.getType()).getElementType() !=
               q.getElementType())
    return std::nullopt;
  AttentionShape s;
  s.batch = q.getDimSize(0);
  s.headsQ = q.getDimSize(1);
  s.seqQ = q.getDimSize(2);
  s.headDim = q.getDimSize(3);
  s.headsKV = k.getDimSize(1);
  s.seqKV = k.getDimSize(2);
  s.valueDim = v.getDimSize(3);
  s.elementType = q.getElementType();
  s.causal = op.getIsCausal();
  s.scale = op.getEffectiveScale();
  s.softcap = op.getEffectiveSoftcap();
  // A window of seqKV keys or more hides none.
  if (int64_t w = op.getEffectiveWindow(); w < k.getDimSize(2))
    s.window = w;
  // Empty tensors (the decomposition's loops have nothing to do) stay with
  // the decomposition.
  for (int64_t d :
       {s.batch, s.headsQ, s.headsKV, s.seqQ, s.seqKV, s.headDim, s.valueDim})
    if (d == 0)
      return std::nullopt;
  if (Value m = op.getMask()) {
    auto mt = cast<RankedTensorType>(m.getType());
    if (!mt.hasStaticShape())
      return std::nullopt;
    s.mask.assign(4 - mt.getRank(), 1);
    s.mask.append(mt.getShape().begin(), mt.getShape().end());
  }
  s.decodeBlocksPerSM = blocksPerSM;
  s.decodeStages = stages;
  s.decodeMma = mma;
  s.decode = decode && useDecodeKernel(s);
  if (s.decode)
    return s;
  // The tiled kernels: even head dimensions in f16/bf16, tiles within
  // shared memory, query blocks on gridDim.y (at most 65535 of 64 or 128
  // queries).
  if (!s.elementType.isF32() && (s.headDim % 2 || s.valueDim % 2))
    return std::nullopt;
  if (!attentionKernelFits(s) || (s.seqQ + 63) / 64 > 65535)
    return std::nullopt;
  return s;
}

/// A concatenation of two along the key axis: a decoder's cache (`first`,
/// `split` keys) and its new keys or values.
struct KeyParts {
  Value first, second;
  int64_t split;
};

/// The two parts of `kv` when it is such a concatenation, else none.
std::optional<KeyParts> keyParts(Value kv) {
  auto concat = kv.getDefiningOp<tosa::ConcatOp>();
  if (!concat || concat.getAxis() != 2 || concat.getInput1().size() != 2)
    return std::nullopt;
  Value first = concat.getInput1()[0], second = concat.getInput1()[1];
  auto keys = [](Value t) {
    return cast<RankedTensorType>(t.getType()).getDimSize(2);
  };
  if (keys(first) <= 0 || keys(second) <= 0)
    return std::nullopt;
  return KeyParts{first, second, keys(first)};
}

/// The buffers of `tensors`, read in place.
SmallVector<Value> buffersOf(OpBuilder &b, Location loc, ValueRange tensors) {
  SmallVector<Value> buffers;
  for (Value tensor : tensors) {
    auto t = cast<RankedTensorType>(tensor.getType());
    buffers.push_back(bufferization::ToBufferOp::create(
        b, loc, MemRefType::get(t.getShape(), t.getElementType()), tensor,
        /*readOnly=*/true));
  }
  return buffers;
}

/// A fresh device buffer of `type`'s shape.
Value allocate(OpBuilder &b, Location loc, ShapedType type) {
  return memref::AllocOp::create(
      b, loc, MemRefType::get(type.getShape(), type.getElementType()),
      b.getI64IntegerAttr(64));
}

/// `out` (written by the kernels launched before) as a tensor of `type`.
Value asTensor(OpBuilder &b, Location loc, Value out, RankedTensorType type) {
  return bufferization::ToTensorOp::create(b, loc, type, out,
                                           /*restrict=*/true,
                                           /*writable=*/true);
}

/// Launches a kernel on the buffers of `inputs` (read in place) and a fresh
/// buffer of `resultType`, which it returns as a tensor.
Value launchOnTensors(OpBuilder &b, Location loc, const KernelLaunch &launch,
                      ValueRange inputs, RankedTensorType resultType) {
  SmallVector<Value> args = buffersOf(b, loc, inputs);
  Value out = allocate(b, loc, resultType);
  args.push_back(out);
  createLaunch(b, loc, launch, args);
  return asTensor(b, loc, out, resultType);
}

/// The decode kernel on `inputs` (q, k, v[, mask]); with several chunks,
/// their partial outputs and statistics in device buffers (freed at the
/// function's return) that the kernel's last blocks combine: one launch.
Value launchDecode(TosaBuilder &tosa, const DecodeLaunch &d, ValueRange inputs,
                   RankedTensorType resultType) {
  OpBuilder &b = tosa.builder();
  Location loc = tosa.getLoc();
  gpu::GPUFuncOp kernel = d.decode.kernel;
  ArrayRef<Type> kernelArgs = kernel.getArgumentTypes();
  if (kernelArgs.size() == inputs.size() + 1)
    return launchOnTensors(b, loc, d.decode, inputs, resultType);
  SmallVector<Value> args = buffersOf(b, loc, inputs);
  Value partial = allocate(b, loc, cast<ShapedType>(kernelArgs.end()[-3]));
  Value stats = allocate(b, loc, cast<ShapedType>(kernelArgs.end()[-2]));
  Value out = allocate(b, loc, resultType);
  args.append({partial, stats, out});
  createLaunch(b, loc, d.decode, args);
  return asTensor(b, loc, out, resultType);
}

/// [d0, ..., dn-1, n] as [rows, n]; nullopt when it has no element.
std::optional<std::pair<int64_t, int64_t>> rowsOf(RankedTensorType t) {
  int64_t n = t.getDimSize(t.getRank() - 1);
  if (n == 0 || t.getNumElements() == 0)
    return std::nullopt;
  return std::pair{t.getNumElements() / n, n};
}

/// Runs a row kernel on `x` viewed as [rows, n] (and `rest` as they are);
/// returns its result in x's shape.
Value launchOnRows(TosaBuilder &tosa, const KernelLaunch &launch, Value x,
                   int64_t rows, int64_t n, ValueRange rest) {
  auto type = cast<RankedTensorType>(x.getType());
  Value rows2d = tosa.reshape(x, {rows, n});
  SmallVector<Value> inputs = {rows2d};
  inputs.append(rest.begin(), rest.end());
  Value y = launchOnTensors(tosa.builder(), tosa.getLoc(), launch, inputs,
                            cast<RankedTensorType>(rows2d.getType()));
  return tosa.reshape(y, type.getShape());
}

/// The runtime's all-reduce of a GPU model (abi.h): `out` ([rows, cols],
/// dense, on the device) receives the sum over the ranks of `in` (same).
constexpr llvm::StringLiteral kDeviceAllReduce = "tfc_device_all_reduce_f32";

/// Replaces `op` by a call of kDeviceAllReduce on its operand's buffer as
/// f32 rows (the partial products of f16 and bf16 models are summed in
/// f32 and rounded once, as on the CPU) and a fresh buffer for the sum.
LogicalResult lowerAllReduce(ModuleOp module, transformer::AllReduceOp op) {
  RankedTensorType type = op.getResult().getType();
  if (!type.hasStaticShape())
    return op.emitError("convert-transformer-to-nvptx: an all-reduce of "
                        "dynamic shape");
  OpBuilder b(op);
  Location loc = op.getLoc();
  TosaBuilder tosa(b, loc);
  Value result = op.getInput();
  if (std::optional<std::pair<int64_t, int64_t>> shape = rowsOf(type)) {
    auto [rows, n] = *shape;
    Type f32 = b.getF32Type();
    Value x = tosa.reshape(tosa.cast(op.getInput(), f32), {rows, n});
    auto rowsType = cast<RankedTensorType>(x.getType());
    MemRefType operand = dynamicF32MemRef(b.getContext(), 2);
    declareKernel(b, module, kDeviceAllReduce, {operand, operand});
    Value in = buffersOf(b, loc, x).front();
    Value out = allocate(b, loc, rowsType);
    func::CallOp::create(
        b, loc, kDeviceAllReduce, TypeRange(),
        ValueRange{memref::CastOp::create(b, loc, operand, in),
                   memref::CastOp::create(b, loc, operand, out)});
    result = tosa.cast(
        tosa.reshape(asTensor(b, loc, out, rowsType), type.getShape()),
        type.getElementType());
  }
  op.getResult().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// The runtime's all-gather and rank of a GPU model (abi.h).
constexpr llvm::StringLiteral kDeviceAllGather = "tfc_device_all_gather_f32";
constexpr llvm::StringLiteral kDeviceRank = "tfc_device_parallel_rank";

/// Replaces `op` by a call of kDeviceAllGather on its operand's buffer as
/// f32 rows [rows, n] and a fresh buffer [ranks x rows, n], which holds the
/// ranks' rows one after another: transposed to [rows, ranks, n], that is
/// the result's rows, the ranks' parts side by side.
LogicalResult lowerAllGather(ModuleOp module, transformer::AllGatherOp op) {
  RankedTensorType in = op.getInput().getType();
  RankedTensorType type = op.getResult().getType();
  if (!in.hasStaticShape() || !type.hasStaticShape())
    return op.emitError("convert-transformer-to-nvptx: an all-gather of "
                        "dynamic shape");
  OpBuilder b(op);
  Location loc = op.getLoc();
  TosaBuilder tosa(b, loc);
  std::optional<std::pair<int64_t, int64_t>> shape = rowsOf(in);
  if (!shape)
    return op.emitError("convert-transformer-to-nvptx: an all-gather of "
                        "no elements");
  auto [rows, n] = *shape;
  int64_t ranks = type.getDimSize(type.getRank() - 1) / n;
  Type f32 = b.getF32Type();
  Value x = tosa.reshape(tosa.cast(op.getInput(), f32), {rows, n});
  MemRefType operand = dynamicF32MemRef(b.getContext(), 2);
  declareKernel(b, module, kDeviceAllGather, {operand, operand});
  Value buffer = buffersOf(b, loc, x).front();
  auto gatheredType = RankedTensorType::get({ranks * rows, n}, f32);
  Value out = allocate(b, loc, gatheredType);
  func::CallOp::create(
      b, loc, kDeviceAllGather, TypeRange(),
      ValueRange{memref::CastOp::create(b, loc, operand, buffer),
                 memref::CastOp::create(b, loc, operand, out)});
  Value gathered =
      tosa.reshape(asTensor(b, loc, out, gatheredType), {ranks, rows, n});
  Value result = tosa.cast(
      tosa.reshape(tosa.transpose(gathered, {1, 0, 2}), type.getShape()),
      type.getElementType());
  op.getResult().replaceAllUsesWith(result);
  op.erase();
  return success();
}

/// Replaces `op` by a fresh device buffer of one i32 that a call of
/// kDeviceRank sets to the process's rank.
void lowerParallelRank(ModuleOp module, transformer::ParallelRankOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  RankedTensorType type = op.getResult().getType();
  MemRefType operand = dynamicMemRef(b.getContext(), 1, b.getI32Type());
  declareKernel(b, module, kDeviceRank, {operand});
  Value out = allocate(b, loc, type);
  func::CallOp::create(
      b, loc, kDeviceRank, TypeRange(),
      ValueRange{memref::CastOp::create(b, loc, operand, out)});
  op.getResult().replaceAllUsesWith(asTensor(b, loc, out, type));
  op.erase();
}

struct ConvertTransformerToNVPTXPass
    : impl::ConvertTransformerToNVPTXBase<ConvertTransformerToNVPTXPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (warpRows != 16 && warpRows != 32) {
      module.emitError() << "convert-transformer-to-nvptx: warp-rows must be "
                            "16 or 32, not "
                         << static_cast<int64_t>(warpRows);
      return signalPassFailure();
    }
    if (decodeBlocksPerSM < 1 || decodeBlocksPerSM > 16 || decodeStages < 2 ||
        decodeStages > 4) {
      module.emitError() << "convert-transformer-to-nvptx: decode-blocks-per-"
                            "sm must be 1 to 16 and decode-stages 2 to 4, not "
                         << static_cast<int64_t>(decodeBlocksPerSM) << " and "
                         << static_cast<int64_t>(decodeStages);
      return signalPassFailure();
    }
    if (wgmmaWarpgroups != 1 && wgmmaWarpgroups != 2) {
      module.emitError() << "convert-transformer-to-nvptx: wgmma-warpgroups "
                            "must be 1 or 2, not "
                         << static_cast<int64_t>(wgmmaWarpgroups);
      return signalPassFailure();
    }
    SmallVector<transformer::AllReduceOp> sums;
    module.walk([&](transformer::AllReduceOp op) { sums.push_back(op); });
    for (transformer::AllReduceOp op : sums)
      if (failed(lowerAllReduce(module, op)))
        return signalPassFailure();
    SmallVector<transformer::AllGatherOp> gathers;
    module.walk([&](transformer::AllGatherOp op) { gathers.push_back(op); });
    for (transformer::AllGatherOp op : gathers)
      if (failed(lowerAllGather(module, op)))
        return signalPassFailure();
    SmallVector<transformer::ParallelRankOp> ranks;
    module.walk([&](transformer::ParallelRankOp op) { ranks.push_back(op); });
    for (transformer::ParallelRankOp op : ranks)
      lowerParallelRank(module, op);
    SmallVector<Operation *> ops;
    module.walk([&](Operation *op) {
      if (isa<transformer::AttentionOp, transformer::SoftmaxOp,
              transformer::LayerNormOp, transformer::RmsNormOp>(op))
        ops.push_back(op);
    });
    if (ops.empty())
      return;
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto kernels = gpu::GPUModuleOp::create(b, module.getLoc(), "tfc_fused");
    int count = 0;
    auto name = [&](StringRef op) {
      return (op + "_" + llvm::Twine(count++)).str();
    };
    for (Operation *op : ops) {
      OpBuilder ob(op);
      Location loc = op->getLoc();
      TosaBuilder tosa(ob, loc);
      Value result;
      if (auto attention = dyn_cast<transformer::AttentionOp>(op)) {
        std::optional<AttentionShape> shape =
            kernelShape(attention, decodeKernel, decodeBlocksPerSM,
                        decodeStages, decodeMma);
        if (!shape)
          continue;
        SmallVector<Value> inputs = {attention.getQuery(), attention.getKey(),
                                     attention.getValue()};
        // The decode kernel reads a concatenated cache and new keys where
        // they are, as two buffers each (the concatenation stays only for
        // any other user).
        auto kParts = keyParts(attention.getKey()),
             vParts = keyParts(attention.getValue());
        if (shape->decode && kParts && vParts &&
            kParts->split == vParts->split) {
          shape->keySplit = kParts->split;
          inputs = {attention.getQuery(), kParts->first, kParts->second,
                    vParts->first, vParts->second};
        }
        if (Value mask = attention.getMask())
          inputs.push_back(tosa.expandToRank(mask, 4));
        RankedTensorType resultType = attention.getResult().getType();
        if (shape->decode) {
          result = launchDecode(
              tosa,
              buildDecodeKernels(b, kernels, name("attention_decode"), *shape),
              inputs, resultType);
        } else {
          shape->ldmatrix = ldmatrix;
          shape->asyncCopy = asyncCopy;
          shape->wgmma = wgmma;
          shape->wgmmaWarpgroups = wgmmaWarpgroups;
          shape->tma = tma;
          shape->tmaProducer = tmaProducer;
          shape->warpRows = warpRows;
          result = launchOnTensors(
              ob, loc,
              buildAttentionKernel(b, kernels, name("attention"), *shape),
              inputs, resultType);
        }
      } else if (auto softmax = dyn_cast<transformer::SoftmaxOp>(op)) {
        RankedTensorType type = softmax.getInput().getType();
        // An inner softmax dimension is left to the decomposition.
        if (!type.hasStaticShape() ||
            int64_t(softmax.getDimension()) != type.getRank() - 1)
          continue;
        auto shape = rowsOf(type);
        if (!shape)
          continue;
        auto [rows, n] = *shape;
        KernelLaunch launch = buildSoftmaxKernel(
            b, kernels, name("softmax"), rows, n, type.getElementType());
        result = launchOnRows(tosa, launch, softmax.getInput(), rows, n, {});
      } else {
        // layer_norm (gamma, beta) or rms_norm (gamma): a row kernel when
        // every operand is static.
        if (!llvm::all_of(op->getOperandTypes(), [](Type t) {
              return cast<RankedTensorType>(t).hasStaticShape();
            }))
          continue;
        Value input = op->getOperand(0);
        RankedTensorType type = cast<RankedTensorType>(input.getType());
        auto shape = rowsOf(type);
        if (!shape)
          continue;
        auto [rows, n] = *shape;
        SmallVector<Value> params(op->getOperands().drop_front());
        KernelLaunch launch =
            isa<transformer::LayerNormOp>(op)
                ? buildLayerNormKernel(b, kernels, name("layer_norm"), rows, n,
                                       cast<transformer::LayerNormOp>(op)
                                           .getEpsilon()
                                           .convertToDouble(),
                                       type.getElementType())
                : buildRmsNormKernel(b, kernels, name("rms_norm"), rows, n,
                                     cast<transformer::RmsNormOp>(op)
                                         .getEpsilon()
                                         .convertToDouble(),
                                     type.getElementType());
        result = launchOnRows(tosa, launch, input, rows, n, params);
      }
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
    }
    if (count == 0) {
      kernels.erase();
      return;
    }
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
  }
};

} // namespace
} // namespace tfc
