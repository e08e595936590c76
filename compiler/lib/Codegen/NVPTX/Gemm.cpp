//===- Gemm.cpp - Matmul kernels for NVIDIA GPUs --------------------------===//
//
// f16/bf16 (f32 or same-type accumulator; f32 ones: buildFmaGemmKernel): a
// tensor-core GEMM kernel built for the shapes: a block of 4 warps owns a
// 64x64 tile of C, walks K in slices of 32 staging A [64][32] and B [32][64]
// through shared memory, both row-major (the next slice loaded into
// registers while the current one is multiplied), and each warp accumulates
// its 16 rows x 64 columns with mma.sync m16n8k16 in f32, its fragments read
// by ldmatrix (B's transposed). The op's semantics C += A·B are kept: C is
// read once at the end; where C was all zeros (GemmShape::accumulate false)
// the kernel stores its product over C instead. Where B is given as [N, K]
// (a weight as stored), every kernel reads it so.
//
// With few rows of A per batch a GEMV kernel streams B once instead
// (Gemv.cpp).
//
// With `wgmma` (sm_90a; K and N multiples of 8), each warpgroup owns 64
// rows x min(N, 128) columns of C, two warpgroups per block sharing the B
// tiles where M > 64 and N reaches 128. K goes in slices of 64: A and B
// tiles are copied by cp.async into three stages of wgmma's 8x8 core
// matrices, and per slice one chain of 4 wgmma m64nNk16 reads both
// operands from shared memory by descriptor (A K-major, B N-major, or
// K-major where it is given as [N, K]), f32 accumulators in registers. A
// slice's chain stays in flight while the warps pass the barrier and copy slice
// + 2 into the stage the previous chain used (waited for first).
//
// With `tma` as well, thread 0 copies the slices by TMA from tensor maps the
// host code makes, into 128-byte swizzled stages that wgmma reads through
// swizzled descriptors. Full mbarriers say a stage has landed; empty ones
// (an arrival per warp once its chain that read the stage has retired) say
// it may be refilled, so that only thread 0 waits for the slowest warp and
// the loop has no block barrier.
//
//===----------------------------------------------------------------------===//

#include "GemmKernel.h"
#include "Gemv.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace tfc {
namespace {

constexpr int64_t kTile = 64, kSlice = 32, kThreads = 128;
/// The wgmma kernel's tile of C is kTile x kWideTile (at most), K in slices
/// of kWideSlice.
constexpr int64_t kWideTile = 128, kWideSlice = 64, kStages = 3;
/// The f32 kernel's K slice.
constexpr int64_t kFmaSlice = 16;

} // namespace

GemmKernel beginGemmKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                           StringRef name, const GemmShape &s, TypeRange args,
                           ArrayRef<MemRefType> tiles, GemmTiling &t,
                           ImplicitLocOpBuilder &b, Arith &a) {
  GemmKernel k;
  // Beyond 48 KiB, dynamic shared memory.
  bool dynamic = sharedBytes(tiles) > 48 * 1024;
  t.dynamicShared = dynamic ? sharedBytes(tiles) : 0;
  k.func = createKernel(builder, module, name, args, tiles, t.threads, k.tiles,
                        dynamic);
  Block &entry = k.func.getBody().front();
  b.setInsertionPointToEnd(&entry);
  k.A = entry.getArgument(0);
  k.B = entry.getArgument(1);
  k.C = entry.getArgument(2);
  k.tid = gpu::ThreadIdOp::create(b, gpu::Dimension::x);
  k.warp = a.div(k.tid, 32);
  k.lane = a.rem(k.tid, 32);
  int64_t nBlocks = (s.n + t.tileN - 1) / t.tileN;
  Value bx = gpu::BlockIdOp::create(b, gpu::Dimension::x);
  k.n0 = a.mul(a.rem(bx, nBlocks), t.tileN);
  k.m0 = a.mul(gpu::BlockIdOp::create(b, gpu::Dimension::y), t.tileM);
  if (s.batched)
    k.lead.push_back(a.div(bx, nBlocks));
  return k;
}

namespace {

/// C += the accumulators of a warp's 16 rows from row0 (C fragments of
/// mma.sync side by side: tile nt holds columns n0 + 8 nt..), two elements
/// at a time, inside the matrix; C = them when !s.accumulate.
void addToC(Arith &a, const GemmShape &s, Value C, ArrayRef<Value> lead,
            Value row0, Value n0, Value lane, ValueRange acc, int64_t tileN) {
  ImplicitLocOpBuilder &b = a.b;
  Value g = a.div(lane, 4), t2 = a.mul(a.rem(lane, 4), 2);
  auto pairTy = VectorType::get({2}, s.acc);
  for (int r = 0; r < 2; ++r) {
    Value row = a.add(row0, a.add(g, 8 * r));
    a.guarded(a.ult(row, s.m), [&]() {
      for (int64_t nt = 0; nt < tileN / 8; ++nt) {
        Value col = a.add(a.add(n0, t2), nt * 8);
        a.guarded(s.n % tileN == 0 ? Value() : a.ult(col, s.n), [&]() {
          SmallVector<Value> idx(lead);
          idx.append({row, col});
          unsigned bytes = 2 * s.acc.getIntOrFloatBitWidth() / 8;
          Value old = s.accumulate
                          ? vector::LoadOp::create(b, pairTy, C, idx, false,
                                                   llvm::MaybeAlign(bytes))
                                .getResult()
                          : Value();
          SmallVector<Value> sum;
          for (int e = 0; e < 2; ++e) {
            Value v = acc[nt * 4 + 2 * r + e];
            if (old)
              v = a.fadd(a.toF32(vector::ExtractOp::create(
                             b, old, ArrayRef<int64_t>{e})),
                         v);
            sum.push_back(a.fromF32(v, s.acc));
          }
          vector::StoreOp::create(
              b, vector::FromElementsOp::create(b, pairTy, sum), C, idx, false,
              llvm::MaybeAlign(bytes));
        });
      }
    });
  }
}

/// Whether the wgmma kernel takes the shape: rows of A and B in 16-byte
/// chunks.
bool useWgmma(const GemmShape &s, bool wgmma) {
  return wgmma && !s.t.isF32() && s.k % 8 == 0 && s.n % 8 == 0;
}

/// The wgmma kernel's columns of C per block: kWideTile, or all of a
/// narrower N (a multiple of 8: wgmma's N), which then wastes nothing.
int64_t wideTile(const GemmShape &s) { return std::min(kWideTile, s.n); }

/// The mma.sync kernel: 64x64 per 4 warps. The wgmma kernel: 64 rows per
/// warpgroup, two warpgroups sharing each B tile where M exceeds 64 and B
/// tiles are 128 wide (on the interpreter, 2.24 instead of 2.93
/// warp-instructions per 16x8x16 at 130x1024x256; at N = 64, 3.57 instead
/// of 2.85: the copies' addressing outweighs the smaller B tile).
GemmTiling gemmTiling(const GemmShape &s, bool wide) {
  if (s.t.isF32())
    return {kTile, kTile, 2 * kThreads};
  if (!wide)
    return {kTile, kTile, kThreads};
  int64_t warpgroups = s.m > kTile && wideTile(s) == kWideTile ? 2 : 1;
  return {kTile * warpgroups, wideTile(s), kThreads * warpgroups};
}

/// Whether the wgmma kernel takes its tiles by TMA: tensor maps of A and B
/// within the driver's limits (dimensions up to 2^32, strides below 2^40;
/// row strides are multiples of 16 bytes where the wgmma kernel applies).
bool useTma(const GemmShape &s, bool wgmma, bool tma) {
  constexpr int64_t kMaxDim = int64_t(1) << 32, kMaxStride = int64_t(1) << 40;
  return tma && useWgmma(s, wgmma) && s.batch <= kMaxDim && s.m <= kMaxDim &&
         s.n <= kMaxDim && s.k <= kMaxDim && 2 * s.m * s.k < kMaxStride &&
         2 * s.k * s.n < kMaxStride;
}

/// TMA: a stage holds A [tileM][64 k] in 128-byte rows, then B: as blocks
/// of 64 columns [64 k][64 n], or given as [N, K], as A: [tileN][64 k].
/// Each 128-byte row is swizzled by 128 bytes (the stages are 1024-byte
/// aligned; tileM and tileN are multiples of 8).
int64_t tmaBBlocks(const GemmTiling &t) { return (t.tileN + 63) / 64; }
int64_t tmaABytes(const GemmTiling &t) { return t.tileM * 128; }
int64_t tmaStageBytes(const GemmShape &s, const GemmTiling &t) {
  return tmaABytes(t) +
         (s.bTransposed ? t.tileN : tmaBBlocks(t) * kWideSlice) * 128;
}

/// The tensor maps of A viewed [batch][M][K] (a box: the block's rows by
/// one slice of K) and B viewed [batch][K][N] (a box: one slice of K by 64
/// columns) or, given as [N, K], [batch][N][K] (a box: the block's columns
/// of C by one slice of K), dimensions innermost first.
SmallVector<TensorMapSpec> gemmTensorMaps(const GemmShape &s,
                                          const GemmTiling &t) {
  int64_t bytes = s.t.getIntOrFloatBitWidth() / 8;
  TensorMapSpec a{0,
                  {s.k, s.m, s.batch},
                  {s.k * bytes, s.m * s.k * bytes},
                  {int32_t(kWideSlice), int32_t(t.tileM), 1},
                  kTensorMapSwizzle128B};
  if (s.bTransposed)
    return {a,
            {1,
             {s.k, s.n, s.batch},
             {s.k * bytes, s.n * s.k * bytes},
             {int32_t(kWideSlice), int32_t(t.tileN), 1},
             kTensorMapSwizzle128B}};
  return {a,
          {1,
           {s.n, s.k, s.batch},
           {s.n * bytes, s.k * s.n * bytes},
           {64, int32_t(kWideSlice), 1},
           kTensorMapSwizzle128B}};
}

gpu::GPUFuncOp buildWgmmaGemmKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                    StringRef name, const GemmShape &s,
                                    TypeRange args, GemmTiling &t, bool tma) {
  int64_t tileM = t.tileM, tileN = t.tileN, threads = t.threads;
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  WgmmaOps wg{a, s.t};
  TmaOps tmaOps{a};
  Type i32 = b.getI32Type();
  // Three stages of A [tileM][64] and B [64][tileN]: in core matrices
  // ([chunks][8]), up to 72 KiB with one warpgroup, 96 with two (dynamic);
  // TMA: full and empty mbarriers per stage, then the swizzled stages
  // (48-96 KiB and 1024 to align them).
  SmallVector<MemRefType> tiles = {
      sharedTile(s.t, kStages * tileM * kWideSlice / 8, 8),
      sharedTile(s.t, kStages * kWideSlice * tileN / 8, 8)};
  if (tma)
    tiles = {
        sharedTile(b.getI64Type(), 1, 2 * kStages),
        sharedTile(b.getI8Type(), 1, kStages * tmaStageBytes(s, t) + 1024)};
  GemmKernel k =
      beginGemmKernel(builder, module, name, s, args, tiles, t, b, a);
  Value as = k.tiles[0], bs = k.tiles[1], A = k.A, B = k.B, tid = k.tid,
        m0 = k.m0, n0 = k.n0;
  ArrayRef<Value> lead = k.lead;
  int64_t slices = (s.k + kWideSlice - 1) / kWideSlice;
  // The warpgroup's 64 rows of the block's tile.
  Value wgRow = a.mul(a.div(k.warp, 4), kTile);
  auto wrap = [&](Value x) { // x % kStages for x < 2 kStages
    Value over =
        arith::CmpIOp::create(b, arith::CmpIPredicate::uge, x, a.c(kStages));
    return a.sel(over, arith::SubIOp::create(b, x, a.c(kStages)), x);
  };

  // cp.async: slice `slice` into stage `stage` (slice % kStages), one
  // group (zero-filled past K).
  TileLayout aLayout{tileM,
                     kWideSlice,
                     8,
                     threads,
                     /*rowsFastest=*/false,
                     /*coreMatrices=*/true,
                     /*warpBlocks=*/true};
  // B given as [N, K]: its tiles are [tileN][64 k], as A's.
  TileLayout bLayout =
      s.bTransposed
          ? TileLayout{tileN, kWideSlice, 8, threads, false, true, true}
          : TileLayout{kWideSlice, tileN, 8, threads, false, true, true};
  auto copySlice = [&](Value slice, Value stage) {
    Value enabled = a.ult(slice, slices), k0 = a.mul(slice, kWideSlice);
    SmallVector<Value> tokens =
        copyTileAsync(a, A, lead, m0, s.m, s.k, enabled, aLayout, as,
                      a.mul(stage, tileM), tid, k0);
    tokens.append(s.bTransposed
                      ? copyTileAsync(a, B, lead, n0, s.n, s.k, enabled,
                                      bLayout, bs, a.mul(stage, tileN), tid, k0)
                      : copyTileAsync(a, B, lead, k0, s.k, s.n, enabled,
                                      bLayout, bs, a.mul(stage, kWideSlice),
                                      tid, n0));
    nvgpu::DeviceAsyncCreateGroupOp::create(
        b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
  };

  // TMA: shared addresses (i32) of the stages and barriers. Slice sl lands
  // in stage sl % kStages, whose full barrier (one arrival: thread 0's,
  // with the bytes) completes phase sl / kStages; every warp arrives on
  // its empty barrier once the chain that read the slice has retired.
  Value stages, bars, aMap, bMap;
  auto toI32 = [&](Value index) { return tmaOps.toI32(index); };
  auto offsetBy = [&](Value address, Value bytes) {
    return tmaOps.offsetBy(address, bytes);
  };
  auto fullBar = [&](Value stage) { return offsetBy(bars, a.mul(stage, 8)); };
  auto emptyBar = [&](Value stage) {
    return offsetBy(bars, a.mul(a.add(stage, kStages), 8));
  };
  auto phase = [&](Value slice) {
    return toI32(a.rem(a.div(slice, kStages), 2));
  };
  auto stageAddress = [&](Value stage) {
    return offsetBy(stages, a.mul(stage, tmaStageBytes(s, t)));
  };
  // Thread 0: slice `slice` into stage `stage`, out-of-bounds rows, columns
  // and K zero-filled (counted in the bytes).
  auto issueSlice = [&](Value slice, Value stage) {
    Value bar = fullBar(stage), dst = stageAddress(stage);
    tmaOps.arriveExpectTx(
        bar, arith::ConstantIntOp::create(b, i32, tmaStageBytes(s, t)));
    Value k0 = toI32(a.mul(slice, kWideSlice));
    Value batch = toI32(lead.empty() ? a.c(0) : lead[0]);
    tmaOps.load3d(dst, aMap, {k0, toI32(m0), batch}, bar);
    if (s.bTransposed) {
      tmaOps.load3d(offsetBy(dst, a.c(tmaABytes(t))), bMap,
                    {k0, toI32(n0), batch}, bar);
      return;
    }
    for (int64_t j = 0; j < tmaBBlocks(t); ++j)
      tmaOps.load3d(offsetBy(dst, a.c(tmaABytes(t) + j * kWideSlice * 128)),
                    bMap, {toI32(a.add(n0, j * 64)), k0, batch}, bar);
  };
  Value thread0;
  if (tma) {
    thread0 = a.ult(tid, 1);
    Block &entry = k.func.getBody().front();
    aMap = entry.getArgument(3);
    bMap = entry.getArgument(4);
    bars = tmaOps.sharedAddress(as);
    // The stages start at the first 1024-byte boundary of their buffer.
    stages = tmaOps.alignedAddress(bs, 1024);
    a.guarded(thread0, [&]() {
      for (int64_t i = 0; i < kStages; ++i) {
        tmaOps.initBarrier(fullBar(a.c(i)), 1);
        tmaOps.initBarrier(emptyBar(a.c(i)), threads / 32);
      }
      tmaOps.fenceBarrierInit();
    });
    gpu::BarrierOp::create(b);
    // Every stage's first slice (none past K: no copy outlives the loop).
    a.guarded(thread0, [&]() {
      for (int64_t i = 0; i < std::min(kStages, slices); ++i)
        issueSlice(a.c(i), a.c(i));
    });
  } else {
    copySlice(a.c(0), a.c(0));
    copySlice(a.c(1), a.c(1));
  }
  // Loop state: the accumulators, then slice sl's stage (sl % kStages,
  // counted instead of divided).
  SmallVector<Value> init(tileN / 2, a.f(0.0));
  init.push_back(a.c(0));
  auto loop = scf::ForOp::create(b, a.c(0), a.c(slices), a.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    Value sl = loop.getInductionVar();
    ValueRange iter = loop.getRegionIterArgs();
    SmallVector<Value> acc(iter.drop_back());
    Value stage = iter.back();
    // Slice sl has landed (sl + 1 may be in flight), for every thread.
    Value descA, descB;
    int64_t stepA, stepB; // bytes per k16
    if (tma) {
      tmaOps.wait(fullBar(stage), phase(sl));
      // A (K-major): 8 rows per 1024 bytes, 16 k are 32 bytes of a row.
      // B (N-major): 8 k per 1024 bytes, LBO between 64-column blocks;
      // given as [N, K], K-major as A. (LBO is unused in the K-major
      // layout.)
      Value stageA = stageAddress(stage);
      descA = wg.swizzledDescriptor(offsetBy(stageA, a.mul(wgRow, 128)),
                                    /*lbo=*/16, /*sbo=*/1024);
      descB = wg.swizzledDescriptor(
          offsetBy(stageA, a.c(tmaABytes(t))),
          /*lbo=*/s.bTransposed ? 16 : kWideSlice * 128, /*sbo=*/1024);
      stepA = 32;
      stepB = s.bTransposed ? 32 : 16 * 128;
    } else {
      NVVM::CpAsyncWaitGroupOp::create(b, 1);
      wg.fenceSharedWrites();
      gpu::BarrierOp::create(b);
      // A: LBO 128 bytes along K, SBO 64 x 16 per 8 rows, the warpgroup's
      // 64 rows; B (N-major): SBO 128 bytes along N, LBO tileN x 16 per 8
      // rows of K; given as [N, K], K-major as A.
      Value aRows = a.add(a.mul(stage, tileM), wgRow);
      descA = wg.descriptor(as, a.mul(aRows, kWideSlice * 2),
                            /*lbo=*/128, /*sbo=*/kWideSlice * 16);
      Value bStage = a.mul(stage, kWideSlice * tileN * 2);
      descB = s.bTransposed ? wg.descriptor(bs, bStage, /*lbo=*/128,
                                            /*sbo=*/kWideSlice * 16)
                            : wg.descriptor(bs, bStage, /*lbo=*/tileN * 16,
                                            /*sbo=*/128);
      stepA = 256;
      stepB = s.bTransposed ? 256 : 2 * tileN * 16;
    }
    // (The chain of slice sl - 1 may still be in flight on the same
    // accumulators: wgmma orders them.) The accumulators are in registers
    // before the fence: their initial zeros are not materialised inside
    // the chain (ptxas would add a warpgroup.arrive).
    wg.pin(acc);
    wg.fence();
    for (int64_t kk = 0; kk < kWideSlice / 16; ++kk)
      wg.mma({wg.advance(descA, kk * stepA)}, wg.advance(descB, kk * stepB),
             /*transposeB=*/!s.bTransposed, /*accumulate=*/true, acc);
    wg.commit();
    // This slice's chain stays in flight while slice sl + 2 goes into the
    // stage of slice sl - 1, whose chain is done (in this warp).
    wg.wait(1);
    if (tma) {
      // Each warp releases that stage; thread 0 waits for all of them
      // (the other warps go on) and refills it. From slice 3 on; none
      // past K.
      if (slices > kStages) {
        Value prev = wrap(a.add(stage, kStages - 1));
        a.guarded(a.ult(a.add(sl, -1), slices - kStages), [&]() {
          a.guarded(a.ult(k.lane, 1), [&]() { tmaOps.arrive(emptyBar(prev)); });
          a.guarded(thread0, [&]() {
            tmaOps.wait(emptyBar(prev), phase(a.add(sl, -1)));
            issueSlice(a.add(sl, kStages - 1), prev);
          });
        });
      }
    } else {
      // Every warp's, before the copies.
      gpu::BarrierOp::create(b);
      copySlice(a.add(sl, 2), wrap(a.add(stage, 2)));
    }
    SmallVector<Value> yield = acc;
    yield.push_back(wrap(a.add(stage, 1)));
    scf::YieldOp::create(b, yield);
  }
  SmallVector<Value> acc(loop.getResults().drop_back());
  wg.wait(0);
  wg.pin(acc);
  addToC(a, s, k.C, lead, a.add(m0, a.mul(k.warp, 16)), n0, k.lane, acc, tileN);
  gpu::ReturnOp::create(b);
  return k.func;
}

/// The K loop of the register-staged GEMM kernels: slices of `slice`
/// columns of A / rows of B staged in shared memory (`as` [tileM][..],
/// `bs` [slice][..]), the next slice loaded into registers while
/// `multiply` adds the current one's products to the accumulators (`acc`
/// holds their initial values). `paddedRows`: the tiles' rows are padded
/// by 16 bytes. With s.bTransposed, B's tile is [tileN][slice] of B as
/// given ([N, K]). Returns the accumulators.
SmallVector<Value>
stagedKLoop(Arith &a, const GemmShape &s, const GemmKernel &k,
            const GemmTiling &t, int64_t slice, int64_t aWidth, int64_t bWidth,
            bool paddedRows, SmallVector<Value> acc,
            llvm::function_ref<void(SmallVectorImpl<Value> &)> multiply) {
  ImplicitLocOpBuilder &b = a.b;
  // Chunks of 16 bytes in warp blocks where the rows are padded by them.
  bool blocks = paddedRows && aWidth * s.t.getIntOrFloatBitWidth() == 128;
  TileLayout aLayout{t.tileM, slice, aWidth, t.threads, false, false, blocks};
  blocks = paddedRows && bWidth * s.t.getIntOrFloatBitWidth() == 128;
  // The f32 kernel stores a tile of B as [N, K] transposed into its
  // [slice][tileN] tile, its 16-byte chunks in paired rows (a warp reads
  // 16 rows of 32 bytes: whole sectors; its 4-byte stores of one k fall in
  // 32 banks: TileLayout::pairedRows), else along K's rows (a warp's 4
  // chunks of a row would store 4 to a bank).
  bool storeTransposed = s.bTransposed && s.t.isF32();
  TileLayout bLayout =
      s.bTransposed
          ? TileLayout{t.tileN,
                       slice,
                       bWidth,
                       t.threads,
                       /*rowsFastest=*/storeTransposed && bWidth == 4,
                       false,
                       blocks && !storeTransposed}
          : TileLayout{slice, t.tileN, bWidth, t.threads, false, false, blocks};
  auto loadA = [&](Value k0) {
    return loadTile(a, k.A, k.lead, k.m0, s.m, k0, s.k, s.k % slice != 0,
                    aLayout, k.tid);
  };
  auto loadB = [&](Value k0) {
    if (s.bTransposed) // [N, K]: a tile of tileN rows, slice columns
      return loadTile(a, k.B, k.lead, k.n0, s.n, k0, s.k, s.k % slice != 0,
                      bLayout, k.tid);
    return loadTile(a, k.B, k.lead, k0, s.k, k.n0, s.n, s.n % t.tileN != 0,
                    bLayout, k.tid);
  };
  TileChunks aFirst = loadA(a.c(0)), bFirst = loadB(a.c(0));
  size_t numAcc = acc.size(), aCount = aFirst.values.size();
  SmallVector<Value> init = acc;
  init.append(aFirst.values.begin(), aFirst.values.end());
  init.append(bFirst.values.begin(), bFirst.values.end());
  int64_t slices = (s.k + slice - 1) / slice;
  auto loop = scf::ForOp::create(b, a.c(0), a.c(slices), a.c(1), init);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(loop.getBody());
    ValueRange iter = loop.getRegionIterArgs();
    SmallVector<Value> sum(iter.begin(), iter.begin() + numAcc);
    TileChunks aTile = aFirst, bTile = bFirst;
    aTile.values.assign(iter.begin() + numAcc, iter.begin() + numAcc + aCount);
    bTile.values.assign(iter.begin() + numAcc + aCount, iter.end());

    gpu::BarrierOp::create(b);
    storeTile(a, aTile, k.tiles[0], /*transpose=*/false, k.tid);
    storeTile(a, bTile, k.tiles[1], storeTransposed, k.tid);
    gpu::BarrierOp::create(b);
    // The last slice prefetches itself again: never past the end of A.
    Value next =
        a.mul(a.umin(a.add(loop.getInductionVar(), 1), slices - 1), slice);
    TileChunks aNext = loadA(next), bNext = loadB(next);
    multiply(sum);
    sum.append(aNext.values.begin(), aNext.values.end());
    sum.append(bNext.values.begin(), bNext.values.end());
    scf::YieldOp::create(b, sum);
  }
  return SmallVector<Value>(loop.getResults().take_front(numAcc));
}

gpu::GPUFuncOp buildGemmKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                               StringRef name, const GemmShape &s,
                               TypeRange args) {
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  MmaOps ops{a, s.t};
  // Rows padded by 16 bytes: the 8 row addresses of an ldmatrix fall in
  // different banks.
  GemmTiling t = gemmTiling(s, /*wide=*/false);
  // B given as [N, K]: its tile is [64 of N][32 of K], as A's.
  GemmKernel k =
      beginGemmKernel(builder, module, name, s, args,
                      {sharedTile(s.t, kTile, kSlice + 8),
                       s.bTransposed ? sharedTile(s.t, kTile, kSlice + 8)
                                     : sharedTile(s.t, kSlice, kTile + 8)},
                      t, b, a);
  Value as = k.tiles[0], bs = k.tiles[1], warp = k.warp, lane = k.lane;

  // A [64 rows of M][32 of K]; B [32 of K][64 of N].
  constexpr int64_t kNTiles = kTile / 8;
  int64_t bWidth =
      (s.bTransposed ? s.k : s.n) % 8 == 0 ? 8 : 2; // along B's rows
  SmallVector<Value> res = stagedKLoop(
      a, s, k, t, kSlice, s.k % 8 == 0 ? 8 : 2, bWidth,
      /*paddedRows=*/true, SmallVector<Value>(kNTiles * 4, a.f(0.0)),
      [&](SmallVectorImpl<Value> &sum) {
        SmallVector<SmallVector<Value>> acc(kNTiles);
        for (int64_t nt = 0; nt < kNTiles; ++nt)
          acc[nt].assign(sum.begin() + 4 * nt, sum.begin() + 4 * nt + 4);
        // Lane l addresses row l % 8 of 8x8 matrix l / 8 of an x4 load.
        // A: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7,
        // k 8-15), (rows 8-15, k 8-15) of the warp's 16 rows: registers
        // a0..a3. B [k][n] transposed: matrices (k 0-7, n tile nt), (k
        // 8-15, nt), (k 0-7, nt + 1), (k 8-15, nt + 1): b0 b1 of tile nt,
        // then of nt + 1.
        Value quarter = a.div(lane, 8);
        Value aRow = a.add(a.add(a.mul(warp, 16), a.mul(a.rem(quarter, 2), 8)),
                           a.rem(lane, 8));
        for (int64_t kk = 0; kk < kSlice / 16; ++kk) {
          Value aCol = a.add(a.mul(a.div(quarter, 2), 8), kk * 16);
          SmallVector<Value> aFrag =
              ops.loadMatrices(as, aRow, aCol, 4, /*transpose=*/false);
          Value bRow = a.add(a.add(a.rem(lane, 8), kk * 16),
                             a.mul(a.rem(quarter, 2), 8));
          for (int64_t nt = 0; nt < kNTiles; nt += 2) {
            Value bCol = a.mul(a.add(a.div(lane, 16), nt), 8);
            // B as [n][k]: the same matrices without .trans, lane l
            // addressing row n = (nt + l / 16) * 8 + l % 8 at k = kk * 16
            // + 8 (l / 8 % 2): a row of Bᵀ holds a fragment's k pairs.
            SmallVector<Value> bFrag =
                s.bTransposed
                    ? ops.loadMatrices(
                          bs, a.add(bCol, a.rem(lane, 8)),
                          a.add(a.mul(a.rem(quarter, 2), 8), kk * 16), 4,
                          /*transpose=*/false)
                    : ops.loadMatrices(bs, bRow, bCol, 4, /*transpose=*/true);
            ops.mma(aFrag, {bFrag[0], bFrag[1]}, acc[nt]);
            ops.mma(aFrag, {bFrag[2], bFrag[3]}, acc[nt + 1]);
          }
        }
        sum.clear();
        for (auto &tile : acc)
          sum.append(tile.begin(), tile.end());
      });
  addToC(a, s, k.C, k.lead, a.add(k.m0, a.mul(warp, 16)), k.n0, lane, res,
         kTile);
  gpu::ReturnOp::create(b);
  return k.func;
}

/// f32: 64x64 tiles of C per block of 256 threads, 4x4 of them per thread
/// (rows 4 (tid / 16).., columns 4 (tid % 16)..), K in slices of 16 staged
/// as the mma.sync kernel's, f32 FMA: f32 results keep f32 accuracy. A
/// thread reads 4 k of a row of A as one 16-byte load, which its
/// half-warp shares (the two rows a warp reads, 64 words apart, would meet
/// in a bank as 4-byte loads).
gpu::GPUFuncOp buildFmaGemmKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                  StringRef name, const GemmShape &s,
                                  TypeRange args) {
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  GemmTiling t = gemmTiling(s, /*wide=*/false);
  GemmKernel k = beginGemmKernel(
      builder, module, name, s, args,
      {sharedTile(s.t, kTile, kFmaSlice), sharedTile(s.t, kFmaSlice, kTile)}, t,
      b, a);
  Value as = k.tiles[0], bs = k.tiles[1];
  Value row0 = a.mul(a.div(k.tid, 16), 4), col0 = a.mul(a.rem(k.tid, 16), 4);
  auto rowOf = [&](int64_t r) { return a.add(row0, r); };
  int64_t bWidth = (s.bTransposed ? s.k : s.n) % 4 == 0 ? 4 : 1;
  // B as [N, K] in 16-byte chunks: stored in paired rows, the rows k of
  // every second chunk (4..7 of each 8) with their columns swizzled.
  bool swizzled = s.bTransposed && bWidth == 4;
  Value swizzledCol0 = arith::XOrIOp::create(b, col0, a.c(16));
  SmallVector<Value> res = stagedKLoop(
      a, s, k, t, kFmaSlice, s.k % 4 == 0 ? 4 : 1, bWidth,
      /*paddedRows=*/false, SmallVector<Value>(16, a.f(0.0)),
      [&](SmallVectorImpl<Value> &acc) {
        for (int64_t kq = 0; kq < kFmaSlice; kq += 4) {
          // A's 4 rows at columns kq..kq + 3, a 16-byte load each (the
          // same for the 16 threads of a row group: broadcast).
          SmallVector<Value> av;
          for (int64_t r = 0; r < 4; ++r)
            av.push_back(vector::LoadOp::create(
                b, VectorType::get({4}, s.t), as, ValueRange{rowOf(r), a.c(kq)},
                false, llvm::MaybeAlign(16)));
          for (int64_t kk = kq; kk < kq + 4; ++kk) {
            // B's 4 columns at row kk in one vector.
            Value bCol = swizzled && kk / 4 % 2 ? swizzledCol0 : col0;
            Value bv = vector::LoadOp::create(b, VectorType::get({4}, s.t), bs,
                                              ValueRange{a.c(kk), bCol}, false,
                                              llvm::MaybeAlign(16));
            for (int64_t r = 0; r < 4; ++r) {
              Value x = vector::ExtractOp::create(b, av[r],
                                                  ArrayRef<int64_t>{kk - kq});
              for (int64_t c = 0; c < 4; ++c) {
                Value bc =
                    vector::ExtractOp::create(b, bv, ArrayRef<int64_t>{c});
                acc[4 * r + c] = a.fma(x, bc, acc[4 * r + c]);
              }
            }
          }
        }
      });
  // C += the accumulators (C = them: !s.accumulate), inside the matrix:
  // where N is a multiple of 4, a thread's 4 columns of a row as one
  // 16-byte access (16 threads write 256 contiguous bytes: whole sectors,
  // where element by element each store would touch 4 times as many).
  Type cType = cast<MemRefType>(k.C.getType()).getElementType();
  for (int64_t r = 0; r < 4; ++r) {
    Value row = a.add(k.m0, rowOf(r));
    a.guarded(a.ult(row, s.m), [&]() {
      if (s.n % 4 == 0) {
        Value col = a.add(k.n0, col0);
        a.guarded(s.n % kTile == 0 ? Value() : a.ult(col, s.n), [&]() {
          SmallVector<Value> idx(k.lead);
          idx.append({row, col});
          VectorType vt = VectorType::get({4}, cType);
          Value v = vector::FromElementsOp::create(
              b, vt, ArrayRef(res).slice(4 * r, 4));
          if (s.accumulate)
            v = a.fadd(vector::LoadOp::create(b, vt, k.C, idx, false,
                                              llvm::MaybeAlign(16)),
                       v);
          vector::StoreOp::create(b, v, k.C, idx, false, llvm::MaybeAlign(16));
        });
        return;
      }
      for (int64_t c = 0; c < 4; ++c) {
        Value col = a.add(a.add(k.n0, col0), c);
        a.guarded(s.n % kTile == 0 ? Value() : a.ult(col, s.n), [&]() {
          SmallVector<Value> idx(k.lead);
          idx.append({row, col});
          Value v = res[4 * r + c];
          if (s.accumulate)
            v = a.fadd(memref::LoadOp::create(b, k.C, idx), v);
          memref::StoreOp::create(b, v, k.C, idx);
        });
      }
    });
  }
  gpu::ReturnOp::create(b);
  return k.func;
}

} // namespace

bool gemmGridFits(const GemmShape &s) {
  return (s.m + kTile - 1) / kTile <= 65535 &&
         s.batch * ((s.n + kTile - 1) / kTile) <= 2147483647;
}

KernelLaunch buildMatmulKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                               StringRef name, const GemmShape &s,
                               TypeRange buffers, bool wgmma, bool tma) {
  bool gemv = useGemv(s), wide = !gemv && useWgmma(s, wgmma),
       maps = wide && useTma(s, wgmma, tma);
  GemmTiling t = gemv ? gemvTiling(s) : gemmTiling(s, wide);
  KernelLaunch launch;
  if (maps)
    launch.tensorMaps.append(gemmTensorMaps(s, t));
  // TMA: the tensor maps' device addresses follow the buffers.
  SmallVector<Type> args(buffers);
  args.append(launch.tensorMaps.size(), builder.getI64Type());
  launch.kernel =
      gemv   ? buildGemvKernel(builder, module, name, s, args)
      : wide ? buildWgmmaGemmKernel(builder, module, name, s, args, t, maps)
      : s.t.isF32() ? buildFmaGemmKernel(builder, module, name, s, args)
                    : buildGemmKernel(builder, module, name, s, args);
  launch.gridX = s.batch * ((s.n + t.tileN - 1) / t.tileN);
  launch.gridY = (s.m + t.tileM - 1) / t.tileM;
  launch.blockX = t.threads;
  launch.dynamicSharedBytes = t.dynamicShared;
  return launch;
}

} // namespace tfc
