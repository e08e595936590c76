//===- AttentionCommon.cpp - What the attention kernels share -------------===//

#include "AttentionCommon.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

using namespace mlir;

namespace tfc {

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

namespace {

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

} // namespace

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

Value inWindow(Arith &a, const AttentionShape &s, Value key, Value row) {
  return arith::CmpIOp::create(a.b, arith::CmpIPredicate::sgt,
                               a.add(key, s.window),
                               a.add(row, s.seqKV - s.seqQ));
}

} // namespace tfc
