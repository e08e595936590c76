//===- LinalgMatmulToNVPTX.cpp - Matmuls as GPU kernel launches -----------===//
//
// linalg.matmul / linalg.batch_matmul on f16, bf16 or f32 buffers of static
// shapes in host code become one launch each of a kernel built for their
// shapes (Codegen/NVPTX/Gemm.h). The op's semantics C += A·B are kept;
// where C was made all zeros for the matmul alone (ZeroInit.h), that fill
// or copy goes and the kernel stores its product over C instead. Where B
// is a weight stored [N, K] transposed into a buffer for the matmul alone,
// the kernel reads the weight as stored (foldableTranspose).
//
//===----------------------------------------------------------------------===//

#include "tfc/Codegen/NVPTX/Gemm.h"
#include "tfc/Codegen/NVPTX/HostCode.h"
#include "tfc/Conversion/Passes.h"
#include "tfc/Transforms/ZeroInit.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

using namespace mlir;

namespace tfc {
#define GEN_PASS_DEF_CONVERTLINALGMATMULTONVPTX
#include "tfc/Conversion/Passes.h.inc"
} // namespace tfc

namespace tfc {
namespace {

/// The kernel's view of a matmul, or nullopt when it stays a loop nest.
std::optional<GemmShape> gemmShape(linalg::LinalgOp op) {
  if (!isa<linalg::MatmulOp, linalg::BatchMatmulOp>(op) ||
      !op.hasPureBufferSemantics())
    return std::nullopt;
  // Transposed or broadcast operands (user-defined indexing maps) are not
  // handled here.
  if (auto mm = dyn_cast<linalg::MatmulOp>(op.getOperation());
      mm && mm.hasUserDefinedMaps())
    return std::nullopt;
  if (auto bmm = dyn_cast<linalg::BatchMatmulOp>(op.getOperation());
      bmm && bmm.hasUserDefinedMaps())
    return std::nullopt;
  SmallVector<MemRefType> types;
  for (Value v : op->getOperands()) {
    auto t = dyn_cast<MemRefType>(v.getType());
    if (!t || !t.hasStaticShape() || !t.getLayout().isIdentity())
      return std::nullopt;
    types.push_back(t);
  }
  GemmShape s;
  s.batched = isa<linalg::BatchMatmulOp>(op);
  s.t = types[0].getElementType();
  s.acc = types[2].getElementType();
  if (!(s.t.isF16() || s.t.isBF16() || s.t.isF32()) ||
      types[1].getElementType() != s.t || !(s.acc.isF32() || s.acc == s.t))
    return std::nullopt;
  int64_t lead = s.batched ? 1 : 0;
  s.batch = s.batched ? types[0].getDimSize(0) : 1;
  s.m = types[0].getDimSize(lead);
  s.k = types[0].getDimSize(lead + 1);
  s.n = types[1].getDimSize(lead + 1);
  if (s.m == 0 || s.n == 0 || s.k == 0 || s.batch == 0)
    return std::nullopt;
  // f16/bf16: pairs of elements along K (A) and N (B, C) must not straddle
  // a row.
  if (!s.t.isF32() && (s.k % 2 || s.n % 2))
    return std::nullopt;
  if (!gemmGridFits(s))
    return std::nullopt;
  return s;
}

/// The buffer `v` is a view of (itself when it is none).
Value viewRoot(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

/// Whether `op` has an operand that is `root` or a view of it.
bool touches(Operation *op, Value root) {
  return llvm::any_of(op->getOperands(),
                      [&](Value v) { return viewRoot(v) == root; });
}

/// Whether `op` writes no memory but fresh buffers (memref.alloc), which
/// cannot be the buffers a transpose reads.
bool writesOnlyFreshBuffers(Operation *op) {
  if (isPure(op) || isa<memref::AllocOp, memref::DeallocOp>(op))
    return true;
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  return llvm::all_of(list, [](const MemoryEffects::EffectInstance &e) {
    if (!isa<MemoryEffects::Write>(e.getEffect()))
      return true;
    Value v = e.getValue();
    return v && viewRoot(v).getDefiningOp<memref::AllocOp>();
  });
}

/// Imported models multiply by weights stored [out, in]: B is a fresh
/// buffer that a linalg.transpose of the last two dimensions of W (static,
/// identity layout) fills just before the matmul. Returns that transpose
/// when the matmul can read W itself as B transposed and the transpose can
/// go: in the same block, nothing between them touches B or W (other ops
/// write only fresh buffers), and nothing reads B's value after the matmul
/// (the next op to touch it frees or overwrites it). Else null.
linalg::TransposeOp foldableTranspose(linalg::LinalgOp matmul) {
  Value b = matmul.getDpsInputs()[1];
  auto alloc = b.getDefiningOp<memref::AllocOp>();
  Block *block = matmul->getBlock();
  if (!alloc || alloc->getBlock() != block)
    return {};
  for (Operation *user : b.getUsers())
    if (user->getBlock() != block ||
        !isa<linalg::LinalgOp, memref::DeallocOp>(user))
      return {};
  linalg::TransposeOp transpose;
  SmallVector<Operation *> between;
  for (Operation *op = matmul->getPrevNode(); op; op = op->getPrevNode()) {
    if (auto t = dyn_cast<linalg::TransposeOp>(op); t && t.getInit() == b) {
      transpose = t;
      break;
    }
    if (touches(op, b) || !writesOnlyFreshBuffers(op))
      return {};
    between.push_back(op);
  }
  if (!transpose || !transpose.hasPureBufferSemantics())
    return {};
  Value w = transpose.getInput();
  auto type = dyn_cast<MemRefType>(w.getType());
  if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity())
    return {};
  ArrayRef<int64_t> perm = transpose.getPermutation();
  int64_t rank = perm.size();
  for (int64_t i = 0; i < rank; ++i)
    if (perm[i] != (i < rank - 2 ? i : 2 * rank - 3 - i))
      return {};
  Value root = viewRoot(w);
  if (llvm::any_of(between, [&](Operation *op) { return touches(op, root); }))
    return {};
  for (Operation *op = matmul->getNextNode(); op; op = op->getNextNode()) {
    if (!touches(op, b))
      continue;
    if (isa<memref::DeallocOp>(op))
      break;
    // Overwritten whole, without being read.
    if (isa<linalg::TransposeOp, linalg::FillOp, linalg::CopyOp>(op) &&
        cast<linalg::LinalgOp>(op).getDpsInits()[0] == b &&
        !llvm::is_contained(cast<linalg::LinalgOp>(op).getDpsInputs(), b))
      break;
    return {};
  }
  return transpose;
}

struct ConvertLinalgMatmulToNVPTXPass
    : impl::ConvertLinalgMatmulToNVPTXBase<ConvertLinalgMatmulToNVPTXPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<std::pair<linalg::LinalgOp, GemmShape>> gemms;
    module.walk([&](linalg::LinalgOp op) {
      if (!isHostCode(op))
        return;
      if (std::optional<GemmShape> s = gemmShape(op))
        gemms.push_back({op, *s});
    });
    if (gemms.empty())
      return;
    module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                    UnitAttr::get(&getContext()));
    OpBuilder b(&getContext());
    b.setInsertionPointToEnd(module.getBody());
    auto kernels = gpu::GPUModuleOp::create(b, module.getLoc(), "tfc_matmul");
    for (auto [i, item] : llvm::enumerate(gemms)) {
      auto [op, s] = item;
      if (Operation *init = foldableZeroInit(op, op.getDpsInits()[0])) {
        init->erase();
        s.accumulate = false;
      }
      SmallVector<Value> operands(op->getOperands());
      // The kernels read a transposed weight as it is stored.
      if (linalg::TransposeOp transpose = foldableTranspose(op)) {
        s.bTransposed = true;
        operands[1] = transpose.getInput();
        transpose->erase();
      }
      std::string name = "matmul_" + std::to_string(i);
      KernelLaunch launch = buildMatmulKernel(
          b, kernels, name, s, ValueRange(operands).getTypes(), wgmma, tma);
      OpBuilder ob(op);
      createLaunch(ob, op.getLoc(), launch, operands);
      Value oldB = op->getOperand(1);
      op->erase();
      // The transposed copy's buffer, when nothing else uses it.
      if (s.bTransposed && llvm::all_of(oldB.getUsers(), [](Operation *u) {
            return isa<memref::DeallocOp>(u);
          }))
        for (Operation *u : llvm::make_early_inc_range(oldB.getUsers()))
          u->erase();
      if (s.bTransposed && oldB.use_empty())
        oldB.getDefiningOp()->erase();
    }
  }
};

} // namespace
} // namespace tfc
