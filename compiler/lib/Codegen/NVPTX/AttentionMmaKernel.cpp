//===- AttentionMmaKernel.cpp - Flash attention on tensor cores -----------===//
//
// Tensor-core kernel (f16, bf16): a block of 4 warps owns 64 query rows of
// one (batch, head), 16 rows per warp. Q stays in registers as mma.sync A
// fragments for the whole kernel. The block walks the keys in tiles of Bc:
// it stages K [Bc][D] and Vᵀ [D][Bc] in shared memory (rows padded by 16
// bytes so that the fragment loads of a warp hit 32 different banks),
// computes S = Q·Kᵀ with mma.sync m16n8k16 (f32 accumulation), applies
// scale, mask and the causal limit, updates the running max and sum of each
// row (online softmax, exp2 with the scale folded into log2 e), and
// accumulates O += P·V with P converted in registers: the C fragment of two
// neighbouring 16x8 score tiles is exactly the A fragment of a 16x16 P tile.
// Each thread owns rows g and g+8 of its warp's 16 (g = lane / 4), so a row
// reduction is a butterfly over the 4 lanes of a quad. Causal blocks stop
// at the last key their last row sees. The score matrix never exists.
//
// Variants: with `ldmatrix`, K and V fragments come from ldmatrix (V stays
// row-major and is loaded transposed); with `asyncCopy` (which implies it),
// the tiles go from global to shared memory by cp.async into two stages:
// tile j + 1 is in flight while tile j is computed, and no register holds
// a prefetched tile.
// With `wgmma` (sm_90a; implies asyncCopy), the block's 4 warps are one
// warpgroup: S = Q·Kᵀ for the whole tile is one chain of wgmma m64nBck16
// (Q from registers, K by descriptor), and O += P·V one chain of
// m64nDk16 (P from registers, V by descriptor, N-major); the tiles are
// stored as wgmma's 8x8 core matrices. The accumulators come out in the
// same per-thread layout as mma.sync's, so the softmax is shared. The
// P·V of tile j - 1 is issued right after S of tile j and runs while the
// warps compute tile j's softmax (V is copied one tile behind K); O is
// waited for only before its rescale, and the last tile's P·V follows the
// loop (FlashAttention-3's intra-warpgroup overlap). With `tma`, thread 0
// copies each group of tiles with cp.async.bulk.tensor into 128-byte
// swizzled stages, completion on full mbarriers that every thread waits
// on; each warp releases a tile's stages on an empty mbarrier once its
// wgmma that read them have retired, and thread 0 waits on it before
// reloading them (no block barrier per tile). Two warpgroups then take
// turns issuing their wgmma (named barriers: FlashAttention-3's
// ping-pong); with `tmaProducer`, a third warpgroup issues the copies
// instead of thread 0 and hands its registers to the other two
// (setmaxnreg: FlashAttention-3's warp specialisation).
//
// The kernel is built in stages (MmaKernel::build): set-up, Q, then per key
// tile its K and V, the scores, the keys hidden, the online softmax and
// P·V; after the loop the output.
//
//===----------------------------------------------------------------------===//

#include "AttentionMmaKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace tfc {
namespace {

/// Replaces `frags` by `update()` (its values in slab, tile, element order)
/// where `cond` holds: a warp-uniform branch, scf.if yielding the updated
/// values or the old ones; without a condition, unconditionally.
void updateWhere(ImplicitLocOpBuilder &b, Value cond, Fragments &frags,
                 llvm::function_ref<SmallVector<Value>()> update) {
  SmallVector<Value> values;
  if (!cond) {
    values = update();
  } else {
    SmallVector<Value> old;
    for (auto &slab : frags)
      for (auto &frag : slab)
        old.append(frag.begin(), frag.end());
    auto ifOp = scf::IfOp::create(
        b, SmallVector<Type>(old.size(), b.getF32Type()), cond,
        /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, update());
    b.setInsertionPointToStart(&ifOp.getElseRegion().front());
    scf::YieldOp::create(b, old);
    values.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  }
  auto next = values.begin();
  for (auto &slab : frags)
    for (auto &frag : slab)
      for (Value &x : frag)
        x = *next++;
}

} // namespace

void MmaKernel::build(gpu::GPUFuncOp func, Value kTiles, Value vTiles) {
  ks = kTiles;
  vts = vTiles;
  setUp(func);
  loadQuery();
  scf::ForOp loop = loopOverKeyTiles();
  SmallVector<Value> res(loop.getResults());
  finishLastTile(res);
  storeOutput(res);
  if (roles)
    b.setInsertionPointAfter(roles);
  gpu::ReturnOp::create(b);
}

void MmaKernel::setUp(gpu::GPUFuncOp func) {
  b.setInsertionPointToEnd(&func.getBody().front());
  KernelArguments args = kernelArguments(func, s);
  q = args.q;
  k = args.k;
  v = args.v;
  mask = args.mask;
  out = args.out;

  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  warp = a.div(tid, 32);
  lane = a.rem(tid, 32);
  g = a.div(lane, 4);
  Value tq = a.rem(lane, 4);
  t2 = a.mul(tq, 2);
  // (batch x head) on x, which allows 2^31 - 1 blocks; query blocks on y
  // (reversed where causal).
  Value bh = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Not in the register-staged build (at D = 64 causal ptxas then took 172
  // registers instead of 168: 2 blocks per SM instead of 3) nor in the
  // producer's (a 12-byte spill in the soft-capped causal kernel).
  qBlock = queryBlock(a, s, (ldmatrix() || wgmma()) && !producer());
  bi = a.div(bh, s.headsQ);
  hi = a.rem(bh, s.headsQ);
  hk = a.div(hi, s.headsQ / s.headsKV);
  if (tma()) {
    kMap = args.kMap;
    vMap = args.vMap;
    bhk = toI32(a.add(a.mul(bi, s.headsKV), hk));
    bars = tmaOps.sharedAddress(ks);
    // The stages start at the first 1024-byte boundary of the buffer.
    kBase = tmaOps.alignedAddress(vts, 1024);
    vBase = offsetBy(kBase, a.c(2 * kStageBytes()));
  }
  // Keys this block sees: causal rows stop at their diagonal; with a
  // sliding window they start at the first row's window.
  KeyTiles tiles = keyTiles(a, s, qBlock, rows(), bc);
  firstTile = tiles.first;
  numTiles =
      s.window > 0 ? arith::SubIOp::create(b, tiles.end, firstTile) : tiles.end;
  // TMA: the mbarriers, then the first copy group goes in flight (K tile 0
  // and a zero V tile -1: V runs one tile behind K, below). Full barriers:
  // one arrival (with the bytes) per phase; empty barriers: one per
  // consumer warp.
  if (tma()) {
    a.guarded(a.ult(tid, 1), [&]() {
      for (int64_t i = 0; i < 4; ++i)
        tmaOps.initBarrier(offsetBy(bars, a.c(8 * i)), i < 2 ? 1 : warps);
      tmaOps.fenceBarrierInit();
    });
    gpu::BarrierOp::create(b);
    if (producer()) {
      // The producer warpgroup, then the consumers (the rest of the
      // kernel).
      roles = scf::IfOp::create(b, a.ult(a.c(threads() - 1), tid),
                                /*withElseRegion=*/true);
      b.setInsertionPointToStart(&roles.getThenRegion().front());
      produce();
      b.setInsertionPointToStart(&roles.getElseRegion().front());
      setMaxRegisters(a, kConsumerRegisters, /*increase=*/true);
    } else {
      issueTilesFromThread0(a.c(0));
    }
  }
}

void MmaKernel::loadQuery() {
  // The warp's rows (nr per thread).
  firstRow = a.add(a.mul(qBlock, rows()), a.mul(warp, 16 * slabs));
  for (int64_t ri = 0; ri < nr; ++ri) {
    row.push_back(a.add(firstRow, a.add(g, ri / 2 * 16 + ri % 2 * 8)));
    rowValid.push_back(a.ult(row.back(), s.seqQ));
  }

  // Q as A fragments, one per slab and 16 columns of the head dimension.
  qFrag.resize(slabs);
  for (int64_t sl = 0; sl < slabs; ++sl)
    for (int64_t kt = 0; kt < dp / 16; ++kt) {
      Value c0 = a.add(t2, kt * 16), c1 = a.add(t2, kt * 16 + 8);
      Value r0 = row[2 * sl], r1 = row[2 * sl + 1];
      Value v0 = rowValid[2 * sl], v1 = rowValid[2 * sl + 1];
      qFrag[sl].push_back(
          {globalPair(q, bi, hi, r0, s.seqQ, c0, s.headDim, v0),
           globalPair(q, bi, hi, r1, s.seqQ, c0, s.headDim, v1),
           globalPair(q, bi, hi, r0, s.seqQ, c1, s.headDim, v0),
           globalPair(q, bi, hi, r1, s.seqQ, c1, s.headDim, v1)});
    }
}

scf::ForOp MmaKernel::loopOverKeyTiles() {
  // Loop state: o [slab][dn][4], then m [ri], l [ri], then a prefetched
  // tile in registers (without async copies).
  zeroF = a.f(0.0);
  numO = slabs * (dvp / 8) * 4;
  SmallVector<Value> init(numO, zeroF);
  for (int64_t ri = 0; ri < nr; ++ri)
    init.push_back(a.negInf());
  for (int64_t ri = 0; ri < nr; ++ri)
    init.push_back(zeroF);
  kLayout = layout(s.headDim, dp, /*transposed=*/false);
  vLayout = layout(s.valueDim, dvp, /*transposed=*/!ldmatrix());
  kFirst = {kLayout, {}};
  vFirst = {vLayout, {}};
  if (tma()) {
    if (pingPong()) {
      // Warpgroup 0 goes first.
      secondGroup = a.ult(a.c(3), warp);
      a.guarded(secondGroup, [&]() { namedBarrierArrive(a, 1, threads()); });
    }
  } else if (async()) {
    // wgmma: V runs one tile behind K (P·V of tile j - 1 overlaps the
    // softmax of tile j): K 0 and a zero V tile -1 first.
    copyTile(a.c(0), a.c(wgmma() ? -1 : 0));
  } else {
    kFirst = loadKV(k, firstKey(a.c(0)), s.headDim, kLayout);
    vFirst = loadKV(v, firstKey(a.c(0)), s.valueDim, vLayout);
  }
  numState = int64_t(init.size());
  init.append(kFirst.values.begin(), kFirst.values.end());
  init.append(vFirst.values.begin(), vFirst.values.end());
  // wgmma: the previous tile's P as A fragments (i32), zero before the
  // first.
  pStart = int64_t(init.size());
  int64_t numP = wgmma() ? bc / 4 : 0;
  init.append(numP, arith::ConstantIntOp::create(b, b.getI32Type(), 0));

  auto loop = scf::ForOp::create(b, a.c(0), numTiles, a.c(1), init);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(loop.getBody());
  TileStep st = startStep(loop);
  stageTiles(st);
  computeScores(st);
  hideKeys(st);
  onlineSoftmax(st);
  multiplyByValues(st);
  endStep(st);
  return loop;
}

TileStep MmaKernel::startStep(scf::ForOp loop) {
  TileStep st;
  st.j = loop.getInductionVar();
  ValueRange iter = loop.getRegionIterArgs();
  st.kTile = kFirst;
  st.vTile = vFirst;
  st.kTile.values.assign(iter.begin() + numState,
                         iter.begin() + numState + kFirst.values.size());
  st.vTile.values.assign(iter.begin() + numState + kFirst.values.size(),
                         iter.begin() + pStart);
  st.pPrev.assign(iter.begin() + pStart, iter.end());
  st.o.resize(slabs);
  for (int64_t sl = 0; sl < slabs; ++sl)
    for (int64_t dn = 0; dn < dvp / 8; ++dn) {
      auto first = iter.begin() + (sl * (dvp / 8) + dn) * 4;
      st.o[sl].push_back(SmallVector<Value>(first, first + 4));
    }
  st.m.assign(iter.begin() + numO, iter.begin() + numO + nr);
  st.l.assign(iter.begin() + numO + nr, iter.begin() + numO + 2 * nr);
  st.kv0 = firstKey(st.j);
  return st;
}

SmallVector<Value> MmaKernel::flatO(const Fragments &o) {
  SmallVector<Value> flat;
  for (auto &frag : o[0])
    flat.append(frag.begin(), frag.end());
  return flat;
}

void MmaKernel::setO(Fragments &o, ArrayRef<Value> flat) {
  for (int64_t dn = 0; dn < dvp / 8; ++dn)
    o[0][dn].assign(flat.begin() + 4 * dn, flat.begin() + 4 * dn + 4);
}

void MmaKernel::stageTiles(TileStep &st) {
  Value j = st.j, kv0 = st.kv0;
  st.nextK = {kLayout, {}};
  st.nextV = {vLayout, {}};
  st.stageRow = a.c(0);
  if (tma()) {
    // Group j has to land. (Group j + 1 is issued once this tile's wgmma
    // are: below.)
    waitTiles(j);
  } else if (async()) {
    // Tile j + 1 goes in flight into the other stage; then wait for this
    // thread's copies of tile j (all but the newest group), and for
    // everyone's.
    st.stageRow = a.mul(a.rem(j, 2), bc);
    copyTile(a.add(j, 1), wgmma() ? j : a.add(j, 1));
    nvgpu::DeviceAsyncWaitOp::create(b, lastGroup, b.getI32IntegerAttr(1));
    if (wgmma())
      wg.fenceSharedWrites();
    gpu::BarrierOp::create(b);
  } else {
    // Stage this tile's K and Vᵀ (prefetched into registers during the
    // previous tile's arithmetic), then issue the loads of the next tile:
    // their latency hides behind this tile's mma work.
    gpu::BarrierOp::create(b);
    storeTile(a, st.kTile, ks, /*transpose=*/false, tid);
    storeTile(a, st.vTile, vts, /*transpose=*/!ldmatrix(), tid);
    gpu::BarrierOp::create(b);
    st.nextK = loadKV(k, a.add(kv0, bc), s.headDim, kLayout);
    st.nextV = loadKV(v, a.add(kv0, bc), s.valueDim, vLayout);
  }
}

void MmaKernel::computeScores(TileStep &st) {
  // S = Q·Kᵀ, scaled into the log2 domain, masked. Each K fragment
  // serves every slab of the warp. Without a mask (and with a positive
  // scale) the scores stay raw: the running max is taken on them and the
  // scale folds into the exponent's FMA, exp2(s·c - m·c), one
  // instruction per score fewer.
  // A soft cap takes the products through tanh first:
  // softcap * log2(e) * tanh(s · scale / softcap).
  Value j = st.j, kv0 = st.kv0;
  Fragments &o = st.o, &sc = st.sc;
  double scaleLog2 = st.scaleLog2 = s.scale * kLog2e;
  bool capped = st.capped = s.softcap > 0;
  bool raw = st.raw = !mask && s.scale > 0 && !capped;
  Value scaleC = st.scaleC = a.f(scaleLog2), log2e = a.f(kLog2e);
  st.ninf = a.negInf();
  sc.assign(slabs, SmallVector<SmallVector<Value>>(bc / 8));
  // wgmma: the whole tile's scores in one chain, K-major core matrices
  // of stage j % 2 (16 head columns = 2 core matrices per step).
  // Then O += P·V of the previous tile (V one stage behind K) goes in
  // flight as a second group, and only the first is waited for: the
  // tensor cores multiply P·V while the warps compute this tile's
  // softmax (FlashAttention-3's intra-warpgroup overlap).
  SmallVector<Value> tileAcc;
  if (wgmma()) {
    tileAcc.assign(bc / 2, zeroF);
    // TMA: 16 head columns are 32 bytes of a 128-byte row; 64 per region.
    // (LBO is unused in this layout.)
    Value desc =
        tma() ? wg.swizzledDescriptor(stageAddress(kBase, j, kStageBytes()),
                                      /*lbo=*/16, /*sbo=*/1024)
              : wg.descriptor(ks, a.mul(a.rem(j, 2), bc * dp * 2),
                              /*lbo=*/128, /*sbo=*/dp * 16);
    SmallVector<Value> flat = flatO(o);
    if (pingPong())
      turn(/*sync=*/true, 1);
    wg.pin(flat);
    wg.pin(st.pPrev);
    wg.fence();
    for (int64_t kt = 0; kt < dp / 16; ++kt)
      wg.mma(
          qFrag[0][kt],
          wg.advance(desc, tma() ? kt / 4 * bc * 128 + kt % 4 * 32 : kt * 256),
          /*transposeB=*/false, /*accumulate=*/kt > 0, tileAcc);
    wg.commit();
    accumulatePV(st.pPrev, a.add(j, 1), flat);
    setO(o, flat);
    if (pingPong())
      turn(/*sync=*/false, 1);
    // TMA: group j + 1 goes in flight into the other stages once every
    // warp has released them (iteration j - 1). Only now: with two
    // warpgroups, the other one releases them after its softmax, which
    // this warpgroup's products (just issued) overlap; waiting before
    // issuing them would stall the tensor cores for that softmax.
    if (tma() && !producer())
      issueTilesFromThread0(a.add(j, 1));
    wg.wait(1);
    wg.pin(tileAcc);
  }
  for (int64_t nt = 0; nt < bc / 8; ++nt) {
    SmallVector<SmallVector<Value>> acc(slabs, SmallVector<Value>(4, zeroF));
    auto mmaAll = [&](int64_t kt, Value b0, Value b1) {
      for (int64_t sl = 0; sl < slabs; ++sl)
        ops.mma(qFrag[sl][kt], {b0, b1}, acc[sl]);
    };
    if (wgmma()) {
      acc[0].assign(tileAcc.begin() + 4 * nt, tileAcc.begin() + 4 * nt + 4);
    } else if (ldmatrix()) {
      // Matrix j of an x4 load: keys nt*8.., head columns kt*16 + 8j..:
      // registers b0, b1 of step kt, then of step kt + 1.
      Value row8 = a.add(a.add(a.rem(lane, 8), nt * 8), st.stageRow);
      for (int64_t kt = 0; kt < dp / 16; kt += 2) {
        int64_t count = kt + 1 < dp / 16 ? 4 : 2;
        Value col = a.add(a.mul(a.rem(a.div(lane, 8), count), 8), kt * 16);
        SmallVector<Value> bs =
            ops.loadMatrices(ks, row8, col, count, /*transpose=*/false);
        mmaAll(kt, bs[0], bs[1]);
        if (count == 4)
          mmaAll(kt + 1, bs[2], bs[3]);
      }
    } else {
      Value kRow = a.add(g, nt * 8);
      for (int64_t kt = 0; kt < dp / 16; ++kt)
        mmaAll(kt, ops.sharedPair(ks, kRow, a.add(t2, kt * 16)),
               ops.sharedPair(ks, kRow, a.add(t2, kt * 16 + 8)));
    }
    for (int64_t sl = 0; sl < slabs; ++sl)
      for (int i = 0; i < 4; ++i) {
        int64_t ri = 2 * sl + i / 2;
        Value key = a.add(a.add(kv0, t2), nt * 8 + i % 2);
        Value x =
            capped
                ? a.fmul(a.tanh(a.fmul(acc[sl][i], a.f(s.scale / s.softcap))),
                         a.f(s.softcap * kLog2e))
            : raw ? acc[sl][i]
                  : a.fmul(acc[sl][i], scaleC);
        if (mask)
          x = a.fadd(x, a.toLog2Domain(maskValue(a, mask, s.mask, bi, hi,
                                                 a.umin(row[ri], s.seqQ - 1),
                                                 a.umin(key, s.seqKV - 1)),
                                       log2e));
        acc[sl][i] = x;
      }
    for (int64_t sl = 0; sl < slabs; ++sl)
      sc[sl][nt] = acc[sl];
  }
}

void MmaKernel::hideKeys(TileStep &st) {
  Value kv0 = st.kv0, ninf = st.ninf;
  Fragments &sc = st.sc;
  // Keys past the end (a partial last tile), past a row's causal limit
  // and before its window are hidden (-inf). Only the tiles that have
  // such keys for this warp pay for it: the last tile, the causal tiles
  // reaching beyond the warp's first row, the tiles starting before the
  // window of its last row. Elsewhere the branch skips the per-score
  // compare and select. (Not in the register-staged builds beyond
  // D = 64: their prefetched tile leaves no registers for the branch's
  // two sets of scores, and ptxas spills.)
  auto hide = [&]() {
    SmallVector<Value> hidden;
    for (int64_t sl = 0; sl < slabs; ++sl)
      for (int64_t nt = 0; nt < bc / 8; ++nt)
        for (int i = 0; i < 4; ++i) {
          int64_t ri = 2 * sl + i / 2;
          Value key = a.add(a.add(kv0, t2), nt * 8 + i % 2);
          Value visible;
          if (s.seqKV % bc != 0)
            visible = a.ult(key, s.seqKV);
          if (s.causal) {
            Value below = a.sle(key, a.add(row[ri], offset));
            visible = visible ? a.andi(visible, below) : below;
          }
          if (s.window > 0) {
            Value above = inWindow(a, s, key, row[ri]);
            visible = visible ? a.andi(visible, above) : above;
          }
          hidden.push_back(a.sel(visible, sc[sl][nt][i], ninf));
        }
    return hidden;
  };
  if (s.causal || s.seqKV % bc != 0 || s.window > 0) {
    Value needed; // null: hide in every tile
    if (branch && s.seqKV % bc != 0)
      needed = a.ult(a.c(s.seqKV), a.add(kv0, bc));
    if (branch && s.causal) {
      // Past the causal limit of the warp's first row.
      Value beyond =
          arith::CmpIOp::create(b, arith::CmpIPredicate::sgt,
                                a.add(kv0, bc - 1), a.add(firstRow, offset));
      needed = needed ? arith::OrIOp::create(b, needed, beyond) : beyond;
    }
    if (branch && s.window > 0) {
      // Before the window of the warp's last row.
      Value lastRow = a.add(firstRow, 16 * slabs - 1);
      Value before =
          arith::CmpIOp::create(b, arith::CmpIPredicate::sle,
                                a.add(kv0, s.window), a.add(lastRow, offset));
      needed = needed ? arith::OrIOp::create(b, needed, before) : before;
    }
    updateWhere(b, needed, sc, hide);
  }
}

void MmaKernel::onlineSoftmax(TileStep &st) {
  Value j = st.j, scaleC = st.scaleC;
  Fragments &o = st.o, &sc = st.sc;
  SmallVector<Value> &m = st.m, &l = st.l, &newM = st.newM, &newL = st.newL;
  double scaleLog2 = st.scaleLog2;
  bool raw = st.raw;
  SmallVector<Value> rowMax(nr, st.ninf);
  for (int64_t sl = 0; sl < slabs; ++sl)
    for (int64_t nt = 0; nt < bc / 8; ++nt)
      for (int i = 0; i < 4; ++i) {
        int64_t ri = 2 * sl + i / 2;
        rowMax[ri] = a.fmax(rowMax[ri], sc[sl][nt][i]);
      }

  // Online softmax: new running max, rescale factor, probabilities.
  // Lazily (where registers allow the branch, as for hiding keys): the
  // reference max of the warp's rows moves only when some row's tile max
  // exceeds it by more than 2^8 (probabilities then stay below 256, exact
  // enough in f16/bf16 and far from overflow in the f32 sums); otherwise
  // alpha is 1 and the rescale of O and l, with the exponentials of its
  // factors, is skipped for the whole warp.
  SmallVector<Value> alpha(nr), mUse(nr), rowSum(nr, zeroF), negMc(nr),
      tileMax(nr);
  newM.assign(nr, Value());
  newL.assign(nr, Value());
  // Row ri's factor for O and l, exp2(m - m'): 1 where the reference max
  // stays, 0 for a row that had seen no key (its O and l are 0).
  auto rescaleFactor = [&](int64_t ri) {
    Value shift = a.fsub(m[ri], mUse[ri]);
    return a.exp2FlushSubnormals(raw ? a.fmul(shift, scaleC) : shift);
  };
  for (int64_t ri = 0; ri < nr; ++ri)
    tileMax[ri] = a.quadReduce(rowMax[ri], 4, /*isMax=*/true);
  Value grow;
  if (branch) {
    Value rises;
    for (int64_t ri = 0; ri < nr; ++ri) {
      // -inf - -inf (no key seen yet) is NaN: not a rise.
      Value d = a.fsub(tileMax[ri], m[ri]);
      Value r = arith::CmpFOp::create(b, arith::CmpFPredicate::OGT,
                                      raw ? a.fmul(d, scaleC) : d,
                                      a.f(kLazyRescaleLog2));
      rises = rises ? arith::OrIOp::create(b, rises, r).getResult() : r;
    }
    grow = NVVM::VoteSyncOp::create(
        b, b.getI1Type(), arith::ConstantIntOp::create(b, b.getI32Type(), -1),
        rises,
        NVVM::VoteSyncKindAttr::get(b.getContext(), NVVM::VoteSyncKind::any));
  }
  for (int64_t ri = 0; ri < nr; ++ri) {
    newM[ri] = a.fmax(m[ri], tileMax[ri]);
    if (grow)
      newM[ri] = a.sel(grow, newM[ri], m[ri]);
    // A row that has seen no key yet keeps -inf: subtract 0 instead.
    mUse[ri] = a.sel(a.isNegInf(newM[ri]), zeroF, newM[ri]);
    if (!grow)
      alpha[ri] = rescaleFactor(ri);
    if (raw)
      negMc[ri] = a.fmul(mUse[ri], a.f(-scaleLog2));
  }
  for (int64_t sl = 0; sl < slabs; ++sl)
    for (int64_t nt = 0; nt < bc / 8; ++nt)
      for (int i = 0; i < 4; ++i) {
        int64_t ri = 2 * sl + i / 2;
        Value x = sc[sl][nt][i];
        sc[sl][nt][i] = a.exp2FlushSubnormals(raw ? a.fma(x, scaleC, negMc[ri])
                                                  : a.fsub(x, mUse[ri]));
        rowSum[ri] = a.fadd(rowSum[ri], sc[sl][nt][i]);
      }
  if (!grow) // (with the branch: below, with O's rescale)
    for (int64_t ri = 0; ri < nr; ++ri)
      newL[ri] = a.fma(l[ri], alpha[ri], rowSum[ri]);
  auto rescale = [&]() {
    SmallVector<Value> scaled;
    for (int64_t sl = 0; sl < slabs; ++sl)
      for (int64_t dn = 0; dn < dvp / 8; ++dn)
        for (int i = 0; i < 4; ++i)
          scaled.push_back(a.fmul(o[sl][dn][i], alpha[2 * sl + i / 2]));
    return scaled;
  };
  if (wgmma()) {
    // The previous tile's P·V is done; O may be rescaled. (TMA: the
    // warp has read this iteration's stages.)
    SmallVector<Value> flat = flatO(o);
    wg.wait(0);
    wg.pin(flat);
    setO(o, flat);
    if (tma())
      releaseTiles(j);
  }
  if (grow) {
    // Lazily: only a warp whose reference max moved computes the
    // factors (one exponential per row) and rescales O and l. (The
    // factors exist inside that branch only.)
    Fragments ol = o;
    ol.push_back({SmallVector<Value>(l.begin(), l.end())});
    updateWhere(b, grow, ol, [&]() {
      for (int64_t ri = 0; ri < nr; ++ri)
        alpha[ri] = rescaleFactor(ri);
      SmallVector<Value> scaled = rescale();
      for (int64_t ri = 0; ri < nr; ++ri)
        scaled.push_back(a.fmul(l[ri], alpha[ri]));
      return scaled;
    });
    for (int64_t ri = 0; ri < nr; ++ri)
      newL[ri] = a.fadd(ol.back()[0][ri], rowSum[ri]);
    ol.pop_back();
    o = std::move(ol);
  } else {
    updateWhere(b, Value(), o, rescale);
  }
}

void MmaKernel::multiplyByValues(TileStep &st) {
  Fragments &o = st.o, &sc = st.sc;
  // O += P·V: P's C fragments become A fragments in registers; each V
  // fragment serves every slab. wgmma: one chain over the tile's keys,
  // V N-major in core matrices (16 keys = 2 row groups per step).
  auto pFragments = [&](int64_t kk) {
    SmallVector<SmallVector<Value>> pFrag;
    for (int64_t sl = 0; sl < slabs; ++sl) {
      auto &p0 = sc[sl][2 * kk], &p1 = sc[sl][2 * kk + 1];
      pFrag.push_back(
          {ops.pairFromF32(p0[0], p0[1]), ops.pairFromF32(p0[2], p0[3]),
           ops.pairFromF32(p1[0], p1[1]), ops.pairFromF32(p1[2], p1[3])});
    }
    return pFrag;
  };
  // wgmma: P goes to the next iteration (converted here, before the
  // fence that precedes its wgmma).
  for (int64_t kk = 0; kk < (wgmma() ? bc / 16 : 0); ++kk)
    for (Value x : pFragments(kk)[0])
      st.pNext.push_back(wg.asI32(x));
  for (int64_t kk = 0; kk < (wgmma() ? 0 : bc / 16); ++kk) {
    SmallVector<SmallVector<Value>> pFrag = pFragments(kk);
    auto mmaAll = [&](int64_t dn, Value b0, Value b1) {
      for (int64_t sl = 0; sl < slabs; ++sl)
        ops.mma(pFrag[sl], {b0, b1}, o[sl][dn]);
    };
    if (ldmatrix()) {
      // V [key][d] row-major, loaded transposed: matrix j of an x4 load
      // holds keys kk*16 + 8 (j % 2).. of head columns (dn + j / 2) * 8..:
      // registers b0, b1 of tile dn, then of tile dn + 1.
      Value keyRow = a.add(a.add(a.add(a.rem(lane, 8), kk * 16),
                                 a.mul(a.rem(a.div(lane, 8), 2), 8)),
                           st.stageRow);
      // (dvp is a multiple of 16: the 8-column tiles come in pairs.)
      for (int64_t dn = 0; dn < dvp / 8; dn += 2) {
        Value col = a.mul(a.add(a.div(lane, 16), dn), 8);
        SmallVector<Value> bs =
            ops.loadMatrices(vts, keyRow, col, 4, /*transpose=*/true);
        mmaAll(dn, bs[0], bs[1]);
        mmaAll(dn + 1, bs[2], bs[3]);
      }
    } else {
      // Vᵀ's odd 8-row groups hold keys 16 (kk ^ 1).. where the even
      // ones hold 16 kk.. (TileLayout::pairedRows).
      bool swizzled = vLayout.pairedRows();
      for (int64_t dn = 0; dn < dvp / 8; ++dn) {
        Value vRow = a.add(g, dn * 8);
        int64_t key = 16 * (swizzled && dn % 2 ? kk ^ 1 : kk);
        mmaAll(dn, ops.sharedPair(vts, vRow, a.add(t2, key)),
               ops.sharedPair(vts, vRow, a.add(t2, key + 8)));
      }
    }
  }
}

void MmaKernel::endStep(TileStep &st) {
  // Every warp is done with this stage before tile j + 2 is copied into
  // it (the next iteration's copies). TMA: the empty barriers say so.
  if (async() && !tma())
    gpu::BarrierOp::create(b);

  SmallVector<Value> yield;
  for (auto &slab : st.o)
    for (auto &frag : slab)
      yield.append(frag.begin(), frag.end());
  yield.append(st.newM.begin(), st.newM.end());
  yield.append(st.newL.begin(), st.newL.end());
  yield.append(st.nextK.values.begin(), st.nextK.values.end());
  yield.append(st.nextV.values.begin(), st.nextV.values.end());
  yield.append(st.pNext.begin(), st.pNext.end());
  scf::YieldOp::create(b, yield);
}

void MmaKernel::finishLastTile(SmallVectorImpl<Value> &res) {
  if (!wgmma())
    return;
  // The last tile's P·V, once its V has landed (nothing to add without
  // tiles: P is zero, the V stage zero-filled).
  if (tma()) {
    waitTiles(numTiles);
  } else {
    NVVM::CpAsyncWaitGroupOp::create(b, 0);
    wg.fenceSharedWrites();
    gpu::BarrierOp::create(b);
  }
  SmallVector<Value> oLast(res.begin(), res.begin() + numO);
  SmallVector<Value> pLast(res.begin() + pStart, res.end());
  wg.pin(oLast);
  wg.pin(pLast);
  wg.fence();
  accumulatePV(pLast, a.add(numTiles, 1), oLast);
  wg.wait(0);
  wg.pin(oLast);
  llvm::copy(oLast, res.begin());
}

void MmaKernel::storeOutput(ArrayRef<Value> res) {
  // O / l, written once; rows without a visible key are 0.
  for (int64_t ri = 0; ri < nr; ++ri) {
    int64_t sl = ri / 2, r = ri % 2;
    Value total = a.quadReduce(res[numO + nr + ri], 4, /*isMax=*/false);
    Value inv = a.inverseOrZero(total);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(
        &scf::IfOp::create(b, rowValid[ri], false).getThenRegion().front());
    for (int64_t dn = 0; dn < dvp / 8; ++dn) {
      if (dn * 8 >= s.valueDim)
        break;
      Value col = a.add(t2, dn * 8);
      int64_t at = (sl * (dvp / 8) + dn) * 4 + 2 * r;
      Value x = a.fmul(res[at], inv);
      Value y = a.fmul(res[at + 1], inv);
      Value pair = vector::FromElementsOp::create(
          b, VectorType::get({2}, t),
          ValueRange{a.fromF32(x, t), a.fromF32(y, t)});
      auto store = [&]() {
        vector::StoreOp::create(b, pair, out, ValueRange{bi, hi, row[ri], col},
                                false, llvm::MaybeAlign(4));
      };
      a.guarded((dn + 1) * 8 <= s.valueDim ? Value() : a.ult(col, s.valueDim),
                store);
    }
  }
}

} // namespace tfc
