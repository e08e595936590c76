//===- KernelBuilder.cpp - Building GPU kernels in MLIR -------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"

using namespace mlir;

namespace tfc {

Value loadRowChunk(Arith &a, Value tensor, ValueRange lead, Value row,
                   int64_t rows, Value col, int64_t cols, int64_t width,
                   Value rowValid, bool colsMayOverflow) {
  ImplicitLocOpBuilder &b = a.b;
  Type et = cast<MemRefType>(tensor.getType()).getElementType();
  auto vecTy = VectorType::get({width}, et);
  Value valid = rowValid;
  Value safeCol = col;
  if (colsMayOverflow) {
    // Whole chunks only: cols is a multiple of width.
    valid = valid ? a.andi(valid, a.ult(col, cols)) : a.ult(col, cols);
    safeCol = a.umin(col, cols - width);
  }
  SmallVector<Value> idx(lead.begin(), lead.end());
  idx.append({a.umin(row, rows - 1), safeCol});
  Value v = vector::LoadOp::create(
      b, vecTy, tensor, idx, /*nontemporal=*/false,
      llvm::MaybeAlign(width * et.getIntOrFloatBitWidth() / 8));
  if (!valid)
    return v;
  Value zero = arith::ConstantOp::create(
      b, vecTy, DenseElementsAttr::get(vecTy, b.getZeroAttr(et)));
  return a.sel(valid, v, zero);
}

Value maskValue(Arith &a, Value mask, ArrayRef<int64_t> dims, Value b, Value h,
                Value row, Value key) {
  Value zero = a.c(0);
  SmallVector<Value> idx = {dims[0] == 1 ? zero : b, dims[1] == 1 ? zero : h,
                            dims[2] == 1 ? zero : row,
                            dims[3] == 1 ? zero : key};
  return a.toF32(memref::LoadOp::create(a.b, mask, idx));
}

Value MmaOps::operand(Value pair) {
  if (!t.isBF16())
    return pair;
  ImplicitLocOpBuilder &b = a.b;
  Value asInt =
      vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), pair);
  return vector::ExtractOp::create(b, asInt, ArrayRef<int64_t>{0});
}

Value MmaOps::pairFromF32(Value x, Value y) {
  return operand(vector::FromElementsOp::create(
      a.b, VectorType::get({2}, t),
      ValueRange{a.fromF32(x, t), a.fromF32(y, t)}));
}

Value MmaOps::sharedPair(Value smem, Value row, Value col) {
  return operand(vector::LoadOp::create(a.b, VectorType::get({2}, t), smem,
                                        ValueRange{row, col}, false,
                                        llvm::MaybeAlign(4)));
}

SmallVector<Value> MmaOps::loadMatrices(Value smem, Value row, Value col,
                                        int64_t count, bool transpose) {
  ImplicitLocOpBuilder &b = a.b;
  Value m = nvgpu::LdMatrixOp::create(
      b, VectorType::get({count, 2}, t), smem, ValueRange{row, col},
      b.getBoolAttr(transpose), b.getI32IntegerAttr(int32_t(count)));
  SmallVector<Value> regs;
  for (int64_t i = 0; i < count; ++i)
    regs.push_back(
        operand(vector::ExtractOp::create(b, m, ArrayRef<int64_t>{i})));
  return regs;
}

void MmaOps::mma(ArrayRef<Value> aFrag, ArrayRef<Value> bFrag,
                 SmallVectorImpl<Value> &acc) {
  ImplicitLocOpBuilder &b = a.b;
  Type f32 = b.getF32Type();
  auto resTy =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes mt = t.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  Value r = NVVM::MmaOp::create(
      b, resTy, aFrag, bFrag, acc, {16, 8, 16}, std::nullopt, std::nullopt,
      std::array<NVVM::MMATypes, 2>{mt, mt},
      std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row,
                                     NVVM::MMALayout::col});
  for (int i = 0; i < 4; ++i)
    acc[i] = LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{i});
}

namespace {
/// A wgmma descriptor of shared address `addr` (i64): bits 0-13 address
/// bits 4-17; 16-29 LBO >> 4; 32-45 SBO >> 4; 49-51 base offset (0: the
/// swizzle groups are aligned); 62-63 the layout (0 none, 1 128-byte
/// swizzle).
Value descriptorBits(Arith &a, Value addr, int64_t lbo, int64_t sbo,
                     int64_t layout) {
  ImplicitLocOpBuilder &b = a.b;
  Type i64 = b.getI64Type();
  auto c64 = [&](int64_t v) {
    return arith::ConstantIntOp::create(b, i64, v).getResult();
  };
  Value start = arith::ShRUIOp::create(
      b, arith::AndIOp::create(b, addr, c64(0x3ffff)), c64(4));
  uint64_t fields = uint64_t((lbo >> 4) & 0x3fff) << 16 |
                    uint64_t((sbo >> 4) & 0x3fff) << 32 |
                    uint64_t(layout) << 62;
  return arith::OrIOp::create(b, start, c64(int64_t(fields)));
}

/// An inline PTX statement with side effects.
Value inlineAsm(ImplicitLocOpBuilder &b, Type resultType, ValueRange operands,
                StringRef text, StringRef constraints) {
  auto op = LLVM::InlineAsmOp::create(
      b, resultType, operands, text, constraints, /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr(), ArrayAttr());
  return resultType ? op.getResult(0) : Value();
}
} // namespace

Value WgmmaOps::descriptor(Value smem, Value offset, int64_t lbo, int64_t sbo) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(a.b, smem);
  return descriptorBits(
      a,
      arith::IndexCastUIOp::create(a.b, a.b.getI64Type(), a.add(base, offset)),
      lbo, sbo, /*layout=*/0);
}

Value WgmmaOps::swizzledDescriptor(Value addr, int64_t lbo, int64_t sbo) {
  return descriptorBits(a, arith::ExtUIOp::create(a.b, a.b.getI64Type(), addr),
                        lbo, sbo,
                        /*layout=*/1);
}

Value WgmmaOps::advance(Value desc, int64_t bytes) {
  if (!bytes)
    return desc;
  return arith::AddIOp::create(
      a.b, desc,
      arith::ConstantIntOp::create(a.b, a.b.getI64Type(), bytes >> 4));
}

void WgmmaOps::mma(ArrayRef<Value> aFrag, Value descB, bool transposeB,
                   bool accumulate, SmallVectorImpl<Value> &acc) {
  ImplicitLocOpBuilder &b = a.b;
  int64_t n = int64_t(acc.size()) * 2;
  Type f32 = b.getF32Type();
  // PTX: d..., {a0..a3} or descA, descB, scale-d (predicate), scale-a,
  // scale-b, [transpose-a,] transpose-b.
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "wgmma.mma_async.sync.aligned.m64n" << n << "k16.f32."
     << (t.isBF16() ? "bf16.bf16" : "f16.f16") << " {";
  std::string constraints;
  int64_t regs = int64_t(acc.size());
  for (int64_t i = 0; i < regs; ++i) {
    os << (i ? ", " : "") << "$" << i;
    constraints += "=f,";
  }
  for (int64_t i = 0; i < regs; ++i)
    constraints += std::to_string(i) + ",";
  bool sharedA = aFrag.size() == 1;
  int64_t next = 2 * regs;
  if (sharedA) {
    os << "}, $" << next++;
    constraints += "l,";
  } else {
    os << "}, {$" << next << ", $" << next + 1 << ", $" << next + 2 << ", $"
       << next + 3 << "}";
    next += 4;
    constraints += "r,r,r,r,";
  }
  os << ", $" << next << ", $" << next + 1 << ", 1, 1, "
     << (sharedA ? "0, " : "") << (transposeB ? 1 : 0) << ";";
  constraints += "l,b,~{memory}";
  SmallVector<Value> operands;
  // Without accumulation the inputs are ignored: undefined, so that
  // nothing initialises them.
  for (Value x : acc)
    operands.push_back(accumulate ? x : LLVM::UndefOp::create(b, f32));
  for (Value x : aFrag)
    operands.push_back(sharedA ? x : asI32(x));
  operands.push_back(descB);
  operands.push_back(
      arith::ConstantIntOp::create(b, b.getI1Type(), accumulate ? 1 : 0));
  auto resTy = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                SmallVector<Type>(regs, f32));
  Value r = inlineAsm(b, resTy, operands, text, constraints);
  for (int64_t i = 0; i < regs; ++i)
    acc[i] = LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{i});
}

Value WgmmaOps::asI32(Value operand) {
  Type i32 = a.b.getI32Type();
  if (operand.getType() == i32)
    return operand;
  return LLVM::BitcastOp::create(a.b, i32, operand);
}

void WgmmaOps::pin(SmallVectorImpl<Value> &values) {
  if (values.empty())
    return;
  ImplicitLocOpBuilder &b = a.b;
  std::string constraints;
  SmallVector<Type> types;
  for (Value x : values) {
    constraints += x.getType().isF32() ? "=f," : "=r,";
    types.push_back(x.getType());
  }
  for (size_t i = 0; i < values.size(); ++i)
    constraints += std::to_string(i) + (i + 1 < values.size() ? "," : "");
  auto resTy = LLVM::LLVMStructType::getLiteral(b.getContext(), types);
  Value r = inlineAsm(b, resTy, values, "", constraints);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] =
        LLVM::ExtractValueOp::create(b, r, ArrayRef<int64_t>{int64_t(i)});
}

void WgmmaOps::fence() { NVVM::WgmmaFenceAlignedOp::create(a.b); }
void WgmmaOps::fenceSharedWrites() {
  MLIRContext *ctx = a.b.getContext();
  NVVM::FenceProxyOp::create(
      a.b, NVVM::ProxyKindAttr::get(ctx, NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(ctx, NVVM::SharedSpace::shared_cta));
}
void WgmmaOps::commit() { NVVM::WgmmaGroupSyncAlignedOp::create(a.b); }
void WgmmaOps::wait(int64_t pending) {
  NVVM::WgmmaWaitGroupSyncOp::create(a.b, uint64_t(pending));
}

Value TmaOps::sharedAddress(Value smem) {
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(a.b, smem);
  return arith::IndexCastUIOp::create(a.b, a.b.getI32Type(), base);
}

Value TmaOps::alignedAddress(Value smem, int64_t align) {
  ImplicitLocOpBuilder &b = a.b;
  Type i32 = b.getI32Type();
  Value up = arith::AddIOp::create(
      b, sharedAddress(smem), arith::ConstantIntOp::create(b, i32, align - 1));
  return arith::AndIOp::create(b, up,
                               arith::ConstantIntOp::create(b, i32, -align));
}

Value TmaOps::toI32(Value index) {
  return arith::IndexCastOp::create(a.b, a.b.getI32Type(), index);
}

Value TmaOps::offsetBy(Value address, Value bytes) {
  return arith::AddIOp::create(a.b, address, toI32(bytes));
}

void TmaOps::initBarrier(Value bar, int64_t count) {
  inlineAsm(a.b, Type(), {bar},
            "mbarrier.init.shared::cta.b64 [$0], " + std::to_string(count) +
                ";",
            "r,~{memory}");
}

void TmaOps::fenceBarrierInit() {
  inlineAsm(a.b, Type(), {}, "fence.mbarrier_init.release.cluster;",
            "~{memory}");
}

void TmaOps::arrive(Value bar) {
  inlineAsm(a.b, Type(), {bar}, "mbarrier.arrive.shared::cta.b64 _, [$0];",
            "r,~{memory}");
}

void TmaOps::arriveExpectTx(Value bar, Value bytes) {
  inlineAsm(a.b, Type(), {bar, bytes},
            "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
            "r,r,~{memory}");
}

void TmaOps::wait(Value bar, Value parity) {
  ImplicitLocOpBuilder &b = a.b;
  Type i32 = b.getI32Type();
  // try_wait suspends the thread for a while before it reports an
  // incomplete phase; the loop asks again.
  auto loop = scf::WhileOp::create(b, TypeRange{}, ValueRange{});
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&loop.getBefore());
    b.setInsertionPointToStart(before);
    Value done = inlineAsm(b, i32, {bar, parity},
                           "{\n.reg .pred p;\n"
                           "mbarrier.try_wait.parity.shared::cta.b64 p, [$1], "
                           "$2;\nselp.b32 $0, 1, 0, p;\n}",
                           "=r,r,r,~{memory}");
    Value pending =
        arith::CmpIOp::create(b, arith::CmpIPredicate::eq, done,
                              arith::ConstantIntOp::create(b, i32, 0));
    scf::ConditionOp::create(b, pending, ValueRange{});
    Block *after = b.createBlock(&loop.getAfter());
    b.setInsertionPointToStart(after);
    scf::YieldOp::create(b, ValueRange{});
  }
}

void TmaOps::load3d(Value dst, Value map, ArrayRef<Value> coords, Value bar) {
  SmallVector<Value> operands = {dst, map};
  operands.append(coords.begin(), coords.end());
  operands.push_back(bar);
  inlineAsm(a.b, Type(), operands,
            "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
            "complete_tx::bytes [$0], [$1, {$2, $3, $4}], [$5];",
            "r,l,r,r,r,r,~{memory}");
}

void namedBarrierSync(Arith &a, int64_t id, int64_t threads) {
  inlineAsm(a.b, Type(), {},
            "bar.sync " + std::to_string(id) + ", " + std::to_string(threads) +
                ";",
            "~{memory}");
}

void namedBarrierArrive(Arith &a, int64_t id, int64_t threads) {
  inlineAsm(a.b, Type(), {},
            "bar.arrive " + std::to_string(id) + ", " +
                std::to_string(threads) + ";",
            "~{memory}");
}

Value Arith::exp2FlushSubnormals(Value x) {
  return LLVM::CallIntrinsicOp::create(
             b, b.getF32Type(), b.getStringAttr("llvm.nvvm.ex2.approx.ftz.f"),
             ValueRange{x})
      .getResult(0);
}

Value Arith::tanh(Value x) {
  Value c = f(7.90531110763549805);
  x = arith::MaximumFOp::create(b, arith::MinimumFOp::create(b, x, c),
                                f(-7.90531110763549805));
  Value x2 = fmul(x, x);
  Value p = f(-2.76076847742355e-16);
  for (double coefficient :
       {2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
        1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03})
    p = fma(p, x2, f(coefficient));
  Value q = f(1.19825839466702e-06);
  for (double coefficient :
       {1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03})
    q = fma(q, x2, f(coefficient));
  return arith::DivFOp::create(b, fmul(x, p), q);
}

void setMaxRegisters(Arith &a, int64_t count, bool increase) {
  assert(count >= 24 && count <= 256 && count % 8 == 0 &&
         "setmaxnreg takes 24 to 256 registers, a multiple of 8");
  NVVM::SetMaxRegisterOp::create(a.b, count,
                                 increase
                                     ? NVVM::SetMaxRegisterAction::increase
                                     : NVVM::SetMaxRegisterAction::decrease);
}

std::pair<Value, Value> chunkPosition(Arith &a, const TileLayout &l,
                                      Value chunk) {
  if (int64_t c = l.blockChunks()) {
    // Lane l of a warp's 32 chunks: row l % 8 of row group l / (8 c),
    // chunk l / 8 % c; the warps' blocks walk along the rows first.
    Value lane = a.rem(chunk, 32), block = a.div(chunk, 32);
    int64_t colBlocks = l.chunksPerRow() / c;
    Value row = a.add(a.mul(a.div(block, colBlocks), 32 / c),
                      a.add(a.mul(a.div(lane, 8 * c), 8), a.rem(lane, 8)));
    Value col =
        a.add(a.mul(a.rem(block, colBlocks), c), a.rem(a.div(lane, 8), c));
    return {row, a.mul(col, l.width)};
  }
  if (l.pairedRows()) {
    // Lane l of a warp's 32 chunks: row l % 16 of the block's 16, chunk
    // l / 16 of its pair; the warps' blocks walk down the rows first.
    Value lane = a.rem(chunk, 32), block = a.div(chunk, 32);
    int64_t rowBlocks = l.tileRows / 16;
    Value row = a.add(a.mul(a.rem(block, rowBlocks), 16), a.rem(lane, 16));
    Value col = a.add(a.mul(a.div(block, rowBlocks), 2), a.div(lane, 16));
    return {row, a.mul(col, l.width)};
  }
  if (l.rowsFastest)
    return {a.rem(chunk, l.tileRows), a.mul(a.div(chunk, l.tileRows), l.width)};
  return {a.div(chunk, l.chunksPerRow()),
          a.mul(a.rem(chunk, l.chunksPerRow()), l.width)};
}

TileChunks loadTile(Arith &a, Value src, ValueRange lead, Value row0,
                    int64_t rows, Value col0, int64_t cols,
                    bool colsMayOverflow, const TileLayout &l, Value tid) {
  TileChunks tile{l, {}};
  for (int64_t it = 0; it < l.perThread(); ++it) {
    // Threads past the last chunk load the last one again (in range, never
    // stored).
    Value chunk = a.umin(a.add(tid, it * l.threads), l.chunks() - 1);
    auto [r, c] = chunkPosition(a, l, chunk);
    Value row = a.add(row0, r);
    Value col = a.add(col0, c);
    tile.values.push_back(loadRowChunk(a, src, lead, row, rows, col, cols,
                                       l.width, a.ult(row, rows),
                                       colsMayOverflow));
  }
  return tile;
}

SmallVector<Value> copyTileAsync(Arith &a, Value src, ValueRange lead,
                                 Value row0, int64_t rows, int64_t cols,
                                 Value enabled, const TileLayout &l, Value dst,
                                 Value dstRow0, Value tid, Value col0,
                                 Value second, int64_t split) {
  ImplicitLocOpBuilder &b = a.b;
  Type token = nvgpu::DeviceAsyncTokenType::get(b.getContext());
  SmallVector<Value> tokens;
  for (int64_t it = 0; it < l.perThread(); ++it) {
    Value chunk = a.add(tid, it * l.threads);
    bool whole = (it + 1) * l.threads <= l.chunks();
    auto body = [&]() {
      auto [r, c] = chunkPosition(a, l, chunk);
      Value row = a.add(row0, r);
      Value col = col0 ? a.add(col0, c) : c;
      Value valid = a.andi(enabled, a.ult(row, rows));
      if (col0 || l.tileCols != cols)
        valid = a.andi(valid, a.ult(col, cols));
      Value srcElements = a.sel(valid, a.c(l.width), a.c(0));
      SmallVector<Value> dstIdx = {a.add(dstRow0, r), c};
      if (l.coreMatrices) {
        // Chunk (row, c) is row row % 8 of core matrix c / 8 of row group
        // row / 8.
        Value at = dstIdx[0];
        dstIdx = {
            a.add(a.add(a.mul(a.div(at, 8), l.tileCols), c), a.rem(at, 8)),
            a.c(0)};
      }
      // 16-byte copies bypass L1 (cp.async.cg); 4 and 8 bytes cannot.
      int64_t bits = l.width * cast<MemRefType>(src.getType())
                                   .getElementType()
                                   .getIntOrFloatBitWidth();
      // Row `from` of `part` (`partRows` rows). Out of range: nothing is
      // read (0 source elements), the address is kept inside the tensor all
      // the same.
      auto copyRow = [&](Value part, Value from, int64_t partRows) {
        SmallVector<Value> srcIdx(lead.begin(), lead.end());
        srcIdx.append(
            {a.umin(from, partRows - 1), a.umin(col, cols - l.width)});
        return nvgpu::DeviceAsyncCopyOp::create(
            b, token, dst, dstIdx, part, srcIdx, b.getIndexAttr(l.width),
            srcElements,
            /*bypassL1=*/bits == 128 ? b.getUnitAttr() : UnitAttr());
      };
      if (!second) {
        Value tok = copyRow(src, row, rows);
        // A token cannot leave the scf.if of the last, partial round; the
        // group commits every copy this thread issued all the same.
        if (whole)
          tokens.push_back(tok);
        return;
      }
      auto inFirst = scf::IfOp::create(b, a.ult(row, split),
                                       /*withElseRegion=*/true);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(&inFirst.getThenRegion().front());
      copyRow(src, row, split);
      b.setInsertionPointToStart(&inFirst.getElseRegion().front());
      copyRow(second, arith::SubIOp::create(b, row, a.c(split)), rows - split);
    };
    // The last round: threads past the last chunk copy nothing.
    a.guarded(whole ? Value() : a.ult(chunk, l.chunks()), body);
  }
  return tokens;
}

void storeTile(Arith &a, const TileChunks &tile, Value dst, bool transpose,
               Value tid) {
  ImplicitLocOpBuilder &b = a.b;
  const TileLayout &l = tile.layout;
  for (auto [it, vec] : llvm::enumerate(tile.values)) {
    Value chunk = a.add(tid, int64_t(it) * l.threads);
    Value v = vec;
    auto body = [&]() {
      auto [r, col] = chunkPosition(a, l, chunk);
      if (!transpose) {
        unsigned bytes = cast<VectorType>(v.getType())
                             .getElementType()
                             .getIntOrFloatBitWidth() /
                         8;
        vector::StoreOp::create(b, v, dst, ValueRange{r, col}, false,
                                llvm::MaybeAlign(l.width * bytes));
        return;
      }
      // Paired rows: the second chunk of a pair (destination rows 8..15 of
      // 16) writes its columns swizzled (TileLayout::pairedRows).
      Value dstCol = r;
      if (l.pairedRows())
        dstCol = a.sel(a.ult(a.c(0), a.rem(a.div(col, l.width), 2)),
                       arith::XOrIOp::create(b, r, a.c(16)), r);
      for (int64_t e = 0; e < l.width; ++e) {
        Value x = vector::ExtractOp::create(b, v, ArrayRef<int64_t>{e});
        memref::StoreOp::create(b, x, dst, ValueRange{a.add(col, e), dstCol});
      }
    };
    a.guarded((int64_t(it) + 1) * l.threads <= l.chunks()
                  ? Value()
                  : a.ult(chunk, l.chunks()),
              body);
  }
}

MemRefType sharedTile(Type t, int64_t rows, int64_t cols) {
  auto workgroup =
      gpu::AddressSpaceAttr::get(t.getContext(), gpu::AddressSpace::Workgroup);
  return MemRefType::get({rows, cols}, t, MemRefLayoutAttrInterface(),
                         workgroup);
}

int64_t sharedBytes(ArrayRef<MemRefType> tiles) {
  int64_t bytes = 0;
  for (MemRefType t : tiles)
    bytes += roundUp(t.getNumElements() * t.getElementTypeBitWidth() / 8, 16);
  return bytes;
}

gpu::GPUFuncOp createKernel(OpBuilder &builder, gpu::GPUModuleOp module,
                            StringRef name, TypeRange args,
                            ArrayRef<MemRefType> tiles, int64_t blockSize,
                            SmallVectorImpl<Value> &tileValues, bool dynamic) {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(module.getBody());
  Location loc = module.getLoc();
  // Static tiles: module globals, declared before the kernel.
  SmallVector<std::string> names;
  if (!dynamic) {
    for (auto [i, type] : llvm::enumerate(tiles)) {
      names.push_back((name + "_tile" + llvm::Twine(i)).str());
      memref::GlobalOp::create(
          builder, loc, names.back(), builder.getStringAttr("private"), type,
          Attribute(), /*constant=*/false, builder.getI64IntegerAttr(16));
    }
  }
  auto func = gpu::GPUFuncOp::create(
      builder, loc, name, FunctionType::get(builder.getContext(), args, {}));
  func->setAttr(gpu::GPUDialect::getKernelFuncAttrName(),
                builder.getUnitAttr());
  func.setKnownBlockSizeAttr(
      builder.getDenseI32ArrayAttr({int32_t(blockSize), 1, 1}));
  builder.setInsertionPointToStart(&func.getBody().front());
  if (!dynamic) {
    for (auto [type, global] : llvm::zip(tiles, names))
      tileValues.push_back(
          memref::GetGlobalOp::create(builder, loc, type, global));
    return func;
  }
  // Dynamic: views of the launch's dynamic shared memory, one after the
  // other.
  auto bytesType =
      MemRefType::get({ShapedType::kDynamic}, builder.getI8Type(), AffineMap(),
                      gpu::AddressSpaceAttr::get(builder.getContext(),
                                                 gpu::AddressSpace::Workgroup));
  Value all = gpu::DynamicSharedMemoryOp::create(builder, loc, bytesType);
  int64_t offset = 0;
  for (MemRefType type : tiles) {
    Value shift = arith::ConstantIndexOp::create(builder, loc, offset);
    tileValues.push_back(
        memref::ViewOp::create(builder, loc, type, all, shift, ValueRange{}));
    offset += sharedBytes({type});
  }
  return func;
}

} // namespace tfc
