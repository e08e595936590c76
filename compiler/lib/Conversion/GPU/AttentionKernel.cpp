//===- AttentionKernel.cpp - Flash-attention GPU kernels ------------------===//
//
// One kernel per fused attention, specialised to its static shapes.
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
// FMA kernel (f32): one thread per query row, q and o in registers, keys in
// shared-memory tiles of 16 with one rescale per tile.
//
//===----------------------------------------------------------------------===//

#include "AttentionKernel.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <cmath>

using namespace mlir;

namespace tfc {
namespace {

constexpr double kLog2e = 1.4426950408889634;
/// Lazy rescaling: the reference max moves when a row's max exceeds it by
/// more than this (log2 domain: a factor of 256).
constexpr double kLazyRescaleLog2 = 8.0;

struct KernelArguments {
  Value q, k, v, mask, out; // mask is null without one
  Value kMap, vMap;         // TMA: the tensor maps' device addresses (i64)
};

KernelArguments kernelArguments(gpu::GPUFuncOp func, const AttentionShape &s) {
  Block &entry = func.getBody().front();
  bool masked = !s.mask.empty();
  unsigned out = masked ? 4 : 3;
  return {entry.getArgument(0),
          entry.getArgument(1),
          entry.getArgument(2),
          masked ? entry.getArgument(3) : Value(),
          entry.getArgument(out),
          s.tma ? entry.getArgument(out + 1) : Value(),
          s.tma ? entry.getArgument(out + 2) : Value()};
}

/// Per-thread fragments of the tensor-core kernel: [slab][8-column tile][4].
using Fragments = SmallVector<SmallVector<SmallVector<Value>>>;

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

/// The block's query block: blockIdx.y, or with a causal mask the
/// blocks in reverse order, since blocks start in blockIdx order and a
/// causal block's work grows with its query rows: the longest then start
/// first, and the last blocks to start are the shortest instead of the
/// longest (a shorter tail once the SMs run out of blocks). From the
/// grid's size (%nctaid.y): with the block count as a constant, ptxas
/// spilled 4 bytes in the register-staged causal kernel (D = 64).
/// `assumeBelowSq` tells LLVM that the index is below Sq, as blockIdx.y's
/// range does: without it the key-tile and row arithmetic stays signed,
/// clamps and sign extensions included (3-10% more instructions per
/// product in the wgmma and TMA builds). Where registers are at the edge
/// LLVM's other choices cost more than that (see the caller).
Value queryBlock(Arith &a, const AttentionShape &s, bool assumeBelowSq) {
  Value y = gpu::BlockIdOp::create(a.b, gpu::Dimension::y);
  if (!s.causal)
    return y;
  Value n = gpu::GridDimOp::create(a.b, gpu::Dimension::y);
  Value q = arith::SubIOp::create(a.b, a.add(n, -1), y);
  if (assumeBelowSq)
    LLVM::AssumeOp::create(a.b, a.ult(q, s.seqQ));
  return q;
}

/// Key tiles of `tileKeys` that the block of `rows` queries starting at
/// qBlock * rows must visit. Causal rows stop at their diagonal: the last
/// row sees keys below qBlock * rows + rows + (Skv - Sq), clamped to
/// [0, Skv] (signed index arithmetic).
Value numKeyTiles(Arith &a, const AttentionShape &s, Value qBlock, int64_t rows,
                  int64_t tileKeys) {
  if (!s.causal)
    return a.c((s.seqKV + tileKeys - 1) / tileKeys);
  ImplicitLocOpBuilder &b = a.b;
  Value end = arith::AddIOp::create(b, a.mul(qBlock, rows),
                                    a.c(rows + s.seqKV - s.seqQ));
  end = arith::MaxSIOp::create(b, end, a.c(0));
  end = arith::MinSIOp::create(b, end, a.c(s.seqKV));
  return arith::CeilDivUIOp::create(b, end, a.c(tileKeys));
}

/// The key tiles [first, end) such a block visits: numKeyTiles' end, from
/// the tile holding the start of the first row's sliding window
/// (qBlock * rows + Skv - Sq - window + 1), or from tile 0 without one.
struct KeyTiles {
  Value first, end;
};
KeyTiles keyTiles(Arith &a, const AttentionShape &s, Value qBlock, int64_t rows,
                  int64_t tileKeys) {
  Value end = numKeyTiles(a, s, qBlock, rows, tileKeys);
  if (s.window <= 0)
    return {a.c(0), end};
  ImplicitLocOpBuilder &b = a.b;
  Value start = arith::AddIOp::create(b, a.mul(qBlock, rows),
                                      a.c(s.seqKV - s.seqQ - s.window + 1));
  start = arith::MaxSIOp::create(b, start, a.c(0));
  Value first = arith::MinUIOp::create(b, a.div(start, tileKeys), end);
  return {first, end};
}

/// Whether `key` is inside the sliding window of query `row` (i1): key >
/// row + Skv - Sq - window, signed.
Value inWindow(Arith &a, const AttentionShape &s, Value key, Value row) {
  return arith::CmpIOp::create(a.b, arith::CmpIPredicate::sgt,
                               a.add(key, s.window),
                               a.add(row, s.seqKV - s.seqQ));
}

//===----------------------------------------------------------------------===//
// Tensor-core kernel
//===----------------------------------------------------------------------===//

/// Registers per thread of the producer warpgroup and of the two consumer
/// warpgroups (setmaxnreg), 384 threads: 24 * 128 + 240 * 256 = 168 * 384,
/// what the block is launched with (65536 / 384, rounded down to 8).
constexpr int64_t kProducerRegisters = 24, kConsumerRegisters = 240;

struct MmaKernel {
  const AttentionShape &s;
  Arith &a;
  ImplicitLocOpBuilder &b;
  Type t;          // f16 or bf16
  int64_t dp, dvp; // head dims rounded up to 16
  int64_t bc;      // keys per tile
  int64_t slabs;   // 16-row slabs per warp (1 or 2)
  int64_t warps;   // per block: 4, or 8 (two warpgroups)
  int64_t threads() const { return 32 * warps; }
  /// Query rows per block: warps of 16 or 32.
  int64_t rows() const { return warps * 16 * slabs; }

  MmaOps ops{a, t};
  WgmmaOps wg{a, t};
  TmaOps tmaOps{a};
  Value tid = {};

  bool async() const { return s.asyncCopy; }
  bool wgmma() const { return s.wgmma; }
  bool tma() const { return s.tma; }
  /// TMA with two warpgroups: they take turns issuing their wgmma (named
  /// barriers 1 and 2: warpgroup w waits at 1 + w, then lets the other go
  /// at 2 - w), so that one's softmax runs while the other's products do
  /// (FlashAttention-3's ping-pong).
  bool pingPong() const { return s.tma && warps == 8; }
  /// Ping-pong with a producer warpgroup (buildAttentionKernel sets it
  /// only there): threads from threads() on (one of them issues the
  /// copies) hand their registers to the consumers.
  bool producer() const { return s.tmaProducer; }
  int64_t blockThreads() const { return threads() + (producer() ? 128 : 0); }
  Value secondGroup = {}; // i1: the thread is in warpgroup 1
  /// Named barrier `base` + the thread's warpgroup (`sync`), or + the other
  /// one (arrive): a warp-uniform branch, for immediate barrier ids.
  void turn(bool sync, int64_t base) {
    auto ifOp = scf::IfOp::create(b, secondGroup, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    for (int64_t group : {1, 0}) {
      b.setInsertionPointToStart(group ? &ifOp.getThenRegion().front()
                                       : &ifOp.getElseRegion().front());
      if (sync)
        namedBarrierSync(a, base + group, threads());
      else
        namedBarrierArrive(a, base + 1 - group, threads());
    }
  }

  /// TMA: each stage holds a tile as regions of 64 columns, [bc][64] with
  /// 128-byte rows, swizzled; stages and regions are 1024-byte aligned.
  /// Shared addresses (i32): the mbarriers (full 0, full 1, empty 0,
  /// empty 1), the K and the V stages.
  Value bars = {}, kBase = {}, vBase = {};
  Value kMap = {}, vMap = {}, bhk = {}; // tensor maps, (batch, kv head)
  static int64_t regions(int64_t cols) { return (cols + 63) / 64; }
  int64_t kStageBytes() const { return regions(s.headDim) * bc * 128; }
  int64_t vStageBytes() const { return regions(s.valueDim) * bc * 128; }
  Value toI32(Value index) { return tmaOps.toI32(index); }
  Value offsetBy(Value address, Value bytes) {
    return tmaOps.offsetBy(address, bytes);
  }
  /// With a sliding window the block's key tiles start at firstTile: tile
  /// indices (loop iterations, copy groups, stages) count from there, and
  /// tile t holds keys from (firstTile + t) * bc. A negative t (V's tile
  /// -1 ahead of the first) stays out of bounds.
  Value firstTile = {};
  Value firstKey(Value tile) {
    if (s.window <= 0)
      return a.mul(tile, bc);
    Value shifted = a.mul(a.add(tile, firstTile), bc);
    return a.sel(
        arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tile, a.c(0)),
        a.mul(tile, bc), shifted);
  }
  /// The stage (tile % 2) of a tile in the stages at `base`.
  Value stageAddress(Value base, Value tile, int64_t stageBytes) {
    return offsetBy(base, a.mul(a.rem(a.add(tile, 2), 2), stageBytes));
  }
  /// Barrier `first + i % 2` (0: full, 2: empty).
  Value barrier(int64_t first, Value i) {
    return offsetBy(bars, a.mul(a.add(a.rem(i, 2), first), 8));
  }
  /// TMA copy group g holds key tile g of K (none from numTiles on) and
  /// tile g - 1 of V (tile -1: out of bounds, zeros), completing on full
  /// barrier g % 2 in its phase (g / 2) % 2. Issued by one thread (thread
  /// 0, or the producer's first) once every warp has released the stages
  /// it overwrites (empty barrier g % 2, in its phase (g - 2) / 2: group
  /// g - 2's tiles were last read in iteration g - 2).
  void issueTiles(Value group, Value numTiles) {
    Value bar = barrier(0, group);
    Type i32 = b.getI32Type();
    Value reused =
        arith::CmpIOp::create(b, arith::CmpIPredicate::uge, group, a.c(2));
    a.guarded(reused, [&]() {
      tmaOps.wait(barrier(2, group),
                  toI32(a.rem(a.div(a.add(group, -2), 2), 2)));
    });
    Value kValid = a.ult(group, numTiles);
    Value bytes = a.sel(
        kValid,
        arith::ConstantIntOp::create(b, i32, kStageBytes() + vStageBytes()),
        arith::ConstantIntOp::create(b, i32, vStageBytes()));
    tmaOps.arriveExpectTx(bar, bytes);
    auto load = [&](Value map, Value tile, Value base, int64_t cols,
                    int64_t stageBytes) {
      Value stage = stageAddress(base, tile, stageBytes);
      Value key0 = toI32(firstKey(tile));
      for (int64_t r = 0; r < regions(cols); ++r)
        tmaOps.load3d(offsetBy(stage, a.c(r * bc * 128)), map,
                      {toI32(a.c(r * 64)), key0, bhk}, bar);
    };
    a.guarded(kValid,
              [&]() { load(kMap, group, kBase, s.headDim, kStageBytes()); });
    load(vMap, a.add(group, -1), vBase, s.valueDim, vStageBytes());
  }
  /// Thread 0 issues copy group `group`.
  void issueTilesFromThread0(Value group, Value numTiles) {
    a.guarded(a.ult(tid, 1), [&]() { issueTiles(group, numTiles); });
  }
  /// The producer warpgroup: its registers go to the consumers, and its
  /// first thread issues every copy group, 0 to numTiles (the last one
  /// holds V's last tile), each once its stages are released.
  void produce(Value numTiles);
  /// Waits for TMA copy group `group`.
  void waitTiles(Value group) {
    tmaOps.wait(barrier(0, group), toI32(a.rem(a.div(group, 2), 2)));
  }
  /// The warp is done with the stages of iteration j (K tile j, V tile
  /// j - 1): one arrival per warp on empty barrier j % 2.
  void releaseTiles(Value j, Value lane) {
    a.guarded(a.ult(lane, 1), [&]() { tmaOps.arrive(barrier(2, j)); });
  }
  bool ldmatrix() const { return s.ldmatrix || s.asyncCopy; }
  /// Issues the cp.async copies of key tile `kTile` of K and `vTile` of V
  /// into their stages (tile % 2) of the K and V buffers ([2 bc][..]) and
  /// commits them as one group; a tile outside [0, numTiles) is zero-filled
  /// without reading memory (vTile -1: stage 1).
  void copyTile(Value kTile, Value vTile, Value numTiles, Value k, Value v,
                Value ks, Value vs, Value bi, Value hk) {
    TileLayout kl = layout(s.headDim, dp, false);
    TileLayout vl = layout(s.valueDim, dvp, false);
    auto stageRow = [&](Value tile) {
      return a.mul(a.rem(a.add(tile, 2), 2), bc);
    };
    // (-1 compares unsigned: beyond numTiles.)
    SmallVector<Value> tokens =
        copyTileAsync(a, k, {bi, hk}, firstKey(kTile), s.seqKV, s.headDim,
                      a.ult(kTile, numTiles), kl, ks, stageRow(kTile), tid);
    tokens.append(copyTileAsync(a, v, {bi, hk}, firstKey(vTile), s.seqKV,
                                s.valueDim, a.ult(vTile, numTiles), vl, vs,
                                stageRow(vTile), tid));
    lastGroup = nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
  }
  Value lastGroup = {};

  /// How a [bc, cols] tile of K or V is staged (cols padded to 16; in
  /// shared memory, rows padded by 16 bytes or core matrices). 16-byte
  /// chunks go in warp blocks into core matrices, and into rows of fewer
  /// than 8 chunks (along a row of 8 or more, a phase of 8 lanes writes 128
  /// contiguous bytes already, and the blocks' index arithmetic costs the
  /// register-staged build registers); transposed, in paired rows.
  TileLayout layout(int64_t cols, int64_t paddedCols, bool transposed) {
    bool narrow = !transposed && paddedCols / 8 < 8;
    return {bc,
            paddedCols,
            cols % 8 == 0 ? 8 : 2,
            threads(),
            transposed,
            /*coreMatrices=*/wgmma(),
            /*warpBlocks=*/cols % 8 == 0 && (wgmma() || narrow)};
  }
  TileChunks loadKV(Value src, Value kv0, int64_t cols, const TileLayout &l,
                    Value bi, Value hk) {
    return loadTile(a, src, {bi, hk}, kv0, s.seqKV, a.c(0), cols,
                    l.tileCols != cols, l, tid);
  }
  /// One pair of a [B, H, rows, cols] tensor in global memory as an mma
  /// operand, zero out of range (cols is even: pairs never straddle it).
  Value globalPair(Value tensor, Value bi, Value hi, Value row, int64_t rows,
                   Value col, int64_t cols, Value rowValid) {
    return ops.operand(loadRowChunk(a, tensor, {bi, hi}, row, rows, col, cols,
                                    2, rowValid, cols % 16 != 0));
  }

  /// wgmma: issues O += P·V on the V tile in stage vTile % 2 of `vts`
  /// (N-major core matrices; 16 keys = 2 row groups per step) and commits
  /// it as one group; the caller has fenced. `p` holds the tile's P as A
  /// registers, 4 per 16 keys; `o` the warp's accumulators, flat.
  void accumulatePV(ArrayRef<Value> p, Value vTile, Value vts,
                    SmallVectorImpl<Value> &o) {
    // TMA: 8 keys per 1024 bytes, 64 columns per region.
    Value desc =
        tma() ? wg.swizzledDescriptor(stageAddress(vBase, vTile, vStageBytes()),
                                      /*lbo=*/bc * 128, /*sbo=*/1024)
              : wg.descriptor(vts, a.mul(a.rem(vTile, 2), bc * dvp * 2),
                              /*lbo=*/dvp * 16, /*sbo=*/128);
    int64_t step = tma() ? 2048 : 2 * dvp * 16;
    for (int64_t kk = 0; kk < bc / 16; ++kk)
      wg.mma(p.slice(4 * kk, 4), wg.advance(desc, kk * step),
             /*transposeB=*/true, /*accumulate=*/true, o);
    wg.commit();
  }

  void build(gpu::GPUFuncOp func, Value ks, Value vts);
};

void MmaKernel::build(gpu::GPUFuncOp func, Value ks, Value vts) {
  b.setInsertionPointToEnd(&func.getBody().front());
  KernelArguments args = kernelArguments(func, s);
  Value q = args.q, k = args.k, v = args.v, mask = args.mask, out = args.out;

  tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = a.div(tid, 32), lane = a.rem(tid, 32);
  Value g = a.div(lane, 4), tq = a.rem(lane, 4);
  Value t2 = a.mul(tq, 2);
  // (batch x head) on x, which allows 2^31 - 1 blocks; query blocks on y
  // (reversed where causal).
  Value bh = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  // Not in the register-staged build (at D = 64 causal ptxas then took 172
  // registers instead of 168: 2 blocks per SM instead of 3) nor in the
  // producer's (a 12-byte spill in the soft-capped causal kernel).
  Value qBlock = queryBlock(a, s, (ldmatrix() || wgmma()) && !producer());
  Value bi = a.div(bh, s.headsQ), hi = a.rem(bh, s.headsQ);
  Value hk = a.div(hi, s.headsQ / s.headsKV);
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
  int64_t offset = s.seqKV - s.seqQ;
  KeyTiles tiles = keyTiles(a, s, qBlock, rows(), bc);
  firstTile = tiles.first;
  Value numTiles =
      s.window > 0 ? arith::SubIOp::create(b, tiles.end, firstTile) : tiles.end;
  // TMA: the mbarriers, then the first copy group goes in flight (K tile 0
  // and a zero V tile -1: V runs one tile behind K, below). Full barriers:
  // one arrival (with the bytes) per phase; empty barriers: one per
  // consumer warp.
  scf::IfOp roles;
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
      produce(numTiles);
      b.setInsertionPointToStart(&roles.getElseRegion().front());
      setMaxRegisters(a, kConsumerRegisters, /*increase=*/true);
    } else {
      issueTilesFromThread0(a.c(0), numTiles);
    }
  }
  // The warp's rows: slab sl (16 rows) holds rows g and g + 8 of it for
  // this thread; row index ri = 2 sl + r.
  int64_t nr = 2 * slabs;
  Value firstRow = a.add(a.mul(qBlock, rows()), a.mul(warp, 16 * slabs));
  SmallVector<Value> row, rowValid;
  for (int64_t ri = 0; ri < nr; ++ri) {
    row.push_back(a.add(firstRow, a.add(g, ri / 2 * 16 + ri % 2 * 8)));
    rowValid.push_back(a.ult(row.back(), s.seqQ));
  }

  // Q as A fragments, one per slab and 16 columns of the head dimension.
  SmallVector<SmallVector<SmallVector<Value, 4>>> qFrag(slabs);
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

  // Loop state: o [slab][dn][4], then m [ri], l [ri], then a prefetched
  // tile in registers (without async copies).
  Value zeroF = a.f(0.0);
  int64_t numO = slabs * (dvp / 8) * 4;
  SmallVector<Value> init(numO, zeroF);
  for (int64_t ri = 0; ri < nr; ++ri)
    init.push_back(a.negInf());
  for (int64_t ri = 0; ri < nr; ++ri)
    init.push_back(zeroF);
  TileLayout kLayout = layout(s.headDim, dp, /*transposed=*/false);
  TileLayout vLayout = layout(s.valueDim, dvp, /*transposed=*/!ldmatrix());
  TileChunks kFirst{kLayout, {}}, vFirst{vLayout, {}};
  if (tma()) {
    if (pingPong()) {
      // Warpgroup 0 goes first.
      secondGroup = a.ult(a.c(3), warp);
      a.guarded(secondGroup, [&]() { namedBarrierArrive(a, 1, threads()); });
    }
  } else if (async()) {
    // wgmma: V runs one tile behind K (P·V of tile j - 1 overlaps the
    // softmax of tile j): K 0 and a zero V tile -1 first.
    copyTile(a.c(0), a.c(wgmma() ? -1 : 0), numTiles, k, v, ks, vts, bi, hk);
  } else {
    kFirst = loadKV(k, firstKey(a.c(0)), s.headDim, kLayout, bi, hk);
    vFirst = loadKV(v, firstKey(a.c(0)), s.valueDim, vLayout, bi, hk);
  }
  int64_t numState = int64_t(init.size());
  init.append(kFirst.values.begin(), kFirst.values.end());
  init.append(vFirst.values.begin(), vFirst.values.end());
  // wgmma: the previous tile's P as A fragments (i32), zero before the
  // first.
  int64_t pStart = int64_t(init.size()), numP = wgmma() ? bc / 4 : 0;
  init.append(numP, arith::ConstantIntOp::create(b, b.getI32Type(), 0));

  auto loop = scf::ForOp::create(b, a.c(0), numTiles, a.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value j = loop.getInductionVar();
    ValueRange iter = loop.getRegionIterArgs();
    TileChunks kTile = kFirst, vTile = vFirst;
    kTile.values.assign(iter.begin() + numState,
                        iter.begin() + numState + kFirst.values.size());
    vTile.values.assign(iter.begin() + numState + kFirst.values.size(),
                        iter.begin() + pStart);
    SmallVector<Value> pPrev(iter.begin() + pStart, iter.end());
    SmallVector<SmallVector<SmallVector<Value>>> o(slabs);
    for (int64_t sl = 0; sl < slabs; ++sl)
      for (int64_t dn = 0; dn < dvp / 8; ++dn) {
        auto first = iter.begin() + (sl * (dvp / 8) + dn) * 4;
        o[sl].push_back(SmallVector<Value>(first, first + 4));
      }
    SmallVector<Value> m(iter.begin() + numO, iter.begin() + numO + nr);
    SmallVector<Value> l(iter.begin() + numO + nr,
                         iter.begin() + numO + 2 * nr);
    // wgmma: a warp's accumulators as one list (slab 0), and back.
    auto flatO = [&]() {
      SmallVector<Value> flat;
      for (auto &frag : o[0])
        flat.append(frag.begin(), frag.end());
      return flat;
    };
    auto setO = [&](ArrayRef<Value> flat) {
      for (int64_t dn = 0; dn < dvp / 8; ++dn)
        o[0][dn].assign(flat.begin() + 4 * dn, flat.begin() + 4 * dn + 4);
    };
    Value kv0 = firstKey(j);

    TileChunks nextK{kLayout, {}}, nextV{vLayout, {}};
    Value stageRow = a.c(0);
    if (tma()) {
      // Group j has to land. (Group j + 1 is issued once this tile's wgmma
      // are: below.)
      waitTiles(j);
    } else if (async()) {
      // Tile j + 1 goes in flight into the other stage; then wait for this
      // thread's copies of tile j (all but the newest group), and for
      // everyone's.
      stageRow = a.mul(a.rem(j, 2), bc);
      copyTile(a.add(j, 1), wgmma() ? j : a.add(j, 1), numTiles, k, v, ks, vts,
               bi, hk);
      nvgpu::DeviceAsyncWaitOp::create(b, lastGroup, b.getI32IntegerAttr(1));
      if (wgmma())
        wg.fenceSharedWrites();
      gpu::BarrierOp::create(b);
    } else {
      // Stage this tile's K and Vᵀ (prefetched into registers during the
      // previous tile's arithmetic), then issue the loads of the next tile:
      // their latency hides behind this tile's mma work.
      gpu::BarrierOp::create(b);
      storeTile(a, kTile, ks, /*transpose=*/false, tid);
      storeTile(a, vTile, vts, /*transpose=*/!ldmatrix(), tid);
      gpu::BarrierOp::create(b);
      nextK = loadKV(k, a.add(kv0, bc), s.headDim, kLayout, bi, hk);
      nextV = loadKV(v, a.add(kv0, bc), s.valueDim, vLayout, bi, hk);
    }

    // Where registers allow (the async builds, or D <= 64), warp-uniform
    // branches skip work that most tiles do not need.
    bool branch = async() || std::max(dp, dvp) <= 64;

    // S = Q·Kᵀ, scaled into the log2 domain, masked. Each K fragment
    // serves every slab of the warp. Without a mask (and with a positive
    // scale) the scores stay raw: the running max is taken on them and the
    // scale folds into the exponent's FMA, exp2(s·c - m·c), one
    // instruction per score fewer.
    // A soft cap takes the products through tanh first:
    // softcap * log2(e) * tanh(s · scale / softcap).
    double scaleLog2 = s.scale * kLog2e;
    bool capped = s.softcap > 0;
    bool raw = !mask && s.scale > 0 && !capped;
    Value scaleC = a.f(scaleLog2), log2e = a.f(kLog2e), ninf = a.negInf();
    SmallVector<SmallVector<SmallVector<Value>>> sc(
        slabs, SmallVector<SmallVector<Value>>(bc / 8));
    SmallVector<Value> rowMax(nr, ninf);
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
      SmallVector<Value> flat = flatO();
      if (pingPong())
        turn(/*sync=*/true, 1);
      wg.pin(flat);
      wg.pin(pPrev);
      wg.fence();
      for (int64_t kt = 0; kt < dp / 16; ++kt)
        wg.mma(qFrag[0][kt],
               wg.advance(desc,
                          tma() ? kt / 4 * bc * 128 + kt % 4 * 32 : kt * 256),
               /*transposeB=*/false, /*accumulate=*/kt > 0, tileAcc);
      wg.commit();
      accumulatePV(pPrev, a.add(j, 1), vts, flat);
      setO(flat);
      if (pingPong())
        turn(/*sync=*/false, 1);
      // TMA: group j + 1 goes in flight into the other stages once every
      // warp has released them (iteration j - 1). Only now: with two
      // warpgroups, the other one releases them after its softmax, which
      // this warpgroup's products (just issued) overlap; waiting before
      // issuing them would stall the tensor cores for that softmax.
      if (tma() && !producer())
        issueTilesFromThread0(a.add(j, 1), numTiles);
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
        Value row8 = a.add(a.add(a.rem(lane, 8), nt * 8), stageRow);
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
    SmallVector<Value> alpha(nr), mUse(nr), newM(nr), rowSum(nr, zeroF),
        newL(nr), negMc(nr), tileMax(nr);
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
          sc[sl][nt][i] = a.exp2FlushSubnormals(
              raw ? a.fma(x, scaleC, negMc[ri]) : a.fsub(x, mUse[ri]));
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
      SmallVector<Value> flat = flatO();
      wg.wait(0);
      wg.pin(flat);
      setO(flat);
      if (tma())
        releaseTiles(j, lane);
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
    SmallVector<Value> pNext;
    for (int64_t kk = 0; kk < (wgmma() ? bc / 16 : 0); ++kk)
      for (Value x : pFragments(kk)[0])
        pNext.push_back(wg.asI32(x));
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
                             stageRow);
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

    // Every warp is done with this stage before tile j + 2 is copied into
    // it (the next iteration's copies). TMA: the empty barriers say so.
    if (async() && !tma())
      gpu::BarrierOp::create(b);

    SmallVector<Value> yield;
    for (auto &slab : o)
      for (auto &frag : slab)
        yield.append(frag.begin(), frag.end());
    yield.append(newM.begin(), newM.end());
    yield.append(newL.begin(), newL.end());
    yield.append(nextK.values.begin(), nextK.values.end());
    yield.append(nextV.values.begin(), nextV.values.end());
    yield.append(pNext.begin(), pNext.end());
    scf::YieldOp::create(b, yield);
  }

  SmallVector<Value> res(loop.getResults());
  if (wgmma()) {
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
    accumulatePV(pLast, a.add(numTiles, 1), vts, oLast);
    wg.wait(0);
    wg.pin(oLast);
    llvm::copy(oLast, res.begin());
  }

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
  if (roles)
    b.setInsertionPointAfter(roles);
  gpu::ReturnOp::create(b);
}

void MmaKernel::produce(Value numTiles) {
  setMaxRegisters(a, kProducerRegisters, /*increase=*/false);
  a.guarded(a.ult(tid, threads() + 1), [&]() {
    auto groups = scf::ForOp::create(b, a.c(0), a.add(numTiles, 1), a.c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(groups.getBody());
    issueTiles(groups.getInductionVar(), numTiles);
  });
}

//===----------------------------------------------------------------------===//
// FMA kernel (f32)
//===----------------------------------------------------------------------===//

void buildFmaKernel(const AttentionShape &s, Arith &a, gpu::GPUFuncOp func,
                    Value ks, Value vs, int64_t rowsPerBlock, int64_t bc) {
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

} // namespace

namespace {
constexpr int64_t kMaxShared = 48 * 1024; // static shared memory per block
/// The async-copy variant's two stages may take dynamic shared memory up to
/// this: two blocks per SM on sm_80 (164 KiB), three on Hopper (227 KiB).
/// At D = 128 that is 64 keys per stage (68 KiB) instead of 32 in static
/// memory: 16% fewer instructions per mma.sync on the interpreter (the
/// softmax and barriers of each tile cover twice the keys) for 173
/// registers instead of 163 (two blocks of 4 warps per SM instead of
/// three; forcing three with .minnctapersm spills).
constexpr int64_t kMaxDynamicShared = 80 * 1024;
/// The same for kernels that run one block per SM (of the 227 KiB).
constexpr int64_t kMaxOneBlockShared = 160 * 1024;

/// Whether the wgmma variant applies: 16-byte chunks of K and V rows, and
/// head dimensions up to 128 (Q's fragments, S and O stay in registers).
bool useWgmma(const AttentionShape &s) {
  return s.wgmma && !s.elementType.isF32() && s.headDim % 8 == 0 &&
         s.valueDim % 8 == 0 && std::max(s.headDim, s.valueDim) <= 128;
}

/// Whether the wgmma kernel takes its tiles by TMA.
bool useTma(const AttentionShape &s) { return s.tma && useWgmma(s); }

/// TMA: the bytes of the two stages of K and V (128-byte rows of 64
/// columns), and 1024 to align them.
int64_t tmaStageBytes(const AttentionShape &s, int64_t bc) {
  return 2 * bc * 128 *
             (MmaKernel::regions(s.headDim) + MmaKernel::regions(s.valueDim)) +
         1024;
}

/// Whether the async-copy variant applies: 16-byte chunks of K and V rows.
bool useAsyncCopy(const AttentionShape &s) {
  return (s.asyncCopy || useWgmma(s)) && !s.elementType.isF32() &&
         s.headDim % 8 == 0 && s.valueDim % 8 == 0;
}

/// Bytes of shared memory of the tensor-core kernel's tiles.
int64_t tileBytes(const AttentionShape &s, int64_t bc, int64_t dp,
                  int64_t dvp) {
  if (useTma(s))
    return tmaStageBytes(s, bc);
  if (useWgmma(s)) // two stages of K and V in core matrices, unpadded
    return 2 * 2 * bc * (dp + dvp);
  if (useAsyncCopy(s)) // two stages of K [bc][dp+8] and V [bc][dvp+8]
    return 2 * 2 * bc * ((dp + 8) + (dvp + 8));
  return 2 * (bc * (dp + 8) + std::max(dvp * (bc + 8), bc * (dvp + 8)));
}

/// Keys per shared-memory tile of the tensor-core kernel. With 32 rows per
/// warp, smaller tiles keep the scores and accumulators within 255
/// registers: 32 keys beyond D = 64 (64 spill at D = 80), 16 beyond D = 96
/// (32 spill in causal D = 128).
int64_t keysPerTile(const AttentionShape &s, int64_t dp, int64_t dvp) {
  int64_t d = std::max(dp, dvp);
  int64_t most = s.warpRows != 32 ? 64 : d <= 64 ? 64 : d <= 96 ? 32 : 16;
  // Two warpgroups take a whole SM's registers (one block per SM): their
  // stages may take more of its shared memory, so D = 128 gets 128 keys
  // too (129 KiB; 223 registers in the causal kernel, no spills).
  if (useTma(s) && s.wgmmaWarpgroups == 2)
    return tileBytes(s, 128, dp, dvp) <= kMaxOneBlockShared ? 128 : 64;
  if (useWgmma(s)) // wgmma's N: 128 keys where two stages fit
    return tileBytes(s, 128, dp, dvp) <= kMaxDynamicShared ? 128 : 64;
  if (useAsyncCopy(s)) {
    for (int64_t bc : {64, 32})
      if (bc <= most && tileBytes(s, bc, dp, dvp) <= kMaxDynamicShared)
        return bc;
    return 16;
  }
  return std::max(dp, dvp) <= 128 ? most : 32;
}
} // namespace

SmallVector<Type, 4> attentionInputTypes(const AttentionShape &s) {
  Type t = s.elementType;
  SmallVector<Type, 4> types = {
      MemRefType::get({s.batch, s.headsQ, s.seqQ, s.headDim}, t)};
  // K's and V's keys, in one buffer each or two.
  SmallVector<int64_t, 2> parts = {s.seqKV};
  if (s.keySplit)
    parts = {s.keySplit, s.seqKV - s.keySplit};
  for (int64_t dim : {s.headDim, s.valueDim})
    for (int64_t keys : parts)
      types.push_back(MemRefType::get({s.batch, s.headsKV, keys, dim}, t));
  if (!s.mask.empty())
    types.push_back(MemRefType::get(s.mask, t));
  return types;
}

MemRefType attentionOutputType(const AttentionShape &s) {
  return MemRefType::get({s.batch, s.headsQ, s.seqQ, s.valueDim},
                         s.elementType);
}

double queryFactor(const AttentionShape &s) {
  return s.softcap > 0 ? s.scale / s.softcap : s.scale * kLog2e;
}

bool attentionKernelFits(const AttentionShape &s) {
  // Static shared memory is limited to 48 KiB per block.
  if (s.elementType.isF32())
    return 4 * 16 * (s.headDim + s.valueDim) <= kMaxShared;
  int64_t dp = roundUp(s.headDim, 16), dvp = roundUp(s.valueDim, 16);
  return tileBytes(s, keysPerTile(s, dp, dvp), dp, dvp) <=
         (useAsyncCopy(s) ? kMaxDynamicShared : kMaxShared);
}

AttentionLaunch buildAttentionKernel(OpBuilder &builder,
                                     gpu::GPUModuleOp module, StringRef name,
                                     const AttentionShape &s) {
  auto smem = [&](int64_t rows, int64_t cols) {
    return sharedTile(s.elementType, rows, cols);
  };
  // q, k, v, [mask,] out.
  Type t = s.elementType;
  SmallVector<Type> args(attentionInputTypes(s));
  args.push_back(attentionOutputType(s));
  AttentionLaunch launch;
  // TMA: tensor maps of K and V as [batch * kv heads][keys][columns],
  // boxes of 64 columns (128-byte swizzled rows) by one tile of keys.
  AttentionShape shape = s;
  shape.tma = useTma(s);
  int64_t dp = roundUp(s.headDim, 16), dvp = roundUp(s.valueDim, 16);
  if (shape.tma) {
    shape.wgmma = true;
    shape.warpRows = 16;
    int64_t bc = keysPerTile(shape, dp, dvp);
    for (auto [operand, cols] :
         {std::pair<unsigned, int64_t>{1, s.headDim}, {2, s.valueDim}}) {
      int64_t bytes = cols * t.getIntOrFloatBitWidth() / 8;
      launch.tensorMaps.push_back({operand,
                                   {cols, s.seqKV, s.batch * s.headsKV},
                                   {bytes, s.seqKV * bytes},
                                   {64, int32_t(bc), 1},
                                   kTensorMapSwizzle128B});
      args.push_back(IntegerType::get(t.getContext(), 64));
    }
  }
  launch.gridX = s.batch * s.headsQ;
  if (s.elementType.isF32()) {
    constexpr int64_t kRows = 128, kKeys = 16;
    SmallVector<Value> tiles;
    launch.kernel = createKernel(
        builder, module, name, args,
        {smem(kKeys, s.headDim), smem(kKeys, s.valueDim)}, kRows, tiles);
    ImplicitLocOpBuilder b(module.getLoc(), builder);
    Arith a{b};
    buildFmaKernel(s, a, launch.kernel, tiles[0], tiles[1], kRows, kKeys);
    launch.gridY = (s.seqQ + kRows - 1) / kRows;
    launch.blockX = kRows;
    return launch;
  }
  // 16 bytes of padding per row: the 8 rows a warp's fragment load touches
  // start 4 banks apart.
  shape.wgmma = useWgmma(s);
  shape.asyncCopy = useAsyncCopy(s);
  if (shape.wgmma) // warpgroups of 4 warps, 16 rows each
    shape.warpRows = 16;
  int64_t warps = shape.wgmma ? 4 * s.wgmmaWarpgroups : 4;
  shape.tmaProducer = s.tmaProducer && shape.tma && warps == 8;
  int64_t bc = keysPerTile(shape, dp, dvp);
  int64_t stages = shape.asyncCopy ? 2 : 1;
  SmallVector<MemRefType> tileTypes = {smem(stages * bc, dp + 8),
                                       shape.ldmatrix || shape.asyncCopy
                                           ? smem(stages * bc, dvp + 8)
                                           : smem(dvp, bc + 8)};
  if (shape.wgmma) // [chunks][8]: core matrices, unpadded
    tileTypes = {smem(stages * bc * dp / 8, 8), smem(stages * bc * dvp / 8, 8)};
  if (shape.tma) // four mbarriers; the stages, addressed by hand
    tileTypes = {sharedTile(IntegerType::get(t.getContext(), 64), 1, 4),
                 sharedTile(IntegerType::get(t.getContext(), 8), 1,
                            tmaStageBytes(s, bc))};
  // Beyond 48 KiB (the async stages at D = 128), dynamic shared memory.
  bool dynamic = sharedBytes(tileTypes) > kMaxShared;
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  MmaKernel kernel{shape, a,   b,  s.elementType,
                   dp,    dvp, bc, shape.warpRows == 32 ? 2 : 1,
                   warps};
  SmallVector<Value> tiles;
  launch.kernel = createKernel(builder, module, name, args, tileTypes,
                               kernel.blockThreads(), tiles, dynamic);
  launch.dynamicSharedBytes = dynamic ? sharedBytes(tileTypes) : 0;
  // setmaxnreg needs the launch's registers per thread fixed by a tuning
  // directive: .maxntid (the known block size) and, as CUTLASS's and
  // FlashAttention-3's launch bounds give, .minnctapersm 1.
  if (shape.tmaProducer)
    launch.kernel->setAttr(NVVM::NVVMDialect::getMinctasmAttrName(),
                           builder.getI32IntegerAttr(1));
  kernel.build(launch.kernel, tiles[0], tiles[1]);
  launch.gridY = (s.seqQ + kernel.rows() - 1) / kernel.rows();
  launch.blockX = kernel.blockThreads();
  return launch;
}

} // namespace tfc
