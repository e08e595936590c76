//===- ImportFlags.h - The command-line flags of a model import -*- C++ -*-===//
//
// The flags tfc-import and tfc-compile take for a model import: for Hugging
// Face directories --batch, --seq-len, --dtype, --output, --token-type-ids,
// --kv-cache, --past-len, --position-ids, --present, --decoder-seq-len,
// --part, --cross-kv, --attention-maps, --tensor-parallel; for ONNX files
// --batch, --seq-len and --input-shape. Defined once: each tool holds one
// static ImportFlags.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_IMPORTER_IMPORTFLAGS_H
#define TFC_IMPORTER_IMPORTFLAGS_H

#include "tfc/Importer/HuggingFace.h"
#include "tfc/Importer/Onnx.h"

#include "llvm/Support/CommandLine.h"

#include <string>
#include <vector>

namespace tfc {

class ImportFlags {
public:
  /// Registers the flags in `category`; `note` starts each description
  /// ("With --hf: " where the import is optional).
  ImportFlags(llvm::cl::OptionCategory &category, llvm::StringRef note = "");

  /// The flags given on the command line, as "--NAME".
  std::vector<std::string> given() const;

  /// The import options the flags say (at the largest --batch and the
  /// longest --seq-len); failure
  /// with `error` set to one line naming the flag.
  mlir::FailureOr<ImportOptions> options(std::string &error) const;

  /// The options of an ONNX import (at the largest --batch; --seq-len only
  /// where given); failure naming a flag that applies to Hugging Face
  /// imports only, or a malformed --input-shape.
  mlir::FailureOr<OnnxImportOptions> onnxOptions(std::string &error) const;

  /// The sequence lengths of --seq-len (comma-separated; the last
  /// occurrence of the flag counts), increasing, each once; failure with
  /// `error` set unless they are positive integers.
  mlir::FailureOr<std::vector<int64_t>> seqLens(std::string &error) const;
  /// The batch sizes of --batch, the same way.
  mlir::FailureOr<std::vector<int64_t>> batches(std::string &error) const;

private:
  /// The descriptions, before the options: cl::desc keeps a reference.
  std::string descriptions[16];
  llvm::cl::opt<std::string> batch, seqLen;
  llvm::cl::opt<std::string> dtype;
  llvm::cl::opt<ImportOutput> output;
  llvm::cl::opt<bool> tokenTypeIds, kvCache;
  llvm::cl::opt<int64_t> pastLen;
  llvm::cl::opt<bool> positionIds;
  llvm::cl::opt<PresentKV> present;
  llvm::cl::list<std::string> inputShape;
  llvm::cl::opt<int64_t> decoderSeqLen;
  llvm::cl::opt<ModelPart> part;
  llvm::cl::opt<bool> crossKV;
  llvm::cl::opt<std::string> attentionMaps;
  llvm::cl::opt<int64_t> tensorParallel;
  llvm::cl::opt<std::string> tensorParallelVocab;
};

/// The items of --attention-maps's comma-separated list: layer numbers
/// (3), ranges (0-2) or `all`, each optionally after a stack name and a dot
/// (encoder.0, decoder.1-2, cross.all); failure with `error` set to one
/// line naming the flag and the item otherwise. Whether the layers exist
/// is the import's to check.
mlir::FailureOr<std::vector<AttentionMapSelection>>
parseAttentionMaps(llvm::StringRef list, std::string &error);

} // namespace tfc

#endif // TFC_IMPORTER_IMPORTFLAGS_H
