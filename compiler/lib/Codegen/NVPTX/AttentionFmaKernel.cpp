//===- AttentionFmaKernel.cpp - Flash attention in f32 on CUDA cores ------===//
//
// FMA kernel (f32): one thread per query row, q and o in registers, keys in
// shared-memory tiles of 16 with one rescale per tile.
//
//===----------------------------------------------------------------------===//

#include "AttentionCommon.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"

using namespace mlir;

namespace tfc {

void buildFmaAttentionKernel(const AttentionShape &s, Arith &a,
                             gpu::GPUFuncOp func, Value ks, Value vs,
                             int64_t rowsPerBlock, int64_t bc) {
  ImplicitLocOpBuilder &b = a.b;
  b.setInsertionPointToEnd(&func.getBody().front());
  KernelArguments args = kernelArguments(func, s);
  Value q = args.q, k = args.k, v = args.v, mask = args.mask, out = args.out;
  int64_t d = s.headDim, dv = s.valueDim;

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  // (batch x head) on x, which allows 2^31 - 1 blocks; query blocks on y
  // (reversed where causal).
  Value bh = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value qBlock = queryBlock(a, s, /*assumeBelowSq=*/true);
  Value bi = a.div(bh, s.headsQ), hi = a.rem(bh, s.headsQ);
  Value hk = a.div(hi, s.headsQ / s.headsKV);
  Value row = a.add(a.mul(qBlock, rowsPerBlock), tid);
  Value rowValid = a.ult(row, s.seqQ);
  Value safeRow = a.umin(row, s.seqQ - 1);

  // The query row, pre-scaled by queryFactor.
  Value scaleC = a.f(queryFactor(s)), log2e = a.f(kLog2e);
  SmallVector<Value> qv;
  for (int64_t i = 0; i < d; ++i)
    qv.push_back(a.fmul(
        memref::LoadOp::create(b, q, ValueRange{bi, hi, safeRow, a.c(i)}),
        scaleC));

  int64_t offset = s.seqKV - s.seqQ;
  KeyTiles tiles = keyTiles(a, s, qBlock, rowsPerBlock, bc);
  Value zeroF = a.f(0.0), ninf = a.negInf();
  SmallVector<Value> init(dv, zeroF);
  init.append({ninf, zeroF}); // m, l
  auto loop = scf::ForOp::create(b, tiles.first, tiles.end, a.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value kv0 = a.mul(loop.getInductionVar(), bc);
    ValueRange iter = loop.getRegionIterArgs();
    SmallVector<Value> o(iter.begin(), iter.begin() + dv);
    Value m = iter[dv], l = iter[dv + 1];

    gpu::BarrierOp::create(b);
    // One element per chunk (f32 rows of any length).
    auto stage = [&](Value src, Value dst, int64_t cols) {
      TileLayout l{bc, cols, 1, rowsPerBlock};
      storeTile(a,
                loadTile(a, src, {bi, hk}, kv0, s.seqKV, a.c(0), cols,
                         /*colsMayOverflow=*/false, l, tid),
                dst, /*transpose=*/false, tid);
    };
    stage(k, ks, d);
    stage(v, vs, dv);
    gpu::BarrierOp::create(b);

    SmallVector<Value> sc;
    Value tileMax = ninf;
    for (int64_t jj = 0; jj < bc; ++jj) {
      Value dot = zeroF;
      for (int64_t i = 0; i < d; ++i)
        dot = a.fma(qv[i],
                    memref::LoadOp::create(b, ks, ValueRange{a.c(jj), a.c(i)}),
                    dot);
      if (s.softcap > 0)
        dot = a.fmul(a.tanh(dot), a.f(s.softcap * kLog2e));
      Value key = a.add(kv0, jj);
      if (mask)
        dot = a.fadd(dot,
                     a.toLog2Domain(maskValue(a, mask, s.mask, bi, hi, safeRow,
                                              a.umin(key, s.seqKV - 1)),
                                    log2e));
      Value visible = a.ult(key, s.seqKV);
      if (s.causal)
        visible = a.andi(visible, a.sle(key, a.add(row, offset)));
      if (s.window > 0)
        visible = a.andi(visible, inWindow(a, s, key, row));
      dot = a.sel(visible, dot, ninf);
      sc.push_back(dot);
      tileMax = a.fmax(tileMax, dot);
    }
    Value newM = a.fmax(m, tileMax);
    Value mUse = a.sel(a.isNegInf(newM), zeroF, newM);
    Value alpha = a.exp2FlushSubnormals(a.fsub(m, mUse));
    Value sum = zeroF;
    for (Value &x : sc) {
      x = a.exp2FlushSubnormals(a.fsub(x, mUse));
      sum = a.fadd(sum, x);
    }
    for (int64_t i = 0; i < dv; ++i) {
      Value acc = a.fmul(o[i], alpha);
      for (int64_t jj = 0; jj < bc; ++jj)
        acc = a.fma(sc[jj],
                    memref::LoadOp::create(b, vs, ValueRange{a.c(jj), a.c(i)}),
                    acc);
      o[i] = acc;
    }
    SmallVector<Value> yield(o);
    yield.append({newM, a.fma(l, alpha, sum)});
    scf::YieldOp::create(b, yield);
  }
  ValueRange res = loop.getResults();
  Value inv = a.inverseOrZero(res[dv + 1]);
  a.guarded(rowValid, [&]() {
    for (int64_t i = 0; i < dv; ++i)
      memref::StoreOp::create(b, a.fmul(res[i], inv), out,
                              ValueRange{bi, hi, row, a.c(i)});
  });
  gpu::ReturnOp::create(b);
}

} // namespace tfc
