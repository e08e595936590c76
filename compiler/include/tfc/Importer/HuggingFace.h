//===- HuggingFace.h - Import Hugging Face model directories -----*- C++
//-*-===//
//
// Reads a Hugging Face model directory (config.json + model.safetensors, as
// saved by transformers / sentence-transformers) and emits the *unfused* TOSA
// graph that the reference implementation computes, as one `func.func @main`.
//
// Weights are never embedded in the IR: every tensor the model uses is a
// function argument carrying its safetensors name (`tfc.name`) and
// `tfc.role = "weight"`; the model inputs carry `tfc.role = "input"`.
//
// Architectures are dispatched through a small registry (architectures() in
// lib/Importer/HuggingFace.cpp): BERT encoders, GPT-2 and LLaMA/Mistral
// decoders, each built from the shared layer helpers in
// lib/Importer/Layers.h.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_IMPORTER_HUGGINGFACE_H
#define TFC_IMPORTER_HUGGINGFACE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tfc {

/// What the emitted function returns.
enum class ImportOutput {
  /// The family's usual output: the sentence embedding for encoders (BERT),
  /// the last hidden state for decoders (GPT-2, LLaMA).
  Default,
  /// The sentence-transformers pipeline: pooling (mean over the attention mask
  /// or CLS, from 1_Pooling/config.json; mean when absent), then L2
  /// normalisation when modules.json lists a Normalize module (or has no
  /// modules.json). Result: tensor<B x hidden x f32>.
  SentenceEmbedding,
  /// The last hidden state: tensor<B x S x hidden> of the compute type.
  LastHiddenState,
  /// Decoders: the language-model head's logits, tensor<B x S x vocab x
  /// f32>: the last hidden state times lm_head.weight transposed (the token
  /// embedding table when config.json ties them), rounded to the compute
  /// type as the framework's head computes it, returned in f32.
  /// ViTForImageClassification: the classifier's, tensor<B x labels x f32>.
  Logits,
  /// ViT and CLIP: the pooler's output, tensor<B x hidden x f32>: ViT's
  /// dense + tanh on the class token; CLIP's class token after
  /// post_layernorm, or the text's state at its EOS token.
  Pooled,
};

/// The element type a model computes in.
enum class ComputeType {
  /// f32: f16/bf16 weights are widened.
  F32,
  /// f16 or bf16, as PyTorch runs a model converted with .half() or
  /// .to(torch.bfloat16): activations and weights in that type (weights of
  /// another type cast once per run), matmuls accumulating in f32,
  /// LayerNorm statistics and activation functions computed in f32 and
  /// rounded back, the attention mask filled with the type's lowest value.
  /// Sentence embeddings (pooling, normalisation) are computed and returned
  /// in f32.
  F16,
  BF16,
};

/// What a decoder's present.L.key/value outputs hold.
enum class PresentKV {
  /// The keys and values of the past and the new tokens, [B, kv heads,
  /// pastLen + seqLen, head dim]: the next step's past.
  All,
  /// Those of the seqLen new tokens only, [B, kv heads, seqLen, head dim]:
  /// the caller writes them into its cache (the slots of the new tokens'
  /// positions). A step then never copies the cache, and the CPU's
  /// attention reads the past and the new keys and values where they are.
  New,
};

/// Which part of an encoder-decoder (Marian, BART, mBART, T5) or of CLIP a
/// build holds.
enum class ModelPart {
  /// The whole model: input_ids, attention_mask [B, S] and
  /// decoder_input_ids [B, T] in, the decoder's output out.
  Whole,
  /// The encoder: input_ids, attention_mask in, encoder_hidden_states
  /// [B, S, hidden] of the compute type out.
  Encoder,
  /// The decoder: decoder_input_ids, encoder_hidden_states and the
  /// encoder's attention_mask in, the decoder's output out.
  Decoder,
  /// CLIP's image tower: pixel_values [B, C, H, W] (f32) in, image_embeds
  /// out.
  Vision,
  /// CLIP's text tower: input_ids, attention_mask [B, S] in, text_embeds
  /// out.
  Text,
};

/// One item of --attention-maps: layers first..last of an attention stack
/// whose probabilities a build returns.
struct AttentionMapSelection {
  /// "" (a model's one stack; with `all`, every stack of any model),
  /// "encoder", "decoder" (an encoder-decoder's self-attention) or
  /// "cross" (its decoder's cross-attention).
  std::string stack;
  int64_t first = 0;
  /// -1: through the stack's last layer (`all`).
  int64_t last = -1;
  /// The item as written, for errors.
  std::string text;
};

struct ImportOptions {
  int64_t batch = 1;
  int64_t seqLen = 128;
  /// Whether seqLen was asked for (--seq-len given): image models take
  /// none and refuse one.
  bool seqLenGiven = false;
  ImportOutput output = ImportOutput::Default;
  /// Add a `token_type_ids` input (tensor<BxSxi64>) after attention_mask; when
  /// false the token types are all zero, as transformers does by default.
  bool tokenTypeIds = false;
  ComputeType computeType = ComputeType::F32;
  /// Decoders: return each layer's keys and values after the hidden state
  /// (`present.L.key`, `present.L.value`, [B, kv heads, pastLen + seqLen,
  /// head dim] of the compute type, keys after the rotary embedding), and
  /// with pastLen > 0 take those of pastLen earlier tokens as inputs after
  /// attention_mask (`past_key_values.L.key`, `.value`, [B, kv heads,
  /// pastLen, head dim]). attention_mask then covers pastLen + seqLen
  /// tokens and positions start at pastLen: one model prefills, another
  /// (seqLen 1) decodes, as transformers does with past_key_values.
  bool kvCache = false;
  int64_t pastLen = 0;
  /// Decoders: take position_ids [B, S] (i64) after attention_mask, each
  /// new token's position (its rotary angle, GPT-2's position embedding)
  /// instead of pastLen, pastLen + 1, ...: with a cache of pastLen slots
  /// whose unused ones attention_mask hides, one build serves every decode
  /// step. Positions are clamped to [0, pastLen + seqLen - 1]. An
  /// encoder-decoder's decoder part takes decoder_attention_mask [B,
  /// pastLen + decoderSeqLen] and decoder_position_ids [B, decoderSeqLen]
  /// after attention_mask, the same way.
  bool positionIds = false;
  /// Decoders with kvCache: what present.L.key/value hold.
  PresentKV present = PresentKV::All;
  /// Encoder-decoders: the decoder's token count T (decoder_input_ids
  /// [B, T]; seqLen is the encoder's S); 0 when not given, which only the
  /// encoder part accepts.
  int64_t decoderSeqLen = 0;
  /// Encoder-decoders and CLIP: the part built.
  ModelPart part = ModelPart::Whole;
  /// Encoder-decoders: the encoder part also returns every decoder layer's
  /// cross-attention keys and values of its output
  /// (cross_key_values.L.key, .value, [B, heads, S, head dim] of the
  /// compute type), and the decoder part takes those instead of
  /// encoder_hidden_states: a decode step does not project them again.
  bool crossKV = false;
  /// Decoders (LLaMA-type, GPT-2): the ranks the heads and the MLP are
  /// split across (docs/tensor-parallel.md); 1: not split.
  int64_t tensorParallel = 1;
  /// With more than one rank: the token embeddings and the LM head split
  /// by vocabulary rows (--tensor-parallel-vocab=split, the default), or
  /// whole on every rank (replicate).
  bool splitVocabulary = true;
  /// tfc-compile's --quantize-activations=int8: with more than one rank, a
  /// row-parallel projection's rank must hold whole blocks of 128 of its
  /// inputs (Layers.cpp), or the import fails.
  bool quantizeActivations = false;
  /// The layers whose attention probabilities [B, heads, Sq, Skv] (after
  /// the softmax, hidden keys 0, in the compute type) the build returns
  /// after its other results: `attentions.L`, or an encoder-decoder's
  /// `encoder_attentions.L`, `decoder_attentions.L`, `cross_attentions.L`,
  /// in that order, each by layer. Those layers' attention stays unfused.
  std::vector<AttentionMapSelection> attentionMaps;
};

/// Imports the model in `dir`. On failure returns failure() and sets `error`
/// to one line naming the file and the field or tensor at fault (no "error:"
/// prefix). The returned module has been verified.
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
importHuggingFace(mlir::MLIRContext &context, llvm::StringRef dir,
                  const ImportOptions &options, std::string &error);

/// The compute type named `name` ("f32", "f16" or "bf16"); failure with
/// a one-line message in `error` (naming `flag`) otherwise.
mlir::FailureOr<ComputeType> parseComputeType(llvm::StringRef name,
                                              llvm::StringRef flag,
                                              std::string &error);

/// The architectures (config.json "architectures" entries) the importer
/// knows, for help texts and error messages.
std::vector<std::string> supportedHuggingFaceArchitectures();

} // namespace tfc

#endif // TFC_IMPORTER_HUGGINGFACE_H
