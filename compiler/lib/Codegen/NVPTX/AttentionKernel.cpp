//===- AttentionKernel.cpp - Flash-attention GPU kernels ------------------===//
//
// One kernel per fused attention, specialised to its static shapes: on
// tensor cores for f16 and bf16 (AttentionMmaKernel.cpp), by FMA for f32
// (AttentionFmaKernel.cpp). This file picks the variant, the keys per tile
// and the shared memory, and declares the kernel.
//
//===----------------------------------------------------------------------===//

#include "AttentionMmaKernel.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;

namespace tfc {

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

KernelLaunch buildAttentionKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                                  StringRef name, const AttentionShape &s) {
  auto smem = [&](int64_t rows, int64_t cols) {
    return sharedTile(s.elementType, rows, cols);
  };
  // q, k, v, [mask,] out.
  Type t = s.elementType;
  SmallVector<Type> args(attentionInputTypes(s));
  args.push_back(attentionOutputType(s));
  KernelLaunch launch;
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
    buildFmaAttentionKernel(s, a, launch.kernel, tiles[0], tiles[1], kRows,
                            kKeys);
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
