//===- ModelBuilder.h - Shared state of one model import --------*- C++ -*-===//
//
// Owns the module and `func.func @main` being built. Inputs are added first;
// weights are added as arguments on first use (so the argument order is the
// order in which the graph uses them, fixed for an architecture) after their
// dtype and shape have been checked against the safetensors header.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_MODELBUILDER_H
#define TFC_LIB_IMPORTER_MODELBUILDER_H

#include "WeightIndex.h"

#include "tfc/Dialect/Transformer/Utils/TosaBuilder.h"
#include "tfc/Importer/HuggingFace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <string>

namespace tfc::importer {

struct ImportRequest;

/// The attention stacks --attention-maps names: a model's one stack, or an
/// encoder-decoder's encoder and decoder self-attention and its decoder's
/// cross-attention (results in this order). CLIP's vision and text towers
/// are each the one stack of their build, their maps named after the tower.
enum class AttentionStack { Only, Encoder, Decoder, Cross, Vision, Text };

/// How a weight is split across the ranks of a tensor-parallel build
/// (--tensor-parallel, docs/tensor-parallel.md): along `axis`, seen as
/// [groups, ranks, size / (groups * ranks)], each rank holding its part of
/// every group (GPT-2's c_attn, Q, K and V in turn: 3 groups). Axis -1:
/// every rank holds all of it. A size the ranks do not divide (a
/// vocabulary, 1 group) is padded: each part ceil(size / ranks) long,
/// zeros past the whole.
struct WeightSplit {
  int64_t axis = -1;
  int64_t groups = 1;
};

class ModelBuilder {
public:
  ModelBuilder(mlir::MLIRContext &context, const WeightIndex &weights,
               std::string prefix, ComputeType computeType, std::string &error);
  /// The model of `request` (its context, weights, compute type and error),
  /// its tensors' names under `prefix`.
  ModelBuilder(ImportRequest &request, std::string prefix);

  mlir::MLIRContext *getContext() { return builder.getContext(); }
  mlir::OpBuilder &getBuilder() { return builder; }
  /// The safetensors name prefix ("", "bert.", ...) of this model's tensors.
  const std::string &getPrefix() const { return prefix; }
  /// The element type activations and weights compute in (f32, f16, bf16).
  mlir::Type getComputeType() const { return computeType; }

  /// A TosaBuilder whose ops are located at `scope` (a NameLoc such as
  /// "encoder.layer.0.attention.self"), so that remarks name the layer.
  TosaBuilder at(llvm::StringRef scope);

  /// Adds a model input (`tfc.role = "input"`).
  /// `bounds` {lo, hi}: every element must lie in [lo, hi), which the
  /// runtime checks before each run (the manifest's bounds, `tfc.bounds`).
  mlir::Value
  addInput(llvm::StringRef name, mlir::RankedTensorType type,
           std::optional<std::pair<int64_t, int64_t>> bounds = std::nullopt);
  /// Sets the bounds [lo, hi) of input `input` (addInput's), which no
  /// gather of the graph implies (a vocabulary-split embedding's ids).
  void bound(mlir::Value input, int64_t lo, int64_t hi);

  /// The weight `prefix + name` (`name` alone when not `prefixed`: a task
  /// head's, such as lm_head.weight) as a value of `shape` in the compute
  /// type;
  /// it becomes a function argument (in its file dtype, cast where that
  /// differs) on first
  /// use. Fails with a message when the tensor is missing, has another shape
  /// or an unsupported dtype.
  /// With `split` (and more than one rank) `shape` is the whole tensor's,
  /// as the file holds it, and the value is the rank's part.
  mlir::FailureOr<mlir::Value> weight(llvm::StringRef name,
                                      llvm::ArrayRef<int64_t> shape,
                                      bool prefixed = true,
                                      WeightSplit split = {});

  /// --tensor-parallel: the ranks the build is split across (1: none). A
  /// family that splits its layers calls declareTensorParallel(); finish()
  /// refuses more than one rank for a build that did not.
  int64_t ranks() const { return tensorParallel; }
  /// Whether the build quantizes the matmuls' activations
  /// (ImportOptions::quantizeActivations).
  bool quantizesActivations() const { return quantizeActivations; }
  void declareTensorParallel() { parallelDeclared = true; }
  /// Marks the input or result `value` (a KV cache's) as split along
  /// `axis`: each rank takes or returns its part.
  void splitAlong(mlir::Value value, int64_t axis) {
    splitValues[value] = axis;
  }

  /// --attention-maps: the stacks this build holds and their layer counts,
  /// against which ImportOptions::attentionMaps is checked (failure with a
  /// one-line error naming the flag and the item). A family supports the
  /// flag by calling this before it builds its layers and handing every
  /// attention's probabilities to attentionMap(); finish() fails (an
  /// internal error) on the flag for a build that declared no stacks.
  mlir::LogicalResult declareAttentionStacks(
      llvm::ArrayRef<std::pair<AttentionStack, int64_t>> stacks);
  /// declareAttentionStacks for the part `part` of an encoder-decoder: the
  /// encoder's self-attention (but in the decoder part), the decoder's
  /// self- and cross-attention (but in the encoder part).
  mlir::LogicalResult declareEncoderDecoderStacks(ModelPart part,
                                                  int64_t encoderLayers,
                                                  int64_t decoderLayers);
  /// Records `probs` [B, heads, Sq, Skv] as the map of layer `layer` of
  /// `stack`, when --attention-maps asked for it.
  void attentionMap(AttentionStack stack, int64_t layer, mlir::Value probs);

  /// Records `message` as the error and returns failure.
  mlir::LogicalResult fail(const llvm::Twine &message);

  /// Returns `results` (named `names` in their `tfc.name`, when given), then
  /// the attention maps asked for, sets the function type and argument
  /// attributes and verifies the module.
  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
  finish(llvm::ArrayRef<mlir::Value> results,
         llvm::ArrayRef<std::string> names = {});

private:
  mlir::OpBuilder builder;
  mlir::Type computeType;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  mlir::Block *body;
  const WeightIndex &weights;
  std::string prefix;
  std::string &error;
  llvm::SmallVector<mlir::DictionaryAttr> argAttrs;
  llvm::StringMap<mlir::Value> weightValues;
  /// --attention-maps as asked for, and the config.json path and
  /// architecture named in its errors (none without an ImportRequest).
  llvm::ArrayRef<AttentionMapSelection> mapsAsked;
  std::string modelText;
  /// The maps wanted, then recorded, by stack and layer.
  std::map<std::pair<AttentionStack, int64_t>, mlir::Value> maps;
  bool stacksDeclared = false;
  int64_t tensorParallel = 1;
  bool quantizeActivations = false;
  bool parallelDeclared = false;
  llvm::DenseMap<mlir::Value, int64_t> splitValues;
};

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_MODELBUILDER_H
