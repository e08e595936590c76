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
  /// Whether the family is an encoder-decoder, the only kind that takes
  /// ImportOptions::decoderSeqLen and ::part.
  bool encoderDecoder = false;
  /// Whether the family has towers of their own inputs (CLIP): the only
  /// kind that takes ModelPart::Vision and ::Text.
  bool towers = false;
  /// Whether the family has a pooled output (ImportOutput::Pooled).
  bool pooled = false;
};

llvm::ArrayRef<Architecture> architectures();

// Families.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildBert(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildRoberta(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildGpt2(ImportRequest &request);
// The rotary decoders, one build function per member of a family
// (buildMember, RotaryDecoder.h): Llama.cpp,
extern const BuildFn buildLlama, buildQwen2, buildQwen3, buildPhi3,
    buildGranite, buildOlmo2;
// Gemma.cpp,
extern const BuildFn buildGemma, buildGemma2, buildGemma3;
// NeoX.cpp.
extern const BuildFn buildGptNeoX, buildPhi, buildStableLm;
// The encoder-decoders (Bart.cpp, on EncoderDecoder.h).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildMarian(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildBart(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildMBart(ImportRequest &request);
// T5, T5 v1.1 and Flan-T5 (T5.cpp, on EncoderDecoder.h's interface).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildT5(ImportRequest &request);
// The image encoders and CLIP (Vit.cpp, Clip.cpp, on VisionTower.h).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildVit(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildClip(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildClipVision(ImportRequest &request);
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildClipText(ImportRequest &request);

/// The safetensors name prefix ("", "bert.", ...) under which the model's
/// tensor `anchor` is stored; when it is missing, an error naming it and a
/// usual prefix, `examplePrefix`.
mlir::FailureOr<std::string> weightPrefix(ImportRequest &request,
                                          llvm::StringRef anchor,
                                          llvm::StringRef examplePrefix);

/// The i64 inputs every family takes, added in this order: input_ids
/// [batch, seq-len], attention_mask [batch, past-len + seq-len] (1 =
/// keep), and with ImportOptions::positionIds position_ids [batch,
/// seq-len], clamped to [0, past-len + seq-len - 1].
struct TokenInputs {
  mlir::Value ids, mask, positions; ///< positions: null without the input.
};
TokenInputs addTokenInputs(ModelBuilder &mb, const ImportOptions &options);

/// A decoder's KV cache (ImportOptions::kvCache): the past keys and values
/// of every layer as inputs, and the keys and values of all tokens (or of
/// the new ones, ImportOptions::present) as outputs.
class KVCache {
public:
  /// Adds the past inputs (none when pastLen is 0): per layer
  /// past_key_values.L.key and .value, [B, heads, pastLen, headDim] of the
  /// compute type.
  KVCache(ModelBuilder &mb, const ImportOptions &options, int64_t layers,
          int64_t heads, int64_t headDim);
  /// Layer `layer`'s keys and values of the new tokens ([B, heads, S, D])
  /// after its past ones; those, or the new ones, recorded as that layer's
  /// outputs.
  std::pair<mlir::Value, mlir::Value> append(TosaBuilder &tb, int64_t layer,
                                             mlir::Value k, mlir::Value v);
  /// Finishes the model: it returns `first` (named `firstName`), then every
  /// layer's keys and values when it has a cache.
  mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
  finish(ModelBuilder &mb, mlir::Value first, llvm::StringRef firstName) const;

private:
  bool enabled, newOnly;
  llvm::SmallVector<std::pair<mlir::Value, mlir::Value>> past, present;
};

/// "--seq-len S", or "--past-len P + --seq-len S" with a past: the token
/// count a model is compiled for, in errors.
std::string tokenCountText(const ImportOptions &options);

/// A decoder's language-model head (finishDecoder).
struct DecoderHead {
  bool tiedByDefault = false; ///< tie_word_embeddings' default
  /// > 0: the logits capped, tanh(logits / cap) * cap in the compute type
  /// (Gemma 2's final_logit_softcapping).
  double softcap = 0;
  /// The logits' divisor, in the compute type (Granite's logits_scaling).
  double divisor = 1;
  std::string name = "lm_head"; ///< Its tensors' name, unprefixed
  bool bias = false;            ///< Whether it adds name.bias [vocab] (Phi)
  /// vocab_size: the rows of the token embeddings, of which a build that
  /// splits the vocabulary (splitsVocabulary) holds the rank's part.
  int64_t vocab = 0;
};

/// Finishes a decoder: it returns the last hidden state
/// (last_hidden_state), or with --output=logits the language-model head's
/// logits (ImportOutput::Logits; head.name.weight [vocab, hidden], or the
/// token embedding table `embeddings` when config.json's
/// tie_word_embeddings, default head.tiedByDefault, says they are tied),
/// then the cache's keys and values. With a vocabulary split each rank
/// computes the logits of its rows, which one all-gather puts together.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
finishDecoder(ImportRequest &request, ModelBuilder &mb, const KVCache &cache,
              mlir::Value hidden, mlir::Value embeddings,
              const DecoderHead &head);

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
