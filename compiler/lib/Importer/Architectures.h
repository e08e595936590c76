//===- Architectures.h - The registry of Hugging Face importers -*- C++ -*-===//
//
// One entry per model family: the config.json "architectures" names (and the
// "model_type" used when that list is absent) it accepts, and the function
// that builds the graph. A new family adds a file with its build function and
// one entry in architectures() (HuggingFace.cpp).
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
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildLlama(ImportRequest &request);

/// The safetensors name prefix ("", "bert.", ...) under which the model's
/// tensor `anchor` is stored; when it is missing, an error naming it and a
/// usual prefix, `examplePrefix`.
mlir::FailureOr<std::string> weightPrefix(ImportRequest &request,
                                          llvm::StringRef anchor,
                                          llvm::StringRef examplePrefix);

/// The [batch, seq-len] i64 inputs every family takes, added in this order:
/// input_ids and attention_mask (1 = keep).
struct TokenInputs {
  mlir::Value ids, mask;
};
TokenInputs addTokenInputs(ModelBuilder &mb, const ImportOptions &options);

/// What a decoder family (`family`: "GPT-2", "LLaMA") cannot import: a
/// sentence-embedding output, token_type_ids, a sequence longer than its
/// `positions` (config field `positionsField`).
mlir::LogicalResult checkDecoderRequest(ImportRequest &request,
                                        llvm::StringRef family,
                                        int64_t positions,
                                        llvm::StringRef positionsField);

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
