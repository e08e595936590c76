//===- Gemv.cpp - Matmul kernels for few rows of A ------------------------===//
//
// With few rows of A per batch (decode steps: up to 32 for an f16/bf16
// weight [N, K], on tensor cores; else up to 8, on CUDA cores), a GEMV
// kernel streams B once instead of the tiled GEMM kernels (Gemm.cpp).
//
//===----------------------------------------------------------------------===//

#include "Gemv.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

#include <algorithm>

using namespace mlir;

namespace tfc {
namespace {

/// Rows of A (per batch) up to which a matmul is a product with a few
/// vectors (a decode step's projections: a row per sequence): the GEMV
/// kernel, which streams B once with many loads in flight, instead of a
/// tiled kernel that would compute 64 rows and keep too few blocks busy.
/// On CUDA cores up to 8 (beyond, the FMA would cost more than B's bytes);
/// on tensor cores, where A's rows are the N of mma.sync m16n8k16 in
/// groups of 8, up to 32 (a batch of 32 sequences' decode step still reads
/// B at 32 flop a byte, well under what the tensor cores sustain).
constexpr int64_t kGemvRows = 8, kGemvMmaRows = 32;
/// The GEMV kernel's block: 4 warps; given B as [N, K], each warp takes 4
/// rows of it (columns of C).
constexpr int64_t kGemvThreads = 128, kGemvColsPerWarp = 4;
/// Given B as [K, N]: chunks of columns per block (2: a row of them is a
/// 32-byte sector where the chunks are 16 bytes), and rows of B per thread
/// and loop step (independent loads in flight).
constexpr int64_t kGemvChunks = 2, kGemvUnroll = 4;
/// The tensor-core GEMV's block: 8 warps splitting K; 32-k blocks per warp
/// and step (at most).
constexpr int64_t kGemvMmaThreads = 256, kGemvMmaUnroll = 4;

/// Whether the GEMV runs on tensor cores: f16/bf16 with B given as [N, K],
/// K in 16-byte chunks, up to kGemvMmaRows rows of A.
bool tensorCoreGemv(const GemmShape &s) {
  return !s.t.isF32() && s.bTransposed && s.k % 8 == 0 && s.m <= kGemvMmaRows;
}

/// The GEMV kernel's chunk along B's rows, in elements: 16 bytes, or the
/// widest power of two that divides the row.
int64_t gemvWidth(const GemmShape &s) {
  int64_t len = s.bTransposed ? s.k : s.n;
  int64_t width = 128 / s.t.getIntOrFloatBitWidth();
  while (len % width)
    width /= 2;
  return width;
}

/// C[m, col] (+)= v (f32), in C's element type.
void storeGemvResult(Arith &a, const GemmShape &s, const GemmKernel &k, Value m,
                     Value col, Value v) {
  ImplicitLocOpBuilder &b = a.b;
  a.guarded(s.n % gemvTiling(s).tileN == 0 ? Value() : a.ult(col, s.n), [&]() {
    SmallVector<Value> idx(k.lead);
    idx.append({m, col});
    if (s.accumulate)
      v = a.fadd(a.toF32(memref::LoadOp::create(b, k.C, idx)), v);
    memref::StoreOp::create(b, a.fromF32(v, s.acc), k.C, idx);
  });
}

/// The GEMV kernel being built: its frame, and the f32 element lists and
/// sum loops of its forms.
struct Gemv {
  const GemmShape &s;
  ImplicitLocOpBuilder &b;
  Arith &a;
  GemmTiling t;
  int64_t width, rows, rowGroups;
  GemmKernel k;

  /// The elements of a chunk of `width`, as f32.
  SmallVector<Value> elements(Value chunk) {
    SmallVector<Value> x;
    for (int64_t e = 0; e < width; ++e)
      x.push_back(
          a.toF32(vector::ExtractOp::create(b, chunk, ArrayRef<int64_t>{e})));
    return x;
  }
  /// An scf.for of `trips` steps carrying `accs` f32 sums from 0, `body`
  /// adding to them; returns the sums.
  SmallVector<Value>
  loop(int64_t trips, int64_t accs,
       llvm::function_ref<void(Value, SmallVectorImpl<Value> &)> body) {
    auto forOp = scf::ForOp::create(b, a.c(0), a.c(trips), a.c(1),
                                    SmallVector<Value>(accs, a.f(0.0)));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    SmallVector<Value> acc(forOp.getRegionIterArgs());
    body(forOp.getInductionVar(), acc);
    scf::YieldOp::create(b, acc);
    return SmallVector<Value>(forOp.getResults());
  }

  /// f16/bf16 with B given as [N, K]: on tensor cores.
  void onTensorCores();
  /// B given as [N, K], by FMA.
  void weightRows();
  /// B given as [K, N], by FMA.
  void columnChunks();
};

void Gemv::onTensorCores() {
  // Cᵀ = B·Aᵀ by mma.sync m16n8k16: B's 16 rows n0.. as the A operand,
  // A's rows in groups of 8 (the last one's missing rows zeros) as the B
  // operand of an mma each. The order of K within an mma is free as long
  // as both operands follow it: lane (g, t) loads the 16-byte chunks at
  // k = kb + 8t of B's rows g and g + 8 and of A's row g of each group,
  // and the first mma takes their elements 0-3 as k 2t, 2t + 1, 2t + 8,
  // 2t + 9 (the fragments' slots), the second elements 4-7: two mma per
  // group and 32 k, every operand one 16-byte load (a warp reads 64
  // contiguous bytes of each of 16 rows of B). The 8 warps take 32-k
  // blocks in turn, `unroll` of them per step (at most 12 chunks a
  // thread), the next step's loads issued before this step's mma
  // (carried in registers across the loop: in flight while the step
  // before multiplies), and add up through shared memory.
  MmaOps ops{a, s.t};
  Value g = a.div(k.lane, 4), t4 = a.rem(k.lane, 4);
  int64_t warps = t.threads / 32, kBlocks = (s.k + 31) / 32;
  int64_t perBlock = 2 + rowGroups; // chunks per 32-k block
  // The most 32-k blocks per warp and step (at most 12 chunks a thread,
  // no more than the warp's share of K) whose last step runs past K by
  // no more than a twentieth of K or the least any step can (lanes past
  // K load their row's last chunk again).
  auto waste = [&](int64_t u) {
    return (kBlocks + warps * u - 1) / (warps * u) * warps * u - kBlocks;
  };
  int64_t unroll = std::clamp<int64_t>((kBlocks + warps - 1) / warps, 1,
                                       kGemvMmaUnroll * 3 / perBlock);
  while (unroll > 1 && waste(unroll) > std::max(waste(1), kBlocks / 20))
    --unroll;
  int64_t perStep = warps * unroll * 32; // k per step, all warps
  int64_t steps = (s.k + perStep - 1) / perStep;
  bool tail = s.k % perStep != 0;
  // Per 32-k block: B's rows g and g + 8, then A's row g of each group.
  auto loadStep = [&](Value step) {
    SmallVector<Value> chunks;
    for (int64_t u = 0; u < unroll; ++u) {
      Value kb = a.mul(
          a.add(a.add(a.mul(step, warps * unroll), warps * u), k.warp), 32);
      Value kc = a.add(kb, a.mul(t4, 8)), row = a.add(k.n0, g);
      chunks.append(
          {loadRowChunk(a, k.B, k.lead, row, s.n, kc, s.k, 8, Value(), tail),
           loadRowChunk(a, k.B, k.lead, a.add(row, 8), s.n, kc, s.k, 8, Value(),
                        tail)});
      for (int64_t gi = 0; gi < rowGroups; ++gi) {
        Value aRow = a.add(g, 8 * gi);
        chunks.push_back(loadRowChunk(
            a, k.A, k.lead, aRow, s.m, kc, s.k, 8,
            8 * (gi + 1) > s.m ? a.ult(aRow, s.m) : Value(), tail));
      }
    }
    return chunks;
  };
  auto pair = [&](Value chunk, int64_t i) {
    return ops.operand(vector::ShuffleOp::create(
        b, chunk, chunk, ArrayRef<int64_t>{2 * i, 2 * i + 1}));
  };
  // acc[4 gi..]: group gi's C fragment.
  auto multiply = [&](ArrayRef<Value> chunks, SmallVectorImpl<Value> &acc) {
    for (int64_t u = 0; u < unroll; ++u) {
      Value w0 = chunks[perBlock * u], w1 = chunks[perBlock * u + 1];
      for (int64_t half = 0; half < 2; ++half) {
        SmallVector<Value> aFrag = {pair(w0, 2 * half), pair(w1, 2 * half),
                                    pair(w0, 2 * half + 1),
                                    pair(w1, 2 * half + 1)};
        for (int64_t gi = 0; gi < rowGroups; ++gi) {
          Value x = chunks[perBlock * u + 2 + gi];
          SmallVector<Value> fragment(acc.begin() + 4 * gi,
                                      acc.begin() + 4 * gi + 4);
          ops.mma(aFrag, {pair(x, 2 * half), pair(x, 2 * half + 1)}, fragment);
          std::copy(fragment.begin(), fragment.end(), acc.begin() + 4 * gi);
        }
      }
    }
  };
  int64_t accs = 4 * rowGroups;
  SmallVector<Value> acc(accs, a.f(0.0)), chunks = loadStep(a.c(0));
  if (steps > 1) {
    SmallVector<Value> init = acc;
    init.append(chunks);
    auto forOp = scf::ForOp::create(b, a.c(0), a.c(steps - 1), a.c(1), init);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(forOp.getBody());
    ValueRange iter = forOp.getRegionIterArgs();
    SmallVector<Value> next = loadStep(a.add(forOp.getInductionVar(), 1));
    SmallVector<Value> sum(iter.take_front(accs));
    multiply(SmallVector<Value>(iter.drop_front(accs)), sum);
    sum.append(next);
    scf::YieldOp::create(b, sum);
    b.setInsertionPointAfter(forOp);
    acc.assign(forOp.getResults().begin(), forOp.getResults().begin() + accs);
    chunks.assign(forOp.getResults().begin() + accs, forOp.getResults().end());
  }
  multiply(chunks, acc);
  // acc[4 gi + 2h + e]: Cᵀ row (column of C) g + 8h, column (row of A)
  // 8 gi + 2t + e.
  Value red = k.tiles[0];
  int64_t rows8 = 8 * rowGroups;
  for (int64_t gi = 0; gi < rowGroups; ++gi)
    for (int64_t r = 0; r < 4; ++r)
      memref::StoreOp::create(
          b, acc[4 * gi + r], red,
          ValueRange{
              a.add(a.add(a.mul(k.warp, rows8), a.mul(t4, 2)), 8 * gi + r % 2),
              a.add(g, r / 2 * 8)});
  gpu::BarrierOp::create(b);
  // Element i of the block's rows8 x 16: column n0 + i % 16 of row m of
  // C, the 8 warps' sums added (16 threads store 64 contiguous bytes of
  // a row of an f32 C), rows of A past M idle. Each 128 elements take 8
  // rows, a warp's two half-warps rows 4 apart (80 words: 16 banks on).
  int64_t outputs = t.tileN * rows8;
  for (int64_t base = 0; base < outputs; base += t.threads) {
    Value i = a.add(k.tid, base);
    Value m = a.add(a.add(a.mul(a.div(i, 128), 8), a.rem(a.div(i, 32), 4)),
                    a.mul(a.rem(a.div(i, 16), 2), 4));
    Value n = a.rem(i, t.tileN);
    Value active = base + t.threads <= outputs ? Value() : a.ult(i, outputs);
    if (rows < rows8)
      active = active ? a.andi(active, a.ult(m, rows)) : a.ult(m, rows);
    a.guarded(active, [&]() {
      Value sum = a.f(0.0);
      for (int64_t w = 0; w < warps; ++w)
        sum = a.fadd(sum, memref::LoadOp::create(
                              b, red, ValueRange{a.add(m, w * rows8), n}));
      storeGemvResult(a, s, k, m, a.add(k.n0, n), sum);
    });
  }
}

void Gemv::weightRows() {
  // acc[m * 4 + j]: row m of A by row col0 + j of B (rows past N are
  // clamped loads whose sums are not stored).
  Value col0 = a.add(k.n0, a.mul(k.warp, kGemvColsPerWarp));
  int64_t chunks = s.k / width;
  bool tail = chunks % 32 != 0;
  SmallVector<Value> acc = loop(
      (chunks + 31) / 32, rows * kGemvColsPerWarp,
      [&](Value step, SmallVectorImpl<Value> &acc) {
        Value kc = a.mul(a.add(a.mul(step, 32), k.lane), width);
        SmallVector<SmallVector<Value>> w;
        for (int64_t j = 0; j < kGemvColsPerWarp; ++j)
          w.push_back(elements(loadRowChunk(a, k.B, k.lead, a.add(col0, j), s.n,
                                            kc, s.k, width, Value(), tail)));
        for (int64_t m = 0; m < rows; ++m) {
          SmallVector<Value> x = elements(loadRowChunk(
              a, k.A, k.lead, a.c(m), s.m, kc, s.k, width, Value(), tail));
          for (int64_t j = 0; j < kGemvColsPerWarp; ++j)
            for (int64_t e = 0; e < width; ++e)
              acc[m * kGemvColsPerWarp + j] =
                  a.fma(x[e], w[j][e], acc[m * kGemvColsPerWarp + j]);
        }
      });
  for (Value &x : acc)
    x = a.butterfly(x, 1, 32, /*isMax=*/false);
  a.guarded(a.ult(k.lane, 1), [&]() {
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t j = 0; j < kGemvColsPerWarp; ++j)
        storeGemvResult(a, s, k, a.c(m), a.add(col0, j),
                        acc[m * kGemvColsPerWarp + j]);
  });
}

void Gemv::columnChunks() {
  // acc[m * width + e]: row m of A by column col + e of B, over this
  // thread's rows of B.
  Value chunk = a.rem(k.tid, kGemvChunks), group = a.div(k.tid, kGemvChunks);
  Value col = a.add(k.n0, a.mul(chunk, width));
  int64_t groups = kGemvThreads / kGemvChunks, perStep = groups * kGemvUnroll;
  bool tail = s.k % perStep != 0;
  SmallVector<Value> acc =
      loop((s.k + perStep - 1) / perStep, rows * width,
           [&](Value step, SmallVectorImpl<Value> &acc) {
             for (int64_t u = 0; u < kGemvUnroll; ++u) {
               Value kr = a.add(a.add(a.mul(step, perStep), u * groups), group);
               Value valid = tail ? a.ult(kr, s.k) : Value();
               SmallVector<Value> w =
                   elements(loadRowChunk(a, k.B, k.lead, kr, s.k, col, s.n,
                                         width, valid, s.n % t.tileN != 0));
               for (int64_t m = 0; m < rows; ++m) {
                 SmallVector<Value> idx(k.lead);
                 idx.append({a.c(m), tail ? a.umin(kr, s.k - 1) : kr});
                 Value x = a.toF32(memref::LoadOp::create(b, k.A, idx));
                 // Past K, B's zeros must not meet an infinite element of A.
                 if (valid)
                   x = a.sel(valid, x, a.f(0.0));
                 for (int64_t e = 0; e < width; ++e)
                   acc[m * width + e] = a.fma(x, w[e], acc[m * width + e]);
               }
             }
           });
  for (Value &x : acc)
    x = a.butterfly(x, kGemvChunks, 32, /*isMax=*/false);
  Value red = k.tiles[0];
  a.guarded(a.ult(k.lane, kGemvChunks), [&]() {
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t e = 0; e < width; ++e)
        memref::StoreOp::create(b, acc[m * width + e], red,
                                ValueRange{a.add(a.mul(k.warp, rows), m),
                                           a.add(a.mul(chunk, width), e)});
  });
  gpu::BarrierOp::create(b);
  // Thread i < rows x tileN: element (i / tileN, i % tileN), the 4 warps'
  // sums added.
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t base = 0; base < t.tileN; base += kGemvThreads) {
      Value n = a.add(k.tid, base);
      a.guarded(
          base + kGemvThreads <= t.tileN ? Value() : a.ult(n, t.tileN), [&]() {
            Value sum = a.f(0.0);
            for (int64_t w = 0; w < 4; ++w)
              sum = a.fadd(sum, memref::LoadOp::create(
                                    b, red, ValueRange{a.c(w * rows + m), n}));
            storeGemvResult(a, s, k, a.c(m), a.add(k.n0, n), sum);
          });
    }
  }
}

} // namespace

GemmTiling gemvTiling(const GemmShape &s) {
  return {s.m,
          s.bTransposed ? kGemvThreads / 32 * kGemvColsPerWarp
                        : kGemvChunks * gemvWidth(s),
          tensorCoreGemv(s) ? kGemvMmaThreads : kGemvThreads};
}

bool useGemv(const GemmShape &s) {
  int64_t tileN = gemvTiling(s).tileN;
  return (s.m <= kGemvRows || tensorCoreGemv(s)) &&
         s.batch * ((s.n + tileN - 1) / tileN) <= 2147483647;
}

gpu::GPUFuncOp buildGemvKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                               StringRef name, const GemmShape &s,
                               TypeRange args) {
  ImplicitLocOpBuilder b(module.getLoc(), builder);
  Arith a{b};
  GemmTiling t = gemvTiling(s);
  int64_t width = gemvWidth(s), rows = s.m;
  SmallVector<MemRefType> tiles;
  // Tensor cores: A's rows in groups of 8; each warp's sums [8 groups][16
  // columns of C], rows padded to 20 words (a warp's stores of one
  // register, rows 2t of its 8 columns g, fall at 40t + g: 32 banks).
  int64_t rowGroups = (rows + 7) / 8;
  if (tensorCoreGemv(s))
    tiles.push_back(
        sharedTile(b.getF32Type(), t.threads / 32 * 8 * rowGroups, 20));
  else if (!s.bTransposed)
    tiles.push_back(sharedTile(b.getF32Type(), 4 * rows, t.tileN));
  GemmKernel k =
      beginGemmKernel(builder, module, name, s, args, tiles, t, b, a);
  Gemv gemv{s, b, a, t, width, rows, rowGroups, k};
  if (tensorCoreGemv(s))
    gemv.onTensorCores();
  else if (s.bTransposed)
    gemv.weightRows();
  else
    gemv.columnChunks();
  gpu::ReturnOp::create(b);
  return k.func;
}

} // namespace tfc
