//===- AttentionMmaTiles.cpp - K and V tiles of the tensor-core kernel ----===//
//
// How the tensor-core attention kernel gets its K and V tiles into shared
// memory: staged from registers, copied by cp.async into two stages, or
// copied by TMA (by thread 0 or a producer warpgroup) with mbarriers; and
// the wgmma that reads a V tile by descriptor.
//
//===----------------------------------------------------------------------===//

#include "AttentionMmaKernel.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"

using namespace mlir;

namespace tfc {

void MmaKernel::turn(bool sync, int64_t base) {
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

Value MmaKernel::firstKey(Value tile) {
  if (s.window <= 0)
    return a.mul(tile, bc);
  Value shifted = a.mul(a.add(tile, firstTile), bc);
  return a.sel(
      arith::CmpIOp::create(b, arith::CmpIPredicate::slt, tile, a.c(0)),
      a.mul(tile, bc), shifted);
}

void MmaKernel::issueTiles(Value group) {
  Value bar = barrier(0, group);
  Type i32 = b.getI32Type();
  Value reused =
      arith::CmpIOp::create(b, arith::CmpIPredicate::uge, group, a.c(2));
  a.guarded(reused, [&]() {
    tmaOps.wait(barrier(2, group), toI32(a.rem(a.div(a.add(group, -2), 2), 2)));
  });
  Value kValid = a.ult(group, numTiles);
  Value bytes =
      a.sel(kValid,
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

void MmaKernel::produce() {
  setMaxRegisters(a, kProducerRegisters, /*increase=*/false);
  a.guarded(a.ult(tid, threads() + 1), [&]() {
    auto groups = scf::ForOp::create(b, a.c(0), a.add(numTiles, 1), a.c(1));
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(groups.getBody());
    issueTiles(groups.getInductionVar());
  });
}

void MmaKernel::copyTile(Value kTile, Value vTile) {
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
                              s.valueDim, a.ult(vTile, numTiles), vl, vts,
                              stageRow(vTile), tid));
  lastGroup = nvgpu::DeviceAsyncCreateGroupOp::create(
      b, nvgpu::DeviceAsyncTokenType::get(b.getContext()), tokens);
}

TileLayout MmaKernel::layout(int64_t cols, int64_t paddedCols,
                             bool transposed) {
  bool narrow = !transposed && paddedCols / 8 < 8;
  return {bc,
          paddedCols,
          cols % 8 == 0 ? 8 : 2,
          threads(),
          transposed,
          /*coreMatrices=*/wgmma(),
          /*warpBlocks=*/cols % 8 == 0 && (wgmma() || narrow)};
}

TileChunks MmaKernel::loadKV(Value src, Value kv0, int64_t cols,
                             const TileLayout &l) {
  return loadTile(a, src, {bi, hk}, kv0, s.seqKV, a.c(0), cols,
                  l.tileCols != cols, l, tid);
}

Value MmaKernel::globalPair(Value tensor, Value bi, Value hi, Value row,
                            int64_t rows, Value col, int64_t cols,
                            Value rowValid) {
  return ops.operand(loadRowChunk(a, tensor, {bi, hi}, row, rows, col, cols, 2,
                                  rowValid, cols % 16 != 0));
}

void MmaKernel::accumulatePV(ArrayRef<Value> p, Value vTile,
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

} // namespace tfc
