//===- Architectures.h - The registry of Hugging Face importers -*- C++ -*-===//
//
// One entry per model family: the config.json "architectures" names (and the
// "model_type" used when that list is absent) it accepts, and the function
// that builds the graph. A new family (GPT-2, LLaMA) adds a file with its
// build function and one entry in Registry.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ARCHITECTURES_H
#define TFC_LIB_IMPORTER_ARCHITECTURES_H

#include "Config.h"
#include "ModelBuilder.h"
#include "WeightIndex.h"

#include "tfc/Importer/HuggingFace.h"

namespace tfc::importer {

struct ImportRequest {
  mlir::MLIRContext &context;
  std::string dir;
  const JsonConfig &config;
  const WeightIndex &weights;
  const ImportOptions &options;
  std::string &error;
};

using BuildFn = mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>> (*)(
    ImportRequest &request);

struct Architecture {
  llvm::StringRef modelType;
  llvm::ArrayRef<llvm::StringRef> names;
  BuildFn build;
};

llvm::ArrayRef<Architecture> architectures();

// Families.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildBert(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildGpt2(ImportRequest &request);

/// The sentence-transformers head shared by encoder families: pooling from
/// DIR/1_Pooling/config.json (mean when absent; mean or cls supported) and
/// L2 normalisation when DIR/modules.json lists a Normalize module (or there
/// is no modules.json). hidden [B, S, H], mask [B, S] -> [B, H].
mlir::FailureOr<mlir::Value> sentenceEmbedding(ImportRequest &request,
                                               ModelBuilder &mb,
                                               mlir::Value hidden,
                                               mlir::Value mask);

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_ARCHITECTURES_H
