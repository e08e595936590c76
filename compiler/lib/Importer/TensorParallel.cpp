//===- TensorParallel.cpp - Splitting a decoder across ranks --------------===//

#include "TensorParallel.h"

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

} // namespace tfc::importer
