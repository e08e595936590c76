//===- LinalgMatmulToCPU.cpp - f32 matmuls to the packed GEMM kernel ------===//

#include "tfc/Codegen/CPU/KernelCalls.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Target/Manifest.h"
#include "tfc/Transforms/ZeroInit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_LINALGMATMULTOCPU
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The users of `buffer` in its block, in program order, or nothing when a
/// user is elsewhere or is a view (its accesses could not be ordered).
SmallVector<Operation *> orderedUsers(Value buffer, Block *block) {
  SmallVector<Operation *> users;
  for (Operation *user : buffer.getUsers()) {
    if (user->getBlock() != block || isa<ViewLikeOpInterface>(user))
      return {};
    users.push_back(user);
  }
  llvm::sort(users,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  return users;
}

/// Whether `op` overwrites all of `buffer` without reading it.
bool overwrites(Operation *op, Value buffer) {
  if (auto t = dyn_cast<linalg::TransposeOp>(op))
    return t.getInit() == buffer && t.getInput() != buffer;
  if (auto f = dyn_cast<linalg::FillOp>(op))
    return f.getOutputs()[0] == buffer;
  if (auto c = dyn_cast<memref::CopyOp>(op))
    return c.getTarget() == buffer && c.getSource() != buffer;
  return false;
}

/// B = transpose(W) written just before the matmul and read by nothing
/// else before it is overwritten or freed: the matmul can read W through a
/// transposed view, and the transpose (a copy of the weight on every run)
/// goes away. Returns the view's source transpose, or null.
linalg::TransposeOp foldableTranspose(Operation *matmul, Value b) {
  SmallVector<Operation *> users = orderedUsers(b, matmul->getBlock());
  auto it = llvm::find(users, matmul);
  if (it == users.end() || it == users.begin())
    return nullptr;
  auto t = dyn_cast<linalg::TransposeOp>(*std::prev(it));
  int64_t rank = cast<MemRefType>(b.getType()).getRank();
  SmallVector<int64_t> swapLast = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(swapLast[rank - 1], swapLast[rank - 2]);
  if (!t || !overwrites(t, b) || t.getPermutation() != ArrayRef(swapLast))
    return nullptr;
  auto next = std::next(it);
  if (next != users.end() && !isa<memref::DeallocOp>(*next) &&
      !overwrites(*next, b))
    return nullptr;
  return t;
}

/// Whether `buffer` is a view of an entry-block argument of its function that
/// carries `tfc.role = "weight"`: bound once, the same on every run.
bool isWeight(Value buffer) {
  while (Operation *def = buffer.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      buffer = view.getViewSource();
    else if (auto transpose = dyn_cast<memref::TransposeOp>(def))
      buffer = transpose.getIn();
    else
      break;
  }
  auto arg = dyn_cast<BlockArgument>(buffer);
  if (!arg)
    return false;
  auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  if (!fn || arg.getOwner() != &fn.getBody().front())
    return false;
  auto role = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfc.role");
  return role && role.getValue() == "weight";
}

/// `src` (f16 or bf16) widened into a fresh f32 buffer of its shape.
Value widenToF32(PatternRewriter &rewriter, Location loc, Value src) {
  auto type = cast<MemRefType>(src.getType());
  SmallVector<Value> sizes;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (type.isDynamicDim(d))
      sizes.push_back(memref::DimOp::create(rewriter, loc, src, d));
  Type f32 = rewriter.getF32Type();
  Value wide = memref::AllocOp::create(rewriter, loc,
                                       MemRefType::get(type.getShape(), f32),
                                       sizes, rewriter.getI64IntegerAttr(64));
  AffineMap id = rewriter.getMultiDimIdentityMap(type.getRank());
  linalg::GenericOp::create(
      rewriter, loc, TypeRange(), ValueRange{src}, ValueRange{wide},
      ArrayRef<AffineMap>{id, id},
      SmallVector<utils::IteratorType>(type.getRank(),
                                       utils::IteratorType::parallel),
      [&](OpBuilder &b, Location l, ValueRange args) {
        linalg::YieldOp::create(
            b, l,
            ValueRange{arith::ExtFOp::create(b, l, b.getF32Type(), args[0])});
      });
  return wide;
}

/// linalg.matmul / linalg.batch_matmul with an f32 result and the default
/// maps. An f16/bf16 B goes to the kernel's _f32_f16 / _f32_bf16 variant as
/// it is: the kernel packs it in 16-bit panels (once for a weight) and
/// widens them as it loads them; an f16 A, or a bf16 A times a B of
/// another type, is widened into an f32 temporary, freed after the call.
/// A bf16 A times a bf16 B goes to the _bf16_bf16 variant as it is, which
/// reads its bf16 values as bf16 pairs for bf16 dot products. Either way,
/// the same products and f32 sums the op defines.
/// A weight B is quantized as the kernel packs it when `quantizeFlag`
/// (TFC_UK_QUANTIZE_I8 or _I4, perhaps with _A8) is not 0.
template <typename OpTy> struct MatmulToKernel : OpRewritePattern<OpTy> {
  MatmulToKernel(MLIRContext *ctx, int32_t quantizeFlag)
      : OpRewritePattern<OpTy>(ctx), quantizeFlag(quantizeFlag) {}

  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() || op.hasUserDefinedMaps())
      return rewriter.notifyMatchFailure(op, "not a plain matmul on buffers");
    SmallVector<Value> operands(op.getDpsInputs());
    operands.push_back(op.getDpsInits()[0]);
    auto elementType = [](Value v) {
      return cast<MemRefType>(v.getType()).getElementType();
    };
    if (!elementType(operands[2]).isF32())
      return rewriter.notifyMatchFailure(op, "not an f32 result");
    for (Value v : ArrayRef(operands).take_front(2))
      if (!elementType(v).isF32() && !elementType(v).isF16() &&
          !elementType(v).isBF16())
        return rewriter.notifyMatchFailure(op, "not f32, f16 or bf16");
    Location loc = op.getLoc();
    int64_t rank = cast<MemRefType>(operands[0].getType()).getRank();

    if (linalg::TransposeOp t = foldableTranspose(op, operands[1])) {
      SmallVector<unsigned> perm =
          llvm::to_vector(llvm::seq<unsigned>(0, unsigned(rank)));
      std::swap(perm[rank - 1], perm[rank - 2]);
      auto map = AffineMap::getPermutationMap(perm, op.getContext());
      operands[1] = memref::TransposeOp::create(rewriter, loc, t.getInput(),
                                                AffineMapAttr::get(map));
      rewriter.eraseOp(t);
    }
    bool accumulate = true;
    if (Operation *init = foldableZeroInit(op, operands[2])) {
      rewriter.eraseOp(init);
      accumulate = false;
    }

    bool constantB = isWeight(operands[1]);
    Type bType = elementType(operands[1]);
    bool bf16Products = elementType(operands[0]).isBF16() && bType.isBF16();
    bool batched = std::is_same_v<OpTy, linalg::BatchMatmulOp>;
    StringRef name =
        bf16Products    ? (batched ? TFC_UK_BATCH_MATMUL_BF16_BF16_NAME
                                   : TFC_UK_MATMUL_BF16_BF16_NAME)
        : bType.isF16() ? (batched ? TFC_UK_BATCH_MATMUL_F32_F16_NAME
                                   : TFC_UK_MATMUL_F32_F16_NAME)
        : bType.isBF16()
            ? (batched ? TFC_UK_BATCH_MATMUL_F32_BF16_NAME
                       : TFC_UK_MATMUL_F32_BF16_NAME)
            : (batched ? TFC_UK_BATCH_MATMUL_F32_NAME : TFC_UK_MATMUL_F32_NAME);
    SmallVector<Value> temporaries;
    if (!elementType(operands[0]).isF32() && !bf16Products) {
      operands[0] = widenToF32(rewriter, loc, operands[0]);
      temporaries.push_back(operands[0]);
    }

    MemRefType dyn = dynamicF32MemRef(op.getContext(), rank);
    MemRefType dynA =
        dynamicMemRef(op.getContext(), rank, elementType(operands[0]));
    MemRefType dynB = dynamicMemRef(op.getContext(), rank, bType);
    SmallVector<Value> args;
    for (auto [i, v] : llvm::enumerate(operands))
      args.push_back(memref::CastOp::create(rewriter, loc,
                                            i == 0   ? dynA
                                            : i == 1 ? dynB
                                                     : dyn,
                                            v));
    int32_t flags = (accumulate ? TFC_UK_ACCUMULATE : 0) |
                    (constantB ? TFC_UK_CONSTANT_B | quantizeFlag : 0);
    args.push_back(arith::ConstantOp::create(
        rewriter, loc, rewriter.getI32IntegerAttr(flags)));
    declareKernel(rewriter, op->template getParentOfType<ModuleOp>(), name,
                  {dynA, dynB, dyn, rewriter.getI32Type()});
    auto call =
        rewriter.replaceOpWithNewOp<func::CallOp>(op, name, TypeRange(), args);
    rewriter.setInsertionPointAfter(call);
    for (Value t : temporaries)
      memref::DeallocOp::create(rewriter, loc, t);
    return success();
  }

  int32_t quantizeFlag;
};

/// The GEMM kernels, whose B operand (1) the kernel packs, once where the
/// call's flags (operand 3) say TFC_UK_CONSTANT_B.
constexpr llvm::StringLiteral kGemmKernels[] = {
    TFC_UK_MATMUL_F32_NAME,
    TFC_UK_MATMUL_F32_F16_NAME,
    TFC_UK_MATMUL_F32_BF16_NAME,
    TFC_UK_MATMUL_BF16_BF16_NAME,
    TFC_UK_BATCH_MATMUL_F32_NAME,
    TFC_UK_BATCH_MATMUL_F32_F16_NAME,
    TFC_UK_BATCH_MATMUL_F32_BF16_NAME,
    TFC_UK_BATCH_MATMUL_BF16_BF16_NAME};

/// Whether `use` is the B operand of a GEMM kernel call that packs it once.
bool isPackedB(OpOperand &use) {
  auto call = dyn_cast<func::CallOp>(use.getOwner());
  if (!call || use.getOperandNumber() != 1 || call.getNumOperands() != 4 ||
      !llvm::is_contained(kGemmKernels, call.getCallee()))
    return false;
  IntegerAttr flags;
  return matchPattern(call.getOperand(3), m_Constant(&flags)) &&
         (flags.getInt() & TFC_UK_CONSTANT_B) != 0;
}

/// Whether nothing reads `weight` but GEMM kernels packing it as their B,
/// through views of it (casts, reshapes, transposes, subviews): the kernel
/// packs it with loads of any alignment, so its bytes may lie anywhere.
bool onlyPacked(Value weight) {
  SmallVector<Value> worklist{weight};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      if (isPackedB(use))
        continue;
      auto view = dyn_cast<ViewLikeOpInterface>(user);
      if (view && view.getViewSource() == v && user->getNumResults() == 1) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      if (auto transpose = dyn_cast<memref::TransposeOp>(user)) {
        worklist.push_back(transpose.getResult());
        continue;
      }
      return false;
    }
  }
  return true;
}

/// kPackedOnlyWeightsAttr of `module`: each function's weight arguments that
/// only the GEMM kernels read, packing them (none: no entry).
void recordPackedOnlyWeights(ModuleOp module) {
  Builder b(module.getContext());
  SmallVector<NamedAttribute> functions;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    SmallVector<int64_t> args;
    for (BlockArgument arg : fn.getArguments()) {
      auto role =
          fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "tfc.role");
      if (role && role.getValue() == "weight" && onlyPacked(arg))
        args.push_back(arg.getArgNumber());
    }
    if (!args.empty())
      functions.push_back(
          b.getNamedAttr(fn.getSymName(), b.getDenseI64ArrayAttr(args)));
  }
  if (functions.empty())
    module->removeAttr(kPackedOnlyWeightsAttr);
  else
    module->setAttr(kPackedOnlyWeightsAttr, b.getDictionaryAttr(functions));
}

struct LinalgMatmulToCPUPass
    : impl::LinalgMatmulToCPUBase<LinalgMatmulToCPUPass> {
  using Base::Base;

  void runOnOperation() override {
    std::string error;
    if (failed(
            verifyQuantization(quantizeWeights, quantizeActivations, error))) {
      getOperation().emitError() << "convert-linalg-matmul-to-cpu: " << error;
      return signalPassFailure();
    }
    int32_t quantize =
        quantizeWeights == QuantizeWeights::Int8   ? TFC_UK_QUANTIZE_I8
        : quantizeWeights == QuantizeWeights::Int4 ? TFC_UK_QUANTIZE_I4
                                                   : 0;
    if (quantizeActivations == QuantizeActivations::Int8)
      quantize |= TFC_UK_QUANTIZE_A8;
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToKernel<linalg::MatmulOp>>(&getContext(), quantize);
    patterns.add<MatmulToKernel<linalg::BatchMatmulOp>>(&getContext(),
                                                        quantize);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    recordPackedOnlyWeights(getOperation());
  }
};

} // namespace
} // namespace tfc
