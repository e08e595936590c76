//===- DecodeCombine.cpp - The decode kernel's chunks combined ------------===//
//
// The block that arrives last combines: once the block has synchronised
// after writing its chunk, one thread fences (membar.gl, cumulative: it
// orders the block's stores that the barrier ordered before it) and adds 1
// to the (batch, KV head)'s counter; the block whose addition finds every
// other chunk counted fences again (so that the other blocks' chunks are
// visible to it), sets the counter back to 0 for the next launch and
// combines each of its rows as a separate combine kernel would.
//
//===----------------------------------------------------------------------===//

#include "DecodeCombine.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tfc {
namespace {

/// Output row `row` (of B x Hq x Sq) is the sum over the chunks of their
/// outputs rescaled to the largest max, over the same sum of their sums (0
/// where no chunk saw a key). Each thread reads the statistics of its own
/// chunks (one trip to memory for all of them), the block reduces their max
/// and sum through shared memory (`warpStats` [2][warps]) and leaves each
/// chunk's weight in `weights` [1][splits]; then each thread sums its
/// columns over the chunks kCombineLoads at a time, their loads independent
/// of each other (a dependent chain per chunk, as the loop over chunks used
/// to be, took about 10 us for 66 chunks on an H200:
/// docs/performance/reports/2026-12-04-h200.md). Block-uniform: it has
/// barriers, and leaves the tiles free for the next row.
constexpr int64_t kCombineLoads = 16;

void combineRow(Arith &a, const AttentionShape &s, int64_t splits,
                int64_t threads, Value tid, Value row, Value part, Value stats,
                Value out, Value weights, Value warpStats) {
  ImplicitLocOpBuilder &b = a.b;
  Value lane = a.rem(tid, 32), warp = a.div(tid, 32);
  int64_t warps = threads / 32;
  Value zero = a.f(0.0), ninf = a.negInf();
  auto stat = [&](Value chunk, int64_t which) -> Value {
    return memref::LoadOp::create(b, stats, ValueRange{chunk, row, a.c(which)});
  };
  // The block's sum (or max) of one value per thread.
  auto blockReduce = [&](Value x, int64_t slot, bool isMax) {
    x = a.butterfly(x, 1, 32, isMax);
    a.guarded(a.ult(lane, 1), [&]() {
      memref::StoreOp::create(b, x, warpStats, ValueRange{a.c(slot), warp});
    });
    gpu::BarrierOp::create(b);
    Value total = isMax ? ninf : zero;
    for (int64_t w = 0; w < warps; ++w) {
      Value v =
          memref::LoadOp::create(b, warpStats, ValueRange{a.c(slot), a.c(w)});
      total = isMax ? a.fmax(total, v) : a.fadd(total, v);
    }
    return total;
  };

  // The thread's chunks tid, tid + threads, ...: their max and sum.
  SmallVector<Value> chunk, inRange, m, l;
  Value most = ninf;
  for (int64_t i = 0; i * threads < splits; ++i) {
    chunk.push_back(a.add(tid, i * threads));
    inRange.push_back(
        (i + 1) * threads <= splits ? Value() : a.ult(chunk.back(), splits));
    Value c = a.umin(chunk.back(), splits - 1);
    m.push_back(inRange.back() ? a.sel(inRange.back(), stat(c, 0), ninf)
                               : stat(c, 0));
    l.push_back(stat(c, 1));
    most = a.fmax(most, m.back());
  }
  most = blockReduce(most, 0, /*isMax=*/true);
  Value mUse = a.sel(a.isNegInf(most), zero, most);
  Value sum = zero;
  for (size_t i = 0; i < chunk.size(); ++i) {
    // (A chunk without a visible key, or past the last: weight 0.)
    Value w = a.exp2FlushSubnormals(a.fsub(m[i], mUse));
    a.guarded(inRange[i], [&]() {
      memref::StoreOp::create(b, w, weights, ValueRange{a.c(0), chunk[i]});
    });
    sum = a.fma(w, l[i], sum);
  }
  Value inv = a.inverseOrZero(blockReduce(sum, 1, /*isMax=*/false));

  // Each column: the chunks' outputs, weighted, kCombineLoads chunks per
  // step (the step's loads first, then its FMAs).
  int64_t step = std::min(kCombineLoads, splits);
  int64_t perThread = (s.valueDim + threads - 1) / threads;
  for (int64_t i = 0; i < perThread; ++i) {
    Value col = a.add(tid, i * threads);
    Value readCol = a.umin(col, s.valueDim - 1);
    auto loop = scf::ForOp::create(b, a.c(0), a.c(roundUp(splits, step)),
                                   a.c(step), ValueRange{zero});
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value c0 = loop.getInductionVar();
      SmallVector<Value> ps, ws;
      for (int64_t u = 0; u < step; ++u) {
        Value c = a.add(c0, u);
        Value cc = splits % step ? a.umin(c, splits - 1) : c;
        ps.push_back(
            memref::LoadOp::create(b, part, ValueRange{cc, row, readCol}));
        Value w = memref::LoadOp::create(b, weights, ValueRange{a.c(0), cc});
        ws.push_back(splits % step ? a.sel(a.ult(c, splits), w, zero) : w);
      }
      Value acc = loop.getRegionIterArgs()[0];
      for (int64_t u = 0; u < step; ++u)
        acc = a.fma(ws[u], ps[u], acc);
      scf::YieldOp::create(b, acc);
    }
    a.guarded(
        (i + 1) * threads <= s.valueDim ? Value() : a.ult(col, s.valueDim),
        [&]() {
          memref::StoreOp::create(
              b, a.fromF32(a.fmul(loop.getResult(0), inv), s.elementType), out,
              ValueRange{a.div(row, s.headsQ * s.seqQ),
                         a.rem(a.div(row, s.seqQ), s.headsQ),
                         a.rem(row, s.seqQ), col});
        });
  }
}

/// A special register (%tid.x, %ctaid.x) read again, as an index: a read
/// the compiler neither merges with the kernel's first one nor moves, so
/// that nothing the combine needs stays live through the decode loop.
Value readAgain(Arith &a, StringRef reg) {
  ImplicitLocOpBuilder &b = a.b;
  auto op = LLVM::InlineAsmOp::create(
      b, b.getI32Type(), ValueRange{}, ("mov.u32 $0, " + reg + ";").str(), "=r",
      /*has_side_effects=*/true, /*is_align_stack=*/false,
      LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
      ArrayAttr());
  return arith::IndexCastUIOp::create(b, b.getIndexType(), op.getResult(0));
}

} // namespace

SmallVector<memref::GlobalOp> combineGlobals(OpBuilder &builder,
                                             gpu::GPUModuleOp module,
                                             StringRef kernel, int64_t blocks,
                                             int64_t splits, int64_t warps) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  Location loc = module.getLoc();
  Type i32 = builder.getI32Type(), f32 = builder.getF32Type();
  auto counters =
      MemRefType::get({blocks}, i32, MemRefLayoutAttrInterface(),
                      gpu::AddressSpaceAttr::get(builder.getContext(),
                                                 gpu::AddressSpace::Global));
  SmallVector<memref::GlobalOp> globals = {memref::GlobalOp::create(
      builder, loc, (kernel + "_arrivals").str(),
      builder.getStringAttr("private"), counters,
      DenseElementsAttr::get(RankedTensorType::get({blocks}, i32),
                             builder.getI32IntegerAttr(0).getValue()),
      /*constant=*/false, builder.getI64IntegerAttr(4))};
  MemRefType tiles[] = {sharedTile(f32, 1, splits + 1),
                        sharedTile(f32, 2, warps)};
  for (auto [i, type] : llvm::enumerate(tiles))
    globals.push_back(memref::GlobalOp::create(
        builder, loc, (kernel + "_combine" + llvm::Twine(i)).str(),
        builder.getStringAttr("private"), type, Attribute(),
        /*constant=*/false, builder.getI64IntegerAttr(16)));
  return globals;
}

void combineInLastBlock(Arith &a, const AttentionShape &s, int64_t splits,
                        int64_t threads, int64_t rows, Value counters,
                        Value part, Value stats, Value out,
                        ArrayRef<Value> tiles,
                        llvm::function_ref<Value(Value, Value)> rowOf) {
  ImplicitLocOpBuilder &b = a.b;
  Value weights = tiles[0], warpStats = tiles[1];
  Value tid = readAgain(a, "%tid.x"), block = readAgain(a, "%ctaid.x");
  Value flag = a.c(splits); // weights[0][splits]: whether this block is last
  // The block's stores of its chunk, then (the fence is cumulative: it
  // orders what the barrier made visible to thread 0) its arrival.
  gpu::BarrierOp::create(b);
  a.guarded(a.ult(tid, 1), [&]() {
    NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
    Type i32 = b.getI32Type();
    Value before = memref::AtomicRMWOp::create(
        b, arith::AtomicRMWKind::addi, arith::ConstantIntOp::create(b, i32, 1),
        counters, ValueRange{block});
    Value last =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, before,
                              arith::ConstantIntOp::create(b, i32, splits - 1));
    memref::StoreOp::create(b, a.sel(last, a.f(1.0), a.f(0.0)), weights,
                            ValueRange{a.c(0), flag});
    // Every chunk has arrived: the counter is back at 0 for the next launch.
    a.guarded(last, [&]() {
      memref::StoreOp::create(b, arith::ConstantIntOp::create(b, i32, 0),
                              counters, ValueRange{block});
    });
  });
  gpu::BarrierOp::create(b);
  Value isLast = arith::CmpFOp::create(
      b, arith::CmpFPredicate::OEQ,
      memref::LoadOp::create(b, weights, ValueRange{a.c(0), flag}), a.f(1.0));
  a.guarded(isLast, [&]() {
    // The other blocks' chunks, visible to every thread of this one.
    NVVM::MembarOp::create(b, NVVM::MemScopeKind::GPU);
    for (int64_t r = 0; r < rows; ++r)
      combineRow(a, s, splits, threads, tid, rowOf(block, a.c(r)), part, stats,
                 out, weights, warpStats);
  });
}

} // namespace tfc
