//===- TensorParallel.h - Splitting a decoder across ranks ------*- C++ -*-===//
//
// --tensor-parallel=N (docs/tensor-parallel.md): Megatron's split of a
// model's layers (decoders, encoders, encoder-decoders) across the N ranks
// of an MPI job. The attention's heads (and K/V heads) and the MLP's
// inner features are divided among them:
// Q, K, V, gate and up are split by their outputs (column-parallel), o_proj
// and down by their inputs (row-parallel), whose partial sums one
// transformer.all_reduce adds before the bias. The token embeddings and
// the LM head are split by vocabulary (or whole on every rank), norms and
// position embeddings whole. The library is one for all ranks: each binds
// its part of the split weights when it loads.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_TENSORPARALLEL_H
#define TFC_LIB_IMPORTER_TENSORPARALLEL_H

#include "Architectures.h"

namespace tfc::importer {

/// With more than one rank (ImportOptions::tensorParallel): checks that
/// the ranks divide each of `sizes` (config.json field, value: the heads,
/// the K/V heads, the MLP's width), that nothing the split does not cover
/// is asked for (--attention-maps), and declares the split to `mb`
/// (ModelBuilder::declareTensorParallel). Failure with a one-line error
/// naming the flag and the field. Nothing to check for one rank.
mlir::LogicalResult
checkTensorParallel(ImportRequest &request, ModelBuilder &mb,
                    llvm::ArrayRef<std::pair<llvm::StringRef, int64_t>> sizes);

/// The sum of `x` over the ranks (transformer.all_reduce).
mlir::Value allReduce(TosaBuilder &tb, mlir::Value x);

/// Whether the build splits the token embeddings and the LM head by
/// vocabulary (Megatron's VocabParallelEmbedding): more than one rank and
/// --tensor-parallel-vocab=split. Each rank then holds ceil(vocab / N)
/// rows of each, the last rank's padded with zeros.
bool splitsVocabulary(const ImportRequest &request, const ModelBuilder &mb);

/// The weight `name` of a table indexed by token id, [vocab, ...] (the
/// token embeddings, an LM head's weight and bias): the rank's rows when
/// `split` (splitsVocabulary), else whole.
mlir::FailureOr<mlir::Value> vocabularyWeight(ModelBuilder &mb, bool split,
                                              llvm::StringRef name,
                                              llvm::ArrayRef<int64_t> shape,
                                              bool prefixed = true);

/// The embeddings of `ids` [B, S] from `table`, the token embeddings of
/// `vocab` rows: with `split`, `table` is the rank's rows, which gives the
/// ids that fall in them (zeros for the others) and one all-reduce the
/// whole; `ids` is then bounded to [0, vocab) (ModelBuilder::bound), which
/// no gather of the whole table implies any more.
mlir::Value vocabularyEmbedding(ModelBuilder &mb, TosaBuilder &tb, bool split,
                                mlir::Value table, mlir::Value ids,
                                int64_t vocab);

/// The logits [1, rows, part] of the rank's vocabulary rows (f32) as the
/// whole [1, rows, vocab]: the `ranks` ranks' gathered
/// (transformer.all_gather), the padding cut off.
mlir::Value gatherVocabulary(TosaBuilder &tb, mlir::Value part, int64_t vocab,
                             int64_t ranks);

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_TENSORPARALLEL_H
