//===- RotaryDecoder.h - Decoders of LLaMA's shape --------------*- C++ -*-===//
//
// One graph serves the decoder families that share LLaMA's shape: token
// embeddings, pre-norm blocks of grouped-query attention with rotary
// position embeddings and a gated MLP, a final norm and an optional LM head.
// Llama.cpp (LLaMA, Mistral, Qwen2, Qwen3, Phi-3, Granite, OLMo 2),
// Gemma.cpp (Gemma 1-3) and NeoX.cpp (GPT-NeoX, Phi, StableLM: LayerNorm,
// parallel residuals, a plain MLP) read their config.json into a
// RotaryDecoder that names the variations.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ROTARYDECODER_H
#define TFC_LIB_IMPORTER_ROTARYDECODER_H

#include "Architectures.h"
#include "Layers.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace tfc::importer {

struct RotaryDecoder : ModelSizes {
  std::string family; ///< In errors: "LLaMA", "Gemma 2", ...
  /// The tensors' names where a family's differ from LLaMA's (the layer
  /// tensors' after "layers.N.", the others' after the model's prefix).
  struct Names {
    std::string prefixExample = "model."; ///< In the missing-prefix error
    std::string embed = "embed_tokens";
    std::string attention = "self_attn", qkv = "qkv_proj", o = "o_proj";
    std::string up = "up_proj", down = "down_proj";
    std::string finalNorm = "norm";
    std::string head = "lm_head"; ///< Unprefixed
  } names;
  int64_t kvHeads = 0, headDim = 0;
  double eps = 0;
  Activation act;
  bool qkvBias = false, oBias = false, mlpBias = false;
  bool qkNorm = false; ///< Q and K normalised per head (q_norm, k_norm)
  /// Q and K normalised over all their heads' features instead (OLMo 2's
  /// q_norm, k_norm of num_heads * head_dim), before the heads are split.
  bool qkNormAcrossHeads = false;
  /// The norms of the attention's and the MLP's inputs (input_layernorm,
  /// post_attention_layernorm or with postNorms pre_feedforward_layernorm);
  /// OLMo 2 has only the post-norms.
  bool preNorms = true;
  bool fusedProjections = false; ///< qkv_proj and gate_up_proj (Phi-3)
  /// The fused Q, K and V interleaved per head, [heads, 3, headDim]
  /// (GPT-NeoX's query_key_value), instead of Q's heads, then K's, then V's;
  /// K and V then have every head (kvHeads == heads).
  bool qkvPerHead = false;
  enum class Norm {
    Rms,      ///< LlamaRMSNorm
    GemmaRms, ///< GemmaRMSNorm: 1 + gamma, in f32
    Layer,    ///< nn.LayerNorm with its bias (GPT-NeoX, Phi, StableLM)
  } normKind = Norm::Rms;
  /// Attention and MLP both read the block's input and their outputs are
  /// added to it together, h + attn(n1(h)) + mlp(n2(h)) (GPT-NeoX's
  /// use_parallel_residual, Phi, StableLM's), instead of one after the other.
  bool parallelResidual = false;
  /// With parallelResidual: the MLP reads the attention's normalised input
  /// (n2 = n1: Phi, StableLM) instead of post_attention_layernorm's
  /// (GPT-NeoX).
  bool sharedNorm = false;
  /// The MLP: down(act(gate(x)) * up(x)); false: down(act(up(x))), the
  /// names' up and down (GPT-NeoX, Phi).
  bool gatedMlp = true;
  bool headBias = false;  ///< The LM head's bias (Phi)
  bool postNorms = false; ///< Gemma 2's norms of the attention and MLP outputs
  /// The embeddings' factor (Gemma: sqrt(hidden); Granite's
  /// embedding_multiplier), in the compute type.
  double embeddingScale = 1;
  /// The blocks' outputs' factor before each residual add (Granite's
  /// residual_multiplier).
  double residualScale = 1;
  /// The logits' divisor (Granite's logits_scaling).
  double logitDivisor = 1;
  double attnScale = 0; ///< Of the scores (0: 1 / sqrt(headDim))
  double attnSoftcap = 0, logitSoftcap = 0; ///< 0: none
  int64_t window = 0;                       ///< Sliding window; 0: none
  llvm::SmallVector<bool> sliding; ///< Per layer, whether it is windowed
  /// The rotary frequencies (rotaryDim / 2 of them), scaling applied;
  /// localRope, when it has any, those of the sliding layers.
  RotaryFrequencies rope, localRope;
  /// The leading features of each head the rotary embedding turns (0: all;
  /// Phi-3's partial_rotary_factor), the others passing through.
  int64_t rotaryDim = 0;
  bool tiedByDefault = false; ///< tie_word_embeddings' default
};

/// The positions a model of `options` is compiled for.
RotaryPositions rotaryPositions(const ImportOptions &options);

/// Reads the sizes every family shares: ModelSizes; num_key_value_heads (absent
/// or null: the heads) dividing the heads; head_dim (absent or null:
/// `headDimDefault`, or hidden_size / heads when that is 0; not read at all,
/// hidden_size / heads, when it is negative), even; rms_norm_eps (1e-6).
mlir::LogicalResult readDecoderShape(const JsonConfig &config,
                                     int64_t headDimDefault, RotaryDecoder &d,
                                     std::string &error);

/// d.rotaryDim from the fraction of each head the rotary embedding turns,
/// config field `field` (default `fallback`): int(head_dim * fraction),
/// which must be even and at least 2 (0 < fraction <= 1).
mlir::LogicalResult readPartialRotary(const JsonConfig &config,
                                      llvm::StringRef field, double fallback,
                                      RotaryDecoder &d, std::string &error);

/// The decoder `d` with the weights and options of `request`; failure when
/// reading `d` failed (its error already in request.error). The sliding
/// layers' mask hides the keys outside the window where it does not cover
/// the keys (slidingWindowMask).
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildRotaryDecoder(ImportRequest &request,
                   const mlir::FailureOr<RotaryDecoder> &d);

/// The build function of the member `member` of a family whose config.json
/// `read(config, member, options, error)` reads into a RotaryDecoder.
template <auto read, auto member>
mlir::FailureOr<mlir::OwningOpRef<mlir::ModuleOp>>
buildMember(ImportRequest &request) {
  return buildRotaryDecoder(
      request, read(request.config, member, request.options, request.error));
}

} // namespace tfc::importer

#endif // TFC_LIB_IMPORTER_ROTARYDECODER_H
