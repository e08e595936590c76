//===- TensorParallel.h - Splitting a decoder across ranks ------*- C++ -*-===//
//
// --tensor-parallel=N (docs/tensor-parallel.md): Megatron's split of a
// decoder's layers across the N ranks of an MPI job. The attention's heads
// (and K/V heads) and the MLP's inner features are divided among them:
// Q, K, V, gate and up are split by their outputs (column-parallel), o_proj
// and down by their inputs (row-parallel), whose partial sums one
// transformer.all_reduce adds before the bias. Embeddings, norms and the
// LM head are whole on every rank. The library is one for all ranks: each
// binds its part of the split weights when it loads.
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

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_TENSORPARALLEL_H
