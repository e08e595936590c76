//===- KernelBuilder.h - Building GPU kernels in MLIR -----------*- C++ -*-===//
//
// The pieces tfc's hand-built GPU kernels share: index and float arithmetic
// on an implicit-location builder, guarded chunk loads from global memory,
// tiles staged through shared memory by a whole block, and the mma.sync
// m16n8k16 fragments of f16/bf16 tensor cores.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_CODEGEN_NVPTX_KERNELBUILDER_H
#define TFC_CODEGEN_NVPTX_KERNELBUILDER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

#include <limits>

namespace tfc {

using mlir::ArrayRef;
using mlir::ImplicitLocOpBuilder;
using mlir::SmallVector;
using mlir::SmallVectorImpl;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;

inline int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// log2(e): the kernels' exponentials are exp2 of arguments scaled by it.
constexpr double kLog2e = 1.4426950408889634;

/// Index and float arithmetic on an implicit-location builder.
struct Arith {
  ImplicitLocOpBuilder &b;

  Value c(int64_t v) { return mlir::arith::ConstantIndexOp::create(b, v); }
  Value f(double v) {
    return mlir::arith::ConstantFloatOp::create(
        b, b.getF32Type(), mlir::APFloat(static_cast<float>(v)));
  }
  Value negInf() {
    return mlir::arith::ConstantFloatOp::create(
        b, b.getF32Type(),
        mlir::APFloat::getInf(mlir::APFloat::IEEEsingle(), /*Negative=*/true));
  }
  Value add(Value x, Value y) { return mlir::arith::AddIOp::create(b, x, y); }
  Value add(Value x, int64_t y) { return y ? add(x, c(y)) : x; }
  Value mul(Value x, int64_t y) {
    return y == 1 ? x : mlir::arith::MulIOp::create(b, x, c(y)).getResult();
  }
  Value div(Value x, int64_t y) {
    return y == 1 ? x : mlir::arith::DivUIOp::create(b, x, c(y)).getResult();
  }
  Value rem(Value x, int64_t y) {
    return mlir::arith::RemUIOp::create(b, x, c(y));
  }
  Value umin(Value x, int64_t y) {
    return mlir::arith::MinUIOp::create(b, x, c(y));
  }
  Value ult(Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, mlir::arith::CmpIPredicate::ult, x,
                                       y);
  }
  Value ult(Value x, int64_t y) { return ult(x, c(y)); }
  /// Signed: a causal limit row + (Skv - Sq) is negative for the first
  /// rows when Sq > Skv.
  Value sle(Value x, Value y) {
    return mlir::arith::CmpIOp::create(b, mlir::arith::CmpIPredicate::sle, x,
                                       y);
  }
  Value andi(Value x, Value y) { return mlir::arith::AndIOp::create(b, x, y); }
  Value sel(Value cond, Value x, Value y) {
    return mlir::arith::SelectOp::create(b, cond, x, y);
  }
  Value fadd(Value x, Value y) { return mlir::arith::AddFOp::create(b, x, y); }
  Value fsub(Value x, Value y) { return mlir::arith::SubFOp::create(b, x, y); }
  Value fmul(Value x, Value y) { return mlir::arith::MulFOp::create(b, x, y); }
  Value fma(Value x, Value y, Value z) {
    return mlir::math::FmaOp::create(b, x, y, z);
  }
  Value fmax(Value x, Value y) {
    return mlir::arith::MaxNumFOp::create(b, x, y);
  }
  Value exp2(Value x) { return mlir::math::Exp2Op::create(b, x); }
  /// 2^x (f32) by one ex2.approx.ftz: subnormal inputs and results are
  /// flushed to zero. Plain ex2.approx.f32 keeps them, which ptxas pays
  /// for with 3 more instructions around each MUFU.EX2 (a compare, a
  /// halving and a conditional square).
  Value exp2FlushSubnormals(Value x);
  /// tanh(x) (f32) in the CPU kernels' form (simd.h vtanh): x clamped to
  /// +-7.90531, then x * P(x^2) / Q(x^2), within 3e-7 of tanh.
  Value tanh(Value x);
  Value isNegInf(Value x) {
    return mlir::arith::CmpFOp::create(b, mlir::arith::CmpFPredicate::OEQ, x,
                                       negInf());
  }
  Value toF32(Value x) {
    return x.getType().isF32()
               ? x
               : mlir::arith::ExtFOp::create(b, b.getF32Type(), x).getResult();
  }
  Value fromF32(Value x, Type t) {
    return t.isF32() ? x : mlir::arith::TruncFOp::create(b, t, x).getResult();
  }
  /// 1 / x for a positive row sum, 0 for a row that saw no key.
  /// (A NaN sum stays NaN.)
  Value inverseOrZero(Value x) {
    Value zero = mlir::arith::CmpFOp::create(b, mlir::arith::CmpFPredicate::OEQ,
                                             x, f(0.0));
    return sel(zero, f(0.0),
               mlir::arith::DivFOp::create(b, f(1.0), x).getResult());
  }
  /// x * log2(e), kept finite when x is: a large finite value (a framework's
  /// finfo.min mask, say) must not become an infinity, which would hide a
  /// key that only -inf may hide.
  Value toLog2Domain(Value x, Value log2e) {
    Value y = fmul(x, log2e);
    Value big = f(3.4028234663852886e38);
    Value clamped = mlir::arith::MaximumFOp::create(
        b, mlir::arith::MinimumFOp::create(b, y, big), fsub(f(0.0), big));
    Value finite = mlir::arith::CmpFOp::create(
        b, mlir::arith::CmpFPredicate::ONE, mlir::math::AbsFOp::create(b, x),
        f(std::numeric_limits<float>::infinity()));
    return sel(finite, clamped, y);
  }
  /// Emits `body` under `if (cond)`, or unconditionally when `cond` is null.
  void guarded(Value cond, llvm::function_ref<void()> body) {
    if (!cond)
      return body();
    auto ifOp = mlir::scf::IfOp::create(b, cond, /*withElseRegion=*/false);
    mlir::OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(&ifOp.getThenRegion().front());
    body();
  }
  /// Butterfly over the `lanes` lowest lanes of each group (xor 1, 2, ...).
  Value quadReduce(Value x, int lanes, bool isMax) {
    return butterfly(x, 1, lanes, isMax);
  }
  /// Butterfly over lanes `first` apart and more (xor first, 2 first, ...,
  /// below `end`): the lanes with the same index modulo `first` combine.
  Value butterfly(Value x, int first, int end, bool isMax) {
    for (int offset = first; offset < end; offset *= 2) {
      Value other = mlir::gpu::ShuffleOp::create(b, x, offset, 32,
                                                 mlir::gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      x = isMax ? fmax(x, other) : fadd(x, other);
    }
    return x;
  }
};

/// Loads `width` consecutive elements at [lead..., row, col] of a dense
/// tensor whose last two dimensions are [rows, cols], as one vector aligned
/// to its size; zeros where the row (`rowValid` false) or the columns are
/// out of range. The row is clamped so that the load itself stays inside.
Value loadRowChunk(Arith &a, Value tensor, ValueRange lead, Value row,
                   int64_t rows, Value col, int64_t cols, int64_t width,
                   Value rowValid, bool colsMayOverflow);

/// The attention mask's element for (b, h, row, key) as f32: `dims` are
/// the mask's 4 dimensions, each 1 (broadcast: index 0) or full.
Value maskValue(Arith &a, Value mask, ArrayRef<int64_t> dims, Value b, Value h,
                Value row, Value key);

/// The f16/bf16 tensor-core operations of mma.sync m16n8k16 (f32
/// accumulation). Fragment layouts (PTX ISA, g = lane / 4, t = lane % 4):
/// A regs {row g, k 2t..2t+1}, {g+8, 2t}, {g, 2t+8}, {g+8, 2t+8}; B regs
/// {k 2t..2t+1, n g}, {k 2t+8.., n g}; C {row g, n 2t..2t+1}, {g+8, ..}.
struct MmaOps {
  Arith &a;
  Type t; // f16 or bf16

  /// A pair of elements as an mma operand: vector<2xf16>, or the i32 that
  /// holds two bf16.
  Value operand(Value pair);
  Value pairFromF32(Value x, Value y);
  /// Two consecutive elements of a shared-memory row.
  Value sharedPair(Value smem, Value row, Value col);
  /// ldmatrix.x`count` (count 2 or 4) from a shared-memory tile, lane l
  /// giving the address [row, col] of row l % 8 of matrix l / 8 (16-byte
  /// aligned); `transpose` loads each 8x8 matrix transposed. Returns the
  /// `count` registers as mma operands: thread T gets (row T / 4, columns
  /// 2 (T % 4) and +1) of each matrix, or with `transpose` (rows 2 (T % 4)
  /// and +1, column T / 4).
  SmallVector<Value> loadMatrices(Value smem, Value row, Value col,
                                  int64_t count, bool transpose);
  /// acc += A·B on one m16n8k16 tile; `acc` holds c0..c3.
  void mma(ArrayRef<Value> aFrag, ArrayRef<Value> bFrag,
           SmallVectorImpl<Value> &acc);
};

/// Hopper's warpgroup MMA (wgmma, sm_90a) for f16/bf16 with f32
/// accumulation: D[64][N] (+)= A[64][16]·B[16][N], issued by the 4 warps of
/// a warpgroup, asynchronously. A comes from registers: warp w of the group
/// holds rows 16w.. as the A fragment of mma.sync m16n8k16. B comes from
/// shared memory through a descriptor, in the layout without swizzle: 8x8
/// core matrices of 8 rows of 16 bytes, 128 contiguous bytes each, LBO bytes
/// apart along K and SBO bytes apart along N. D: register 4i + j of a
/// thread holds row 16w + lane/4 + 8 (j/2), column 8i + 2 (lane%4) + j%2,
/// the C fragments of mma.sync side by side.
struct WgmmaOps {
  Arith &a;
  Type t; // f16 or bf16

  /// The descriptor of a shared-memory operand starting at byte `offset` of
  /// `smem` (16-byte aligned).
  Value descriptor(Value smem, Value offset, int64_t lbo, int64_t sbo);
  /// The descriptor of an operand at shared address `addr` (i32) in the
  /// 128-byte swizzled layout TMA writes: rows of 128 bytes (64 elements)
  /// whose 16-byte chunks are permuted by the row's index in its group of 8
  /// (groups 1024-byte aligned). K-major: row n holds element (n, k); SBO
  /// bytes between groups of 8 rows; `addr` moves 32 bytes per 16 k. N-major
  /// (transposed): row k holds element (n, k) for 64 n; SBO bytes between
  /// groups of 8 k, LBO between blocks of 64 n.
  Value swizzledDescriptor(Value addr, int64_t lbo, int64_t sbo);
  /// The descriptor of the operand `bytes` (a multiple of 16) further on
  /// (shared memory addresses stay below 2^18: no carry out of the field).
  Value advance(Value desc, int64_t bytes);
  /// Issues acc = A·B (+ acc with `accumulate`) for N = acc.size() * 2
  /// columns; `aFrag` holds the 4 A registers as mma operands, or A's
  /// descriptor (one i64: A K-major in shared memory); B is K-major
  /// (element (n, k) in row n of a core matrix), or with `transposeB`
  /// N-major (element (n, k) in row k). The results are valid only after
  /// commit() and wait().
  void mma(ArrayRef<Value> aFrag, Value descB, bool transposeB, bool accumulate,
           SmallVectorImpl<Value> &acc);
  /// Orders register accesses before the wgmma that follow it.
  void fence();
  /// Orders this thread's completed writes to shared memory (cp.async
  /// included, after its wait) before wgmma's reads, which go through the
  /// async proxy: before the barrier that publishes a tile.
  void fenceSharedWrites();
  /// Closes the wgmma issued since the last commit into a group.
  void commit();
  /// Waits until at most `pending` groups are in flight.
  void wait(int64_t pending);
  /// Replaces `values` (f32 or i32) by the same values out of an empty asm
  /// statement with side effects: instructions that use the new ones stay
  /// after a preceding wait (for accumulators) and their producers stay
  /// before a following fence, whatever LLVM schedules.
  void pin(SmallVectorImpl<Value> &values);
  /// An A operand (vector<2xf16> or i32) as the i32 register wgmma takes.
  Value asI32(Value operand);
};

/// Hopper's tensor memory accelerator (TMA, sm_90): one thread copies a
/// whole box of a tensor from global to shared memory, described by a
/// tensor map (CUtensorMap, 128 bytes in device memory, made on the host by
/// the runtime's tfc_gpu_tensor_map); the bytes it writes count towards
/// the transaction count of an mbarrier, whose phase completes once the
/// expected arrivals and bytes are in. Addresses are shared-memory addresses
/// (i32); barriers are 8-byte words of shared memory.
struct TmaOps {
  Arith &a;

  /// The shared-memory address (i32) of the first element of `smem`.
  Value sharedAddress(Value smem);
  /// The same, rounded up to a multiple of `align` (a power of two): TMA's
  /// swizzled stages are 1024-byte aligned.
  Value alignedAddress(Value smem, int64_t align);
  /// An index as the i32 that addresses and coordinates are.
  Value toI32(Value index);
  /// Shared address `address` (i32) plus `bytes` (index).
  Value offsetBy(Value address, Value bytes);
  /// mbarrier.init: phase 0, `count` arrivals per phase.
  void initBarrier(Value bar, int64_t count);
  /// Makes the initialised barriers visible to the other threads' and the
  /// copy engine's operations on them (before the block's barrier).
  void fenceBarrierInit();
  /// mbarrier.arrive: one arrival on `bar`.
  void arrive(Value bar);
  /// mbarrier.arrive.expect_tx: the current phase also waits for `bytes`
  /// (i32) of copies, then this thread arrives.
  void arriveExpectTx(Value bar, Value bytes);
  /// Waits until the phase of parity `parity` (i32, 0 or 1) of `bar` has
  /// completed (mbarrier.try_wait.parity in a loop).
  void wait(Value bar, Value parity);
  /// cp.async.bulk.tensor.3d: the box of tensor map `map` (i64, its device
  /// address) at `coords` (3 x i32, innermost first; out-of-bound elements
  /// read as zero) into shared memory at `dst`, completing on `bar`.
  void load3d(Value dst, Value map, ArrayRef<Value> coords, Value bar);
};

/// bar.sync `id` (1-15; 0 is the block barrier), `threads`: waits until
/// `threads` threads (whole warps) have arrived at named barrier `id`, by
/// bar.sync or bar.arrive. (Immediate ids: with a register, ptxas reserves
/// all 16 barriers.)
void namedBarrierSync(Arith &a, int64_t id, int64_t threads);
/// bar.arrive: counts this warp's arrival at named barrier `id` without
/// waiting.
void namedBarrierArrive(Arith &a, int64_t id, int64_t threads);
/// setmaxnreg (sm_90a): the executing warpgroup (all its threads, with the
/// same count) lowers its registers per thread to `count`, returning the
/// rest to the block's pool, or raises them, waiting until the pool has
/// them. `count`: 24 to 256, a multiple of 8.
void setMaxRegisters(Arith &a, int64_t count, bool increase);

/// A [tileRows, tileCols] window of a tensor's last two dimensions, staged
/// through shared memory by `threads` threads in chunks of `width`
/// elements (16 bytes when the rows allow, else pairs).
struct TileLayout {
  int64_t tileRows, tileCols, width, threads;
  /// Consecutive chunks walk down a column of chunks instead of along a
  /// row. For tiles stored transposed: the 32 lanes of a warp then write 32
  /// different rows of the transposed tile, which fall in 16 different
  /// banks (along a row, every chunk's elements would land in one bank).
  bool rowsFastest = false;
  /// Stored as wgmma's 8x8 core matrices (16-byte chunks only) in a
  /// [rows * tileCols / 8][8] buffer: each group of 8 rows holds its
  /// tileCols / 8 core matrices one after another (tileCols * 16 bytes),
  /// a core matrix 8 rows of 16 bytes.
  bool coreMatrices = false;
  /// 16-byte chunks in warp blocks: a warp's 32 consecutive chunks take
  /// 32 / c rows x c consecutive chunks (c = 4, or 2 where a row has no
  /// multiple of 4), in groups of 8 rows, rows fastest. The warp reads 16 c
  /// contiguous bytes of each row (whole 32-byte sectors), and each phase of
  /// 8 lanes writes one chunk of 8 consecutive rows: a core matrix (128
  /// contiguous bytes), or, in a row-major tile whose rows are an odd number
  /// of chunks apart (padded by 16 bytes), 8 chunks in 8 different groups
  /// of banks. Along the rows, the 8 lanes of a phase would write 8 core
  /// matrices 128 bytes apart (all in the same 4 banks), or span rows whose
  /// chunks meet in a bank group.
  bool warpBlocks = false;
  int64_t chunksPerRow() const { return tileCols / width; }
  /// The chunks of a row in a warp block; 0 where the tile has no blocks.
  int64_t blockChunks() const {
    int64_t c = chunksPerRow() % 4 == 0 ? 4 : chunksPerRow() % 2 == 0 ? 2 : 0;
    return warpBlocks && c && tileRows % (32 / c) == 0 && threads % 32 == 0 ? c
                                                                            : 0;
  }
  /// rowsFastest with 16-byte chunks in pairs: a warp's 32 consecutive
  /// chunks take 16 rows x 2 consecutive chunks (the lanes 16 apart read
  /// the two halves of a 32-byte sector: whole sectors, where 32 rows of
  /// one chunk read half of each). Stored transposed, the two chunks of a
  /// source row go to destination rows 8 apart, which (4 (2n + 1) words
  /// apart, as the mma fragment reads want them) fall in the same banks:
  /// so the destination's rows 8..15 of every 16 hold their columns
  /// swizzled, column c at c ^ 16 (storeTile), and one store's two groups
  /// of 16 columns land 8 banks apart. Readers apply the same swizzle
  /// (a constant per 8-row group: which 16 columns of each 32).
  /// The tile has at least 32 rows.
  /// The same holds for the f32 GEMM's 16-byte chunks of 4 (its B given as
  /// [N, K]): the rows of every second chunk, 4..7 of each 8, are swizzled.
  bool pairedRows() const {
    return rowsFastest && !coreMatrices && (width == 8 || width == 4) &&
           tileRows % 32 == 0 && chunksPerRow() % 2 == 0 && threads % 32 == 0;
  }
  int64_t chunks() const { return tileRows * chunksPerRow(); }
  int64_t perThread() const { return (chunks() + threads - 1) / threads; }
};

/// The row and first column (within the tile) of chunk `chunk`.
std::pair<Value, Value> chunkPosition(Arith &a, const TileLayout &layout,
                                      Value chunk);

/// The chunks of one tile that one thread holds in registers: chunk
/// tid + i * threads.
struct TileChunks {
  TileLayout layout;
  SmallVector<Value> values;
};

/// Loads the tile at rows [row0, row0 + tileRows) (valid below `rows`) and
/// columns [col0, col0 + tileCols) (valid below `cols`; checked only when
/// `colsMayOverflow`) of `src` [lead..., rows, cols]; out-of-range elements
/// are zero.
TileChunks loadTile(Arith &a, Value src, ValueRange lead, Value row0,
                    int64_t rows, Value col0, int64_t cols,
                    bool colsMayOverflow, const TileLayout &layout, Value tid);
/// Stores the chunks into `dst` [tileRows][>= tileCols], or transposed into
/// `dst` [tileCols][>= tileRows].
void storeTile(Arith &a, const TileChunks &tile, Value dst, bool transpose,
               Value tid);

/// Copies the same window as loadTile (columns from `col0`, 0 when null)
/// straight into `dst` [>= dstRow0 + tileRows][>= tileCols] at row dstRow0
/// with cp.async (chunks of `layout.width` elements, 4, 8 or 16 bytes,
/// `cols` a multiple of it; 16-byte chunks bypass L1); chunks out of range,
/// and all of them when
/// `enabled` is false, are zero-filled without reading memory. Returns the
/// copies' tokens, for one nvgpu.device_async_create_group. With `second`,
/// the rows come in two parts: [0, split) from `src` and the others from
/// row - split of `second` (a decoder's cache and its new keys); those
/// copies return no token (the group commits them all the same).
SmallVector<Value> copyTileAsync(Arith &a, Value src, ValueRange lead,
                                 Value row0, int64_t rows, int64_t cols,
                                 Value enabled, const TileLayout &layout,
                                 Value dst, Value dstRow0, Value tid,
                                 Value col0 = {}, Value second = {},
                                 int64_t split = 0);

/// Declares kernel `name` in `module` with `args` and a known block size,
/// and its shared-memory tiles: globals in the workgroup address space with
/// 16-byte alignment (16-byte stores and 4-byte fragment loads; workgroup
/// attributions would only be aligned to the element size). Returns the
/// kernel with the tiles fetched at its entry. With `dynamic`, the tiles
/// are views, 16-byte aligned, of the launch's dynamic shared memory
/// instead (beyond the 48 KiB of static shared memory; the launch passes
/// sharedBytes(tiles) and the runtime opts the kernel in).
mlir::gpu::GPUFuncOp
createKernel(mlir::OpBuilder &builder, mlir::gpu::GPUModuleOp module,
             llvm::StringRef name, mlir::TypeRange args,
             ArrayRef<mlir::MemRefType> tiles, int64_t blockSize,
             SmallVectorImpl<Value> &tileValues, bool dynamic = false);

/// Bytes of shared memory the tiles take, each 16-byte aligned.
int64_t sharedBytes(ArrayRef<mlir::MemRefType> tiles);

/// memref<rows x cols x t> in the workgroup address space.
mlir::MemRefType sharedTile(Type t, int64_t rows, int64_t cols);

} // namespace tfc

#endif // TFC_CODEGEN_NVPTX_KERNELBUILDER_H
