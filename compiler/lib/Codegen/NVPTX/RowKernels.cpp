//===- RowKernels.cpp - Softmax and the norms as one GPU kernel each ------===//
//
// One warp per row of [rows, n] (4 rows per block of 128 threads). Lane l
// reads elements l, l + 32, ... (each warp access is contiguous), keeps its
// statistics in registers (softmax: running max and rescaled sum; layer_norm:
// sums of x - x[0] and of its square; rms_norm: the sum of squares) and the
// warp combines them with a
// butterfly of shuffles. A second sweep over the row (from L1/L2) writes
// the result once. Statistics are f32 for every element type.
//
//===----------------------------------------------------------------------===//

#include "tfc/Codegen/NVPTX/RowKernels.h"

#include "KernelBuilder.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tfc {
namespace {

constexpr int64_t kRowsPerBlock = 4, kThreads = 32 * kRowsPerBlock;

struct RowContext {
  Value row, lane, rowValid, safeRow;
};

/// The kernel's frame: its row, its lane, and whether the row exists.
RowContext rowContext(Arith &a, int64_t rows) {
  ImplicitLocOpBuilder &b = a.b;
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value block = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value row = a.add(a.mul(block, kRowsPerBlock), a.div(tid, 32));
  return {row, a.rem(tid, 32), a.ult(row, rows), a.umin(row, rows - 1)};
}

/// Runs `body(j, inRange)` for j = lane, lane + 32, ... < n, carrying
/// `init` through an scf.for; returns the final values.
SmallVector<Value>
sweep(Arith &a, Value lane, int64_t n, ValueRange init,
      llvm::function_ref<SmallVector<Value>(Value, Value, ValueRange)> body) {
  ImplicitLocOpBuilder &b = a.b;
  auto loop = scf::ForOp::create(b, a.c(0), a.c((n + 31) / 32), a.c(1), init);
  OpBuilder::InsertionGuard guard(b);
  // Without loop-carried values the builder already added the terminator.
  Block *block = loop.getBody();
  if (init.empty())
    b.setInsertionPoint(block->getTerminator());
  else
    b.setInsertionPointToStart(block);
  Value j = a.add(a.mul(loop.getInductionVar(), 32), lane);
  Value inRange = a.ult(j, n);
  SmallVector<Value> next =
      body(a.umin(j, n - 1), inRange, loop.getRegionIterArgs());
  if (!init.empty())
    scf::YieldOp::create(b, next);
  return SmallVector<Value>(loop.getResults());
}

/// A row kernel being built: arguments x [rows, n], `params` vectors [n]
/// (gamma, beta) and y [rows, n] of element type `t`; the builder at the
/// end of its entry, past the row context.
struct RowKernel {
  int64_t rows, n;
  Type t;
  gpu::GPUFuncOp func;
  ImplicitLocOpBuilder b;
  Arith a{b};
  RowContext r;

  RowKernel(OpBuilder &builder, gpu::GPUModuleOp module, StringRef name,
            int64_t rows, int64_t n, int64_t params, Type t)
      : rows(rows), n(n), t(t),
        func(declare(builder, module, name, rows, n, params, t)),
        b(module.getLoc(), builder) {
    b.setInsertionPointToEnd(&func.getBody().front());
    r = rowContext(a, rows);
  }

  static gpu::GPUFuncOp declare(OpBuilder &builder, gpu::GPUModuleOp module,
                                StringRef name, int64_t rows, int64_t n,
                                int64_t params, Type t) {
    auto io = MemRefType::get({rows, n}, t);
    SmallVector<Type> args = {io};
    args.append(params, MemRefType::get({n}, t));
    args.push_back(io);
    SmallVector<Value> noTiles;
    return createKernel(builder, module, name, args, {}, kThreads, noTiles);
  }

  Value x() { return func.getArgument(0); }
  Value param(unsigned i) { return func.getArgument(1 + i); }
  /// x's element j of the row, as f32.
  Value load(Value j) {
    return a.toF32(memref::LoadOp::create(b, x(), ValueRange{r.safeRow, j}));
  }
  /// y's element j of the row = v (f32), in the element type.
  void store(Value j, Value v) {
    memref::StoreOp::create(b, a.fromF32(v, t), func.getArguments().back(),
                            ValueRange{r.row, j});
  }
  /// The second sweep: `body(j, inRange)` for the lane's elements j of the
  /// row inside it, where the row exists.
  void writeRow(llvm::function_ref<void(Value, Value)> body) {
    a.guarded(r.rowValid, [&]() {
      sweep(a, r.lane, n, {},
            [&](Value j, Value inRange, ValueRange) -> SmallVector<Value> {
              a.guarded(inRange, [&]() { body(j, inRange); });
              return {};
            });
    });
  }
  /// Ends the kernel: a warp per row, kRowsPerBlock rows per block.
  KernelLaunch finish() {
    gpu::ReturnOp::create(b);
    KernelLaunch launch;
    launch.kernel = func;
    launch.gridX = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
    launch.blockX = kThreads;
    return launch;
  }
};

} // namespace

KernelLaunch buildSoftmaxKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                StringRef name, int64_t rows, int64_t n,
                                Type t) {
  RowKernel k(builder, module, name, rows, n, /*params=*/0, t);
  Arith &a = k.a;
  Value log2e = a.f(kLog2e), zero = a.f(0.0);
  // x in the log2 domain; -inf beyond the row.
  auto load = [&](Value j, Value inRange) {
    Value v = a.fmul(k.load(j), log2e);
    return a.sel(inRange, v, a.negInf());
  };
  // Subtracting -inf would give NaN: a row (or lane) that has seen only
  // -inf subtracts 0.
  auto usable = [&](Value m) { return a.sel(a.isNegInf(m), zero, m); };
  SmallVector<Value> stats =
      sweep(a, k.r.lane, n, {a.negInf(), zero},
            [&](Value j, Value inRange, ValueRange acc) -> SmallVector<Value> {
              Value v = load(j, inRange);
              Value m = a.fmax(acc[0], v);
              Value mu = usable(m);
              Value s = a.fadd(a.fmul(acc[1], a.exp2(a.fsub(acc[0], mu))),
                               a.exp2(a.fsub(v, mu)));
              return {m, s};
            });
  // A row of -inf sums to 0 and gives NaN, as on the CPU.
  Value rowMax = a.quadReduce(stats[0], 32, /*isMax=*/true);
  Value mu = usable(rowMax);
  Value total = a.quadReduce(a.fmul(stats[1], a.exp2(a.fsub(stats[0], mu))), 32,
                             /*isMax=*/false);
  Value inv = arith::DivFOp::create(k.b, a.f(1.0), total);
  k.writeRow([&](Value j, Value inRange) {
    k.store(j, a.fmul(a.exp2(a.fsub(load(j, inRange), mu)), inv));
  });
  return k.finish();
}

KernelLaunch buildLayerNormKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                  StringRef name, int64_t rows, int64_t n,
                                  double epsilon, Type t) {
  RowKernel k(builder, module, name, rows, n, /*params=*/2, t);
  Arith &a = k.a;
  Value zero = a.f(0.0);
  // Sums shifted by the row's first element, so that a large mean does not
  // cancel the variance away.
  Value shift = k.load(a.c(0));
  SmallVector<Value> sums =
      sweep(a, k.r.lane, n, {zero, zero},
            [&](Value j, Value inRange, ValueRange acc) -> SmallVector<Value> {
              Value d = a.sel(inRange, a.fsub(k.load(j), shift), zero);
              return {a.fadd(acc[0], d), a.fma(d, d, acc[1])};
            });
  Value invN = a.f(1.0 / double(n));
  Value meanShifted = a.fmul(a.quadReduce(sums[0], 32, false), invN);
  Value meanSquare = a.fmul(a.quadReduce(sums[1], 32, false), invN);
  Value var =
      a.fmax(a.fsub(meanSquare, a.fmul(meanShifted, meanShifted)), zero);
  Value rstd = math::RsqrtOp::create(k.b, a.fadd(var, a.f(epsilon)));
  Value mean = a.fadd(shift, meanShifted);
  k.writeRow([&](Value j, Value) {
    Value g = a.toF32(memref::LoadOp::create(k.b, k.param(0), j));
    Value bb = a.toF32(memref::LoadOp::create(k.b, k.param(1), j));
    k.store(j, a.fma(a.fmul(a.fsub(k.load(j), mean), rstd), g, bb));
  });
  return k.finish();
}

KernelLaunch buildRmsNormKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                StringRef name, int64_t rows, int64_t n,
                                double epsilon, Type t) {
  RowKernel k(builder, module, name, rows, n, /*params=*/1, t);
  Arith &a = k.a;
  Value zero = a.f(0.0);
  SmallVector<Value> sums =
      sweep(a, k.r.lane, n, {zero},
            [&](Value j, Value inRange, ValueRange acc) -> SmallVector<Value> {
              Value v = a.sel(inRange, k.load(j), zero);
              return {a.fma(v, v, acc[0])};
            });
  Value meanSquare =
      a.fmul(a.quadReduce(sums[0], 32, false), a.f(1.0 / double(n)));
  Value rms = math::RsqrtOp::create(k.b, a.fadd(meanSquare, a.f(epsilon)));
  k.writeRow([&](Value j, Value) {
    // Rounded to the element type before gamma (the op's definition); the
    // product of two f16/bf16 values is exact in f32, so one more rounding
    // gives the type's product.
    Value v = a.toF32(a.fromF32(a.fmul(k.load(j), rms), t));
    Value g = a.toF32(memref::LoadOp::create(k.b, k.param(0), j));
    k.store(j, a.fmul(v, g));
  });
  return k.finish();
}

} // namespace tfc
