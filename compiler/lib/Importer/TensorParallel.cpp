//===- TensorParallel.cpp - Splitting a decoder across ranks --------------===//

#include "TensorParallel.h"

#include "Layers.h"

#include "tfc/Dialect/Transformer/IR/Transformer.h"

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

LogicalResult
checkTensorParallel(ImportRequest &r, ModelBuilder &mb,
                    ArrayRef<std::pair<StringRef, int64_t>> sizes) {
  int64_t ranks = r.options.tensorParallel;
  if (ranks == 1)
    return success();
  std::string flag = "--tensor-parallel=" + std::to_string(ranks);
  if (!r.options.attentionMaps.empty())
    return mb.fail(flag + ": --attention-maps: a rank holds only its heads' "
                          "attention; build the maps without the split");
  for (auto [field, size] : sizes)
    if (size % ranks != 0)
      return mb.fail(flag + ": " + Twine(ranks) + " ranks do not divide " +
                     field + " (" + Twine(size) + ") in " + r.config.path() +
                     ": each rank takes an equal part");
  mb.declareTensorParallel();
  return success();
}

Value allReduce(TosaBuilder &tb, Value x) {
  OpBuilder &b = tb.builder();
  b.getContext()->getOrLoadDialect<transformer::TransformerDialect>();
  return transformer::AllReduceOp::create(b, tb.getLoc(), x.getType(), x);
}

bool splitsVocabulary(const ImportRequest &r, const ModelBuilder &mb) {
  return mb.ranks() > 1 && r.options.splitVocabulary;
}

FailureOr<Value> vocabularyWeight(ModelBuilder &mb, bool split, StringRef name,
                                  ArrayRef<int64_t> shape, bool prefixed) {
  return mb.weight(name, shape, prefixed,
                   split ? WeightSplit{0, 1} : WeightSplit{});
}

Value vocabularyEmbedding(ModelBuilder &mb, TosaBuilder &tb, bool split,
                          Value table, Value ids, int64_t vocab) {
  if (!split)
    return embeddingLookup(tb, table, ids);
  mb.bound(ids, 0, vocab);
  OpBuilder &b = tb.builder();
  b.getContext()->getOrLoadDialect<transformer::TransformerDialect>();
  auto tt = cast<RankedTensorType>(table.getType());
  auto it = cast<RankedTensorType>(ids.getType());
  int64_t rows = tt.getDimSize(0), hidden = tt.getDimSize(1);
  int64_t b0 = it.getDimSize(0), s0 = it.getDimSize(1);
  Type i32 = b.getI32Type();
  // The ids relative to the rank's first row, and those in its rows.
  Value rank = tb.reshape(transformer::ParallelRankOp::create(
                              b, tb.getLoc(), RankedTensorType::get({1}, i32)),
                          {1, 1});
  Value first = tb.mul(rank, tb.splat(double(rows), i32, 2));
  Value local = tb.sub(tb.reshape(tb.cast(ids, i32), {1, b0 * s0}), first);
  Value inRows = tb.clampInt(local, 0, rows - 1);
  Value mine = tb.reshape(tb.equal(inRows, local), {1, b0 * s0, 1});
  Value found = tb.gather(tb.reshape(table, {1, rows, hidden}), inRows);
  Value e = tb.select(mine, found, tb.splat(0, tt.getElementType(), 3));
  return allReduce(tb, tb.reshape(e, {b0, s0, hidden}));
}

Value gatherVocabulary(TosaBuilder &tb, Value part, int64_t vocab,
                       int64_t ranks) {
  OpBuilder &b = tb.builder();
  b.getContext()->getOrLoadDialect<transformer::TransformerDialect>();
  auto pt = cast<RankedTensorType>(part.getType());
  int64_t rows = pt.getDimSize(1), cols = pt.getDimSize(2);
  auto wholeType =
      RankedTensorType::get({1, rows, ranks * cols}, pt.getElementType());
  Value whole =
      transformer::AllGatherOp::create(b, tb.getLoc(), wholeType, part);
  return ranks * cols == vocab ? whole
                               : tb.slice(whole, {0, 0, 0}, {1, rows, vocab});
}

} // namespace tfc::importer
