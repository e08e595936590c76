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
//   blocks,
//   at least kMinTilesPerSplit tiles each);
// - a block of 4 warps walks its chunk in tiles of 32 keys, copied to
//   shared memory by cp.async into 2 to 4 stages (decodeStages - 1 tiles in
//   flight during the current one, no register holding them). Warp w owns keys
//   8w..8w+7 of each tile, 4 lanes per key:
//   a lane multiplies its quarter of the head dimension with each query
//   row (Q, scaled into the log2 domain, in shared memory), two shuffles
//   sum the quarters; each warp keeps its own running max, sum and output
//   rows (lane l: columns 2l, 2l + 1, 2l + 64, ...), the probabilities of
//   its keys broadcast by shuffles. At the end the 4 warps combine through
//   shared memory;
// - with one chunk the block writes the output; with more, each writes its
//   rows' unnormalised output and (max, sum), and a second kernel (a block
//   per output row) rescales and adds the chunks.
//
// Arithmetic is f32 on the CUDA cores for every element type: per key the
// kernel does 2 R (D + Dv) FLOP on 2 (D + Dv) bytes of f16 K and V, R FLOP
// per byte for R rows, below the H200's FMA-to-bandwidth ratio (67 TFLOP/s
// over 4.8 TB/s, 14) up to R = 8: memory bound, as decode is.
//
//===----------------------------------------------------------------------===//

#include "DecodeKernel.h"
#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace tfc {
namespace {

constexpr double kLog2e = 1.4426950408889634;
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
    return {sharedTile(f32, rows, dPad),
            sharedTile(t, stages * kTileKeys, kStride),
            sharedTile(t, stages * kTileKeys, dvPad),
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

Geometry geometry(const AttentionShape &s) {
  Geometry g;
  g.rows = s.headsQ / s.headsKV * s.seqQ;
  g.stages = s.decodeStages;
  int64_t most = 128 / s.elementType.getIntOrFloatBitWidth();
  g.kWidth = chunkWidth(s.headDim, most);
  g.dPad = roundUp(s.headDim, 4 * g.kWidth);
  g.kStride = g.dPad / (4 * g.kWidth) % 2 ? g.dPad : g.dPad + 4 * g.kWidth;
  g.vWidth = chunkWidth(s.valueDim, most);
  g.vPair = s.valueDim % 2 ? 1 : 2;
  g.dvPad = roundUp(s.valueDim, 32 * g.vPair);
  g.firstTile =
      s.window > 0
          ? std::max<int64_t>(0, s.seqKV - s.seqQ - s.window + 1) / kTileKeys
          : 0;
  g.tiles = (s.seqKV + kTileKeys - 1) / kTileKeys - g.firstTile;
  int64_t blocks = s.batch * s.headsKV;
  int64_t splits =
      std::clamp<int64_t>((s.decodeBlocksPerSM * kSMs + blocks - 1) / blocks, 1,
                          std::max<int64_t>(1, g.tiles / kMinTilesPerSplit));
  g.tilesPerSplit = (g.tiles + splits - 1) / splits;
  g.splits = (g.tiles + g.tilesPerSplit - 1) / g.tilesPerSplit;
  return g;
}

struct DecodeKernel {
  const AttentionShape &s;
  const Geometry &g;
  Arith &a;
  ImplicitLocOpBuilder &b;
  Value qs, ks, vs, stats; // the shared-memory tiles

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

  // Q, scaled by queryFactor, zero beyond D.
  Value scaleC = a.f(queryFactor(s));
  int64_t qElements = rows * g.dPad;
  for (int64_t it = 0; it * kThreads < qElements; ++it) {
    Value idx = a.add(tid, it * kThreads);
    Value r = a.umin(a.div(idx, g.dPad), rows - 1), c = a.rem(idx, g.dPad);
    Value x = memref::LoadOp::create(
        b, q,
        ValueRange{bi, headOf(r), a.rem(r, s.seqQ), a.umin(c, s.headDim - 1)});
    Value scaled = a.sel(a.ult(c, s.headDim), a.fmul(a.toF32(x), scaleC), zero);
    a.guarded((it + 1) * kThreads <= qElements ? Value()
                                               : a.ult(idx, qElements),
              [&]() {
                memref::StoreOp::create(b, scaled, qs, ValueRange{r, c});
              });
  }

  // The block's chunk: tiles [tile0, tile0 + numTiles).
  Value chunkStart = a.mul(split, g.tilesPerSplit);
  Value tile0 = a.add(chunkStart, g.firstTile);
  Value numTiles = arith::MinUIOp::create(
      b, a.c(g.tilesPerSplit),
      arith::SubIOp::create(b, a.c(g.tiles), chunkStart));
  TileLayout kLayout{kTileKeys, g.dPad, g.kWidth, kThreads};
  TileLayout vLayout{kTileKeys, g.dvPad, g.vWidth, kThreads};
  // Key tile `tile`, the chunk's tile `tileInChunk`, into stage
  // tileInChunk % stages (zeros past the chunk), as one group of copies.
  Value lastGroup;
  auto copy = [&](Value tile, Value tileInChunk) {
    Value enabled = a.ult(tileInChunk, numTiles);
    Value row0 = a.mul(tile, kTileKeys);
    Value stage = a.mul(a.rem(tileInChunk, g.stages), kTileKeys);
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

    // Once every warp is done with tile j - 1's stage, tile j + stages - 1
    // goes in flight into it; then tile j has to land (this thread's
    // copies: all but the newest stages - 1 groups; everyone's: the
    // barrier).
    gpu::BarrierOp::create(b);
    copy(a.add(a.add(tile0, j), g.stages - 1), a.add(j, g.stages - 1));
    nvgpu::DeviceAsyncWaitOp::create(b, lastGroup,
                                     b.getI32IntegerAttr(g.stages - 1));
    gpu::BarrierOp::create(b);
    Value stageRow = a.mul(a.rem(j, g.stages), kTileKeys);

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
          elements(vector::LoadOp::create(b, VectorType::get({g.kWidth}, t), ks,
                                          ValueRange{keyRow, col}, false,
                                          llvm::MaybeAlign(g.kWidth * bytes)),
                   g.kWidth);
      for (int64_t r = 0; r < rows; ++r) {
        SmallVector<Value> qv =
            elements(vector::LoadOp::create(
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
    Value log2e = a.f(kLog2e);
    Value inRange = s.seqKV % kTileKeys ? a.ult(key, s.seqKV) : Value();
    SmallVector<Value> p(rows);
    for (int64_t r = 0; r < rows; ++r) {
      Value x = a.quadReduce(sc[r], 4, /*isMax=*/false);
      if (s.softcap > 0)
        x = a.fmul(a.tanh(x), a.f(s.softcap * kLog2e));
      int64_t query = r % s.seqQ;
      if (mask)
        x = a.fadd(
            x, a.toLog2Domain(maskValue(a, mask, s.mask, bi, headOf(a.c(r)),
                                        a.c(query), a.umin(key, s.seqKV - 1)),
                              log2e));
      Value visible = inRange;
      if (s.causal) {
        Value below = a.sle(key, a.c(query + offset));
        visible = visible ? a.andi(visible, below) : below;
      }
      if (s.window > 0) {
        // Inside the row's sliding window: key > query + offset - window.
        Value above = arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, key,
                                            a.c(query + offset - s.window));
        visible = visible ? a.andi(visible, above) : above;
      }
      if (visible)
        x = a.sel(visible, x, ninf);
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
        SmallVector<Value> vv =
            elements(vector::LoadOp::create(b, VectorType::get({g.vPair}, t),
                                            vs, ValueRange{vRow, col}, false,
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

  // (The last groups, past the chunk, only zero-fill stages.)
  NVVM::CpAsyncWaitGroupOp::create(b, 0);

  // Each warp's statistics (sums over its 8 keys' lanes) and output rows go
  // to shared memory, the rows where the V stages were, once every warp is
  // done with them.
  ValueRange res = loop.getResults();
  gpu::BarrierOp::create(b);
  Value ow = memref::ViewOp::create(
      b, g.outputsType(t),
      gpu::DynamicSharedMemoryOp::create(
          b,
          MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), AffineMap(),
                          gpu::AddressSpaceAttr::get(
                              b.getContext(), gpu::AddressSpace::Workgroup))),
      a.c(g.outputsOffset(t)), ValueRange{});
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
  gpu::ReturnOp::create(b);
}

/// The combine kernel: output row `blockIdx.x` (of B x Hq x Sq) is the sum over
/// the chunks of their outputs rescaled to the largest max, over the same sum
/// of their sums (0 where no chunk saw a key).
void buildCombine(Arith &a, gpu::GPUFuncOp func, const AttentionShape &s,
                  int64_t splits, int64_t threads) {
  ImplicitLocOpBuilder &b = a.b;
  Block &entry = func.getBody().front();
  b.setInsertionPointToEnd(&entry);
  Value part = entry.getArgument(0), stats = entry.getArgument(1),
        out = entry.getArgument(2);
  Value tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  Value row = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  Value zero = a.f(0.0);
  auto stat = [&](Value chunk, int64_t which) -> Value {
    return memref::LoadOp::create(b, stats, ValueRange{chunk, row, a.c(which)});
  };
  auto largest = scf::ForOp::create(b, a.c(0), a.c(splits), a.c(1),
                                    ValueRange{a.negInf()});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(largest.getBody());
    scf::YieldOp::create(b, a.fmax(largest.getRegionIterArgs()[0],
                                   stat(largest.getInductionVar(), 0)));
  }
  Value most = largest.getResult(0);
  Value mUse = a.sel(a.isNegInf(most), zero, most);
  int64_t perThread = (s.valueDim + threads - 1) / threads;
  SmallVector<Value> cols;
  for (int64_t i = 0; i < perThread; ++i)
    cols.push_back(a.add(tid, i * threads));
  SmallVector<Value> init(perThread + 1, zero);
  auto sums = scf::ForOp::create(b, a.c(0), a.c(splits), a.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(sums.getBody());
    Value chunk = sums.getInductionVar();
    ValueRange acc = sums.getRegionIterArgs();
    Value w = a.exp2FlushSubnormals(a.fsub(stat(chunk, 0), mUse));
    SmallVector<Value> next = {a.fma(w, stat(chunk, 1), acc[0])};
    for (int64_t i = 0; i < perThread; ++i)
      next.push_back(a.fma(
          w,
          memref::LoadOp::create(
              b, part, ValueRange{chunk, row, a.umin(cols[i], s.valueDim - 1)}),
          acc[1 + i]));
    scf::YieldOp::create(b, next);
  }
  Value inv = a.inverseOrZero(sums.getResult(0));
  for (int64_t i = 0; i < perThread; ++i)
    a.guarded(
        (i + 1) * threads <= s.valueDim ? Value() : a.ult(cols[i], s.valueDim),
        [&]() {
          memref::StoreOp::create(
              b, a.fromF32(a.fmul(sums.getResult(1 + i), inv), s.elementType),
              out,
              ValueRange{a.div(row, s.headsQ * s.seqQ),
                         a.rem(a.div(row, s.seqQ), s.headsQ),
                         a.rem(row, s.seqQ), cols[i]});
        });
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
    args.push_back(partial);
    args.push_back(stats);
  }
  SmallVector<MemRefType> tileTypes = g.tileTypes(t);
  DecodeLaunch launch;
  SmallVector<Value> tiles;
  launch.kernel = createKernel(builder, module, name, args, tileTypes, kThreads,
                               tiles, /*dynamic=*/true);
  launch.dynamicSharedBytes = sharedBytes(tileTypes);
  assert(sharedBytes({g.outputsType(t)}) <= sharedBytes({tileTypes[2]}) &&
         "the warps' outputs fit in the V stages");
  launch.gridX = s.batch * s.headsKV;
  launch.splits = g.splits;
  launch.blockX = kThreads;
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  DecodeKernel{s, g, a, b, tiles[0], tiles[1], tiles[2], tiles[3]}.build(
      launch.kernel);
  if (g.splits == 1)
    return launch;
  launch.combineGridX = n;
  launch.combineBlockX = std::min<int64_t>(kThreads, roundUp(s.valueDim, 32));
  SmallVector<Value> none;
  launch.combine = createKernel(builder, module, (name + "_combine").str(),
                                {partial, stats, attentionOutputType(s)}, {},
                                launch.combineBlockX, none);
  buildCombine(a, launch.combine, s, g.splits, launch.combineBlockX);
  return launch;
}

} // namespace tfc
