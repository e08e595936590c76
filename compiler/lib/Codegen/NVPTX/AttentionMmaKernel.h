//===- AttentionMmaKernel.h - Flash attention on tensor cores ---*- C++ -*-===//
//
// The tensor-core attention kernel (f16, bf16) being built: its variant,
// its state, and its stages (AttentionMmaKernel.cpp); how it gets its K and
// V tiles (AttentionMmaTiles.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_ATTENTIONMMAKERNEL_H
#define TFC_CODEGEN_NVPTX_ATTENTIONMMAKERNEL_H

#include "AttentionCommon.h"

namespace tfc {

/// Registers per thread of the producer warpgroup and of the two consumer
/// warpgroups (setmaxnreg), 384 threads: 24 * 128 + 240 * 256 = 168 * 384,
/// what the block is launched with (65536 / 384, rounded down to 8).
constexpr int64_t kProducerRegisters = 24, kConsumerRegisters = 240;

/// Per-thread fragments of the tensor-core kernel: [slab][8-column tile][4].
using Fragments = SmallVector<SmallVector<SmallVector<Value>>>;

/// One iteration of the loop over key tiles: the loop state it starts
/// from, what its stages compute, and what it yields.
struct TileStep {
  Value j, kv0; // the iteration (the block's key tile j) and its first key
  /// Register-staged builds: this tile's K and V, staged from registers,
  /// and the next tile's, loaded during this one.
  TileChunks kTile, vTile, nextK, nextV;
  Value stageRow; // async builds: the tile's first row in its stage
  /// wgmma: the previous tile's P (its P·V overlaps this tile's softmax),
  /// and this tile's.
  SmallVector<Value> pPrev, pNext;
  Fragments o;  // the output's accumulators
  Fragments sc; // the tile's scores, then its probabilities
  /// Each row's running max and sum, and their new values.
  SmallVector<Value> m, l, newM, newL;
  /// The scores' scaling (computeScores): raw scores take the scale in the
  /// exponent; capped ones go through tanh.
  double scaleLog2 = 0;
  bool capped = false, raw = false;
  Value scaleC, ninf;
};

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
  void turn(bool sync, int64_t base);

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
  Value firstKey(Value tile);
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
  void issueTiles(Value group);
  /// Thread 0 issues copy group `group`.
  void issueTilesFromThread0(Value group) {
    a.guarded(a.ult(tid, 1), [&]() { issueTiles(group); });
  }
  /// The producer warpgroup: its registers go to the consumers, and its
  /// first thread issues every copy group, 0 to numTiles (the last one
  /// holds V's last tile), each once its stages are released.
  void produce();
  /// Waits for TMA copy group `group`.
  void waitTiles(Value group) {
    tmaOps.wait(barrier(0, group), toI32(a.rem(a.div(group, 2), 2)));
  }
  /// The warp is done with the stages of iteration j (K tile j, V tile
  /// j - 1): one arrival per warp on empty barrier j % 2.
  void releaseTiles(Value j) {
    a.guarded(a.ult(lane, 1), [&]() { tmaOps.arrive(barrier(2, j)); });
  }
  bool ldmatrix() const { return s.ldmatrix || s.asyncCopy; }
  /// Issues the cp.async copies of key tile `kTile` of K and `vTile` of V
  /// into their stages (tile % 2) of the K and V buffers ([2 bc][..]) and
  /// commits them as one group; a tile outside [0, numTiles) is zero-filled
  /// without reading memory (vTile -1: stage 1).
  void copyTile(Value kTile, Value vTile);
  Value lastGroup = {};

  /// How a [bc, cols] tile of K or V is staged (cols padded to 16; in
  /// shared memory, rows padded by 16 bytes or core matrices). 16-byte
  /// chunks go in warp blocks into core matrices, and into rows of fewer
  /// than 8 chunks (along a row of 8 or more, a phase of 8 lanes writes 128
  /// contiguous bytes already, and the blocks' index arithmetic costs the
  /// register-staged build registers); transposed, in paired rows.
  TileLayout layout(int64_t cols, int64_t paddedCols, bool transposed);
  /// A tile of K or V (`src`) from key kv0, loaded into registers.
  TileChunks loadKV(Value src, Value kv0, int64_t cols, const TileLayout &l);
  /// One pair of a [B, H, rows, cols] tensor in global memory as an mma
  /// operand, zero out of range (cols is even: pairs never straddle it).
  Value globalPair(Value tensor, Value bi, Value hi, Value row, int64_t rows,
                   Value col, int64_t cols, Value rowValid);

  /// wgmma: issues O += P·V on the V tile in stage vTile % 2 of `vts`
  /// (N-major core matrices; 16 keys = 2 row groups per step) and commits
  /// it as one group; the caller has fenced. `p` holds the tile's P as A
  /// registers, 4 per 16 keys; `o` the warp's accumulators, flat.
  void accumulatePV(ArrayRef<Value> p, Value vTile, SmallVectorImpl<Value> &o);

  //===--------------------------------------------------------------------===//
  // The kernel's state, set by its first stages
  //===--------------------------------------------------------------------===//

  Value q = {}, k = {}, v = {}, mask = {}, out = {}; // mask null without one
  Value ks = {}, vts = {}; // the K and V (or Vᵀ) tiles in shared memory
  Value warp = {}, lane = {}, g = {},
        t2 = {}; // g = lane / 4, t2 = 2 (lane % 4)
  /// (batch, query head) of the block, its KV head, its query block.
  Value bi = {}, hi = {}, hk = {}, qBlock = {};
  /// The key tiles the block visits (from firstTile on).
  Value numTiles = {};
  /// TMA with a producer warpgroup: producer / consumers.
  mlir::scf::IfOp roles = {};
  /// Rows per thread: slab sl (16 rows) holds rows g and g + 8 of it for
  /// this thread, row index ri = 2 sl + r.
  int64_t nr = 2 * slabs;
  int64_t offset = s.seqKV - s.seqQ; // keys before query row 0's diagonal
  Value firstRow = {};               // the warp's first row
  SmallVector<Value> row = {}, rowValid = {}; // per row index ri
  /// Q as A fragments, one per slab and 16 columns of the head dimension.
  SmallVector<SmallVector<SmallVector<Value, 4>>> qFrag = {};
  Value zeroF = {};
  TileLayout kLayout = {}, vLayout = {};
  /// The first tile, prefetched into registers (register-staged builds).
  TileChunks kFirst = {}, vFirst = {};
  /// The loop state: o [slab][dn][4] (numO values), then m [ri], l [ri]
  /// (numState values so far), then a prefetched tile in registers (without
  /// async copies), then from pStart the previous tile's P (wgmma).
  int64_t numO = 0, numState = 0, pStart = 0;
  /// Where registers allow (the async builds, or D <= 64), warp-uniform
  /// branches skip work that most tiles do not need.
  bool branch = async() || std::max(dp, dvp) <= 64;

  //===--------------------------------------------------------------------===//
  // Stages
  //===--------------------------------------------------------------------===//

  /// Builds the kernel into `func`, its tiles of K and V (or Vᵀ) in shared
  /// memory `kTiles` and `vTiles`.
  void build(mlir::gpu::GPUFuncOp func, Value kTiles, Value vTiles);
  /// Thread and block indices, the key tiles the block visits, and with
  /// TMA the barriers and the first copies (or the producer warpgroup).
  void setUp(mlir::gpu::GPUFuncOp func);
  /// The thread's query rows and Q as A fragments.
  void loadQuery();
  /// The loop over the key tiles, its state started and its iteration
  /// built by the stages below.
  mlir::scf::ForOp loopOverKeyTiles();
  /// An iteration's loop state.
  TileStep startStep(mlir::scf::ForOp loop);
  /// The tile's K and V in shared memory: landed by TMA or cp.async, or
  /// stored from registers (the next tile then loaded into registers).
  void stageTiles(TileStep &st);
  /// S = Q·Kᵀ, scaled into the log2 domain, masked (wgmma: with the
  /// previous tile's P·V issued).
  void computeScores(TileStep &st);
  /// Keys past the end, past a row's causal limit or before its window
  /// hidden (-inf).
  void hideKeys(TileStep &st);
  /// Online softmax: new running max and sum, probabilities, O rescaled.
  void onlineSoftmax(TileStep &st);
  /// O += P·V (wgmma: P kept for the next iteration).
  void multiplyByValues(TileStep &st);
  /// The iteration's barrier and the loop state it yields.
  void endStep(TileStep &st);
  /// wgmma: the last tile's P·V, after the loop.
  void finishLastTile(SmallVectorImpl<Value> &res);
  /// O / l, written once.
  void storeOutput(ArrayRef<Value> res);

  /// wgmma: a warp's accumulators as one list (slab 0), and back.
  SmallVector<Value> flatO(const Fragments &o);
  void setO(Fragments &o, ArrayRef<Value> flat);
};

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_ATTENTIONMMAKERNEL_H
