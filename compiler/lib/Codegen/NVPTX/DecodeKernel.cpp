//===- DecodeKernel.cpp - Split-KV attention for few query rows -----------===//
//
// With one query row per head (decode), the tiled kernels run a block per
// (batch x head): few blocks for the SMs (B = 1, H = 32: 32 blocks on 132
// SMs), each walking every key, 63 of its 64 rows empty; and with
// grouped-query heads each KV head's keys are read once per query head.
// This kernel is FlashDecoding's split-KV instead:
//
// - a block per (batch x KV head, chunk of keys): its query rows are every
//   row of the query heads that share the KV head (g x Sq rows, at most
//   kMaxDecodeRows), so K and V are read once per KV head;
// - the chunks spread the keys over the GPU (about decodeBlocksPerSM x 132
//   blocks, at least kMinTilesPerSplit tiles each);
// - a block of 4 warps walks its chunk in tiles of 32 keys, copied to
//   shared memory by cp.async into 2 to 4 stages (decodeStages - 1 tiles
//   in flight during the current one, no register holding them). Warp w
//   owns keys 8w..8w+7 of each tile, 4 lanes per key:
//   a lane multiplies its quarter of the head dimension with each query
//   row (Q, scaled into the log2 domain, in shared memory), two shuffles
//   sum the quarters; each warp keeps its own running max, sum and output
//   rows (lane l: columns 2l, 2l + 1, 2l + 64, ...), the probabilities of
//   its keys broadcast by shuffles. At the end the 4 warps combine through
//   shared memory;
// - with one chunk the block writes the output; with more, each writes its
//   rows' unnormalised output and (max, sum), and the last block of the
//   (batch x KV head) to finish rescales and adds the chunks
//   (DecodeCombine.h): one launch.
//
// Arithmetic is f32 on the CUDA cores for every element type: per key the
// kernel does 2 R (D + Dv) FLOP on 2 (D + Dv) bytes of f16 K and V, R FLOP
// per byte for R rows, below the H200's FMA-to-bandwidth ratio (67 TFLOP/s
// over 4.8 TB/s, 14) up to R = 8: memory bound, as decode is.
//
//===----------------------------------------------------------------------===//

#include "tfc/Codegen/NVPTX/DecodeKernel.h"

#include "DecodeCombine.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace tfc {
namespace {

constexpr int64_t kWarps = 4, kThreads = 32 * kWarps;
/// Keys per tile: 8 per warp, 4 lanes per key.
constexpr int64_t kTileKeys = 32, kKeysPerWarp = kTileKeys / kWarps;
/// The chunks aim at decodeBlocksPerSM blocks per SM of an H200 (132 SMs);
/// a chunk holds at least kMinTilesPerSplit tiles (128 keys), so that its
/// partial output (R x Dv f32) stays small against the K and V it reads.
constexpr int64_t kSMs = 132, kMinTilesPerSplit = 4;
/// Beyond this the block's tiles do not fit twice on an SM.
constexpr int64_t kMaxDecodeShared = 100 * 1024;

/// The largest power of two up to `most` that divides `n`.
int64_t chunkWidth(int64_t n, int64_t most) {
  int64_t w = most;
  while (n % w)
    w /= 2;
  return w;
}

struct Geometry {
  int64_t rows;   // query rows per block: heads per KV head x Sq
  int64_t stages; // K and V tiles in shared memory
  /// On tensor cores (decodeMma; f16/bf16, D and Dv multiples of 16): the
  /// rows as mma.sync's M (16, rows 8.. empty), 16 keys per warp, tiles of
  /// 64 keys stored in rows an odd number of 16-byte chunks long (D + 8:
  /// ldmatrix's 8 rows fall in 8 different groups of banks), no Q tile.
  bool mma;
  int64_t tileKeys, vStride;
  /// K: copied in chunks of kWidth elements (16 bytes where D allows, 4
  /// at least: cp.async's sizes), the head dimension padded with zeros to
  /// 4 kWidth (each lane of a key takes every fourth chunk), rows of kStride
  /// elements in shared memory: the 8 keys x 4 chunks that one phase of a
  /// warp's shared loads touches fall in different banks when
  /// kStride / (4 kWidth) is odd.
  int64_t kWidth, dPad, kStride;
  /// V: copied in chunks of vWidth; a lane reads vPair consecutive columns
  /// (pairs where Dv is even) at a time, 32 lanes a row of 32 vPair;
  /// columns padded with zeros to dvPad.
  int64_t vWidth, vPair, dvPad;
  /// The first key tile any row sees (with a sliding window, the tile of
  /// row 0's window start; else 0), the tiles from there to the end, tiles
  /// per chunk, chunks.
  int64_t firstTile, tiles, tilesPerSplit, splits;

  int64_t groups() const { return dvPad / (32 * vPair); }
  /// Q [rows][dPad] f32, the stages of K [32][kStride] and of V
  /// [32][dvPad], the warps' row statistics [max x 4, sum x 4][rows] f32;
  /// views of the launch's dynamic shared memory.
  SmallVector<MemRefType> tileTypes(Type t) const {
    Type f32 = Float32Type::get(t.getContext());
    return {sharedTile(f32, mma ? 1 : rows, mma ? 4 : dPad),
            sharedTile(t, stages * tileKeys, kStride),
            sharedTile(t, stages * tileKeys, vStride),
            sharedTile(f32, 2 * kWarps, rows)};
  }
  /// After the loop, the warps' output rows [4 rows][dvPad] f32 take the
  /// V stages' place (rows <= 8: at most 16 x 8 dvPad bytes, the stages
  /// 128 dvPad or more).
  MemRefType outputsType(Type t) const {
    return sharedTile(Float32Type::get(t.getContext()), kWarps * rows, dvPad);
  }
  int64_t outputsOffset(Type t) const {
    return sharedBytes(ArrayRef(tileTypes(t)).take_front(2));
  }
};

Geometry geometry(const AttentionShape &s, bool mma) {
  Geometry g;
  g.rows = s.headsQ / s.headsKV * s.seqQ;
  g.stages = s.decodeStages;
  g.mma = mma;
  g.tileKeys = g.mma ? 16 * kWarps : kTileKeys;
  int64_t most = 128 / s.elementType.getIntOrFloatBitWidth();
  g.kWidth = chunkWidth(s.headDim, most);
  g.dPad = roundUp(s.headDim, 4 * g.kWidth);
  g.kStride = g.mma                         ? s.headDim + 8
              : g.dPad / (4 * g.kWidth) % 2 ? g.dPad
                                            : g.dPad + 4 * g.kWidth;
  g.vWidth = chunkWidth(s.valueDim, most);
  g.vPair = s.valueDim % 2 ? 1 : 2;
  g.dvPad = roundUp(s.valueDim, 32 * g.vPair);
  g.vStride = g.mma ? s.valueDim + 8 : g.dvPad;
  g.firstTile =
      s.window > 0
          ? std::max<int64_t>(0, s.seqKV - s.seqQ - s.window + 1) / g.tileKeys
          : 0;
  g.tiles = (s.seqKV + g.tileKeys - 1) / g.tileKeys - g.firstTile;
  int64_t blocks = s.batch * s.headsKV;
  // At least 128 keys per chunk.
  int64_t minTiles = kMinTilesPerSplit * kTileKeys / g.tileKeys;
  int64_t splits =
      std::clamp<int64_t>((s.decodeBlocksPerSM * kSMs + blocks - 1) / blocks, 1,
                          std::max<int64_t>(1, g.tiles / minTiles));
  g.tilesPerSplit = (g.tiles + splits - 1) / splits;
  g.splits = (g.tiles + g.tilesPerSplit - 1) / g.tilesPerSplit;
  return g;
}

/// The tensor-core path where asked for and possible (f16/bf16, head
/// dimensions in steps of 16, its tiles within kMaxDecodeShared), else the
/// CUDA cores.
Geometry geometry(const AttentionShape &s) {
  bool mma = s.decodeMma && !s.elementType.isF32() && s.headDim % 16 == 0 &&
             s.valueDim % 16 == 0;
  if (mma) {
    Geometry g = geometry(s, true);
    if (sharedBytes(g.tileTypes(s.elementType)) <= kMaxDecodeShared)
      return g;
  }
  return geometry(s, false);
}

struct DecodeKernel {
  const AttentionShape &s;
  const Geometry &g;
  Arith &a;
  ImplicitLocOpBuilder &b;
  Value qs, ks, vs, stats; // the shared-memory tiles
  /// With more than one chunk: the combine's counters and tiles.
  ArrayRef<memref::GlobalOp> combine;

  void build(gpu::GPUFuncOp func);
};

void DecodeKernel::build(gpu::GPUFuncOp func) {
  Block &entry = func.getBody().front();
  b.setInsertionPointToEnd(&entry);
  bool masked = !s.mask.empty();
  // q, K's and V's one or two parts (attentionInputTypes), the mask.
  unsigned parts = s.keySplit ? 2 : 1;
  Value q = entry.getArgument(0), k = entry.getArgument(1),
        k1 = s.keySplit ? entry.getArgument(2) : Value(),
        v = entry.getArgument(1 + parts),
        v1 = s.keySplit ? entry.getArgument(2 + parts) : Value(),
        mask = masked ? entry.getArgument(1 + 2 * parts) : Value();
  unsigned results = 1 + 2 * parts + (masked ? 1 : 0);
  Type t = s.elementType, f32 = b.getF32Type();
  int64_t bytes = t.getIntOrFloatBitWidth() / 8;
  int64_t rows = g.rows, group = s.headsQ / s.headsKV;
  int64_t offset = s.seqKV - s.seqQ; // causal: row i sees keys <= i + offset

  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value warp = a.div(tid, 32), lane = a.rem(tid, 32);
  Value keyInWarp = a.div(lane, 4), quarter = a.rem(lane, 4);
  Value bhk = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value split = gpu::BlockIdOp::create(b, gpu::Dimension::y);
  Value bi = a.div(bhk, s.headsKV), hk = a.rem(bhk, s.headsKV);
  // Row r is query r % Sq of head hk * group + r / Sq.
  Value firstHead = a.mul(hk, group);
  auto headOf = [&](Value r) { return a.add(firstHead, a.div(r, s.seqQ)); };
  Value zero = a.f(0.0), ninf = a.negInf();

  Value scaleC = a.f(queryFactor(s));
  // Q, scaled by queryFactor, zero beyond D (the tensor-core path reads it
  // as mma fragments instead).
  if (!g.mma) {
    int64_t qElements = rows * g.dPad;
    for (int64_t it = 0; it * kThreads < qElements; ++it) {
      Value idx = a.add(tid, it * kThreads);
      Value r = a.umin(a.div(idx, g.dPad), rows - 1), c = a.rem(idx, g.dPad);
      Value x =
          memref::LoadOp::create(b, q,
                                 ValueRange{bi, headOf(r), a.rem(r, s.seqQ),
                                            a.umin(c, s.headDim - 1)});
      Value scaled =
          a.sel(a.ult(c, s.headDim), a.fmul(a.toF32(x), scaleC), zero);
      a.guarded((it + 1) * kThreads <= qElements ? Value()
                                                 : a.ult(idx, qElements),
                [&]() {
                  memref::StoreOp::create(b, scaled, qs, ValueRange{r, c});
                });
    }
  }

  // The block's chunk: tiles [tile0, tile0 + numTiles).
  Value chunkStart = a.mul(split, g.tilesPerSplit);
  Value tile0 = a.add(chunkStart, g.firstTile);
  Value numTiles = arith::MinUIOp::create(
      b, a.c(g.tilesPerSplit),
      arith::SubIOp::create(b, a.c(g.tiles), chunkStart));
  TileLayout kLayout{g.tileKeys, g.mma ? s.headDim : g.dPad,
                     g.mma ? 8 : g.kWidth, kThreads};
  TileLayout vLayout{g.tileKeys, g.mma ? s.valueDim : g.dvPad,
                     g.mma ? 8 : g.vWidth, kThreads};
  kLayout.warpBlocks = vLayout.warpBlocks = g.mma;
  // Key tile `tile`, the chunk's tile `tileInChunk`, into stage
  // tileInChunk % stages (zeros past the chunk), as one group of copies.
  Value lastGroup;
  auto copy = [&](Value tile, Value tileInChunk) {
    Value enabled = a.ult(tileInChunk, numTiles);
    Value row0 = a.mul(tile, g.tileKeys);
    Value stage = a.mul(a.rem(tileInChunk, g.stages), g.tileKeys);
    SmallVector<Value> tokens =
        copyTileAsync(a, k, {bi, hk}, row0, s.seqKV, s.headDim, enabled,
                      kLayout, ks, stage, tid, Value(), k1, s.keySplit);
    tokens.append(copyTileAsync(a, v, {bi, hk}, row0, s.seqKV, s.valueDim,
                                enabled, vLayout, vs, stage, tid, Value(), v1,
                                s.keySplit));
    lastGroup = nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
  };
  for (int64_t i = 0; i + 1 < g.stages; ++i)
    copy(a.add(tile0, i), a.c(i));

  // query + k, a constant where the query is (the CUDA-core path's rows).
  auto plus = [&](Value query, int64_t k) {
    std::optional<int64_t> q0 = getConstantIntValue(query);
    return q0 ? a.c(*q0 + k) : a.add(query, k);
  };
  // A score in the log2 domain of row r (query `query` of head headOf(r))
  // for key `key`: soft-capped, plus the mask; -inf where the key is hidden
  // (past the end where `inRange` is false, beyond the row's causal limit,
  // before its sliding window).
  auto hide = [&](Value x, Value r, Value query, Value key, Value inRange) {
    if (s.softcap > 0)
      x = a.fmul(a.tanh(x), a.f(s.softcap * kLog2e));
    if (mask)
      x = a.fadd(x, a.toLog2Domain(maskValue(a, mask, s.mask, bi, headOf(r),
                                             query, a.umin(key, s.seqKV - 1)),
                                   a.f(kLog2e)));
    Value visible = inRange;
    if (s.causal) {
      Value below = a.sle(key, plus(query, offset));
      visible = visible ? a.andi(visible, below) : below;
    }
    if (s.window > 0) {
      // Inside the row's sliding window: key > query + offset - window.
      Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, key,
                                          plus(query, offset - s.window));
      visible = visible ? a.andi(visible, above) : above;
    }
    return visible ? a.sel(visible, x, ninf) : x;
  };
  // Iteration j's start: once every warp is done with tile j - 1's stage,
  // tile j + stages - 1 goes in flight into it; then tile j has to land
  // (this thread's copies: all but the newest stages - 1 groups;
  // everyone's: the barrier). Returns the first row of tile j's stage.
  auto awaitTile = [&](Value j) {
    gpu::BarrierOp::create(b);
    copy(a.add(a.add(tile0, j), g.stages - 1), a.add(j, g.stages - 1));
    nvgpu::DeviceAsyncWaitOp::create(b, lastGroup,
                                     b.getI32IntegerAttr(g.stages - 1));
    gpu::BarrierOp::create(b);
    return a.mul(a.rem(j, g.stages), g.tileKeys);
  };
  // After the loop (the last groups, past the chunk, only zero-fill
  // stages), once every warp is done with the V stages: the warps' output
  // rows [warp * rows + r][dvPad] f32 in their place.
  auto outputsView = [&]() -> Value {
    NVVM::CpAsyncWaitGroupOp::create(b, 0);
    gpu::BarrierOp::create(b);
    return memref::ViewOp::create(
        b, g.outputsType(t),
        gpu::DynamicSharedMemoryOp::create(
            b,
            MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), AffineMap(),
                            gpu::AddressSpaceAttr::get(
                                b.getContext(), gpu::AddressSpace::Workgroup))),
        a.c(g.outputsOffset(t)), ValueRange{});
  };

  Value ow; // the warps' output rows, after the loop
  if (g.mma) {
    // Tensor cores: lane l holds row g = l / 4 of S (its keys 2 (l % 4)
    // and + 1 of each n8 tile) and of O; rows g + 8 of the m16 tiles stay
    // zero. Q as A fragments, one per 16 head columns, read once.
    MmaOps ops{a, t};
    Value gRow = a.div(lane, 4), t2 = a.mul(a.rem(lane, 4), 2);
    Value rowValid = a.ult(gRow, rows), qRow = a.umin(gRow, rows - 1);
    Value qQuery = a.rem(qRow, s.seqQ), qHead = headOf(qRow);
    Value zeroPair = ops.pairFromF32(zero, zero);
    int64_t kSteps = s.headDim / 16, vTiles = s.valueDim / 8;
    SmallVector<SmallVector<Value>> qFrag;
    for (int64_t kt = 0; kt < kSteps; ++kt) {
      auto pair = [&](int64_t col) {
        return ops.operand(loadRowChunk(a, q, {bi, qHead}, qQuery, s.seqQ,
                                        a.add(t2, col), s.headDim, 2, rowValid,
                                        /*colsMayOverflow=*/false));
      };
      qFrag.push_back({pair(16 * kt), zeroPair, pair(16 * kt + 8), zeroPair});
    }

    // Loop state: o [vTiles][4] (c0..c3 of each n8 tile of Dv), m, l (this
    // lane's part of row g's sum).
    SmallVector<Value> init(4 * vTiles, zero);
    init.append({ninf, zero});
    auto loop = scf::ForOp::create(b, a.c(0), numTiles, a.c(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value j = loop.getInductionVar();
      ValueRange iter = loop.getRegionIterArgs();
      SmallVector<SmallVector<Value>> o;
      for (int64_t d = 0; d < vTiles; ++d)
        o.emplace_back(iter.begin() + 4 * d, iter.begin() + 4 * d + 4);
      Value m = iter[4 * vTiles], l = iter[4 * vTiles + 1];

      // The warp's 16 keys of tile j's stage.
      Value warpRow = a.add(awaitTile(j), a.mul(warp, 16));

      // S = Q·Kᵀ, two n8 tiles of keys: K row-major is Kᵀ's B operand;
      // matrix i of an x4 ldmatrix holds head columns kt*16 + 8i.., the
      // registers b0, b1 of step kt, then of step kt + 1.
      SmallVector<SmallVector<Value>> sc(2, SmallVector<Value>(4, zero));
      for (int64_t nt = 0; nt < 2; ++nt) {
        Value row8 = a.add(a.add(a.rem(lane, 8), nt * 8), warpRow);
        for (int64_t kt = 0; kt < kSteps; kt += 2) {
          int64_t count = kt + 1 < kSteps ? 4 : 2;
          Value col = a.add(a.mul(a.rem(a.div(lane, 8), count), 8), kt * 16);
          SmallVector<Value> bs =
              ops.loadMatrices(ks, row8, col, count, /*transpose=*/false);
          ops.mma(qFrag[kt], {bs[0], bs[1]}, sc[nt]);
          if (count == 4)
            ops.mma(qFrag[kt + 1], {bs[2], bs[3]}, sc[nt]);
        }
      }

      // Online softmax of row g over the warp's 16 keys: 4 per lane, the
      // max over the row's 4 lanes (xor 1, 2).
      Value key0 =
          a.add(a.add(a.mul(a.add(tile0, j), g.tileKeys), a.mul(warp, 16)), t2);
      SmallVector<Value> x;
      Value most = ninf;
      for (int64_t nt = 0; nt < 2; ++nt)
        for (int64_t e = 0; e < 2; ++e) {
          Value key = a.add(key0, nt * 8 + e);
          Value inRange = s.seqKV % g.tileKeys ? a.ult(key, s.seqKV) : Value();
          x.push_back(
              hide(a.fmul(sc[nt][e], scaleC), qRow, qQuery, key, inRange));
          most = a.fmax(most, x.back());
        }
      Value newM = a.fmax(m, a.butterfly(most, 1, 4, /*isMax=*/true));
      // A row that has seen no key yet keeps -inf: subtract 0 instead.
      Value mUse = a.sel(a.isNegInf(newM), zero, newM);
      Value alpha = a.exp2FlushSubnormals(a.fsub(m, mUse));
      SmallVector<Value> p;
      Value sum = zero;
      for (Value xi : x) {
        p.push_back(a.exp2FlushSubnormals(a.fsub(xi, mUse)));
        sum = a.fadd(sum, p.back());
      }
      l = a.fma(l, alpha, sum);
      for (SmallVector<Value> &od : o) {
        od[0] = a.fmul(od[0], alpha);
        od[1] = a.fmul(od[1], alpha);
      }

      // O += P·V: P as the A operand (keys 2t.. from n8 tile 0, 2t + 8..
      // from tile 1); V [key][d] loaded transposed, matrix i of an x4 load
      // holding keys 8 (i % 2).. of head columns (d + i / 2) * 8..: the
      // registers b0, b1 of n8 tile d, then of tile d + 1.
      SmallVector<Value> pFrag = {ops.pairFromF32(p[0], p[1]), zeroPair,
                                  ops.pairFromF32(p[2], p[3]), zeroPair};
      Value keyRow = a.add(
          a.add(a.rem(lane, 8), a.mul(a.rem(a.div(lane, 8), 2), 8)), warpRow);
      for (int64_t d = 0; d < vTiles; d += 2) {
        Value col = a.mul(a.add(a.div(lane, 16), d), 8);
        SmallVector<Value> bs =
            ops.loadMatrices(vs, keyRow, col, 4, /*transpose=*/true);
        ops.mma(pFrag, {bs[0], bs[1]}, o[d]);
        ops.mma(pFrag, {bs[2], bs[3]}, o[d + 1]);
      }
      SmallVector<Value> yield;
      for (SmallVector<Value> &od : o)
        yield.append(od);
      yield.append({newM, l});
      scf::YieldOp::create(b, yield);
    }

    // Each warp's row statistics (the sum over the row's 4 lanes) and
    // output rows to shared memory, for the combine below.
    ValueRange res = loop.getResults();
    ow = outputsView();
    Value rowSum = a.butterfly(res[4 * vTiles + 1], 1, 4, /*isMax=*/false);
    a.guarded(a.andi(rowValid, a.ult(a.rem(lane, 4), 1)), [&]() {
      memref::StoreOp::create(b, res[4 * vTiles], stats,
                              ValueRange{warp, gRow});
      memref::StoreOp::create(b, rowSum, stats,
                              ValueRange{a.add(warp, kWarps), gRow});
    });
    a.guarded(rowValid, [&]() {
      for (int64_t d = 0; d < vTiles; ++d)
        vector::StoreOp::create(
            b,
            vector::FromElementsOp::create(
                b, VectorType::get({2}, f32),
                ValueRange{res[4 * d], res[4 * d + 1]}),
            ow, ValueRange{a.add(a.mul(warp, rows), gRow), a.add(t2, 8 * d)},
            false, llvm::MaybeAlign(8));
    });
  } else {
    // Loop state: o [row][group][vPair], m [row], l [row] (this warp's).
    int64_t numO = rows * g.groups() * g.vPair;
    auto at = [&](int64_t r, int64_t i, int64_t e) {
      return (r * g.groups() + i) * g.vPair + e;
    };
    SmallVector<Value> init(numO, zero);
    init.append(rows, ninf);
    init.append(rows, zero);
    auto loop = scf::ForOp::create(b, a.c(0), numTiles, a.c(1), init);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(loop.getBody());
      Value j = loop.getInductionVar();
      ValueRange iter = loop.getRegionIterArgs();
      SmallVector<Value> o(iter.begin(), iter.begin() + numO);
      SmallVector<Value> m(iter.begin() + numO, iter.begin() + numO + rows);
      SmallVector<Value> l(iter.begin() + numO + rows, iter.end());

      Value stageRow = awaitTile(j);

      // Scores of the lane's key: its quarter of the head dimension (chunks
      // quarter, quarter + 4, ...), then summed over the key's 4 lanes.
      Value keyRow = a.add(a.mul(warp, kKeysPerWarp), keyInWarp);
      Value key = a.add(a.mul(a.add(tile0, j), kTileKeys), keyRow);
      keyRow = a.add(stageRow, keyRow);
      SmallVector<Value> sc(rows, zero);
      auto elements = [&](Value vec, int64_t n) {
        SmallVector<Value> out;
        for (int64_t e = 0; e < n; ++e)
          out.push_back(
              a.toF32(vector::ExtractOp::create(b, vec, ArrayRef<int64_t>{e})));
        return out;
      };
      for (int64_t jj = 0; jj < g.dPad / (4 * g.kWidth); ++jj) {
        Value col = a.mul(a.add(quarter, 4 * jj), g.kWidth);
        SmallVector<Value> kv =
            elements(vector::LoadOp::create(b, VectorType::get({g.kWidth}, t),
                                            ks, ValueRange{keyRow, col}, false,
                                            llvm::MaybeAlign(g.kWidth * bytes)),
                     g.kWidth);
        for (int64_t r = 0; r < rows; ++r) {
          SmallVector<Value> qv = elements(
              vector::LoadOp::create(
                  b, VectorType::get({g.kWidth}, f32), qs,
                  ValueRange{a.c(r), col}, false,
                  llvm::MaybeAlign(std::min<int64_t>(16, 4 * g.kWidth))),
              g.kWidth);
          for (int64_t e = 0; e < g.kWidth; ++e)
            sc[r] = a.fma(qv[e], kv[e], sc[r]);
        }
      }

      // Online softmax per row over the warp's 8 keys: the max over lanes 4
      // apart (the 4 lanes of a key hold the same score), the rescale of the
      // warp's output and sum.
      Value inRange = s.seqKV % kTileKeys ? a.ult(key, s.seqKV) : Value();
      SmallVector<Value> p(rows);
      for (int64_t r = 0; r < rows; ++r) {
        Value x = hide(a.quadReduce(sc[r], 4, /*isMax=*/false), a.c(r),
                       a.c(r % s.seqQ), key, inRange);
        Value newM = a.fmax(m[r], a.butterfly(x, 4, 32, /*isMax=*/true));
        // A row that has seen no key yet keeps -inf: subtract 0 instead.
        Value mUse = a.sel(a.isNegInf(newM), zero, newM);
        Value alpha = a.exp2FlushSubnormals(a.fsub(m[r], mUse));
        p[r] = a.exp2FlushSubnormals(a.fsub(x, mUse));
        l[r] = a.fma(l[r], alpha, p[r]);
        m[r] = newM;
        for (int64_t i = 0; i < g.groups(); ++i)
          for (int64_t e = 0; e < g.vPair; ++e)
            o[at(r, i, e)] = a.fmul(o[at(r, i, e)], alpha);
      }

      // O += P·V over the warp's keys: key kk's probabilities from its first
      // lane, V's row kk from shared memory (lane l: columns vPair (l + 32 i)).
      for (int64_t kk = 0; kk < kKeysPerWarp; ++kk) {
        Value vRow = a.add(stageRow, a.add(a.mul(warp, kKeysPerWarp), kk));
        SmallVector<Value> pk;
        for (int64_t r = 0; r < rows; ++r)
          pk.push_back(gpu::ShuffleOp::create(b, p[r], int32_t(4 * kk), 32,
                                              gpu::ShuffleMode::IDX)
                           .getShuffleResult());
        for (int64_t i = 0; i < g.groups(); ++i) {
          Value col = a.mul(a.add(lane, 32 * i), g.vPair);
          SmallVector<Value> vv = elements(
              vector::LoadOp::create(b, VectorType::get({g.vPair}, t), vs,
                                     ValueRange{vRow, col}, false,
                                     llvm::MaybeAlign(g.vPair * bytes)),
              g.vPair);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t e = 0; e < g.vPair; ++e)
              o[at(r, i, e)] = a.fma(pk[r], vv[e], o[at(r, i, e)]);
        }
      }
      SmallVector<Value> yield(o);
      yield.append(m);
      yield.append(l);
      scf::YieldOp::create(b, yield);
    }

    // Each warp's statistics (sums over its 8 keys' lanes) and output rows
    // to shared memory, for the combine below.
    ValueRange res = loop.getResults();
    ow = outputsView();
    SmallVector<Value> sums;
    for (int64_t r = 0; r < rows; ++r)
      sums.push_back(a.butterfly(res[numO + rows + r], 4, 32, /*isMax=*/false));
    a.guarded(a.ult(lane, 1), [&]() {
      for (int64_t r = 0; r < rows; ++r) {
        memref::StoreOp::create(b, res[numO + r], stats,
                                ValueRange{warp, a.c(r)});
        memref::StoreOp::create(b, sums[r], stats,
                                ValueRange{a.add(warp, kWarps), a.c(r)});
      }
    });
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < g.groups(); ++i) {
        SmallVector<Value> pair;
        for (int64_t e = 0; e < g.vPair; ++e)
          pair.push_back(res[at(r, i, e)]);
        vector::StoreOp::create(b,
                                vector::FromElementsOp::create(
                                    b, VectorType::get({g.vPair}, f32), pair),
                                ow,
                                ValueRange{a.add(a.mul(warp, rows), r),
                                           a.mul(a.add(lane, 32 * i), g.vPair)},
                                false, llvm::MaybeAlign(4 * g.vPair));
      }
  }
  gpu::BarrierOp::create(b);

  // The warps combined, element (r, c) by thread (r Dv + c) % 128: each
  // warp's output rescaled from its max to the largest.
  Value out = entry.getArgument(results);
  int64_t elements = rows * s.valueDim;
  for (int64_t it = 0; it * kThreads < elements; ++it) {
    Value idx = a.add(tid, it * kThreads);
    a.guarded(
        (it + 1) * kThreads <= elements ? Value() : a.ult(idx, elements),
        [&]() {
          Value r = a.div(idx, s.valueDim), c = a.rem(idx, s.valueDim);
          SmallVector<Value> mw;
          Value most = ninf;
          for (int64_t w = 0; w < kWarps; ++w) {
            mw.push_back(
                memref::LoadOp::create(b, stats, ValueRange{a.c(w), r}));
            most = a.fmax(most, mw.back());
          }
          Value mUse = a.sel(a.isNegInf(most), zero, most);
          Value sum = zero, acc = zero;
          for (int64_t w = 0; w < kWarps; ++w) {
            Value e = a.exp2FlushSubnormals(a.fsub(mw[w], mUse));
            sum = a.fma(e,
                        memref::LoadOp::create(b, stats,
                                               ValueRange{a.c(kWarps + w), r}),
                        sum);
            acc = a.fma(e,
                        memref::LoadOp::create(
                            b, ow, ValueRange{a.add(a.c(w * rows), r), c}),
                        acc);
          }
          Value head = headOf(r), query = a.rem(r, s.seqQ);
          if (g.splits == 1) {
            memref::StoreOp::create(
                b, a.fromF32(a.fmul(acc, a.inverseOrZero(sum)), t), out,
                ValueRange{bi, head, query, c});
            return;
          }
          // The chunk's unnormalised output, its max (-inf: no visible key)
          // and its sum relative to that max.
          Value flat =
              a.add(a.mul(a.add(a.mul(bi, s.headsQ), head), s.seqQ), query);
          memref::StoreOp::create(b, acc, out, ValueRange{split, flat, c});
          Value statsOut = entry.getArgument(results + 1);
          a.guarded(a.ult(c, 1), [&]() {
            memref::StoreOp::create(b, most, statsOut,
                                    ValueRange{split, flat, a.c(0)});
            memref::StoreOp::create(b, sum, statsOut,
                                    ValueRange{split, flat, a.c(1)});
          });
        });
  }
  if (g.splits > 1) {
    SmallVector<Value> globals;
    for (memref::GlobalOp global : combine)
      globals.push_back(memref::GetGlobalOp::create(b, global.getType(),
                                                    global.getSymName()));
    combineInLastBlock(
        a, s, g.splits, kThreads, rows, globals[0], out,
        entry.getArgument(results + 1), entry.getArgument(results + 2),
        ArrayRef(globals).drop_front(), [&](Value block, Value r) {
          Value head =
              a.add(a.mul(a.rem(block, s.headsKV), group), a.div(r, s.seqQ));
          return a.add(
              a.mul(a.add(a.mul(a.div(block, s.headsKV), s.headsQ), head),
                    s.seqQ),
              a.rem(r, s.seqQ));
        });
  }
  gpu::ReturnOp::create(b);
}

} // namespace

bool useDecodeKernel(const AttentionShape &s) {
  if (s.headsQ % s.headsKV || s.headsQ / s.headsKV * s.seqQ > kMaxDecodeRows)
    return false;
  // cp.async copies 4 bytes or more: f16/bf16 head dimensions are even.
  if (!s.elementType.isF32() && (s.headDim % 2 || s.valueDim % 2))
    return false;
  // At most 32 chunks per row: beyond, the offsets of a thread's many
  // chunks stay in registers across the loop (f32 D = 81, 84 chunks of 4
  // bytes: 255 registers and spills; D = 98: 52 chunks of 8 bytes, 255).
  Geometry g = geometry(s);
  if (g.dPad / g.kWidth > 32 || g.dvPad / g.vWidth > 32)
    return false;
  return sharedBytes(g.tileTypes(s.elementType)) <= kMaxDecodeShared;
}

DecodeLaunch buildDecodeKernels(OpBuilder &builder, gpu::GPUModuleOp module,
                                StringRef name, const AttentionShape &s) {
  Geometry g = geometry(s);
  Type t = s.elementType, f32 = builder.getF32Type();
  int64_t n = s.batch * s.headsQ * s.seqQ;
  SmallVector<Type> args(attentionInputTypes(s));
  auto partial = MemRefType::get({g.splits, n, s.valueDim}, f32);
  auto stats = MemRefType::get({g.splits, n, 2}, f32);
  if (g.splits == 1) {
    args.push_back(attentionOutputType(s));
  } else {
    args.append({partial, stats, attentionOutputType(s)});
  }
  SmallVector<MemRefType> tileTypes = g.tileTypes(t);
  DecodeLaunch launch;
  SmallVector<Value> tiles;
  launch.decode.kernel = createKernel(builder, module, name, args, tileTypes,
                                      kThreads, tiles, /*dynamic=*/true);
  launch.decode.dynamicSharedBytes = sharedBytes(tileTypes);
  assert(sharedBytes({g.outputsType(t)}) <= sharedBytes({tileTypes[2]}) &&
         "the warps' outputs fit in the V stages");
  launch.decode.gridX = s.batch * s.headsKV;
  launch.decode.gridY = g.splits;
  launch.decode.blockX = kThreads;
  SmallVector<memref::GlobalOp> combine;
  if (g.splits > 1)
    combine = combineGlobals(builder, module, name, launch.decode.gridX,
                             g.splits, kWarps);
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  DecodeKernel{s, g, a, b, tiles[0], tiles[1], tiles[2], tiles[3], combine}
      .build(launch.decode.kernel);
  return launch;
}

} // namespace tfc
